"""`gnnbench calibrate`: do the verdicts keep their error rates here? A/A pairs (cells doing identical
work) run as paired cells (suites/calibration.yaml), quiet or under a background load the command
makes itself, or with a planted slowdown of a known share of each epoch; then how often the 95 %
interval holds the truth, how often an A/A pair reads a difference, how often a planted one is found.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from bench import paired_ratio
from bench.commands.common import EXIT_INTERRUPTED, add_select, command_line, ending_as_interrupt
from bench.inputs import InputError
from bench.run.session import RunOptions, Session

# The load --load makes: one busy core switching on and off, so turns see the machine change under them
LOAD_ON_S, LOAD_OFF_S = 3.0, 2.0
BUSY_LOOP = (f"import time\nwhile True:\n    t = time.monotonic() + {LOAD_ON_S}\n    while time.monotonic() < t: pass\n"
             f"    time.sleep({LOAD_OFF_S})\n")
LR = re.compile(r"/lr=([0-9.e-]+)")


def add_parser(sub, parents) -> None:
    cal = sub.add_parser("calibrate", parents=parents, help="check the paired verdicts' error rates on A/A pairs "
                                                             "and planted slowdowns (suites/calibration.yaml)")
    cal.add_argument("suite", nargs="?", default="calibration", help="a suite of A/A cells paired by lr")
    add_select(cal)
    cal.add_argument("--runs", type=int, default=1, help="times the suite is run (each adds its A/A pairs)")
    cal.add_argument("--launches", type=int, metavar="N",
                     help="launches each pair is measured in (default: the suite's, 6); more narrow the intervals "
                          "as one over the square root of N, which is what finding a planted 5 %% takes")
    cal.add_argument("--load", action="store_true",
                     help=f"a background load while it runs: one core busy {LOAD_ON_S:g} s, idle {LOAD_OFF_S:g} s, on and on")
    cal.add_argument("--planted", type=float, metavar="FRACTION",
                     help="make the second cell of each pair this much slower: a busy-wait of this share of each measured epoch, at its end (e.g. 0.05)")
    cal.add_argument("--results", type=Path, metavar="DIR", help="folder for the result files (default: results/runs)")


def disjoint_pairs(cell_ids: list[str]) -> list[tuple[str, str]]:
    """The pairs calibrate reads: within each group (cells alike but for lr), lr index 0-1, 2-3, ...:
    no cell in two pairs, so the pairs are independent."""
    groups: dict[str, list[str]] = {}
    for cell in cell_ids:
        groups.setdefault(LR.sub("", cell), []).append(cell)
    by_lr = [sorted(cells, key=lambda c: float(LR.search(c).group(1))) for cells in groups.values()]
    return [pair for cells in by_lr for pair in zip(cells[0::2], cells[1::2])]


def summary(documents: list[dict], planted: float | None) -> dict:
    """Over the disjoint pairs of the result documents: their readings and the rates the issue asks."""
    rows = []
    for meta in (doc.get("gnnbench") or {} for doc in documents):
        pairs = {(p["first"], p["second"]): p for p in meta.get("pairs") or []}
        rows += [pair for key in disjoint_pairs(meta.get("cells") or [])
                 if (pair := pairs.get(key)) and pair.get("ci95")]
    n = len(rows)
    held = sum(p["ci95"][0] <= 1.0 <= p["ci95"][1] for p in rows)
    counts = {reading: sum(p.get("reading") == reading for p in rows) for reading in paired_ratio.READINGS}
    found = counts[paired_ratio.SLOWER] + counts[paired_ratio.LEANS_SLOWER]
    return {"pairs": n, "planted": planted, "interval_holds_1": held, "readings": counts,
            "differences_claimed": counts[paired_ratio.SLOWER] + counts[paired_ratio.FASTER], "found": found,
            "ratios": [[round(p["ratio"], 4), round(p["ci95"][0], 4), round(p["ci95"][1], 4), p["reading"]]
                       for p in rows]}


def text(result: dict, condition: str) -> str:
    n = result["pairs"] or 1
    lines = [f"Calibration ({condition}): {result['pairs']} disjoint pairs",
             f"- 95 % interval holds 1.00: {result['interval_holds_1']} of {result['pairs']} "
             f"({result['interval_holds_1'] / n:.0%})"]
    if result["planted"] is None:
        lines.append(f"- A/A read as faster or slower beyond the band: {result['differences_claimed']} of {result['pairs']}")
    else:
        lines.append(f"- planted {result['planted']:.0%} found (reads slower, surely or leaning): {result['found']} of "
                     f"{result['pairs']} ({result['found'] / n:.0%})")
    lines.append("- readings: " + ", ".join(f"{k} {v}" for k, v in result["readings"].items() if v))
    return "\n".join(lines)


def run(args) -> int:
    if not 1 <= args.runs <= 20:
        raise InputError(f"--runs {args.runs}: give 1 to 20")
    if args.planted is not None and not 0.01 <= args.planted <= 0.5:
        raise InputError(f"--planted {args.planted}: give a fraction from 0.01 to 0.5 (e.g. 0.05)")
    condition = ("loaded" if args.load else "quiet") + (f", planted {args.planted:.0%}" if args.planted else ", A/A")
    env_before = os.environ.get("GNNBENCH_FAULT")
    load = subprocess.Popen([sys.executable, "-c", BUSY_LOOP]) if args.load else None
    documents, paths, slowed = [], [], []
    try:
        with ending_as_interrupt():
            for number in range(args.runs):
                session = Session(RunOptions(suite=args.suite, results=args.results, paired_launches=args.launches),
                                  select=args.select)
                if args.planted:  # the second cell of each disjoint pair, slowed by a share of each epoch
                    slowed = [second for _, second in disjoint_pairs([c.id for c in session.selected])]
                    print(f"calibrate: planted {args.planted:.0%} of each epoch in {len(slowed)} cells", flush=True)
                    os.environ["GNNBENCH_FAULT"] = ",".join(f"slow{round(args.planted * 100)}:{cell.rsplit('/', 1)[1]}"
                                                            for cell in slowed)
                print(f"calibrate: run {number + 1} of {args.runs} ({condition})", flush=True)
                path = session.run()
                paths.append(path)
                documents.append(json.loads(path.read_text()))
    except KeyboardInterrupt:
        print("gnnbench: calibrate interrupted; the finished runs' files are kept: " + ", ".join(map(str, paths)),
              file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        if load is not None:
            load.kill()
            load.wait()
        os.environ.pop("GNNBENCH_FAULT", None)
        if env_before is not None:
            os.environ["GNNBENCH_FAULT"] = env_before
    result = {"command": command_line(), "condition": condition, "results": [str(p) for p in paths],
              "planted_in": slowed, **summary(documents, args.planted)}
    out = paths[-1].with_name(paths[-1].stem + ".calibration.json")
    out.write_text(json.dumps(result, indent=2) + "\n")
    said = text(result, condition)
    out.with_suffix(".md").write_text(f"Command: `{result['command']}`\n\n{said}\n")
    print(said + f"\ncalibration: {out}")
    return 0
