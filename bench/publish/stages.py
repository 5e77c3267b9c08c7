"""Where a cell's epoch went, and how close each stage ran to what the machine can do: read from
the stage timings and work counts the worker records (extra_info `stages`, `work`,
`loader_worker_s`) and the run's measured ceilings (machine_info `ceilings`). The stage split is the
slowest rank's (it adds up to the cell's epoch), work counts are per batch, and `work.batches` is
the batches of all ranks per epoch (bench/run/worker.py merge_ranks): rates here are per rank,
the figure a one-process ceiling compares with. Everything here is derived on read; files written before the stage timings have none, and every function answers
None for them.

    shares(cell)          stage -> share of the epoch (the stages add up to the epoch)
    binding(cell)         the stage with the largest share
    fetch_rate(cell)      feature bytes gathered per second of the fetch stage, and the ceiling
    copy_rate(cell)       bytes copied to the device per second of the copy stage, and the ceiling
    headline(cell)        "fetch 61 % of the epoch at 38 % of this machine's gather bandwidth"
    equal_work(cells)     cells that do different work for the same dataset, fanout and batch size
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from bench.publish import fmt

if TYPE_CHECKING:
    from bench.publish.results import CellResult

STAGES = ("sample", "fetch", "copy", "forward_backward", "optimizer", "allreduce", "wait", "other")
LABELS = {"forward_backward": "forward/backward", "allreduce": "all-reduce"}
EQUAL_WORK_TOLERANCE = 0.10   # nodes per batch differing by more than this: not the same work
# with the dataset: cells that should do the same work. The world size too: each rank takes its
# share of the seeds, so more ranks leave more partial batches (PyG's shards), fewer nodes each.
SAME_WORK_KEYS = ("fanout", "batch_size", "world_size")


def label(stage: str) -> str:
    return LABELS.get(stage, stage)


def seconds(cell: CellResult) -> dict[str, float] | None:
    """Seconds per epoch by stage, in STAGES order (stages the file lacks count 0)."""
    stages = cell.metrics.stages if cell.metrics else None
    if not stages:
        return None
    return {s: float(stages.get(s) or 0.0) for s in STAGES}


def total(cell: CellResult) -> float | None:
    split = seconds(cell)
    return sum(split.values()) if split else None


def shares(cell: CellResult) -> dict[str, float] | None:
    """Each stage's share of the epoch (of the stages' sum, which is the epoch within a few %)."""
    split, whole = seconds(cell), total(cell)
    if not split or not whole:
        return None
    return {s: v / whole for s, v in split.items()}


def binding(cell: CellResult) -> tuple[str, float] | None:
    """The stage that takes the largest share of the epoch, and that share."""
    parts = shares(cell)
    if not parts:
        return None
    stage = max(parts, key=parts.get)
    return stage, parts[stage]


def share_of(cell: CellResult, stage: str) -> float | None:
    parts = shares(cell)
    return parts[stage] if parts else None


def workers(cell: CellResult) -> int:
    return int(cell.settings.get("num_workers") or 0)


def _work(cell: CellResult, key: str):
    work = cell.metrics.work if cell.metrics else None
    return (work or {}).get(key)


def batches_per_rank(cell: CellResult) -> float | None:
    """Batches one rank runs per epoch."""
    if cell.metrics is None:
        return None
    total = _work(cell, "batches")
    if total:
        return total / int(cell.settings.get("world_size") or 1)
    return cell.metrics.batches_per_epoch


def nodes_per_batch(cell: CellResult) -> float | None:
    """The nodes whose features a batch fetched (its sampled neighbourhood, all hops)."""
    nodes = _work(cell, "input_nodes")
    if nodes is None and _work(cell, "hop_nodes"):
        nodes = sum(_work(cell, "hop_nodes"))
    return nodes


def row_bytes(cell: CellResult) -> int | None:
    """A feature row's width in bytes: from the work counts, else float32 rows of the card's width."""
    fetched, nodes = _work(cell, "feature_bytes"), _work(cell, "input_nodes")
    if fetched and nodes:
        return round(fetched / nodes)
    return cell.card.feature_dim * 4 if cell.card and cell.card.feature_dim else None


def _ceilings(cell: CellResult) -> dict:
    return (cell.machine.ceilings if cell.machine else None) or {}


def gather_ceiling(cell: CellResult) -> float | None:
    """This machine's random-row gather bandwidth at the cell's row width (the nearest width measured)."""
    measured = _ceilings(cell).get("gather_bytes_per_s") or {}
    width = row_bytes(cell)
    if not measured or not width:
        return None
    nearest = min(measured, key=lambda w: abs(int(w) - width))
    return measured[nearest]


def _pinned(cell: CellResult) -> bool:
    """What the cell pinned: its mode's data (pinned-cuda) or its loader's batches (pin_memory)."""
    from bench.modes import MODES, pins

    name = str(cell.settings.get("mode", ""))
    return name in MODES and pins(name, cell.settings)


def h2d_ceiling(cell: CellResult) -> tuple[float, str] | None:
    """The host-to-device bandwidth the copy stage is held against: pinned where the mode pins
    its features, else pageable (else whichever was measured)."""
    ceil = _ceilings(cell)
    pinned, pageable = ceil.get("h2d_pinned_bytes_per_s"), ceil.get("h2d_pageable_bytes_per_s")
    if _pinned(cell) and pinned:
        return pinned, "pinned"
    if pageable:
        return pageable, "pageable"
    return (pinned, "pinned") if pinned else None


def fetch_rate(cell: CellResult) -> tuple[float, float | None] | None:
    """Feature bytes fetched per second of the fetch stage, and its share of the gather ceiling;
    only where the fetch ran in the training process (num_workers=0: in workers it overlaps)."""
    fetch = (seconds(cell) or {}).get("fetch")
    fetched, batches = _work(cell, "feature_bytes"), batches_per_rank(cell)
    if workers(cell) or not fetch or not fetched or not batches:
        return None
    rate = fetched * batches / fetch
    ceiling = gather_ceiling(cell)
    return rate, (rate / ceiling if ceiling else None)


def copy_rate(cell: CellResult) -> tuple[float, float | None] | None:
    """Bytes copied to the device per second of the copy stage, and its share of the h2d ceiling."""
    copy = (seconds(cell) or {}).get("copy")
    copied, batches = _work(cell, "copy_bytes"), batches_per_rank(cell)
    if not copy or not copied or not batches:
        return None
    rate = copied * batches / copy
    ceiling = h2d_ceiling(cell)
    return rate, (rate / ceiling[0] if ceiling else None)


def bandwidth(value: tuple[float, float | None] | None) -> str:
    """'1.2 GB/s (38 %)' of a fetch_rate/copy_rate answer: the rate and its share of the ceiling."""
    if value is None:
        return fmt.DASH
    rate, fraction = value
    return fmt.byte_rate(rate) + (f" ({fmt.pct(fraction, 0)})" if fraction is not None else "")


def against_ceiling(cell: CellResult, stage: str) -> str | None:
    """'at 38 % of this machine's gather bandwidth', for the fetch and copy stages where known."""
    if stage == "fetch":
        rate = fetch_rate(cell)
        if rate and rate[1] is not None:
            return f"at {fmt.pct(rate[1], 0)} of this machine's gather bandwidth"
    if stage == "copy":
        rate, ceiling = copy_rate(cell), h2d_ceiling(cell)
        if rate and rate[1] is not None:
            return f"at {fmt.pct(rate[1], 0)} of this machine's {ceiling[1]} host-to-device bandwidth"
    return None


def binding_text(cell: CellResult) -> str | None:
    """'fetch 61 %': the binding stage and its share of the epoch."""
    found = binding(cell)
    return f"{label(found[0])} {fmt.pct(found[1], 0)}" if found else None


def headline(cell: CellResult) -> str | None:
    """'fetch 61 % of the epoch at 38 % of this machine's gather bandwidth'."""
    found = binding(cell)
    if not found:
        return None
    against = against_ceiling(cell, found[0])
    return f"{label(found[0])} {fmt.pct(found[1], 0)} of the epoch" + (f" {against}" if against else "")


def sums_to_epoch(cell: CellResult) -> float | None:
    """The stages' sum over the epoch's mean (1.0: they add up; the contract asks within 5 %)."""
    whole, mean = total(cell), cell.stats.mean if cell.stats else None
    return whole / mean if whole and mean else None


def split_line(recorded: dict | None) -> str | None:
    """A recorded `stages` dict (extra_info) as one console line, binding stage first:
    'fetch 61 % · sample 20 % · forward/backward 15 % · ...' (stages under 0.5 % left out)."""
    if not recorded:
        return None
    whole = sum(float(recorded.get(s) or 0.0) for s in STAGES)
    if not whole:
        return None
    parts = sorted(((float(recorded.get(s) or 0.0) / whole, s) for s in STAGES), reverse=True)
    return " · ".join(f"{label(s)} {fmt.pct(share, 0)}" for share, s in parts if share >= 0.005)


# --- the equal-work check ----------------------------------------------------------------------

def equal_work(cells) -> dict[str, str]:
    """cell id -> a flag, for each measured cell whose nodes per batch differ by more than
    EQUAL_WORK_TOLERANCE from another cell of the same dataset, fanout, batch size and world size: the two
    sample different neighbourhoods, and their epoch times do not compare."""
    groups: dict[str, list] = {}
    for cell in cells:
        if cell.measured and nodes_per_batch(cell):
            key = json.dumps([cell.dataset, *(cell.settings.get(k) for k in SAME_WORK_KEYS)], default=str)
            groups.setdefault(key, []).append(cell)
    flags = {}
    for group in groups.values():
        for cell in group:
            mine = nodes_per_batch(cell)
            other = max(group, key=lambda c: abs(nodes_per_batch(c) - mine))
            theirs = nodes_per_batch(other)
            if abs(mine - theirs) / min(mine, theirs) > EQUAL_WORK_TOLERANCE:
                flags[cell.id] = f"{mine:,.0f} nodes per batch against {theirs:,.0f} in {other.id}"
    return flags
