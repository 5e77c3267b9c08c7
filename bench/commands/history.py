"""`gnnbench history`: where each configuration's series of runs stepped beyond its noise
(bench.publish.steps), and the newest run judged against the one before (docs/history.md)."""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

from bench.inputs import InputError, finite_float, folder
from bench.publish import history, results, site, steps

RECENT = 3   # --fail-on-step: a step is news while its first run is among a series' last RECENT runs


def add_parser(sub, parents) -> None:
    hist = sub.add_parser("history", parents=parents,
                          help="each configuration's runs over time, and where each series stepped beyond its noise")
    hist.add_argument("paths", nargs="+", type=Path, metavar="FILE|DIR",
                      help="result files, or folders searched for them (*.json, sub-folders included)")
    hist.add_argument("--suite", action="append", default=[], metavar="NAME",
                      help="only the runs of this suite (repeatable)")
    hist.add_argument("--floor", type=finite_float(0, 10), default=0.05,
                      help="least relative change ever called a step (default 0.05)")
    hist.add_argument("--fail-on-step", action="store_true",
                      help="exit 1 when a series stepped to slower at one of its newest --recent runs")
    hist.add_argument("--recent", type=_at_least_one, default=RECENT, metavar="N",
                      help=f"the newest runs --fail-on-step looks at (default {RECENT}: a step may need a "
                           "run or two after it to stand out of the noise)")
    hist.add_argument("--html", type=Path, metavar="DIR",
                      help="also build the site here (index, suite pages, history.html with a chart per series)")


def _at_least_one(text: str) -> int:
    """`--recent N`: a whole number, 1 or more."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is below 1")
    return value


def run(args) -> int:
    runs, skipped, copies = result_files(args.paths)
    if args.suite:
        if not (runs := [r for r in runs if r.suite in args.suite]):
            raise InputError(f"--suite {', '.join(args.suite)}: no run of that suite among the result files")
    if args.html:
        folder(f"--html {args.html}", args.html, writable=True)
    analysed = steps.analyse(runs, floor=args.floor)
    print(steps.text(analysed, recent=args.recent))
    for old, new, verdicts in history.latest(runs):  # what `gnnbench compare` says of the newest two
        print(f"newest run of {new.suite} against the one before, as `gnnbench compare` judges it:\n"
              + history.verdict_report(old, new, verdicts))
    for copy, first in copies:
        print(f"counted once: {copy} holds the same result as {first}")
    if skipped:
        print(f"left out {len(skipped)} JSON file{'s' if len(skipped) != 1 else ''} that are not gnnbench result files: "
              + ", ".join(str(p) for p in skipped[:5]) + (" ..." if len(skipped) > 5 else ""))
    if args.html:
        pages = site.build(runs, args.html, command=None)
        print(f"site: {len(pages)} pages in {args.html} (open {args.html / 'history.html'})")
    news = [(s, step) for s in analysed if args.fail_on_step and (step := s.recent_slower_step(args.recent))]
    for series, step in news:
        print(f"FAIL {series.key.cell_id} ({series.key.suite}, {series.key.machine}): "
              f"{step.ratio:.2f}x slower since {step.after.when} ({steps.run_words(step.after)})")
    return 1 if news else 0


def result_files(paths: list[Path]) -> tuple[list[results.RunResult], list[Path], list[tuple[Path, Path]]]:
    """(runs, JSON files left out, (copy, first) pairs): the named files and the folders' *.json files, read
    and checked; a file reached twice, or one result under several names, counts once."""
    refuse_named_twice([("", p) for p in paths], "file or folder")
    runs, skipped, seen, copies = [], [], set(), []
    by_content: dict[str, Path] = {}
    for path in paths:
        for found in sorted(path.rglob("*.json")) if path.is_dir() else [path]:
            if found.resolve() in seen:
                continue
            seen.add(found.resolve())
            if found is not path and not is_result_file(found):
                skipped.append(found)
                continue
            run = results.read(found)
            digest = hashlib.sha256(found.read_bytes()).hexdigest()
            if digest in by_content:  # one run counted twice would read as no noise at all
                copies.append((found, by_content[digest]))
            else:
                by_content[digest] = found
                runs.append(run)
    if not runs:
        raise InputError(f"{', '.join(map(str, paths))}: no gnnbench result file there")
    return runs, skipped, copies


def refuse_named_twice(given: list[tuple[str, Path]], what: str = "result file") -> None:
    """The same file given twice (docs/guarantees.md): a run compared with itself says "unchanged"
    for every cell, which would read as a verdict. `given`: (the option it came by, or "", path)."""
    seen: dict[Path, tuple[str, Path]] = {}
    for role, path in given:
        key = path.resolve()
        if key in seen:
            first_role, first = seen[key]
            raise InputError(f"{path}: given twice ({f'{role}, and {first_role} ' if role else ''}{first} is the same "
                             f"file); allowed: each {what} once")
        seen[key] = (role, path)


def is_result_file(path: Path) -> bool:
    """Whether a JSON file claims to be a gnnbench result file (one that does and is broken is
    read, and its error stops the command; other JSON beside the results is left out)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and isinstance(data.get("benchmarks"), list) and isinstance(data.get("gnnbench"), dict)
