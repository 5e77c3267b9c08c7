"""A paired cell's side of taking turns (the host's side: bench/run/paired.py).

Two or more cells' workers live at once and run their measured epochs one at a time: each waits
for its turn in a blocking read of a pipe (no thread spinning, its loader's iterator not yet made,
so nothing prefetches), runs one epoch, says how long it took, and waits again, until the host says
stop. The host reads the turns' epoch times back to back and pauses the waiting cells' memory
samplers. Runs inside the stack: standard library only."""

from __future__ import annotations

import os
from pathlib import Path

TURNS_ENV = "GNNBENCH_TURNS"  # a folder holding the two pipes: `go` (host to worker) and `done`
MAX_TURNS_ENV = "GNNBENCH_MAX_TURNS"  # the most measured epochs the host may ask for
GO, STOP, READY, DONE = "go", "stop", "ready", "done"


class Turns:
    def __init__(self, folder: Path, max_turns: int):
        self.max_turns = max_turns
        self._go = open(folder / "go", "r")  # the host holds both ends open: neither open blocks
        self._done = open(folder / "done", "w", buffering=1)
        self._ready = False

    def wait(self) -> bool:
        """Block until the host gives this cell a turn (True) or says stop (False); says ready the
        first time, after its warm-up."""
        if not self._ready:
            self._done.write(f"{READY}\n")
            self._ready = True
        line = self._go.readline()  # a blocking read: no CPU while the others run
        return line.strip() == GO

    def done(self, seconds: float) -> None:
        self._done.write(f"{DONE} {seconds!r}\n")


def from_env() -> Turns | None:
    """The turns of a paired cell (its launcher set TURNS_ENV), else None: the cell runs as always."""
    folder = os.environ.get(TURNS_ENV)
    if not folder:
        return None
    return Turns(Path(folder), int(os.environ.get(MAX_TURNS_ENV, "100")))
