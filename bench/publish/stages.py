"""Where a cell's epoch went and how close each stage ran to what the machine can do, from the
worker's stage timings and work counts (extra_info `stages`, `work`, `loader_worker_s`) and the
run's ceilings; files written before them have none (every function answers None). The stage split
is the slowest rank's; rates are per rank, the figure a one-process ceiling compares with. Beside
them, the checks that compared cells do the same work: `equal_work` and `fewer_seeds`.
"""

from __future__ import annotations

import json
from typing import Any

# the stage names and their labels are the stage clocks' (the worker records them)
from bench.backends.stages import STAGES, label
from bench.publish import fmt
from bench.modes import MODES, pins
from bench.backends import BACKENDS

# bench.publish.results.CellResult, not imported: results runs the checks here as it reads a file
CellResult = Any

EQUAL_WORK_TOLERANCE = 0.10   # a per-seed figure differing by more than this: not the same work
# with the dataset: cells that should do the same work (more ranks leave more partial batches; other
# negatives or exclusion, the link task's settings, are other work by design)
SAME_WORK_KEYS = ("fanout", "batch_size", "world_size", "neg_ratio", "neg_mode", "exclusion")


def seconds(cell: CellResult) -> dict[str, float] | None:
    """Seconds per epoch by stage, in STAGES order (stages the file lacks count 0)."""
    stages = cell.metrics.stages if cell.metrics else None
    return {s: float(stages.get(s) or 0.0) for s in STAGES} if stages else None


def total(cell: CellResult) -> float | None:
    split = seconds(cell)
    return sum(split.values()) if split else None


def shares(cell: CellResult) -> dict[str, float] | None:
    """Each stage's share of the epoch (of the stages' sum, which is the epoch within a few %)."""
    split, whole = seconds(cell), total(cell)
    return {s: v / whole for s, v in split.items()} if split and whole else None


def binding(cell: CellResult) -> tuple[str, float] | None:
    """The stage that takes the largest share of the epoch, and that share."""
    parts = shares(cell)
    return max(parts.items(), key=lambda part: part[1]) if parts else None


def workers(cell: CellResult) -> int:
    return int(cell.settings.num_workers or 0)


def _work(cell: CellResult, key: str):
    work = cell.metrics.work if cell.metrics else None
    return (work or {}).get(key)


def batches_per_rank(cell: CellResult) -> float | None:
    """Batches one rank runs per epoch."""
    if batches := _work(cell, "batches"):
        return batches / int(cell.settings.world_size or 1)
    return cell.metrics.batches_per_epoch if cell.metrics else None


def nodes_per_batch(cell: CellResult) -> float | None:
    """The nodes whose features a batch fetched (its sampled neighbourhood, all hops)."""
    nodes, hops = _work(cell, "input_nodes"), _work(cell, "hop_nodes")
    return sum(hops) if nodes is None and hops else nodes


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
    return measured[min(measured, key=lambda w: abs(int(w) - width))] if measured and width else None


def h2d_ceiling(cell: CellResult) -> tuple[float, str] | None:
    """The host-to-device bandwidth the copy stage is held against: pinned where the mode pins
    its features, else pageable (else whichever was measured)."""
    ceil = _ceilings(cell)
    pinned, pageable = ceil.get("h2d_pinned_bytes_per_s"), ceil.get("h2d_pageable_bytes_per_s")
    # pinned: its mode's data (pinned-cuda) or its loader's batches (pin_memory)
    if cell.settings.mode in MODES and pins(cell.settings) and pinned:
        return pinned, "pinned"
    if pageable:
        return pageable, "pageable"
    return (pinned, "pinned") if pinned else None


def _rate(cell: CellResult, stage: str, moved: str, ceiling: float | None) -> tuple[float, float | None] | None:
    """Bytes moved (the work count `moved`) per second of `stage`, and its share of `ceiling`."""
    spent, moved, batches = (seconds(cell) or {}).get(stage), _work(cell, moved), batches_per_rank(cell)
    if not spent or not moved or not batches:
        return None
    rate = moved * batches / spent
    return rate, (rate / ceiling if ceiling else None)


def fetch_rate(cell: CellResult) -> tuple[float, float | None] | None:
    """Feature bytes fetched per second of the fetch stage, and its share of the gather ceiling;
    only where the fetch ran in the training process (num_workers=0: in workers it overlaps)."""
    return None if workers(cell) else _rate(cell, "fetch", "feature_bytes", gather_ceiling(cell))


def copy_rate(cell: CellResult) -> tuple[float, float | None] | None:
    """Bytes copied to the device per second of the copy stage, and its share of the h2d ceiling."""
    ceiling = h2d_ceiling(cell)
    return _rate(cell, "copy", "copy_bytes", ceiling[0] if ceiling else None)


def bandwidth(value: tuple[float, float | None] | None) -> str:
    """'1.2 GB/s (38 %)' of a fetch_rate/copy_rate answer: the rate and its share of the ceiling."""
    if value is None:
        return fmt.DASH
    rate, fraction = value
    return fmt.byte_rate(rate) + (f" ({fmt.pct(fraction, 0)})" if fraction is not None else "")


def against_ceiling(cell: CellResult, stage: str) -> str | None:
    """'at 38 % of this machine's gather bandwidth', for the fetch and copy stages where known."""
    rate = {"fetch": fetch_rate, "copy": copy_rate}.get(stage, lambda _: None)(cell)
    if not rate or rate[1] is None:
        return None
    what = "gather" if stage == "fetch" else f"{h2d_ceiling(cell)[1]} host-to-device"
    return f"at {fmt.pct(rate[1], 0)} of this machine's {what} bandwidth"


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


def per_seed(cell: CellResult) -> dict | None:
    """The work per training seed (hops, layers, `over`) as recorded, else derived per batch (no layers)."""
    recorded = _work(cell, "per_seed")
    if recorded and recorded.get("hop_nodes"):
        return recorded
    hop_nodes, hop_edges = _work(cell, "hop_nodes"), _work(cell, "hop_edges") or []
    if not hop_nodes or not hop_nodes[0]:
        return None
    return {"over": "all", "hop_nodes": [n / hop_nodes[0] for n in hop_nodes],
            "hop_edges": [e / hop_nodes[0] for e in hop_edges], "layer_nodes": [], "layer_edges": []}


def typed_work(cell: CellResult) -> dict | None:
    """A typed cell's work per batch by node type and relation (`hop_nodes`, `hop_edges`), or None."""
    found = _work(cell, "typed")
    return found if found and found.get("hop_nodes") else None


def seeds_per_epoch(cell: CellResult) -> float | None:
    """Seeds trained per epoch, all ranks: as recorded, else (older files) seeds/s times the mean epoch."""
    if not cell.measured or cell.metrics is None:
        return None
    if cell.metrics.seeds_per_epoch is not None:
        return cell.metrics.seeds_per_epoch
    mean = cell.stats.mean if cell.stats else None
    return round(cell.metrics.seeds_per_s * mean) if mean and cell.metrics.seeds_per_s is not None else None


def _figures(found: dict) -> dict[tuple[str, int, str], float]:
    """(part, number, what) -> per seed, part a hop or layer (from 1), typed hops also per type/relation."""
    out = {}
    link = found.get("negatives") is not None  # a link cell: a seed is a positive edge
    if link:
        out[("negatives", 0, "negatives")] = float(found["negatives"])
    typed = found.get("typed") or {}
    for what in ("nodes", "edges"):
        named = [(what, found.get(f"hop_{what}") or [])]
        named += [(f"{name} {what}", values) for name, values in sorted((typed.get(f"hop_{what}") or {}).items())]
        for label_, values in named:
            for i, v in enumerate(values):
                # hop 0's nodes are the seeds themselves: 1 per seed (a link cell's: the ends of its pairs)
                if what == "edges" or i > 0 or link:
                    out[("hop", i + 1 if what == "edges" else i, label_)] = float(v)
        for i, v in enumerate(found.get(f"layer_{what}") or []):
            out[("layer", i + 1, what)] = float(v)
    return dict(sorted(out.items(), key=lambda kv: (kv[0][0] != "negatives", kv[0][0] != "hop", kv[0][1],
                                                    not kv[0][2].endswith("nodes"),
                                                    kv[0][2] not in ("nodes", "edges"), kv[0][2])))


def _apart(mine: float, theirs: float) -> float:
    """How far apart two figures are, relative to the smaller (inf where one is 0 and not the other)."""
    low = min(mine, theirs)
    return (0.0 if mine == theirs else float("inf")) if low <= 0 else abs(mine - theirs) / low


def _why(cell: CellResult, figure: tuple[str, int, str]) -> str | None:
    """What the framework does that makes this figure larger (bench.backends.BackendInfo.work_notes)."""
    info = BACKENDS.get(cell.backend or "")
    if info is None:
        return None
    part, number, what = figure
    what = what.rsplit(" ", 1)[-1]  # a type's or relation's figure: the note of its kind
    return info.work_notes.get(f"{part}_{what}" if part == "layer" else f"hop{number}_{what}") \
        or info.work_notes.get(part)


def equal_work(cells) -> dict[str, str]:
    """cell id -> a flag, for each measured cell whose work per training seed (over full batches)
    differs by more than EQUAL_WORK_TOLERANCE from another cell of the same SAME_WORK_KEYS: their epoch
    times do not compare. Older files: per seed over batches of about as many seeds, else per batch."""
    groups = fmt.group_by((c for c in cells if c.measured and (per_seed(c) or nodes_per_batch(c))), lambda c:
                          json.dumps([c.dataset, *map(c.settings.get, SAME_WORK_KEYS)], default=str))
    return {cell.id: flag for group in groups.values() for cell in group
            if (flag := _per_seed_flag(cell, group) if per_seed(cell) else _per_batch_flag(cell, group))}


def _comparable(cell: CellResult, other: CellResult) -> bool:
    """Whether two cells' per-seed figures compare: both over full batches, or over batches of about as
    many seeds (a batch of few seeds shares fewer neighbours, so has more unique nodes per seed)."""
    if per_seed(cell).get("over") == per_seed(other).get("over") == "full":
        return True
    mine, theirs = _work(cell, "hop_nodes"), _work(other, "hop_nodes")
    return bool(mine and theirs) and _apart(mine[0], theirs[0]) <= EQUAL_WORK_TOLERANCE


def _per_seed_flag(cell: CellResult, group: list) -> str | None:
    mine = _figures(per_seed(cell))
    others = [(other, _figures(per_seed(other))) for other in group
              if other is not cell and per_seed(other) and _comparable(cell, other)]
    parts, said = [], set()
    for figure, value in mine.items():
        found = [(_apart(value, theirs[figure]), other, theirs[figure]) for other, theirs in others if figure in theirs]
        apart, other, theirs = max(found, key=lambda f: f[0], default=(0.0, None, None))
        if apart <= EQUAL_WORK_TOLERANCE:
            continue
        part, number, what = figure
        change = f"{(value - theirs) / theirs:+.0%}".replace("-", "−") if theirs else "more"
        where = "negatives" if part == "negatives" else f"{part} {number}"
        text = (f"{where}: {fmt.per_hop([value], True)} {what} per seed against {fmt.per_hop([theirs], True)} "
                f"in {other.id} ({change.replace('%', ' %')})")
        why = _why(cell, figure) if value > theirs else None
        parts.append(text + (f": {why}" if why and why not in said else ""))
        said.add(why)
    return "; ".join(parts) or None


def _per_batch_flag(cell: CellResult, group: list) -> str | None:
    mine = nodes_per_batch(cell)
    comparable = [c for c in group if nodes_per_batch(c)]
    if not mine or not comparable:
        return None
    other = max(comparable, key=lambda c: abs(nodes_per_batch(c) - mine))
    theirs = nodes_per_batch(other)
    if abs(mine - theirs) / min(mine, theirs) > EQUAL_WORK_TOLERANCE:
        return f"{mine:,.0f} nodes per batch against {theirs:,.0f} in {other.id}"
    return None


def fewer_seeds(cells) -> dict[str, str]:
    """cell id -> a note, for each measured cell that trained fewer seeds per epoch than another of its
    dataset and batch size (a sampler that drops seeds): compare those by seeds/s, not epoch time."""
    groups: dict[str, list] = {}
    for cell in cells:
        info = BACKENDS.get(cell.backend or "")
        # a replay_batch cell trains its first batch's seeds again for every batch: not the dataset's seeds
        if seeds_per_epoch(cell) and (info is None or info.seeds_are_training_seeds) and not cell.settings.replay_batch:
            # a link cell's seeds are positive edges: compared with link cells only
            key = json.dumps([cell.dataset, cell.settings.batch_size, info and info.task], default=str)
            groups.setdefault(key, []).append(cell)
    notes = {}
    for group in groups.values():
        most = max(group, key=seeds_per_epoch)
        for cell in group:
            fewer = seeds_per_epoch(most) - seeds_per_epoch(cell)
            if fewer >= 0.5:
                notes[cell.id] = (f"{fewer:,.0f} fewer seeds per epoch ({seeds_per_epoch(cell):,.0f} against "
                                  f"{seeds_per_epoch(most):,.0f} in {most.id})")
    return notes
