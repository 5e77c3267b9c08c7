"""What the harness costs: each cell's epoch, run by gnnbench, against the plain loop its
framework's examples write (bench/harness_costs/plain_loops.py), run in the same stack on the same data.

    gnnbench fidelity [SUITE] [-k EXPR] [--rounds N] [--out FILE]

The two are interleaved, round after round (cell, plain loop, plain loop, cell, ...), so that a
machine that gets busier or quieter moves both alike; each side's figure is the median of its
measured epochs over all rounds. A cell is faithful when its median is within ±TOLERANCE of the
plain loop's, in either direction: a harness faster than the loop it mirrors is a difference to
explain as much as a slower one. Beside it, the CPU-time ratio: each side's process CPU seconds
per epoch (its threads; DataLoader workers' not counted), the work done, which a busy machine
moves far less than wall time: a cause hunted on a loaded machine shows there first. Both sides run with the cell's thread count (the core budget,
bench/machine/core_budget.py); the table lists it, and every pair outside the band below it. Only cells a plain loop exists for are compared: one rank, cpu-cpu, features in
memory, the GraphSAGE model, a backend of plain_loops.LOOPS.
"""

from __future__ import annotations

import datetime as dt
import json
import statistics
import subprocess
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bench import modes
from bench import stacks
from bench.backends import BACKENDS
from bench.run.prepare import ensure_dataset
from bench.run.runner import run_in_stack, worker_env
from bench.run.suite import Cell

TOLERANCE = 0.03  # every cell within ±3 % of the plain loop (issue 27), either direction
# the backends whose registry line names a plain loop (bench/harness_costs/plain_loops.py)
PLAIN_BACKENDS = tuple(name for name, info in BACKENDS.items() if info.plain_loop)


class FidelityError(RuntimeError):
    pass


@dataclass
class Comparison:
    cell_id: str
    harness_epochs: list[float]
    plain_epochs: list[float]
    other_load: list[float]  # each harness run's share of the machine other processes took
    threads: int | None = None  # torch threads both sides ran with (the cell's core budget)
    # each side's process CPU seconds per measured epoch (its threads, not its loader workers'): the
    # work done, which other load moves far less than wall time; empty where not recorded
    harness_cpu: list[float] = field(default_factory=list)
    plain_cpu: list[float] = field(default_factory=list)

    @property
    def cpu_ratio(self) -> float | None:
        """The harness's median CPU seconds per epoch over the plain loop's."""
        if not self.harness_cpu or not self.plain_cpu or not statistics.median(self.plain_cpu):
            return None
        return statistics.median(self.harness_cpu) / statistics.median(self.plain_cpu)

    @property
    def harness_median(self) -> float:
        return statistics.median(self.harness_epochs)

    @property
    def plain_median(self) -> float:
        return statistics.median(self.plain_epochs)

    @property
    def ratio(self) -> float:
        return self.harness_median / self.plain_median

    @property
    def faithful(self) -> bool:
        return within(self.ratio)

    @property
    def verdict(self) -> str:
        """'yes', or '**no**: 12.1 % faster' (the harness against its plain loop)."""
        if self.faithful:
            return "yes"
        return f"**no**: {abs(self.ratio - 1):.1%} {'slower' if self.ratio > 1 else 'faster'}"

    def as_dict(self) -> dict:
        return {**asdict(self), "harness_median_s": self.harness_median, "plain_median_s": self.plain_median,
                "ratio": self.ratio, "faithful": self.faithful, "cpu_ratio": self.cpu_ratio}


def within(ratio: float, tolerance: float = TOLERANCE) -> bool:
    """A harness/plain ratio inside ±tolerance (a little slack for the float's last digits)."""
    return abs(ratio - 1) <= tolerance + 1e-9


def comparable(cell: Cell) -> bool:
    s = cell.settings
    return (cell.backend in PLAIN_BACKENDS and s["world_size"] == 1 and not modes.mode(s["mode"]).needs_gpu
            and s.get("store", "memory") == "memory" and s["model"] == "sage")


def run_plain(cell: Cell, dataset_dir: Path, cache: Path) -> tuple[list[float], list[float]]:
    """The plain loop's measured epochs, in the cell's stack: (wall seconds, CPU seconds) of each."""
    stack = stacks.get(cell.stack)
    proc = subprocess.run([str(stack.python), "-m", "bench.harness_costs.plain_loops", cell.to_json(), str(dataset_dir)],
                          env=worker_env(cache, uuid.uuid4().hex), text=True, capture_output=True,
                          timeout=float(cell.settings["timeout"]))
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-1:] or [f"exit code {proc.returncode}"]
        raise FidelityError(f"{cell.id}: the plain loop failed: {tail[0]}")
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    return found["epochs"], found.get("cpu", [])


def run_harness(cell: Cell, dataset_dir: Path, cache: Path) -> tuple[list[float], list[float], float | None]:
    """The cell's measured epochs as gnnbench runs it: (wall seconds, CPU seconds, other load)."""
    outcome = run_in_stack(cell, dataset_dir, cache)
    if outcome.status != "ok":
        raise FidelityError(f"{cell.id}: the cell ended {outcome.status}: {outcome.reason.splitlines()[0]}")
    epochs = outcome.record["epochs"]
    return ([e["seconds"] for e in epochs], [e["cpu_s"] for e in epochs if e.get("cpu_s") is not None],
            outcome.other_load)


def compare(cells: list[Cell], cache: Path, data_root: Path | None, rounds: int, say=print) -> list[Comparison]:
    found = []
    for cell in cells:
        dataset_dir = ensure_dataset(cell.dataset_spec, cache, data_root)
        result = Comparison(cell.id, [], [], [])
        from bench.machine import core_budget

        s = cell.settings  # one rank: the plan both sides set (bench/run/worker.py set_threads)
        result.threads = core_budget.plan(core_budget.usable_cores(), 1, s["num_workers"], s.get("threads", "auto")).threads
        for r in range(rounds):
            # alternate which goes first, so neither always runs on a machine the other warmed
            for side in (("harness", "plain") if r % 2 == 0 else ("plain", "harness")):
                if side == "harness":
                    epochs, cpu, load = run_harness(cell, dataset_dir, cache)
                    result.harness_epochs += epochs
                    result.harness_cpu += cpu
                    result.other_load.append(load)
                else:
                    epochs, cpu = run_plain(cell, dataset_dir, cache)
                    result.plain_epochs += epochs
                    result.plain_cpu += cpu
            say(f"  {cell.id} round {r + 1}/{rounds}: harness {statistics.median(result.harness_epochs):.4f} s, "
                f"plain {statistics.median(result.plain_epochs):.4f} s")
        found.append(result)
    return found


def table(found: list[Comparison]) -> str:
    band = f"within ±{TOLERANCE:.0%}"
    lines = [f"| cell | threads | gnnbench epoch (median) | plain loop epoch (median) | ratio | {band} | CPU-time ratio | other load |",
             "|---|---:|---:|---:|---:|---|---:|---:|"]
    for c in found:
        loads = [x for x in c.other_load if x is not None]
        load = f"{max(loads):.0%}" if loads else "n/a"  # the busiest round: other processes' CPU share
        threads = "n/a" if c.threads is None else str(c.threads)
        lines.append(f"| `{c.cell_id}` | {threads} | {c.harness_median:.4f} s | {c.plain_median:.4f} s | "
                     f"{c.ratio:.3f} | {c.verdict} | {'n/a' if c.cpu_ratio is None else f'{c.cpu_ratio:.3f}'} | {load} |")
    outside = [c for c in found if not c.faithful]
    if outside:
        lines += ["", f"Outside ±{TOLERANCE:.0%} (the harness against the plain loop it mirrors, either way):"]
        lines += [f"- `{c.cell_id}`: {c.verdict.removeprefix('**no**: ')} (ratio {c.ratio:.3f})" for c in outside]
    return "\n".join(lines)


def write(found: list[Comparison], path: Path, command: str) -> None:
    write_document(path, command, {"tolerance": TOLERANCE, "cells": [c.as_dict() for c in found]}, table(found))


def write_document(path: Path, command: str, fields: dict, table_text: str) -> None:
    """A comparison's JSON (its command, when, on what machine, then `fields`) and its Markdown
    table beside it: `gnnbench fidelity` and `gnnbench overhead` alike."""
    import platform

    from bench.machine.load import usable_cores

    doc = {"command": command, "written_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
           "machine": {"node": platform.node(), "processor": platform.processor(), "cpus": usable_cores()},
           **fields}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2) + "\n")
    path.with_suffix(".md").write_text(f"Command: `{command}`\n\n{table_text}\n")
