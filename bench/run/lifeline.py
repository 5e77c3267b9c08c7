"""Ties a cell's processes to the process that started them, so that nothing outlives gnnbench: a
cell runs in its own session (so a timeout can end its group), and Linux's parent-death signal
ends it when gnnbench itself is killed.

    python -m bench.run.lifeline MODULE ARGS...   run MODULE (torch.distributed.run) tied to its
                                                  parent, and its own children tied to it"""

from __future__ import annotations

import ctypes
import os
import runpy
import signal
import sys

PARENT_ENV = "GNNBENCH_PARENT_PID"  # the pid a process of the cell must have as its parent
PR_SET_PDEATHSIG = 1


def tie_to_parent() -> None:
    """SIGKILL this process when its parent dies; exit at once if it already has."""
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    expected = os.environ.get(PARENT_ENV)
    if expected and os.getppid() != int(expected):  # the parent died before the call above
        os._exit(1)


def main() -> None:
    tie_to_parent()
    os.environ[PARENT_ENV] = str(os.getpid())  # what the module starts is tied to this process
    module, sys.argv = sys.argv[1], sys.argv[1:]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
