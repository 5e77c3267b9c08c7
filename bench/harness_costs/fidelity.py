"""What the harness costs: each cell's epoch, run by gnnbench, against the plain loop its
framework's examples write (bench/harness_costs/plain_loops.py), in the same stack on the same data.

    gnnbench fidelity [SUITE] [-k EXPR] [--rounds N] [--against-itself | --side-by-side] [--out FILE]
    gnnbench fidelity [SUITE] --clocks [-k EXPR] [--rounds N] [--out FILE]     (what the clocks cost)

The two are interleaved round after round, so a machine that gets busier or quieter moves both
alike; a cell is faithful when its ratio is within ±TOLERANCE, either way (the CPU-time ratio
beside it). A GPU pair that cannot run here is skipped; one that runs names what differs by design.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import platform
import statistics
import subprocess
import time
import uuid
from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path

from bench import modes, paired_ratio, stacks
from bench.paired_ratio import MIN_LAUNCHES, TOLERANCE
from bench.backends import BACKENDS
from bench.machine import core_budget
from bench.machine.load import LoadMeter
from bench.run.executor import Executor
from bench.run.prepare import Preparation, PreparedCell
from bench.run.runner import Launch, Outcome, worker_env
from bench.run.suite import Cell

# the backends whose registry line names a plain loop (bench/harness_costs/plain_loops.py)
PLAIN_BACKENDS = tuple(name for name, info in BACKENDS.items() if info.plain_loop)
# the modes the plain loops honour: GraphBolt's pinned and GPU storage not
PLAIN_MODES = ("cpu-cpu", "cpu-cuda")


class FidelityError(RuntimeError):
    """A pair's cell or plain loop failed."""


class PairSkipped(FidelityError):
    """A pair that cannot run here (a GPU mode: no GPU, or no CUDA build of the cell's stack)."""


class PairInterrupted(KeyboardInterrupt):
    """An interrupt in a pair's rounds, carrying the pair over the rounds both sides finished."""

    def __init__(self, partial: Comparison):
        super().__init__()
        self.partial = partial


@dataclass
class Comparison:
    """One cell's pair: each side's epochs, round by round, and what is read from them."""
    cell_id: str
    harness_epochs: list[float]
    plain_epochs: list[float]
    other_load: list[float]  # each harness run's share of the machine other processes took
    threads: int | None = None  # torch threads both sides ran with (the cell's core budget)
    # each side's process CPU seconds per measured epoch (not its loader workers'); empty where not recorded
    harness_cpu: list[float] = field(default_factory=list)
    plain_cpu: list[float] = field(default_factory=list)
    # each round's measured epochs: runs differ more than epochs do, so the interval resamples rounds
    harness_rounds: list[list[float]] = field(default_factory=list)
    plain_rounds: list[list[float]] = field(default_factory=list)
    against_itself: bool = False  # an A/A run: the plain loop on both sides
    side_by_side: bool = False  # each round ran both loops in one process, epochs interleaved
    # --max-rounds: the cap on rounds added while the interval straddles an edge of the band
    max_rounds: int | None = None
    # what differs between the two sides by design (a GPU pair's: gpu_differences), named with its ratio
    differences: list[str] = field(default_factory=list)
    # an interrupt (Ctrl-C, a timeout's SIGINT) stopped the pair after these rounds of the `rounds` asked for
    interrupted_after: int | None = None
    rounds_asked: int | None = None

    def add(self, side: str, epochs: list[float], cpu: list[float], load: float | None = None) -> None:
        """One round's run of one side ("harness" or "plain", which carries the other load)."""
        self.__dict__.pop("_estimate", None)  # a new round: the ratio is taken again when next read
        getattr(self, f"{side}_rounds").append(epochs)
        getattr(self, f"{side}_epochs").extend(epochs)
        getattr(self, f"{side}_cpu").extend(cpu)
        if side == "harness":
            self.other_load.append(load)

    @property
    def paired(self) -> bool:
        """Whether the ratio is over paired epochs: a --side-by-side run, every round's epochs back to back."""
        return (self.side_by_side and bool(self.harness_rounds) and len(self.harness_rounds) == len(self.plain_rounds)
                and all(len(h) == len(p) for h, p in zip(self.harness_rounds, self.plain_rounds)))

    def _round_logs(self) -> list[float]:
        """Each round's log(harness / plain): a round is a launch (fresh processes), so what differs
        between launches is in the rounds' spread. Paired epochs: the median of their drift-free
        sandwiches (paired_ratio.sandwich_logs); else the log of the round's medians' ratio."""
        logs = []
        for hs, ps in zip(self.harness_rounds, self.plain_rounds):
            if self.paired:
                turns = [turn for h, p in zip(hs, ps) for turn in (("harness", h), ("plain", p))]
                logs.append(paired_ratio.launch_estimate(paired_ratio.sandwich_logs(turns, "plain", "harness")))
            elif hs and ps:
                logs.append(math.log(statistics.median(hs) / statistics.median(ps)))
        return [x for x in logs if x is not None]

    @property
    def confidence(self) -> float:
        """The verdict interval's confidence: 95 % at one look (at --rounds), 97.5 % at each of two (and at
        --max-rounds where given: each spends half of ALPHA)."""
        return 1 - paired_ratio.look_alpha(2 if self.max_rounds else 1)

    @cached_property
    def _estimate(self) -> tuple[float, tuple[float, float] | None]:
        """The ratio over the rounds and its interval at `confidence` (kept until a round is added)."""
        logs = self._round_logs()
        if not logs:
            return self.ratio_of_medians, None
        ratio, found = paired_ratio.over_launches(logs, 1 - self.confidence)
        return ratio, found if len(logs) >= MIN_LAUNCHES else None

    @property
    def interval(self) -> tuple[float, float] | None:
        """The verdict's interval: a t interval over the rounds (launches), None below MIN_LAUNCHES."""
        return self._estimate[1]

    @property
    def settled(self) -> str | None:
        """"inside" or "outside" the band at the plan's confidence; None where it straddles an edge."""
        return paired_ratio.band_state(self.interval)

    @property
    def reading(self) -> str:
        """What the interval says against the band (paired_ratio.READINGS)."""
        return paired_ratio.reading(self.ratio, self.interval)

    @property
    def resolved(self) -> bool | None:
        """Whether the whole interval lies outside the band; None without one."""
        return None if self.interval is None else self.settled == "outside"

    @property
    def unsettled_reason(self) -> str | None:
        """Why the pair stayed unsettled, where an interval was taken."""
        if self.settled is not None or self.interval is None:
            return None
        n = len(self.harness_rounds)
        low, high = self.interval
        cap = f" (the cap, --max-rounds {self.max_rounds})" if self.max_rounds else " (give --max-rounds to add more)"
        if self.interrupted_after is not None:
            cap = f" (interrupted after {n} of the {self.rounds_asked} rounds asked)"
        return (f"its {self.confidence:.1%} interval {low:.3f}–{high:.3f} still straddles an edge of ±{TOLERANCE:.0%} "
                f"after {n} rounds{cap}: the launch-to-launch spread here is wider than the difference")

    @property
    def cpu_ratio(self) -> float | None:
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
    def ratio_of_medians(self) -> float:
        return self.harness_median / self.plain_median

    @property
    def ratio(self) -> float:
        """The harness against the plain loop: the geometric mean of the rounds' ratios."""
        return self._estimate[0]

    @property
    def faithful(self) -> bool:
        """Whether the interval lies inside the band (the harness surely costs less than ±TOLERANCE)."""
        return self.reading == paired_ratio.SAME

    @property
    def differs(self) -> bool:
        """Whether the interval lies wholly beyond the band: a difference to name."""
        return self.reading in (paired_ratio.SLOWER, paired_ratio.FASTER)

    @property
    def verdict(self) -> str:
        """'yes' (inside the band), '**no**: 12.1% faster (...)' (wholly beyond it), else what the interval
        says (paired_ratio.verdict): never "yes" from the point estimate alone."""
        if self.faithful:
            return "yes"
        words = paired_ratio.verdict({"ratio": self.ratio, "ci95": self.interval, "within": TOLERANCE,
                                      "paired": True, "launches": len(self.harness_rounds), "rounds": 1})
        return f"**no**: {words}" if self.differs else words

    def as_dict(self) -> dict:
        return {**asdict(self), "harness_median_s": self.harness_median, "plain_median_s": self.plain_median,
                "ratio": self.ratio, "ratio_of_medians": self.ratio_of_medians,
                "faithful": self.faithful, "cpu_ratio": self.cpu_ratio,
                "ratio_interval": list(self.interval) if self.interval else None, "confidence": self.confidence,
                "ratio_is": "geometric mean of the rounds' ratios (each round a launch)",
                "reading": self.reading, "settled": self.settled, "unsettled_reason": self.unsettled_reason}


def comparable(cell: Cell) -> bool:
    """Whether a plain loop exists for the cell."""
    s = cell.settings
    return (cell.backend in PLAIN_BACKENDS and s.world_size == 1 and s.mode in PLAIN_MODES and s.amp == "off"
            and s.store == "memory" and s.model in (*BACKENDS[cell.backend].models, "none"))


def gpu_differences(cell: Cell, side_by_side: bool) -> list[str]:
    """What a GPU pair's two sides do differently by design (none on the CPU)."""
    s = cell.settings
    if not modes.mode(s.mode).needs_gpu:
        return []
    found = [] if side_by_side else [  # one process: neither side is pinned to the GPU's cores
        "threads: the cell's rank is pinned to its GPU's cores and its thread count refitted to them, PyG's "
        "loader workers one core each (bench/machine/gpu_affinity.py); the plain loop keeps the core budget's "
        "count, unpinned"]
    if s.profile:
        found.append("the cell's stage clocks synchronise the GPU at every stage boundary (profile: true); the "
                     "plain loop only around each epoch: give the pair's cell profile: false for the speed")
    return found


def run_plain(cell: Cell, dataset_dir: Path, cache: Path) -> tuple[list[float], list[float]]:
    """The plain loop's measured epochs, in the cell's stack: (wall seconds, CPU seconds) of each."""
    found = plain_loops_json(cell, [cell.to_json(), str(dataset_dir)], cache)
    return found["epochs"], found.get("cpu", [])


def run_side_by_side(cell: Cell, dataset_dir: Path, cache: Path) -> dict:
    """Both loops in one process of the cell's stack (plain_loops.side_by_side)."""
    return plain_loops_json(cell, ["--side-by-side", cell.to_json(), str(dataset_dir)], cache)


def plain_loops_json(cell: Cell, args: list[str], cache: Path, timeout: float | None = None,
                     error=FidelityError, failed: str = "the plain loop failed") -> dict:
    """plain_loops run with `args` in the cell's stack: its JSON line."""
    timeout = float(cell.settings.timeout) if timeout is None else timeout
    try:
        proc = subprocess.run([str(stacks.get(cell.stack).python), "-m", "bench.harness_costs.plain_loops", *args],
                              env=worker_env(cache, uuid.uuid4().hex), text=True, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise error(f"{cell.id}: not done within {timeout:.0f} s") from None
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-1:] or [f"exit code {proc.returncode}"]
        raise error(f"{cell.id}: {failed}: {tail[0]}")
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    if "skipped" in found:  # the stack's own answer: no GPU, or no CUDA build of its framework
        raise PairSkipped(found["skipped"])
    return found


def cell_executor(cells: list[Cell], cache: Path, data_root: Path | None, say=print) -> Executor:
    """The executor `gnnbench run` prepares and launches cells with (stacks, dataset and link split,
    store, the GPU and node refusals), so a pair's harness side is the cell as a run runs it."""
    return Executor(cells, None, "fidelity", False, cache, Launch(), Preparation(cache, data_root, say=say),
                    journal=None, say=say)


def prepared(executor: Executor, cell: Cell) -> tuple[Cell, PreparedCell]:
    """The cell as it runs here and it prepared, or PairSkipped / FidelityError with what stopped it."""
    resolved, ready = executor.prepared(cell)
    if isinstance(ready, Outcome):
        why = ready.reason.splitlines()[0]
        raise PairSkipped(why) if ready.status == "skipped" else FidelityError(f"{cell.id}: {ready.status}: {why}")
    return resolved, ready


def run_harness(executor: Executor, cell: Cell, ready: PreparedCell) -> tuple[list[float], list[float], float | None]:
    """The cell's measured epochs as gnnbench runs it: (wall seconds, CPU seconds, other load)."""
    if (outcome := executor.start(cell, ready)).status != "ok":
        why = outcome.reason.splitlines()[0]
        raise PairSkipped(why) if outcome.status == "skipped" else FidelityError(
            f"{cell.id}: the cell ended {outcome.status}: {why}")
    epochs = outcome.record["epochs"]
    return ([e["seconds"] for e in epochs], [e["cpu_s"] for e in epochs if e.get("cpu_s") is not None],
            outcome.other_load)


def compare(cells: list[Cell], cache: Path, data_root: Path | None, rounds: int, say=print,
            against_itself: bool = False, side_by_side: bool = False, max_rounds: int | None = None,
            found: list[Comparison] | None = None, failed: dict[str, str] | None = None,
            skipped: dict[str, str] | None = None) -> list[Comparison]:
    """Each cell against its plain loop, `rounds` interleaved rounds, then (where unsettled at that
    look) on to `max_rounds` and one more look; pairs go into `found` as they end (kept on an interrupt), `failed`, `skipped`."""
    found = [] if found is None else found
    failed = {} if failed is None else failed
    skipped = {} if skipped is None else skipped
    executor = cell_executor(cells, cache, data_root, say)
    for cell in cells:
        try:
            found.append(_compare_one(executor, cell, cache, rounds, say, against_itself, side_by_side, max_rounds))
        except PairInterrupted as exc:  # its finished rounds are measurements: kept, the interrupt goes on
            found.append(exc.partial)
            raise KeyboardInterrupt from None
        except PairSkipped as exc:
            skipped[cell.id] = str(exc)
            say(f"  {cell.id}: skipped: {exc}")
        except FidelityError as exc:
            failed[cell.id] = str(exc)
            say(f"  {cell.id}: failed: {exc}")
    return found


def _compare_one(executor: Executor, cell: Cell, cache: Path, rounds: int, say, against_itself: bool,
                 side_by_side: bool, max_rounds: int | None) -> Comparison:
    """One cell's pair (compare); an interrupt after a round raises PairInterrupted with the rounds so far."""
    # both sides train on what a run prepares (its dataset, a link task's split), the GPU refusal first
    resolved, ready = prepared(executor, cell)
    dataset_dir = ready.dataset_dir
    result = Comparison(cell.id, [], [], [], against_itself=against_itself, side_by_side=side_by_side,
                        max_rounds=max_rounds, differences=gpu_differences(cell, side_by_side),
                        rounds_asked=max_rounds or rounds)  # the most this pair could have run
    s = cell.settings  # one rank: the plan both sides set (bench/run/worker.py set_threads)
    result.threads = core_budget.plan(core_budget.usable_cores(), 1, s.num_workers, s.threads).threads
    r = 0
    try:
        # two planned looks at most: at --rounds, and (where unsettled there) at --max-rounds, none between
        while r < rounds or (max_rounds and r < max_rounds and (r > rounds or result.settled is None)):
            if side_by_side:  # one process runs both
                both = run_side_by_side(resolved, dataset_dir, cache)
                runs = {"harness": (both["harness"], both["harness_cpu"]), "plain": (both["epochs"], both["cpu"])}
            else:  # alternate which goes first, so neither always runs on a machine the other warmed
                runs = {side: (run_plain(resolved, dataset_dir, cache) if against_itself or side == "plain"
                               else run_harness(executor, resolved, ready))  # an A/A run: plain on both sides
                        for side in (("harness", "plain") if r % 2 == 0 else ("plain", "harness"))}
            for side, run in runs.items():  # a round counts once both sides finished it
                result.add(side, *run)
            r += 1
            of = f"{r}/{rounds}" if r <= rounds else f"{r} (of at most {max_rounds}: unsettled)"
            say(f"  {cell.id} round {of}, medians so far: {'A' if against_itself else 'harness'} "
                f"{statistics.median(result.harness_epochs):.4f} s, "
                f"{'B' if against_itself else 'plain'} {statistics.median(result.plain_epochs):.4f} s")
    except KeyboardInterrupt:
        if not r:
            raise
        result.interrupted_after = r
        say(f"  {cell.id}: interrupted after {r} of {result.rounds_asked} rounds: kept")
        raise PairInterrupted(result) from None
    if result.unsettled_reason:
        say(f"  {cell.id}: unresolved: {result.unsettled_reason}")
    return result


# what a table's two sides and its list of pairs outside the band are, by the kind of run
HEADINGS = {
    "against_itself": ("plain loop, A (median)", "plain loop, B (median)",
                       "the plain loop against itself: no harness on either side"),
    "side_by_side": ("gnnbench epoch, same process (median)", "plain loop epoch (median)",
                     "the harness's loop against the plain loop in one process, either way"),
    "apart": ("gnnbench epoch (median)", "plain loop epoch (median)",
              "the harness against the plain loop it mirrors, either way"),
}


def table(found: list[Comparison]) -> str:
    """The pairs as a Markdown table, with the lists of unsettled, differing and outside pairs."""
    band = f"within ±{TOLERANCE:.0%}"
    kind = ("against_itself" if any(c.against_itself for c in found)
            else "side_by_side" if any(c.side_by_side for c in found) else "apart")
    first, second, what = HEADINGS[kind]
    paired = any(c.paired for c in found)  # the ratio is over back-to-back epoch pairs; their medians' ratio beside it
    ratio = "ratio (paired epochs) | ratio of medians" if paired else "ratio (rounds' geometric mean)"
    confidence = f"{found[0].confidence:.1%}" if found else "95 %"
    lines = [f"| cell | threads | {first} | {second} | {ratio} | {confidence} interval (rounds) | {band} | CPU-time ratio | other load |",
             "|---|---:|---:|---:|---:|" + ("---:|" if paired else "") + "---|---|---:|---:|"]
    for c in found:
        loads = [x for x in c.other_load if x is not None]
        load = f"{max(loads):.0%}" if loads else "n/a"  # the busiest round: other processes' CPU share
        threads = "n/a" if c.threads is None else str(c.threads)
        interval = "n/a" if c.interval is None else f"{c.interval[0]:.3f}–{c.interval[1]:.3f} ({len(c.harness_rounds)})"
        lines.append(f"| `{c.cell_id}` | {threads} | {c.harness_median:.4f} s | {c.plain_median:.4f} s | "
                     f"{c.ratio:.3f} | {f'{c.ratio_of_medians:.3f} | ' if paired else ''}{interval} | {c.verdict} | {'n/a' if c.cpu_ratio is None else f'{c.cpu_ratio:.3f}'} | {load} |")
    sections = {
        "Interrupted (its figures are over the rounds that finished):":
            [f"`{c.cell_id}`: {c.interrupted_after} of the {c.rounds_asked} rounds asked"
             for c in found if c.interrupted_after is not None],
        "Unresolved (neither inside nor wholly outside the band at the plan's confidence):":
            [f"`{c.cell_id}`: {c.unsettled_reason}" for c in found if c.unsettled_reason],
        "Differences by design (the GPU pairs' sides):":
            [f"`{c.cell_id}`: {d}" for c in found for d in c.differences],
        f"Outside ±{TOLERANCE:.0%} ({what}):":
            [f"`{c.cell_id}`: {c.verdict.removeprefix('**no**: ')} (ratio {c.ratio:.3f}){_resolution(c)}"
             for c in found if c.differs or (c.interval is None and not paired_ratio.within(c.ratio))]}
    for heading, items in sections.items():
        lines += ["", heading, *(f"- {item}" for item in items)] if items else []
    return "\n".join(lines)


def _resolution(c: Comparison) -> str:
    """What the interval says of a pair outside the band."""
    if c.interval is None:
        return f"; over {len(c.harness_rounds)} rounds, fewer than the {MIN_LAUNCHES} an interval over launches needs"
    return "" if c.differs else f"; its {c.confidence:.1%} interval reaches into the band: not surely beyond it"


def write(found: list[Comparison], path: Path, command: str, not_run: list[str] | None = None,
          failed: dict[str, str] | None = None, skipped: dict[str, str] | None = None) -> str:
    """The comparison's files (naming pairs not run, failed or skipped); returns the table."""
    fields = {"tolerance": TOLERANCE, "cells": [c.as_dict() for c in found]}
    text = table(found) if found else "No pair finished."
    for key, heading, pairs in (("failed", "Failed", failed), ("skipped", "Skipped", skipped)):
        if pairs:
            fields[key] = pairs
            text += f"\n\n{heading} (no ratio):\n" + "\n".join(f"- `{cell}`: {why}" for cell, why in pairs.items())
    return write_document(path, command, fields, text, not_run)


def write_document(path: Path, command: str, fields: dict, table_text: str, not_run: list[str] | None = None) -> str:
    """A comparison's JSON (command, time, machine, then `fields`) and its Markdown table beside it, naming
    the cells an interrupt left unrun; returns the table."""
    if not_run:
        fields["not_run"] = {"reason": "interrupted", "cells": not_run}
        table_text = "Interrupted: not run: " + ", ".join(f"`{cell}`" for cell in not_run) + "\n\n" + table_text

    doc = {"command": command, "written_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
           "machine": {"node": platform.node(), "processor": platform.processor(), "cpus": core_budget.usable_cores()},
           **fields}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2) + "\n")
    path.with_suffix(".md").write_text(f"Command: `{command}`\n\n{table_text}\n")
    return table_text


# --- `fidelity --clocks`: a cell's epoch with the stage clocks (`profile: true`) against without.
# One process (plain_loops.py --clocks) builds the pipeline twice and runs their epochs in pairs from
# the same seed: the overhead is the median of the pairs' ratios minus one, with a distribution-free
# 95 % interval. One-rank cells only (two DDP pipelines in one process would share one all-reduce).

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
        return sorted(a / b for a, b in zip(self.on_epochs, self.off_epochs))

    @property
    def overhead(self) -> float:
        return statistics.median(self.ratios) - 1

    @property
    def interval(self) -> tuple[float, float]:
        """A 95 % interval of that median (order statistics of the pairs' ratios, binomial normal approximation)."""
        r, n = self.ratios, len(self.ratios)
        half = 0.98 * math.sqrt(n)  # 1.96 * sqrt(n) / 2
        low, high = math.floor(n / 2 - half), math.ceil(1 + n / 2 + half)  # ranks, counted from 1
        return r[max(0, low - 1)] - 1, r[min(n, high) - 1] - 1

    @property
    def medians_ratio(self) -> float:
        return statistics.median(self.on_epochs) / statistics.median(self.off_epochs) - 1

    @property
    def within_goal(self) -> bool:
        return self.error is None and self.overhead <= GOAL

    def as_dict(self) -> dict:
        if self.error:
            return {**asdict(self), "within_goal": False}
        return {**asdict(self), "on_median_s": statistics.median(self.on_epochs),
                "off_median_s": statistics.median(self.off_epochs), "overhead": self.overhead,
                "overhead_ci95": list(self.interval), "medians_ratio": self.medians_ratio,
                "within_goal": self.within_goal}


def clocks_measurable(cell) -> bool:
    return cell.settings.world_size == 1


def run_clocks(cell, dataset_dir: Path, cache: Path, epochs: int) -> Overhead:
    """One cell's interleaved run in its stack."""
    if not stacks.get(cell.stack).installed:
        raise OverheadError(f"{cell.id}: stack {cell.stack!r} is not installed (gnnbench stacks install {cell.stack})")
    # both sides' epochs and warm-ups, as the cell's own timeout would allow for one side
    timeout = 2 * float(cell.settings.timeout) * max(1.0, epochs / max(1, cell.settings.epochs))
    meter = LoadMeter()
    found = plain_loops_json(cell, ["--clocks", cell.to_json(), str(dataset_dir), str(epochs)], cache, timeout,
                             OverheadError, "the interleaved run failed")
    return Overhead(cell.id, found["on"], found["off"], other_load=meter.other_share(0.0))


def measure_clocks(cells: list, cache: Path, data_root: Path | None, epochs: int, found: list[Overhead],
                   say=print) -> list[Overhead]:
    """Every cell's pairs, into `found` as each ends (kept on an interrupt); a failing cell is recorded
    and the others still measured."""
    executor = cell_executor(cells, cache, data_root, say)
    for n, cell in enumerate(cells, 1):
        say(f"[{n}/{len(cells)}] {cell.id}: {epochs} epochs each side, interleaved ...")
        started = time.perf_counter()
        try:
            resolved, ready = prepared(executor, cell)
            result = run_clocks(resolved, ready.dataset_dir, cache, epochs)
        except (OverheadError, FidelityError) as exc:
            say(f"  failed: {exc}")
            found.append(Overhead(cell.id, [], [], error=str(exc)))
            continue
        low, high = result.interval
        say(f"  profile on {statistics.median(result.on_epochs):.4f} s, off {statistics.median(result.off_epochs):.4f} s:"
            f" overhead {result.overhead:+.1%} (95 % CI {low:+.1%} to {high:+.1%}) in {time.perf_counter() - started:.0f} s")
        found.append(result)
    return found


def clocks_table(found: list[Overhead]) -> str:
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


def write_clocks(found: list[Overhead], path: Path, command: str, not_run: list[str] | None = None) -> str:
    return write_document(path, command, {"goal": GOAL, "cells": [r.as_dict() for r in found]}, clocks_table(found),
                          not_run)
