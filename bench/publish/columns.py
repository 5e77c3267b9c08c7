"""The metric columns of the tables, declared once: the Markdown report, the HTML suite page and the
docs' column reference iterate these lists, so a recorded number becomes a column with one line
(docs/ADDING.md: `brief`, `shown` and the rest).
"""

from __future__ import annotations

import argparse
import dataclasses
import re

from collections.abc import Callable
from dataclasses import dataclass

from bench.backends.stages import STAGES, label as stage_label
from bench.publish import diagnosis, fmt, stages
from bench.publish.results import CellResult
from bench.machine.load import HIGH_LOAD


@dataclass(frozen=True)
class Column:
    header: str                                   # the Markdown header: name and unit
    value: Callable[[CellResult], object]         # what the column shows of a measured cell
    format: Callable[[object], str] = fmt.num     # that value as text
    title: str | None = None                      # the HTML header, where it differs from `header`
    unit: str = ""                                # the HTML header's second, smaller line
    suffix: str = ""                              # HTML: after a value whose header names no unit
    note: Callable[[CellResult], str | None] | None = None   # after the value (smaller in HTML)
    hint: Callable[[CellResult], str] | None = None          # HTML: the cell's tooltip
    markdown: bool = True
    html: bool = True
    shown: Callable[[dict], bool] | None = None   # HTML: whether a dataset table (report.dataset_tables) shows it
    brief: bool = False                           # in the default table (else: --columns, HTML's "more columns")
    doc: str = ""                                 # what it means, for the docs' column reference (required there)

    @property
    def key(self) -> str:
        """The name `--columns` takes: the header in lower case, words joined by '-' ("val-acc/mrr")."""
        return re.sub(r"[^a-z0-9/@%]+", "-", re.sub(r"\s*/\s*", "/", self.header.lower())).strip("-")

    def text(self, cell: CellResult) -> str:
        return self.format(self.value(cell))

    def markdown_text(self, cell: CellResult) -> str:
        note = self.note(cell) if self.note else None
        return self.text(cell) + (f" {note}" if note else "")

    def html_text(self, cell: CellResult) -> str:
        value = self.value(cell)
        return self.format(value) + (self.suffix if value is not None else "")

    @property
    def html_title(self) -> str:
        return self.title or self.header


def metric(name: str) -> Callable[[CellResult], object]:
    """The recorded number of that extra_info name (see results.Metrics.get)."""
    return lambda cell: cell.metrics.get(name)


def _hits(hits) -> str:
    return fmt.DASH if not hits else " / ".join(fmt.accuracy(hits.get(k)) for k in ("10", "50", "100"))


def _busy_note(cell: CellResult) -> str:
    """' busy: times suspect' where other work took HIGH_LOAD of the machine or more while the cell ran."""
    load = cell.metrics.get("other_load") if cell.metrics else None
    return f" (busy {fmt.pct(load, 0)}: times suspect)" if load is not None and load >= HIGH_LOAD else ""


def _speedup_note(cell: CellResult) -> str | None:
    """The paired speedup's interval, or why there is none."""
    if cell.speedup_ci:
        return f"({fmt.ratio(cell.speedup_ci[0])}–{fmt.ratio(cell.speedup_ci[1])}, paired)"
    return "(not paired)" if cell.speedup_unpaired else None


def _leak_note(cell: CellResult) -> str | None:
    leaks = cell.metrics.get("leaks") or {}
    return "(includes the leak)" if cell.settings.exclusion == "none" and leaks.get("leaked_batches") else None


def _recorded(name: str) -> Callable[[dict], bool]:
    """Shown where some measured cell of the table records `name` (older result files lack it)."""
    return lambda table: any(r.measured and r.metrics.get(name) is not None for r in table["rows"])


def _unequal_work(cell: CellResult) -> str | None:
    return "(unequal work)" if cell.work_flag else None


def _fewer_seeds(cell: CellResult) -> str | None:
    """'(12 fewer seeds per epoch)' (stages.fewer_seeds; the whole note in the HTML tooltip)."""
    return f"({cell.seeds_flag.split(' (', 1)[0]})" if cell.seeds_flag else None


def _seeds_hint(cell: CellResult) -> str:
    per_epoch = stages.seeds_per_epoch(cell)
    text = f"{fmt.rate(per_epoch)} seeds per epoch" if per_epoch else "training seeds per second"
    return f"{text}: {cell.seeds_flag}" if cell.seeds_flag else text


def _per_seed_hops(key: str) -> Callable[[CellResult], str]:
    """A work figure per training seed at each hop or layer (stages.per_seed), as text."""
    return lambda cell: fmt.per_hop((stages.per_seed(cell) or {}).get(key), per_seed=True)


def _sampled(cell: CellResult) -> str | None:
    """Where the work budget counted a sample of the batches (bench/backends/stages.py): how many."""
    work = cell.metrics.work or {}
    counted, batches = work.get("counted"), work.get("batches")
    if counted and batches and counted < batches:
        return f"(means over {counted:,.1f} of {batches:,.1f} batches per epoch)"
    return None


def _work_hint(cell: CellResult) -> str:
    hops = (cell.metrics.work or {}).get("hop_nodes")
    per_hop = f"nodes per hop: {fmt.per_hop(hops)}" if hops else "nodes per hop not recorded"
    per_hop = " ".join(filter(None, (per_hop, _sampled(cell))))
    return f"unequal work: {cell.work_flag}; {per_hop}" if cell.work_flag else per_hop


def _ceiling_note(cell: CellResult) -> str | None:
    found = stages.binding(cell)
    against = stages.against_ceiling(cell, found[0]) if found else None
    return f"({against.removeprefix('at ').replace(' of this machine', ' of the machine')})" if against else None


def largest_private(cell: CellResult) -> tuple[str, int, int] | None:
    """(part, private bytes, rank) of the largest private part of any rank's peak PSS, or None."""
    parts = [(part, sizes.get("private", 0), rank)
             for rank, ranked in enumerate(cell.metrics.get("memory_breakdown") or [])
             for part, sizes in ((ranked or {}).get("parts") or {}).items()]
    return max(parts, key=lambda found: found[1], default=None)


def _breakdown_hint(cell: CellResult) -> str:
    return "; ".join(f"rank {rank}: " + ", ".join(
        f"{name.replace('_', ' ')} {fmt.mib(v.get('private', 0))} private + {fmt.mib(v.get('shared', 0))} shared MiB"
        for name, v in ((ranked or {}).get("parts") or {}).items())
        for rank, ranked in enumerate(cell.metrics.get("memory_breakdown") or []))


def gpu_util(cell: CellResult, key: str = "util_mean_pct") -> float | None:
    """A figure of the GPU utilisation in the measured epochs (bench/machine/gpu_sampler.py), or None."""
    found = cell.metrics.get("gpu_util")
    return found.get(key) if isinstance(found, dict) else None


def percent(value) -> str:
    """A percentage recorded as one (0-100, NVML's form), unlike fmt.pct's shares."""
    return fmt.DASH if value is None else f"{value:.0f} %"


def _gpu_util_note(cell: CellResult) -> str | None:
    peak, least, mean = (gpu_util(cell, k) for k in ("util_max_pct", "util_min_rank_pct", "util_mean_pct"))
    parts = [f"max {percent(peak)}"] if peak is not None else []
    if least is not None and mean is not None and (cell.num_ranks or 1) > 1 and mean - least >= 5:
        parts.append(f"least busy rank {percent(least)}")
    return f"({', '.join(parts)})" if parts else None


def _gpu_util_hint(cell: CellResult) -> str:
    lines = [f"rank {r.rank}: mean {percent(u.get('util_mean_pct'))}, max {percent(u.get('util_max_pct'))}, "
             f"host-to-device {fmt.rate(u.get('h2d_mb_per_s'))} MB/s" for r in cell.metrics.ranks if (u := r.gpu_util)]
    return "; ".join(lines) or "GPU busy share sampled by NVML during the measured epochs; low with a high loader stall: the loader starves the GPU"


def threads(cell: CellResult) -> int | None:
    """The torch compute threads each rank ran with (set by the core budget, bench/machine/core_budget.py)."""
    return (cell.device or {}).get("num_threads")


def _threads_note(cell: CellResult) -> str | None:
    """'(2 ranks × (1 thread + 0 workers) = 2 of 2 cores)', and whether a setting oversubscribed them."""
    b = (cell.device or {}).get("core_budget")
    if not b:
        return None
    r, t, w = b["ranks"], b["threads"], b["workers"]
    text = f"{r} × ({t} + {w} workers) of {b['cores']} cores" if w else f"× {r} of {b['cores']} cores"
    return f"({text}{', oversubscribed' if b.get('oversubscribed') else ''})"


def _by_phase(value: Callable[[float], str]) -> Callable[[dict | None], str]:
    """{"imports": 3.1, "dataset": 0.4} as 'imports 3.1 · dataset 0.4' (each `value`), or a dash."""
    return lambda phases: " · ".join(f"{name} {value(v)}" for name, v in phases.items()) if phases else fmt.DASH


TYPED_MODELS = {"rgcn": "R-GCN", "rgat": "R-GAT"}


def _typed_table(table: dict) -> bool:
    """Shown where some measured cell of the table is a typed one (work per node type recorded)."""
    return any(r.measured and stages.typed_work(r) for r in table["rows"])


def _model_text(cell: CellResult) -> str | None:
    found = cell.metrics.get("model")
    if not isinstance(found, dict):
        return None
    name = TYPED_MODELS.get(found.get("name"), found.get("name"))
    heads = f" ×{found['heads']} heads" if found.get("heads") else ""
    return f"{name}{heads}, {fmt.rate(found.get('parameters'))} parameters"


def _model_note(cell: CellResult) -> str | None:
    found = cell.metrics.get("model")
    embedded = found.get("embedding_parameters") if isinstance(found, dict) else None
    return f"({fmt.rate(embedded)} in node embeddings)" if embedded else None


def _typed_totals(key: str, name: Callable[[str], str] = str) -> Callable[[CellResult], str | None]:
    """A typed cell's work per batch by node type or relation, all hops, largest first: 'paper 1,234'."""
    def text(cell: CellResult) -> str | None:
        totals = sorted(((sum(v), k) for k, v in ((stages.typed_work(cell) or {}).get(key) or {}).items()),
                        reverse=True)
        return " · ".join(f"{name(k)} {n:,.0f}" for n, k in totals if n) or None
    return text


def _typed_hint(cell: CellResult) -> str:
    found = stages.typed_work(cell) or {}
    lines = [f"{t}: {fmt.per_hop(v)} nodes per hop" for t, v in (found.get("hop_nodes") or {}).items()]
    lines += [f"{r}: {fmt.per_hop(v)} edges per hop" for r, v in (found.get("hop_edges") or {}).items()]
    return "; ".join(lines)


CELL_COLUMNS = [
    Column("sampler", metric("sampler"), fmt.setting_text, unit="neighbourhoods", shown=_recorded("sampler"),
           doc="The neighbourhood sampler the cell ran on, with its version (PyG: pyg-lib or the torch-sparse fallback; GraphBolt: its own)."),
    # the core budget: threads per rank, and the ranks and workers beside them on the node's cores
    Column("threads", threads, lambda x: "" if x is None else str(x), unit="per rank (core budget)",
           note=_threads_note, hint=lambda c: (_threads_note(c) or "").strip("()"),
           shown=lambda t: any(r.measured and (r.device or {}).get("core_budget") for r in t["rows"]),
           doc="torch intra-op threads each rank ran with, from the core budget (usable cores ÷ ranks, less the rank's loader workers) or the `threads` setting; noted where ranks × threads + workers exceed the usable cores."),
    Column("epoch s, median (IQR)", lambda c: c.median, fmt.seconds, title="epoch time", unit="median (IQR)",
           suffix=" s", note=lambda c: f"({fmt.seconds(c.stats.iqr)})" + _busy_note(c),
           brief=True, doc="Wall time of one measured epoch: the median over the measured epochs (rounds), with the interquartile range."),
    Column("rounds", lambda c: c.stats.rounds, str, html=False,
           doc="Measured epochs the statistics are taken over (warm-up epochs excluded)."),
    Column("speedup", lambda c: c.speedup, fmt.ratio, unit="vs reference", note=_speedup_note,
           brief=True, doc="The reference cell's epoch time over this cell's: above 1 is faster than the reference (the suite's `baseline`, default its first cell). Where the two took turns in paired launches, from their pair, with its 95 % interval over launches; else the ratio of their medians, noted `(not paired)` in a run that paired other cells."),
    Column("scaling efficiency", lambda c: c.scaling_efficiency, fmt.pct, title="scaling", unit="efficiency",
           hint=lambda c: f"speedup against 1 rank: {fmt.ratio(c.speedup_vs_ws1)}", markdown=False,
           # the scaling chart beside the table draws it too
           shown=lambda t: "world_size" in t["varying"] and any(r.scaling_efficiency is not None for r in t["rows"]),
           doc="Speedup against the same configuration at 1 rank, divided by the world size: 100 % is perfect scaling."),
    Column("seeds/s", metric("seeds_per_s"), fmt.rate, title="throughput", unit="seeds/s", note=_fewer_seeds,
           hint=_seeds_hint,
           brief=True, doc="Training seeds (labelled nodes or graphs; a link cell's positive seed edges) processed per second of the measured epochs, all ranks together; noted where the cell trained fewer seeds per epoch than another of its configuration."),
    Column("sampled edges/s", metric("edges_per_s"), fmt.rate, html=False,
           doc="Edges sampled per second of the measured epochs (from the counted batches)."),
    Column("loader stall", metric("loader_stall"), fmt.pct, title="loader", unit="stall",
           brief=True, doc="Share of the epoch the training loop waited for the next batch from the loader."),
    Column("binding stage", stages.binding_text, fmt.setting_text, title="binding stage", unit="share of the epoch",
           note=_ceiling_note, hint=lambda c: stages.headline(c) or "", shown=_recorded("stages"),
           brief=True, doc="The stage with the largest share of the epoch (see the stage table), held against the machine's measured ceiling where it is the feature fetch or the host-to-device copy."),
    Column("nodes / batch", stages.nodes_per_batch, fmt.rate, title="work", unit="nodes / batch",
           note=_unequal_work, hint=_work_hint, shown=_recorded("work"),
           doc="Nodes in a batch's sampled subgraph, the mean over the counted batches; noted `(unequal work)` where the per-seed, per-hop work differs from a cell that should do the same."),
    # typed graphs (bench/backends/typed.py): the model, and the work per node type and relation
    Column("model", _model_text, fmt.setting_text, unit="parameters", note=_model_note, shown=_typed_table,
           doc="Typed cells: the model trained (R-GCN, or R-GAT with its heads) and its parameters, the featureless node types' learnable embeddings among them (noted)."),
    Column("nodes / batch by type", _typed_totals("hop_nodes"), fmt.setting_text, title="work by node type",
           unit="nodes / batch", hint=_typed_hint, shown=_typed_table,
           doc="Typed cells: nodes in a batch's sampled subgraph per node type (all hops), the mean over the counted batches; the tooltip has each type's nodes and each relation's edges per hop."),
    Column("edges / batch by relation", _typed_totals("hop_edges", lambda r: r.split(":")[1]), fmt.setting_text,
           title="work by relation", unit="edges / batch",
           hint=_typed_hint, shown=_typed_table,
           doc="Typed cells: edges sampled per batch for each relation (all hops), largest first; the equal-work check compares them per hop and per seed."),
    Column("peak PSS MiB", metric("peak_pss_bytes"), fmt.mib, html=False,
           brief=True, doc="Peak proportional set size of the cell's processes (shared pages split among their sharers), the largest rank's."),
    Column("peak RSS MiB", metric("peak_rss_bytes"), fmt.mib, html=False,
           doc="Peak resident set size of the cell's largest rank (shared pages counted in full)."),
    Column("PSS per rank", lambda c: c.rank_pss_bytes, fmt.mib, unit="max, MiB", markdown=False,
           note=lambda c: f"× {c.num_ranks}" if c.num_ranks and c.num_ranks > 1 else None,
           brief=True, doc="Largest peak PSS of one rank, with the number of ranks."),
    Column("PSS total", metric("total_pss_bytes"), fmt.mib, unit="MiB", markdown=False,
           doc="Peak PSS of all of the cell's processes together (ranks and loader workers)."),
    Column("largest private MiB", largest_private,
           lambda found: fmt.DASH if found is None else f"{found[0].replace('_', ' ')} {fmt.mib(found[1])}",
           title="largest private", unit="part of a rank's PSS, MiB", hint=_breakdown_hint,
           shown=_recorded("memory_breakdown"),
           doc="The largest private part of any rank's peak PSS (features, graph, model, framework) from the memory breakdown; the tooltip has every part."),
    Column("GPU memory", metric("peak_gpu_bytes"), fmt.mib, unit="peak, MiB", markdown=False,
           shown=lambda t: any(r.measured and r.metrics.peak_gpu_bytes for r in t["rows"]),
           doc="Peak GPU memory allocated by torch on a rank (CUDA cells only)."),
    Column("GPU device used", metric("gpu_device_used_bytes"), fmt.mib, unit="after the epochs, MiB", markdown=False,
           shown=_recorded("gpu_device_used_bytes"),
           doc="GPU memory in use device-wide after the measured epochs (total less free, as the driver sees it), the busiest rank's: the allocator's tensors plus the CUDA context, NCCL's buffers and framework caches it does not see (CUDA cells only)."),
    Column("GPU peak by phase", metric("gpu_peaks"), _by_phase(fmt.mib), unit="MiB: build · warmup · measured · evaluation",
           markdown=False, shown=_recorded("gpu_peaks"),
           doc="The allocator's peak GPU memory in each phase of the cell (building the pipeline, warm-up epochs, measured epochs, evaluation on rank 0), the busiest rank's per phase (CUDA cells only)."),
    # "is the loader starving my GPU": NVML's busy share and PCIe traffic per GPU; blank for CPU cells
    Column("GPU util %", gpu_util, percent, title="GPU util", unit="mean (max), NVML", note=_gpu_util_note,
           hint=_gpu_util_hint, shown=_recorded("gpu_util"),
           doc="Mean share of time the GPU was busy during the measured epochs, sampled by NVML (max in brackets); blank for CPU cells."),
    Column("h2d MB/s", lambda c: gpu_util(c, "h2d_mb_per_s"), fmt.rate, title="host → GPU", unit="MB/s per GPU, NVML",
           hint=lambda c: "PCIe bytes the GPU received per second of the measured epochs (NVML, sampled)",
           shown=_recorded("gpu_util"),
           doc="PCIe bytes per second the GPU received during the measured epochs, per GPU (NVML)."),
    Column("val acc / MRR", lambda c: c.metrics.get("val_mrr") if c.metrics.get("val_mrr") is not None else c.metrics.val_acc,
           fmt.accuracy, title="quality", unit="validation acc, or MRR (link)", note=_leak_note,
           hint=lambda c: "; ".join(c.metrics.get("link_notes") or []),
           brief=True, doc="Validation accuracy after the last measured epoch; a link cell's validation MRR against its fixed negatives, full neighbourhoods over the training graph, `(includes the leak)` where exclusion is none and batches sampled their own seed edges."),
    Column("test acc", metric("test_acc"), fmt.accuracy, unit="sampled",
           doc="Test accuracy after the last measured epoch, sampled with the training fanouts."),
    # DGL's examples' way: every neighbour, layer by layer (bench/backends/base.py full_accuracy)
    Column("test acc, full neighbourhoods", metric("test_acc_full"), fmt.accuracy, title="test acc",
           unit="full neighbourhoods", shown=_recorded("test_acc_full"),
           doc="Test accuracy with every neighbour, layer by layer over all nodes (layer-wise inference, as DGL's examples report it)."),
    Column("test MRR", metric("test_mrr"), fmt.accuracy, title="MRR", unit="test", shown=_recorded("test_mrr"),
           doc="Link cells: mean reciprocal rank of the test edges against their fixed negatives."),
    Column("test Hits@10/50/100", lambda c: c.metrics.get("test_hits"), _hits, title="Hits@K", unit="test, 10 / 50 / 100",
           shown=_recorded("test_hits"),
           doc="Link cells: the share of test edges ranked within the first 10, 50 and 100 against their fixed negatives."),
    Column("time to target", lambda c: c, diagnosis.target_text, title="time to target",
           unit="training s (epochs), eval apart", hint=diagnosis.target_hint,
           shown=lambda t: any(r.settings.target_acc is not None for r in t["rows"]),
           brief=True, doc="Training seconds (slowest rank, evaluation and start-up excluded) and epochs until the validation accuracy first reached the suite's `target_acc`, or `not reached` with the best value; n/a for a cell without a model."),
    Column("start-up s", metric("startup_s"), lambda x: fmt.num(x, "{:.1f}"), html=False,
           doc="Seconds from launching the cell to its first epoch: interpreter, framework import, data load, process group."),
    Column("start-up by phase", metric("startup_phases"), _by_phase("{:.1f}".format), title="start-up", unit="s by phase",
           markdown=False, shown=_recorded("startup_phases"),
           doc="Start-up split by phase, the slowest rank's each: imports (interpreter and framework), cuda_context, process_group (gloo, or NCCL's communicator with a barrier on the rank's GPU), dataset, pipeline, first_batch; – in files written before it was recorded."),
    Column("CPU s / epoch", metric("cpu_s_per_epoch"), fmt.seconds, title="CPU time", unit="s per epoch",
           markdown=False,
           doc="CPU seconds the training process spent per measured epoch, all its threads (the slowest rank's; not its DataLoader workers'): the work done, which a busy machine moves far less than the epoch time; – in files written before it was recorded."),
    Column("runner CPU", metric("runner_cpu_share"), fmt.pct, unit="of a core", markdown=False,
           shown=_recorded("runner_cpu_share"),
           doc="CPU the runner's memory sampler took beside the cell, per second of the cell (a share of one core): the harness's own cost on the cores the cell shares; – in files written before it was recorded."),
    Column("other load", metric("other_load"), fmt.pct, unit="of the machine",
           note=lambda c: "(busy: times suspect)" if (c.metrics.get("other_load") or 0) >= HIGH_LOAD else None,
           hint=lambda c: "CPU share other processes took while this cell ran", shown=_recorded("other_load"),
           doc="CPU share other processes took while the cell ran; at or above the high-load mark its times are marked suspect."),
]

def _allreduce(cell: CellResult) -> float | str | None:
    """DDP's all-reduce seconds per epoch, or "not measured" where a `profile: false` cell ran it
    untimed (the worker records None, never a 0 that reads as free)."""
    seconds = cell.metrics.get("comm_s")
    return "not measured" if seconds is None and cell.settings.profile is False else seconds


# The Markdown scaling table: one row per world size of a configuration measured at several.
SCALING_COLUMNS = [
    Column("epoch s", lambda c: c.median, fmt.seconds, doc="Median epoch time at this world size."),
    Column("speedup", lambda c: c.speedup_vs_ws1, fmt.ratio, doc="The 1-rank epoch time over this world size's."),
    Column("efficiency", lambda c: c.scaling_efficiency, fmt.pct,
           doc="Speedup against 1 rank divided by the world size."),
    Column("loader stall", metric("loader_stall"), fmt.pct,
           doc="Share of the epoch the training loop waited for the next batch."),
    Column("compute s / epoch", metric("compute_s"), fmt.seconds,
           doc="Seconds per epoch in forward, backward and the optimizer step."),
    Column("all-reduce s / epoch", _allreduce, lambda v: v if isinstance(v, str) else fmt.seconds(v),
           doc="Seconds per epoch in DDP's gradient all-reduce (communication); `not measured` in a "
               "`profile: false` cell (its timing hook runs only when profiling: bench/backends/base.py distribute)."),
    Column("peak PSS per rank MiB", lambda c: c.rank_pss_bytes, fmt.mib, doc="Largest peak PSS of one rank."),
    Column("total PSS MiB", metric("total_pss_bytes"), fmt.mib,
           doc="Peak PSS of all processes of the cell together."),
]


STAGE_DOCS = {
    "sample": "sampling the batch's neighbourhoods in the main process",
    "fetch": "gathering the batch's feature and label rows",
    "copy": "copying the batch to the training device",
    "forward_backward": "the model's forward and backward passes",
    "optimizer": "the optimizer step",
    "allreduce": "DDP's gradient all-reduce",
    "wait": "the main thread waiting on the loader (its workers or prefetch thread) for the next batch",
    "other": "the rest of the epoch no stage accounts for (the loop, logging, Python)",
}


def _worker_seconds(cell: CellResult) -> str | None:
    spent = cell.metrics.loader_worker_s
    return " / ".join(f"{spent.get(k, 0):.3f}" for k in ("sample", "fetch")) if spent else None


# The Markdown "where the time goes" table: each cell's epoch split into its stages (the brief ones),
# the rest with `--columns all`.
STAGE_COLUMNS = [
    Column("stages s (of epoch s)", lambda c: (stages.total(c), c.stats.mean),
           lambda v: f"{fmt.seconds(v[0])} ({fmt.seconds(v[1])})", brief=True,
           doc="Seconds of the epoch the stages account for, against the epoch's mean time."),
    *(Column(stage_label(s), lambda c, s=s: (stages.shares(c) or {}).get(s), lambda x: fmt.pct(x, 0), brief=True,
             doc=f"Share of the epoch in {STAGE_DOCS.get(s, s)}.") for s in STAGES),
    Column("workers: sample / fetch worker-s", _worker_seconds, fmt.setting_text,
           doc="Seconds the loader's worker processes spent sampling and fetching features per epoch, beside the main process."),
    Column("fetch rate (of gather ceiling)", stages.fetch_rate, stages.bandwidth,
           doc="Feature bytes gathered per second in the fetch stage, and its share of the machine's measured gather ceiling."),
    Column("copy rate (of h2d ceiling)", stages.copy_rate, stages.bandwidth,
           doc="Bytes copied host to device per second in the copy stage, and its share of the measured host-to-device ceiling."),
    Column("nodes per hop", lambda c: (c.metrics.work or {}).get("hop_nodes"), fmt.per_hop,
           note=lambda c: " ".join(filter(None, (_unequal_work(c), _sampled(c)))) or None,
           doc="Nodes sampled at each hop, mean per counted batch."),
    Column("edges per hop, per seed", _per_seed_hops("hop_edges"), str,
           doc="Edges sampled at each hop per training seed (over full batches where recorded): what the equal-work check compares."),
    Column("layer nodes per seed", _per_seed_hops("layer_nodes"), str,
           doc="Nodes each model layer computes over, per training seed."),
    Column("layer edges per seed", _per_seed_hops("layer_edges"), str,
           doc="Edges each model layer aggregates over, per training seed."),
]


def markdown_columns(cells: list[CellResult], chosen: list[str] | None = None) -> list[Column]:
    """The Markdown columns of a run's table: the brief ones with values, or `--columns` (`all`, or named ones)."""
    if chosen and chosen != ["all"]:
        by_key = {c.key: c for c in CELL_COLUMNS if c.markdown}
        return [by_key[key] for key in chosen]
    return [c for c in CELL_COLUMNS if c.markdown and (c.brief or chosen) and (c.shown is None or c.shown({"rows": cells}))]


def column_choice(text: str) -> list[str]:
    """`--columns`' type: `all`, or column keys separated by commas (an unknown one: an error naming the keys)."""
    chosen = [k.strip() for k in text.split(",") if k.strip()]
    keys = [c.key for c in CELL_COLUMNS if c.markdown]
    unknown = [k for k in chosen if k not in keys] if chosen != ["all"] else []
    if not chosen or unknown:
        raise argparse.ArgumentTypeError(f"{', '.join(unknown) or repr(text)}: not a column; allowed: all, or any of "
                         + ", ".join(keys))
    return chosen


# A link table varies more settings beside MRR and Hits: these go under its toggle (a 1280 px screen)
LINK_FOLDED = ("time to target",)


def html_columns(table: dict) -> list[Column]:
    """The HTML columns one dataset's table shows."""
    shown = [c for c in CELL_COLUMNS if c.html and (c.shown is None or c.shown(table))]
    if _recorded("val_mrr")(table):
        shown = [dataclasses.replace(c, brief=False) if c.header in LINK_FOLDED else c for c in shown]
    return shown
