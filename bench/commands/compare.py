"""`gnnbench compare`: verdicts for NEW against OLD, beyond the measured noise."""

from __future__ import annotations

from pathlib import Path

from bench.inputs import InputError, finite_float, terminal_safe
from bench.publish import results
from bench.publish import history


def add_parser(sub, parents) -> None:
    cmp = sub.add_parser("compare", parents=parents, help="verdicts for NEW against OLD, beyond the measured noise")
    cmp.add_argument("old", type=Path, help="the earlier result file")
    cmp.add_argument("new", type=Path, help="the later result file")
    cmp.add_argument("--floor", type=finite_float(0, 10), default=0.10, help="least relative change ever called (default 0.10)")
    cmp.add_argument("--force", action="store_true", help="compare runs of different machines anyway")
    cmp.add_argument("--history", type=Path, action="append", default=[], metavar="FILE",
                     help="an earlier run of the suite, for each cell's own run-to-run noise (repeatable)")
    cmp.add_argument("--fail-on", choices=["regression"], help="exit 1 when a cell regressed or now fails")


def run(args) -> int:
    refuse_repeats([("OLD", args.old), ("NEW", args.new), *(("--history", f) for f in args.history)])
    old, new = results.read(args.old), results.read(args.new)
    verdicts = history.compare(old, new, floor=args.floor, force=args.force,
                               history=[results.read(f) for f in args.history])
    print(terminal_safe(history.run_line("old", old)))
    print(terminal_safe(history.run_line("new", new)))
    print(terminal_safe(history.verdict_table(verdicts, floor=args.floor)))
    if args.fail_on == "regression" and any(v.verdict in ("regression", "now failing") for v in verdicts):
        return 1
    return 0


def refuse_repeats(given: list[tuple[str, Path]]) -> None:
    """The same result file twice (docs/guarantees.md): a run compared with itself says "unchanged"
    for every cell, which would read as a verdict."""
    seen: dict[Path, tuple[str, Path]] = {}
    for role, path in given:
        key = path.resolve()
        if key in seen:
            first_role, first = seen[key]
            raise InputError(f"{path}: given twice ({role}, and {first_role} {first} is the same file); allowed: "
                             "each result file once (compare two runs)")
        seen[key] = (role, path)
