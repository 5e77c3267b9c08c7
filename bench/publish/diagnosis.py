"""Why more ranks or more workers are slower (docs/reading-results.md): per configuration slower per
epoch than the fastest of the same with fewer, a sentence from each rule (a function of that
`Slower` pair) that applies. Beside it, time to accuracy read (bench/run/to_target.py): `target_text`,
and `target_lines`: each cell whose faster epoch reaches the validation target later than a slower one.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from bench.publish import fmt, stages
from bench.publish.results import CellResult
from bench.machine.load import HIGH_LOAD
from bench.machine import core_budget

AXES = {"world_size": ("rank", "ranks"), "num_workers": ("worker", "workers")}
OVERSUBSCRIBED = 1.0      # processes per usable core above which the CPU is oversubscribed
STARTUP_SHARE = 0.5       # start-up this share of the whole run (start-up + epochs) or more, and longer than with fewer
ALLREDUCE_SHARE = 0.25    # DDP's all-reduce this share of the epoch or more
FEW_BATCHES = 20          # fewer batches per rank per epoch cannot amortise per-epoch costs
WAIT_SHARE = 0.4          # the loop waits for the loader this share of the epoch or more ...
WAIT_GROWTH = 0.1         # ... and this much more of it than with fewer ranks/workers
COMPUTE_GROWTH = 1.5      # compute per batch this many times that with fewer: cores shared
WORKER_COST = 1.5         # loader workers spend this many times the main process's sample+fetch
OTHER_SHARE = 0.3         # this share of the epoch outside every measured stage
SLOW_FIRST_EPOCH = 1.5    # a first epoch this many times the other's explains a later arrival at the target
# epoch time against time to accuracy: both must differ by this share before a pair is named (noise)
CLEAR_MARGIN = 0.05


@dataclass(frozen=True)
class Slower:
    """A configuration (`cell`) slower per epoch than the same one with fewer ranks or workers (`base`)."""
    cell: CellResult
    base: CellResult
    axis: str

    def setting(self, cell: CellResult) -> str:
        """'4 ranks', '0 workers'."""
        value = int(cell.settings.get(self.axis) or 0)
        one, many = AXES[self.axis]
        return f"{value} {one if value == 1 else many}"


def ranks(cell: CellResult) -> int:
    return int(cell.settings.world_size or 1)


def oversubscription(s: Slower) -> str | None:
    """The cell's core budget (bench/machine/core_budget.py) as it ran, where it oversubscribes the cores."""
    cell, machine = s.cell, s.cell.machine
    cores = machine and (machine.ceilings.get("usable_cores") or machine.cpu_count_logical or machine.cpu_count)
    if not cores:
        return None
    threads = (cell.device or {}).get("num_threads") or 1
    budget = core_budget.plan(cores, ranks(cell), stages.workers(cell), threads)
    return None if budget.used <= cores * OVERSUBSCRIBED else f"{budget.describe()}: CPU oversubscribed"


def startup_share(s: Slower) -> str | None:
    m, epochs = s.cell.metrics, s.cell.settings.epochs
    if not epochs or m.startup_s is None or s.base.metrics.startup_s is None:
        return None
    share = m.startup_s / (m.startup_s + epochs * s.cell.median)
    if share < STARTUP_SHARE or m.startup_s <= (s.base.metrics.startup_s or 0):
        return None  # a start-up that did not grow with the ranks or workers is no cause
    return (f"start-up is {fmt.pct(share, 0)} of a {epochs}-epoch run ({m.startup_s:.1f} s, against "
            f"{s.base.metrics.startup_s:.1f} s with {s.setting(s.base)})")


def allreduce_share(s: Slower) -> str | None:
    split = stages.seconds(s.cell)
    seconds = split["allreduce"] if split else s.cell.metrics.comm_s
    epoch = stages.total(s.cell) or s.cell.median
    if not seconds or seconds / epoch < ALLREDUCE_SHARE:
        return None
    return f"all-reduce is {fmt.pct(seconds / epoch, 0)} of the epoch ({seconds:.3f} s)"


def few_batches(s: Slower) -> str | None:
    n = stages.batches_per_rank(s.cell)
    if n is None or n >= FEW_BATCHES:
        return None
    who = "each rank runs" if ranks(s.cell) > 1 else "an epoch is"
    return (f"{who} {n:.0f} batch{'' if round(n) == 1 else 'es'}: too few to amortise the per-epoch costs "
            f"(loader start{', DDP synchronisation' if ranks(s.cell) > 1 else ''})")


def wait(cell: CellResult) -> float | None:
    """The share of the epoch the training loop waited for the loader."""
    share = (stages.shares(cell) or {}).get("wait")
    return share if share is not None else cell.metrics.loader_stall


def loader_wait(s: Slower) -> str | None:
    mine, theirs = wait(s.cell), wait(s.base)
    if mine is None or mine < WAIT_SHARE or (theirs is not None and mine - theirs < WAIT_GROWTH):
        return None
    return (f"the training loop waits for the loader {fmt.pct(mine, 0)} of the epoch (against "
            f"{fmt.pct(theirs, 0)} with {s.setting(s.base)})")


def compute_per_batch(cell: CellResult) -> float | None:
    split, n = stages.seconds(cell), stages.batches_per_rank(cell)
    seconds = split["forward_backward"] + split["optimizer"] if split else cell.metrics.compute_s
    return seconds / n if seconds and n else None


def compute_growth(s: Slower) -> str | None:
    mine, theirs = compute_per_batch(s.cell), compute_per_batch(s.base)
    if not mine or not theirs or mine / theirs < COMPUTE_GROWTH:
        return None
    return (f"a batch's compute takes {mine / theirs:.1f}× as long as with {s.setting(s.base)} "
            f"({mine * 1e3:.1f} ms against {theirs * 1e3:.1f} ms): the processes compete for the cores")


def worker_cost(s: Slower) -> str | None:
    spent = s.cell.metrics.loader_worker_s
    base_split = stages.seconds(s.base)
    if s.axis != "num_workers" or not spent or not base_split:
        return None
    mine = sum(spent.values())
    theirs = base_split["sample"] + base_split["fetch"]
    if not theirs or mine / theirs < WORKER_COST:
        return None
    return (f"the loader workers spend {mine:.3f} worker-seconds sampling and fetching per epoch, "
            f"{mine / theirs:.1f}× what the training process spends with {s.setting(s.base)}")


def other_share(s: Slower) -> str | None:
    share = (stages.shares(s.cell) or {}).get("other")
    if share is None or share < OTHER_SHARE:
        return None
    return f"{fmt.pct(share, 0)} of the epoch is outside every measured stage (e.g. loader workers starting)"


def busy_machine(s: Slower) -> str | None:
    load = s.cell.metrics.get("other_load")
    if load is None or load < HIGH_LOAD:
        return None
    return f"other processes took {fmt.pct(load, 0)} of the machine meanwhile: its times are suspect"


RULES: tuple[Callable[[Slower], str | None], ...] = (
    oversubscription, startup_share, allreduce_share, few_batches, loader_wait, compute_growth, worker_cost,
    other_share, busy_machine)


@dataclass(frozen=True)
class Diagnosis:
    slower: Slower
    causes: tuple[str, ...]

    @property
    def line(self) -> str:
        s = self.slower
        head = (f"{s.cell.id} is {s.cell.median / s.base.median:.2f}× slower per epoch with {s.setting(s.cell)} than with "
                f"{s.setting(s.base)} ({s.cell.median:.3g} s against {s.base.median:.3g} s)")
        causes = "; ".join(self.causes) if self.causes else "no recorded number explains it"
        return f"{head}: {causes}."


def slower_pairs(cells: Iterable[CellResult]) -> list[Slower]:
    """Each measured configuration slower than the fastest of the same with fewer ranks (or workers)."""
    measured = [c for c in cells if c.measured and c.median]
    found = []
    for axis in AXES:
        groups = fmt.group_by((c for c in measured if axis in c.settings), lambda c: json.dumps(
            [c.dataset, c.backend, {k: v for k, v in c.settings.items() if k != axis}], sort_keys=True,
            default=str))
        for group in groups.values():
            for cell in group:
                base = min((c for c in group if (c.settings[axis] or 0) < (cell.settings[axis] or 0)),
                           key=lambda c: c.median, default=None)
                if base is not None and cell.median > base.median:
                    found.append(Slower(cell, base, axis))
    return found


def diagnose(cells: Iterable[CellResult]) -> list[Diagnosis]:
    """A diagnosis per slower configuration, with every rule that applies."""
    return [Diagnosis(s, tuple(text for rule in RULES if (text := rule(s)))) for s in slower_pairs(cells)]


def target_rank(cell: CellResult) -> tuple:
    """Sorts cells by time to the target: reached (soonest first), not reached (best first), not sought."""
    if cell.target_seconds is not None:
        return 0, cell.target_seconds
    if cell.to_target:
        return 1, -(cell.to_target.get("best_val_acc") or 0.0)
    return 2, cell.median or 0.0


def target_text(cell: CellResult) -> str:
    """'1.234 s (4 epochs to 0.83)', 'not reached (best 0.712 in 10 epochs)', 'n/a' (no model), or a dash."""
    found = cell.to_target
    if cell.settings.target_acc is None:
        return fmt.DASH
    if not found:
        return "n/a"
    if found.get("reached"):
        return f"{fmt.seconds(found['seconds'])} s ({epochs(found['epochs'])} to {found['target']:g})"
    return (f"not reached (best {fmt.accuracy(found.get('best_val_acc'))} "
            f"in {epochs(found.get('epochs_run'))}, target {found['target']:g})")


def target_hint(cell: CellResult) -> str:
    """The evaluations behind it, for the HTML tooltip."""
    found = cell.to_target
    if not found:
        return "no model trained: no accuracy to reach" if cell.settings.target_acc is not None else ""
    seen = ", ".join(f"epoch {e['epoch']}: {fmt.accuracy(e.get('val_acc'))}" for e in found.get("evaluations") or [])
    return (f"validation accuracy every {found.get('eval_every')} epoch(s), at most {found.get('max_epochs')} epochs; "
            f"training time only ({fmt.seconds(found.get('eval_s'))} s of evaluation apart): {seen}")


def epochs(n) -> str:
    return f"{n} epoch{'' if n == 1 else 's'}"


@dataclass(frozen=True)
class Overtaken:
    """A cell with a faster epoch (`faster`) that reaches the validation target later than `sooner`."""
    faster: CellResult
    sooner: CellResult

    @property
    def line(self) -> str:
        a, b = self.faster, self.sooner
        found_a, found_b = a.to_target, b.to_target
        head = (f"{a.id} has the faster epoch ({a.median:.3g} s against {b.median:.3g} s for {b.id}) but reaches "
                f"its validation target {found_b['target']:g} later: {target_text(a)} against {target_text(b)}")
        causes = []
        if found_a.get("reached") and found_a["epochs"] > found_b["epochs"]:
            causes.append(f"it needs {found_a['epochs']} epochs to {found_b['epochs']}")
        seeds_a, seeds_b = stages.seeds_per_epoch(a), stages.seeds_per_epoch(b)
        if seeds_a and seeds_b and seeds_a < seeds_b:
            causes.append(f"it trains {fmt.rate(seeds_a)} seeds per epoch against {fmt.rate(seeds_b)}")
        first_a, first_b = (c.metrics.warmup_epoch_s[0] if c.metrics.warmup_epoch_s else None for c in (a, b))
        if first_a and first_b and first_a >= SLOW_FIRST_EPOCH * first_b:
            causes.append(f"its first epoch, a warm-up that trains too, took {first_a:.3g} s against {first_b:.3g} s")
        return head + (f": {'; '.join(causes)}" if causes else "") + "."


def overtaken(cells: Iterable[CellResult]) -> list[Overtaken]:
    """Each cell that a cell with a slower epoch (same dataset and target) beats to the target, paired
    with the soonest; the epoch and the arrival must both differ by CLEAR_MARGIN (never reached: any)."""
    trained = [c for c in cells if c.measured and c.median and c.to_target]
    found = []
    for cell in trained:
        rivals = [o for o in trained if beats_to_target(o, cell)]
        if rivals:
            found.append(Overtaken(cell, min(rivals, key=target_rank)))
    return found


def beats_to_target(rival: CellResult, cell: CellResult) -> bool:
    """The rival's epoch is clearly slower, yet it reached the same dataset's same target clearly sooner."""
    if (rival.dataset, rival.settings.target_acc) != (cell.dataset, cell.settings.target_acc):
        return False
    slower = rival.median >= cell.median * (1 + CLEAR_MARGIN)
    sooner = rival.target_seconds is not None and target_rank(rival) < target_rank(cell) and (
        cell.target_seconds is None or rival.target_seconds * (1 + CLEAR_MARGIN) <= cell.target_seconds)
    return slower and sooner


def target_lines(cells: Iterable[CellResult]) -> list[str]:
    """A line per cell overtaken by a slower epoch, else one saying none was (where a cell trained to a target)."""
    cells = list(cells)
    if found := overtaken(cells):
        return [o.line for o in found]
    if any(c.measured and c.to_target for c in cells):
        return [f"None: no epoch faster by {CLEAR_MARGIN:.0%} or more reached the validation target later by "
                f"{CLEAR_MARGIN:.0%} or more (time to accuracy orders these cells as epoch time does, those that "
                "did not reach it last)."]
    return []
