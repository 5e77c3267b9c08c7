"""What the commands share: gnnbench's exit codes and the argument blocks several commands take."""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import shlex
import signal
import sys
from pathlib import Path

from bench.inputs import InputError
from bench.run import suite as suite_mod
from bench.run.plan import select_cells
from bench.paths import default_results_dir

# Exit codes of `gnnbench` (0: every cell ran, or was skipped or refused for a stated reason)
EXIT_CELLS_FAILED = 1  # a cell failed or timed out (its result is recorded with the others)
EXIT_BAD_INPUT = 2  # nothing was run
EXIT_NOT_WRITTEN = 3  # the result file or table could not be written where asked (the message says where)
EXIT_INTERRUPTED = 130  # Ctrl-C, SIGTERM or SIGHUP (finished cells are kept)
EXIT_INTERNAL = 70  # EX_SOFTWARE in sysexits.h: a defect of gnnbench (one line; --debug shows the traceback)
FAILED = ("failed", "timeout")


def add_select(parser) -> None:
    """`-k EXPR`: the cells a command takes of its suite."""
    parser.add_argument("-k", dest="select", metavar="EXPR", help="only cells whose id matches (pytest's -k rules)")


def add_data_root(parser, what: str = "raw dataset files") -> None:
    parser.add_argument("--data-root", type=Path, metavar="DIR", default=os.environ.get("GNNBENCH_DATA_ROOT"),
                        help=f"where {what} are looked for first (env GNNBENCH_DATA_ROOT)")


def add_cache_dir(parser) -> None:
    parser.add_argument("--cache-dir", metavar="DIR", help="dataset hub folder (env GNNBENCH_CACHE)")


def command_line() -> str:
    """This process's command, quoted as a shell would take it (recorded with what it wrote)."""
    return "gnnbench " + " ".join(shlex.quote(a) for a in sys.argv[1:])


def chosen_cells(args, keep, needs: str):
    """The suite's cells (after -k) that `keep` accepts; an input error naming `needs` if none."""
    suite, _ = suite_mod.load(args.suite)
    if getattr(args, "stack", None):  # fidelity's --stack: the suite's stack axis replaced, as run's
        suite, _ = suite_mod.with_stacks(suite, args.stack)
    cells = suite_mod.expand(suite)
    cells = select_cells(cells, args.select) if args.select else cells
    if not (chosen := [c for c in cells if keep(c)]):
        raise InputError(f"suite {suite.name!r}{f' -k {args.select!r}' if args.select else ''}: no cell {needs}")
    return suite, chosen


def results_path(args, kind: str, suite_name: str) -> Path:
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return args.out or default_results_dir() / f"{kind}-{suite_name}-{stamp}.json"


@contextlib.contextmanager
def ending_as_interrupt():
    """SIGTERM and SIGHUP end a command as Ctrl-C does, so a run keeps its finished cells (bench/cli.py)."""
    def interrupt(signum, frame):
        raise KeyboardInterrupt(signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
