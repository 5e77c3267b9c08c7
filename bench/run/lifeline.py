"""A cell's processes and the gnnbench that started them: tied to it, so that nothing outlives it
(a cell runs in its own session, so a timeout can end its group, and Linux's parent-death signal
ends it when gnnbench itself is killed), and what they say to it: a progress event is one stdout
line, PROGRESS_TAG and a JSON object (both sides import this plain module, not the worker).

    python -m bench.run.lifeline MODULE ARGS...   run MODULE (torch.distributed.run) tied to its
                                                  parent, and its own children tied to it"""

from __future__ import annotations

import ctypes
import json
import os
import runpy
import signal
import sys

PARENT_ENV = "GNNBENCH_PARENT_PID"  # the pid a process of the cell must have as its parent
PR_SET_PDEATHSIG = 1
PROGRESS_TAG = "GNNBENCH-PROGRESS "


def progress(**event) -> None:
    print(PROGRESS_TAG + json.dumps(event), flush=True)


def tie_to_parent() -> None:
    """SIGKILL this process when its parent dies; exit at once if it already has."""
    if not sys.platform.startswith("linux"):
        return
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
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
