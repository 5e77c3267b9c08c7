"""`gnnbench fidelity`: what the harness costs, each cell's epoch against the plain loop its
framework's examples write; with `--clocks`, what its stage clocks cost: each cell's epoch with
profile on against off, interleaved in one process (bench/harness_costs/fidelity.py)."""

from __future__ import annotations

import sys
from pathlib import Path

from bench.commands.common import (EXIT_CELLS_FAILED, EXIT_INTERRUPTED, add_cache_dir, add_data_root, add_select,
                                   chosen_cells, command_line, ending_as_interrupt, results_path)
from bench.inputs import InputError, folder, new_output_file
from bench.paths import cache_dir
from bench.harness_costs import fidelity

MOST_ROUNDS = 1000  # --rounds and --max-rounds: more is a typo, not a measurement plan


def add_parser(sub, parents) -> None:
    fid = sub.add_parser("fidelity", parents=parents,
                         help="what the harness costs: each cell's epoch against the plain loop its framework's examples write")
    fid.add_argument("suite", nargs="?", default="smoke", help="suite name in suites/ or a YAML path")
    add_select(fid)
    fid.add_argument("--rounds", type=int, metavar="N",
                     help="interleaved rounds of cell and plain loop (default 3); with --clocks, measured epochs "
                          "of each side, alternating (default 20)")
    fid.add_argument("--max-rounds", type=int, metavar="N",
                     help="after --rounds, keep adding rounds while a pair's 95 %% interval straddles an edge of "
                          "the ±3 %% band (or fewer than 6 rounds ran: the fewest that settle a pair), up to N "
                          "rounds in all; pairs still unresolved are named with why")
    fid.add_argument("--against-itself", action="store_true",
                     help="run the plain loop on both sides (an A/A run): how far two runs of the same code read apart here")
    fid.add_argument("--side-by-side", action="store_true",
                     help="each round, one process runs the harness's pipeline and the plain loop, epochs "
                          "interleaved: the loops alone, the processes around them the same")
    fid.add_argument("--stack", action="append", metavar="NAME",
                     help="the suite's `stack` axis, replaced, as `gnnbench run --stack` takes it (e.g. a GPU "
                          "node's own interpreter, registered with `gnnbench stacks add`)")
    fid.add_argument("--clocks", action="store_true",
                     help="what the stage clocks cost: each one-rank cell's epoch with profile on against off, "
                          "interleaved epoch by epoch in one process (goal: at most 2 %% of the epoch median)")
    fid.add_argument("--out", type=Path, metavar="FILE",
                     help="the comparison's JSON (a Markdown table beside it); default: "
                          "results/runs/fidelity-<suite>-STAMP.json (--clocks: overhead-<suite>-STAMP.json)")
    fid.add_argument("--force", action="store_true", help="replace the --out file (and its Markdown) if already there")
    add_data_root(fid)
    add_cache_dir(fid)


def rounds(flag: str, n: int) -> int:
    if not 1 <= n <= MOST_ROUNDS:
        raise InputError(f"{flag} {n}: give at least 1 and at most {MOST_ROUNDS}")
    return n


def output_paths(args, kind: str, suite_name: str) -> Path:
    """The JSON this run writes (its Markdown beside it), checked before anything is measured: a .json in a
    writable folder, neither file there yet unless --force (no command writes over what it did not make)."""
    out = results_path(args, kind, suite_name)
    if args.out and out.suffix != ".json":
        raise InputError(f"--out {out}: give a .json file (its Markdown table is written beside it, as .md)")
    for path in (out, out.with_suffix(".md")) if args.out else ():
        new_output_file(f"--out {out}", path, args.force)
    return out if args.out else folder("the results folder (--out FILE for another)", out.parent, True) / out.name


def run(args) -> int:
    if args.clocks:
        return run_clocks(args)
    args.rounds = rounds("--rounds", 3 if args.rounds is None else args.rounds)
    if args.max_rounds is not None and rounds("--max-rounds", args.max_rounds) < args.rounds:
        raise InputError(f"--max-rounds {args.max_rounds}: give at least --rounds ({args.rounds})")
    if args.against_itself and args.side_by_side:
        raise InputError("--against-itself and --side-by-side: give one of them")
    suite, chosen = chosen_cells(args, fidelity.comparable,
                                 f"a plain loop exists for (one rank, mode {' or '.join(fidelity.PLAIN_MODES)}, no amp, "
                                 f"store memory, the backend's model or none, backend one of "
                                 f"{', '.join(fidelity.PLAIN_BACKENDS)})")
    out = output_paths(args, "fidelity", suite.name)
    print(f"fidelity: {len(chosen)} cell(s) of {suite.name}, {args.rounds} interleaved round(s) each"
          + (f", up to {args.max_rounds} while a pair is unresolved" if args.max_rounds else "")
          + (", the plain loop against itself" if args.against_itself else "")
          + (", both loops in one process" if args.side_by_side else ""))
    found: list[fidelity.Comparison] = []
    failed: dict[str, str] = {}  # a pair that failed is data: the others still run
    skipped: dict[str, str] = {}  # a GPU pair that cannot run here, with why
    try:
        with ending_as_interrupt():
            fidelity.compare(chosen, cache_dir(args.cache_dir, writable=True), args.data_root, args.rounds,
                             against_itself=args.against_itself, side_by_side=args.side_by_side,
                             max_rounds=args.max_rounds, found=found, failed=failed, skipped=skipped)
    except KeyboardInterrupt:  # the pairs that finished are kept; the rest are named
        if not found and not failed:
            raise
        done = {c.cell_id for c in found} | set(failed) | set(skipped)
        not_run = [c.id for c in chosen if c.id not in done]
        print(fidelity.write(found, out, command_line(), not_run=not_run, failed=failed, skipped=skipped))
        cut = [c.cell_id for c in found if c.interrupted_after is not None]
        print(f"results: {out} ({len(found)} of {len(chosen)} pairs"
              + (f"; {', '.join(cut)} interrupted with its finished rounds kept" if cut else "")
              + (f"; interrupted before {', '.join(not_run)}" if not_run else "") + ")", file=sys.stderr)
        return EXIT_INTERRUPTED
    print(fidelity.write(found, out, command_line(), failed=failed, skipped=skipped))
    print(f"results: {out}")
    if failed:
        print(f"gnnbench: {len(failed)} of {len(chosen)} pair(s) failed: {', '.join(failed)}", file=sys.stderr)
    if skipped:
        print(f"gnnbench: {len(skipped)} of {len(chosen)} pair(s) skipped here (no ratio): {', '.join(skipped)}",
              file=sys.stderr)
    # skipped pairs are not failures: a GPU pair on a CPU machine is named, the rest judged
    return 0 if (found or skipped) and not failed and not any(c.differs for c in found) else EXIT_CELLS_FAILED


def run_clocks(args) -> int:
    """The pair is the harness with its stage clocks and without them, not the plain loop."""
    if given := [flag for flag, on in (("--max-rounds", args.max_rounds is not None),
                                       ("--against-itself", args.against_itself),
                                       ("--side-by-side", args.side_by_side)) if on]:
        raise InputError(f"--clocks and {', '.join(given)}: --clocks runs both sides in one process, epoch by "
                         "epoch; give --rounds for the epochs of each side")
    epochs = rounds("--rounds", 20 if args.rounds is None else args.rounds)
    suite, chosen = chosen_cells(args, fidelity.clocks_measurable, "of one rank (world_size: 1)")
    out = output_paths(args, "overhead", suite.name)
    print(f"fidelity --clocks: {len(chosen)} cell(s) of {suite.name}, profile on and off, {epochs} epochs each, interleaved")
    found: list[fidelity.Overhead] = []  # cells go in as they end: on an interrupt, kept and the rest named
    try:
        with ending_as_interrupt():
            fidelity.measure_clocks(chosen, cache_dir(args.cache_dir, writable=True), args.data_root, epochs, found)
    except KeyboardInterrupt:
        if not found:
            raise
    not_run = [c.id for c in chosen[len(found):]]
    print(fidelity.write_clocks(found, out, command_line(), not_run))
    print(f"results: {out}" + (f" ({len(found)} of {len(chosen)} cells; interrupted before {', '.join(not_run)})"
                               if not_run else ""), file=sys.stderr if not_run else sys.stdout)
    return EXIT_INTERRUPTED if not_run else 0 if all(r.within_goal for r in found) else EXIT_CELLS_FAILED
