"""`gnnbench`: run suites, render reports, manage the pinned stacks. One module per command in
bench/commands/ (its parser and what it runs); this module holds what every command shares: the
exit codes and how errors end a command."""

from __future__ import annotations

import argparse
import sys
from contextlib import redirect_stderr, redirect_stdout

from bench.commands import (bundle, calibrate, compare, datasets, fidelity, history, k8s, recover, report, run, slurm,
                            stacks as stacks_cmd)
from bench.commands.common import EXIT_BAD_INPUT, EXIT_INTERNAL, EXIT_INTERRUPTED, ending_as_interrupt
from bench.commands.run import default_suite  # noqa: F401 - part of the command's interface (tests)
from bench.datasets.hub import DatasetError
from bench.inputs import InputError, TerminalSafe, check_environment
from bench.publish import results
from bench import stacks
from bench.run import suite as suite_mod
from bench.stacks import external as external_stacks
from bench.run.session import SessionError

# The commands, in the order `gnnbench --help` lists them: each module has add_parser(sub, parents)
# and run(args) -> exit code.
COMMANDS = {"run": run, "report": report, "recover": recover, "compare": compare, "history": history, "fidelity": fidelity,
            "calibrate": calibrate, "datasets": datasets, "stacks": stacks_cmd, "bundle": bundle, "slurm": slurm, "k8s": k8s}
# What a bad input raises: its message names the input; `gnnbench` prints it and exits 2.
BAD_INPUT = (InputError, suite_mod.SuiteError, SessionError, results.ResultsError, stacks.StackError, DatasetError,
             external_stacks.ExternalStackError)


def main(argv: list[str] | None = None) -> int:
    """The command, every line it prints made terminal-safe (bench/inputs.py TerminalSafe)."""
    with redirect_stdout(TerminalSafe(sys.stdout)), redirect_stderr(TerminalSafe(sys.stderr)):
        return _main(argv)


def _main(argv: list[str] | None) -> int:
    debug = argparse.ArgumentParser(add_help=False)  # `--debug` before or after the command
    debug.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                       help="on an error, show Python's traceback too")
    parser = argparse.ArgumentParser(prog="gnnbench", description="run suites, render reports, manage the pinned stacks", parents=[debug])
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS.values():
        command.add_parser(sub, [debug])

    args = parser.parse_args(argv)
    try:
        with ending_as_interrupt():  # SIGTERM, SIGHUP: as Ctrl-C, so what a command half wrote is removed
            return dispatch(args)
    except KeyboardInterrupt:  # outside a run (which keeps its cells and says how to resume)
        print(f"gnnbench: interrupted ({args.command})", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - a defect of gnnbench: one line, the traceback on --debug
        if getattr(args, "debug", False):
            raise
        print(f"gnnbench: internal error: {type(exc).__name__}: {exc}\n(run the same command with --debug for "
              "the traceback, and report it)", file=sys.stderr)
        return EXIT_INTERNAL


def dispatch(args) -> int:
    """Run the parsed command; bad input is one line and exit 2."""
    try:
        check_environment()
        return COMMANDS[args.command].run(args)
    except BAD_INPUT as exc:
        if getattr(args, "debug", False):
            raise
        print(f"gnnbench: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as exc:  # a file or folder the system refused (the run handles its own)
        if getattr(args, "debug", False) or args.command == "run":
            raise
        print(f"gnnbench: error: {exc.filename or ''}{': ' if exc.filename else ''}{exc.strerror or exc}",
              file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
