"""A paired cell's side of taking turns (the host's side: bench/run/paired.py). Standard library only.

Each measured epoch waits for its turn in a blocking read of a pipe (no thread spinning, its
loader's iterator not yet made, so nothing prefetches). The epoch's time is said as the worker
waits again, after the epoch's tail (progress line, loader teardown) and once its threads are
still (quiet_threads): said earlier, that tail ran into the next cell's turn."""

from __future__ import annotations

import os
import threading
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
        return self._go.readline().strip() == GO  # a blocking read: no CPU while the others run

    def done(self, seconds: float) -> None:
        self._seconds = seconds


QUIET_POLL_S, QUIET_AT_MOST_S = 0.001, 0.1


def quiet_threads() -> None:
    """Return once no other thread of this process is running (state R in /proc/self/task/*/stat), at
    most QUIET_AT_MOST_S later: a spinning OpenMP thread would take the next cell's turn's CPU. The
    state, not run times, which the scheduler updates only at its tick. Linux only; elsewhere, at once."""
    me = threading.get_native_id()
    give_up = time.monotonic() + QUIET_AT_MOST_S
    while time.monotonic() < give_up:
        try:
            others = [t for t in os.listdir("/proc/self/task") if int(t) != me]
            states = [Path(f"/proc/self/task/{t}/stat").read_text().rsplit(")", 1)[1].split()[0] for t in others]
        except (OSError, ValueError, IndexError):
            return  # no /proc, or a thread gone between the listing and its read: do not wait on it
        if "R" not in states:
            return
        time.sleep(QUIET_POLL_S)


def from_env() -> Turns | None:
    """The turns of a paired cell (its launcher set TURNS_ENV), else None: the cell runs as always."""
    folder = os.environ.get(TURNS_ENV)
    return Turns(Path(folder), int(os.environ.get(MAX_TURNS_ENV, "100"))) if folder else None
