"""`gnnbench run`: run a suite, write its result file, then print its table."""

from __future__ import annotations

import shlex
import sys

from bench.commands.common import (EXIT_CELLS_FAILED, EXIT_INTERRUPTED, EXIT_NOT_WRITTEN, FAILED, add_select,
                                   ending_as_interrupt)
from bench.commands.report import add_columns, report_files
from bench.inputs import InputError
from bench.run.session import RunOptions, Session, add_run_options
from bench.machine import gpus


def add_parser(sub, parents) -> None:
    run = sub.add_parser("run", parents=parents, help="run a suite, write its result file, then print its table")
    run.add_argument("suite", nargs="?", default=None,
                     help="suite name in suites/ or a YAML path (default: gpu where a GPU is visible, else smoke)")
    add_select(run)
    add_run_options(run.add_argument)
    add_columns(run)


def default_suite() -> tuple[str, str]:
    """The suite `gnnbench run` takes when none is named, and why."""
    shown = gpus.visible()
    if shown:
        return "gpu", f"{len(shown)} GPU(s) visible ({', '.join(dict.fromkeys(shown.names))}; {shown.how})"
    return "smoke", f"no GPU visible ({shown.how})"


def run(args) -> int:
    if args.suite is None:
        args.suite, why = default_suite()
        print(f"gnnbench: no suite named: running {args.suite!r} because {why}; name a suite to choose "
              "(gnnbench run smoke | gpu | multi-gpu | ...)", flush=True)
    session = Session(RunOptions.from_namespace(args), select=args.select)
    interrupted = False
    try:
        with ending_as_interrupt():
            session.run()
    except KeyboardInterrupt:
        interrupted = True
    path = session.written_to or session.result_path
    code = 0
    if session.write_problem:
        print(f"gnnbench: {session.write_problem}", file=sys.stderr)
        code = EXIT_NOT_WRITTEN
    elif session.written_to:
        markdown = path.with_suffix(".md")
        command = "gnnbench run " + " ".join(shlex.quote(a) for a in sys.argv[2:]) if sys.argv[1:2] == ["run"] else None
        try:
            report_files([path], markdown, command=command, force=True, chosen=args.columns)  # this run's own table
            print(markdown.read_text())
            print(f"results: {path}\ntable:   {markdown}")
        except (OSError, InputError) as exc:
            print(f"gnnbench: could not write the table {markdown} ({getattr(exc, 'strerror', None) or exc}); every number is in "
                  f"{path} (gnnbench report {path})", file=sys.stderr)
            code = EXIT_NOT_WRITTEN
    done = sum(c.id in session.finished for c in session.selected)
    if interrupted:
        print(f"gnnbench: interrupted after {done} of {len(session.selected)} cells; finish the run with\n"
              f"  gnnbench run {shlex.quote(str(session.suite_path))} --resume {shlex.quote(str(session.journal.path))}",
              file=sys.stderr)
        return EXIT_INTERRUPTED
    if failed := [c.id for c in session.selected if session.finished[c.id].status in FAILED]:
        print(f"gnnbench: {len(failed)} of {len(session.selected)} cells failed or timed out "
              f"(the table says why): {', '.join(failed)}", file=sys.stderr)
    return code or (EXIT_CELLS_FAILED if failed else 0)
