"""`gnnbench recover`: a run's result file from its journal (.cells.jsonl), running nothing."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from bench.commands.common import EXIT_NOT_WRITTEN
from bench.publish import results
from bench.run import recover
from bench.run.session import SessionError, write_whole


def add_parser(sub, parents) -> None:
    rec = sub.add_parser("recover", parents=parents,
                         help="write a run's result file from its journal (.cells.jsonl), running nothing")
    rec.add_argument("journal", type=Path, help="the run's SUITE-STAMP.cells.jsonl")
    rec.add_argument("--suite", metavar="NAME|PATH",
                     help="the run's suite: the cells the journal lacks are listed as not run")
    rec.add_argument("--out", type=Path, metavar="FILE",
                     help="the result file to write (default: SUITE-STAMP.json beside the journal, if not there yet)")
    rec.add_argument("--force", action="store_true", help="replace the --out file if it is already there")


def run(args) -> int:
    out = args.out or recover.default_output(args.journal)
    if out.exists() and not args.force:
        made_by = "the run wrote it" if args.out is None else "gnnbench did not write it in this command"
        raise SessionError(f"{out} is already there ({made_by}); give --out FILE to write another, or --force "
                           "to replace it")
    if out.resolve() == Path(args.journal).resolve():
        raise SessionError(f"--out {out}: that is the journal being read; give another file")
    doc = recover.document(args.journal, args.suite)
    read = results.of_document(doc, out)  # checked as any result file is, before it is written
    try:
        write_whole(out, json.dumps(doc, indent=4))
    except OSError as exc:
        print(f"gnnbench: could not write {out} ({exc.strerror or exc}); the cells are still in "
              f"{args.journal}", file=sys.stderr)
        return EXIT_NOT_WRITTEN
    not_run = sum(c.status == results.NOT_RUN for c in read.cells)
    print(f"recovered {len(read.cells) - not_run} finished cells of suite {read.suite!r} "
          f"({len(read.measured)} measured)" + (f", {not_run} not run" if not_run else "")
          + f" from {args.journal}\nresults: {out}")
    return 0
