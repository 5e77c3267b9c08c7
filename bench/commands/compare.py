"""`gnnbench compare`: verdicts for NEW against OLD beyond the measured noise, `gnnbench history`'s
judgement (bench.publish.history.compare) for two runs."""

from __future__ import annotations

from pathlib import Path

from bench.commands.history import refuse_named_twice
from bench.inputs import InputError, finite_float
from bench.publish import history, results


def add_parser(sub, parents) -> None:
    cmp = sub.add_parser("compare", parents=parents,
                         help="verdicts for NEW against OLD beyond the measured noise (history's judgement, two runs)")
    cmp.add_argument("old", type=Path, help="the earlier result file")
    cmp.add_argument("new", type=Path, help="the later result file")
    cmp.add_argument("--floor", type=finite_float(0, 10), default=history.COMPARE_FLOOR,
                     help=f"least relative change ever called (default {history.COMPARE_FLOOR})")
    cmp.add_argument("--force", action="store_true", help="compare runs of different machines anyway")
    cmp.add_argument("--history", type=Path, action="append", default=[], metavar="FILE",
                     help="an earlier run of the suite, for each cell's own run-to-run noise (repeatable)")
    cmp.add_argument("--fail-on", choices=["regression"], help="exit 1 when a cell regressed or now fails")


def run(args) -> int:
    refuse_named_twice([("OLD", args.old), ("NEW", args.new), *(("--history", f) for f in args.history)])
    old, new, earlier = results.read(args.old), results.read(args.new), [results.read(f) for f in args.history]
    # a run against its copy: "unchanged" everywhere, read as a verdict
    if args.old.read_bytes() == args.new.read_bytes():
        raise InputError(f"{args.new}: holds the same result as {args.old} (a copy of one run); allowed: two runs")
    verdicts = history.compare(old, new, floor=args.floor, force=args.force, history=earlier)
    print(history.verdict_report(old, new, verdicts, floor=args.floor))
    return int(args.fail_on == "regression" and any(v.verdict in ("regression", "now failing") for v in verdicts))
