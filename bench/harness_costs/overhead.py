"""What looking costs: a cell's epoch with the stage timings and work counts (`profile: true`)
against the same epoch without them, interleaved epoch by epoch in one process.

    gnnbench fidelity [SUITE] --clocks [-k EXPR] [--rounds N] [--out FILE]

Separate runs differ by more than the overhead on a shared machine, so one process in the cell's
stack (overhead_loop.py) builds the cell's pipeline twice, profile on and off, and runs their
measured epochs in pairs, both epochs of a pair from the same seed (`Pipeline.reseed`), so their
ratio holds little but the machine's noise. The overhead is the median of the pairs' ratios minus
one, with a distribution-free 95 % interval. One-rank cells only (two DDP pipelines in one
process group would share one all-reduce).
"""

from __future__ import annotations

import json
import math
import statistics
import subprocess
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

from bench import stacks
from bench.harness_costs.fidelity import write_document
from bench.machine.load import LoadMeter
from bench.run.prepare import ensure_dataset  # bench.datasets.ready with this machine's stacks
from bench.run.runner import worker_env

GOAL = 0.02  # the promise: profiling costs at most 2 % of the epoch median


class OverheadError(RuntimeError):
    """A cell's interleaved run failed."""


@dataclass
class Overhead:
    """One cell's epoch pairs, profile on and off."""
    cell_id: str
    on_epochs: list[float]
    off_epochs: list[float]
    error: str | None = None  # the cell's interleaved run failed: why (the other cells go on)
    other_load: float | None = None  # the share of the machine other work took meanwhile (bench.machine.load)

    @property
    def ratios(self) -> list[float]:
        """Each pair's on/off, sorted."""
        return sorted(a / b for a, b in zip(self.on_epochs, self.off_epochs))

    @property
    def overhead(self) -> float:
        """Median over the pairs of on/off, minus one."""
        return statistics.median(self.ratios) - 1

    @property
    def interval(self) -> tuple[float, float]:
        """A 95 % confidence interval of that median (order statistics of the pairs' ratios: the
        binomial normal approximation, no assumption about their distribution)."""
        r, n = self.ratios, len(self.ratios)
        half = 0.98 * math.sqrt(n)  # 1.96 * sqrt(n) / 2
        low, high = math.floor(n / 2 - half), math.ceil(1 + n / 2 + half)  # ranks, counted from 1
        return r[max(0, low - 1)] - 1, r[min(n, high) - 1] - 1

    @property
    def medians_ratio(self) -> float:
        """The two sides' medians' ratio, minus one."""
        return statistics.median(self.on_epochs) / statistics.median(self.off_epochs) - 1

    @property
    def within_goal(self) -> bool:
        """Whether the overhead is within GOAL."""
        return self.error is None and self.overhead <= GOAL

    def as_dict(self) -> dict:
        """The cell as the JSON file holds it."""
        if self.error:
            return {**asdict(self), "within_goal": False}
        return {**asdict(self), "on_median_s": statistics.median(self.on_epochs),
                "off_median_s": statistics.median(self.off_epochs), "overhead": self.overhead,
                "overhead_ci95": list(self.interval), "medians_ratio": self.medians_ratio,
                "within_goal": self.within_goal}


def measurable(cell) -> bool:
    """Whether the cell can be measured (one rank)."""
    return cell.settings.world_size == 1


# ---- gnnbench's side -----------------------------------------------------------------------------

def run_cell(cell, dataset_dir: Path, cache: Path, epochs: int) -> Overhead:
    """One cell's interleaved run in its stack."""
    stack = stacks.get(cell.stack)
    if not stack.installed:
        raise OverheadError(f"{cell.id}: stack {cell.stack!r} is not installed (gnnbench stacks install {cell.stack})")
    # both sides' epochs and warm-ups, as the cell's own timeout would allow for one side
    timeout = 2 * float(cell.settings.timeout) * max(1.0, epochs / max(1, cell.settings.epochs))
    meter = LoadMeter()
    try:
        proc = subprocess.run([str(stack.python), "-m", "bench.harness_costs.overhead_loop", cell.to_json(), str(dataset_dir),
                               str(epochs)], env=worker_env(cache, uuid.uuid4().hex), text=True,
                              capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise OverheadError(f"{cell.id}: not done within {timeout:.0f} s") from None
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-1:] or [f"exit code {proc.returncode}"]
        raise OverheadError(f"{cell.id}: the interleaved run failed: {tail[0]}")
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    return Overhead(cell.id, found["on"], found["off"], other_load=meter.other_share(0.0))


def measure(cells: list, cache: Path, data_root: Path | None, epochs: int, say=print) -> list[Overhead]:
    """Every cell's pairs; a failing cell is recorded and the others still measured."""
    found = []
    for n, cell in enumerate(cells, 1):
        say(f"[{n}/{len(cells)}] {cell.id}: {epochs} epochs each side, interleaved ...")
        started = time.perf_counter()
        try:
            result = run_cell(cell, ensure_dataset(cell.dataset_spec, cache, data_root), cache, epochs)
        except OverheadError as exc:
            say(f"  failed: {exc}")
            found.append(Overhead(cell.id, [], [], error=str(exc)))
            continue
        low, high = result.interval
        say(f"  profile on {statistics.median(result.on_epochs):.4f} s, off {statistics.median(result.off_epochs):.4f} s:"
            f" overhead {result.overhead:+.1%} (95 % CI {low:+.1%} to {high:+.1%}) in {time.perf_counter() - started:.0f} s")
        found.append(result)
    return found


def table(found: list[Overhead]) -> str:
    """The cells as a Markdown table."""
    lines = ["| cell | epoch pairs | profile on (median) | profile off (median) | overhead (median of pairs) | 95 % CI | "
             "ratio of medians | within 2 % | other load |", "|---|---:|---:|---:|---:|---|---:|---|---:|"]
    for r in found:
        if r.error:
            error = r.error.replace("|", "\\|")  # a table cell
            lines.append(f"| `{r.cell_id}` | failed: {error} | | | | | | **no** | |")
            continue
        low, high = r.interval
        lines.append(f"| `{r.cell_id}` | {len(r.on_epochs)} | {statistics.median(r.on_epochs):.4f} s | "
                     f"{statistics.median(r.off_epochs):.4f} s | {r.overhead:+.1%} | {low:+.1%} to {high:+.1%} | "
                     f"{r.medians_ratio:+.1%} | {'yes' if r.within_goal else '**no**'} | "
                     f"{'n/a' if r.other_load is None else format(r.other_load, '.0%')} |")
    return "\n".join(lines)


def write(found: list[Overhead], path: Path, command: str) -> None:
    """The measurement's JSON and Markdown files."""
    write_document(path, command, {"goal": GOAL, "cells": [r.as_dict() for r in found]}, table(found))
