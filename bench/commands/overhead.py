"""`gnnbench overhead`: what the stage timings cost, each cell's epoch with profile on against
off, interleaved in one process."""

from __future__ import annotations

from pathlib import Path

from bench.commands.common import (EXIT_CELLS_FAILED, add_cache_dir, add_data_root, add_select, chosen_cells,
                                   command_line, results_path)
from bench.inputs import InputError
from bench.paths import cache_dir
from bench.harness_costs import overhead


def add_parser(sub, parents) -> None:
    ovh = sub.add_parser("overhead", parents=parents,
                         help="what the stage timings cost: each cell's epoch with profile on against off, interleaved in one process")
    ovh.add_argument("suite", nargs="?", default="profile-overhead", help="suite name in suites/ or a YAML path")
    add_select(ovh)
    ovh.add_argument("--epochs", type=int, default=20, help="measured epochs of each side, alternating (default 20)")
    ovh.add_argument("--out", type=Path, metavar="FILE",
                     help="the measurement's JSON (a Markdown table beside it); default: results/runs/overhead-<suite>-STAMP.json")
    add_data_root(ovh)
    add_cache_dir(ovh)


def run(args) -> int:
    if args.epochs < 1:
        raise InputError(f"--epochs {args.epochs}: give at least 1")
    suite, chosen = chosen_cells(args, overhead.measurable, "of one rank (world_size: 1)")
    out = results_path(args, "overhead", suite.name)
    print(f"overhead: {len(chosen)} cell(s) of {suite.name}, profile on and off, {args.epochs} epochs each, interleaved")
    found = overhead.measure(chosen, cache_dir(args.cache_dir, writable=True), args.data_root, args.epochs)
    overhead.write(found, out, command_line())
    print(overhead.table(found))
    print(f"results: {out}")
    return 0 if all(r.within_goal for r in found) else EXIT_CELLS_FAILED
