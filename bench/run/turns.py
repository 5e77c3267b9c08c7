"""A paired cell's side of taking turns (the host's side: bench/run/paired.py).

Two or more cells' workers live at once and run their measured epochs one at a time: each waits
for its turn in a blocking read of a pipe (no thread spinning, its loader's iterator not yet made,
so nothing prefetches), runs one epoch, and says how long it took as it waits again (after its
epoch's tail: the progress line, the loader's teardown; said at the epoch's end, that tail ran into
the next cell's turn and counted as waiting CPU, 5-6 % of a core beside 0.06-s epochs) and once
its threads are still (OpenMP's threads spin 4-6 ms after each parallel region here: quiet_threads),
until the host says stop. The host reads the turns' epoch times back to back and pauses the waiting cells' memory
samplers. Runs inside the stack: standard library only."""

from __future__ import annotations

import os
import time
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
        self._seconds: float | None = None  # the last turn's epoch, said when the worker waits again

    def wait(self) -> bool:
        """Say the last turn's epoch time (ready, the first time: after the warm-up), then block until
        the host gives this cell a turn (True) or says stop (False)."""
        if self._seconds is not None:
            quiet_threads()
            self._done.write(f"{DONE} {self._seconds!r}\n")
            self._seconds = None
        elif not self._ready:
            self._done.write(f"{READY}\n")
            self._ready = True
        line = self._go.readline()  # a blocking read: no CPU while the others run
        return line.strip() == GO

    def done(self, seconds: float) -> None:
        self._seconds = seconds


QUIET_FOR_S, QUIET_AT_MOST_S = 0.002, 0.1


def quiet_threads() -> None:
    """Return once no other thread of this process has run for QUIET_FOR_S (at most QUIET_AT_MOST_S):
    a spinning OpenMP thread would take the next cell's CPU in its turn. Linux's per-thread run time
    (/proc/self/task/*/schedstat, nanoseconds); elsewhere, at once."""
    def others_ns() -> int | None:
        try:
            tasks = [t for t in os.listdir("/proc/self/task") if int(t) != os.getpid()]
            return sum(int(open(f"/proc/self/task/{t}/schedstat").read().split()[0]) for t in tasks)
        except (OSError, ValueError, IndexError):
            return None
    give_up = time.monotonic() + QUIET_AT_MOST_S
    last = others_ns()
    while last is not None and time.monotonic() < give_up:
        time.sleep(QUIET_FOR_S)
        now = others_ns()
        if now is None or now == last:
            return
        last = now


def from_env() -> Turns | None:
    """The turns of a paired cell (its launcher set TURNS_ENV), else None: the cell runs as always."""
    folder = os.environ.get(TURNS_ENV)
    if not folder:
        return None
    return Turns(Path(folder), int(os.environ.get(MAX_TURNS_ENV, "100")))
