"""The result format, both ways: what bench/run/record.py (and the session's journal) writes and
bench/publish/results.py reads (docs/ADDING.md: a new metric). `problems` checks a file once on
read, each message naming the file, the key path and what is allowed; unknown keys are allowed
(pytest-benchmark writes more than we read). Host only (pydantic): the worker never imports it.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, create_model

SCHEMA_VERSION = 1
DATASET_FIELDS = ("name", "num_nodes", "num_edges", "feature_dim", "num_classes")
UNMEASURED_STATUSES = ("failed", "timeout", "oom", "skipped", "refused", "follower")
READINGS = ("slower", "faster", "same", "leans slower", "leans faster", "unresolved")  # a pair's reading
_ID_KEY = {"benchmarks": "cell_id", "unmeasured": "id"}


# --- where the writer takes an extra_info field from (pydantic ignores these annotations) -----

@dataclass(frozen=True)
class Copied:
    """Written as the worker's record holds it under the same name; with `if_set`, left out where empty."""
    if_set: bool = False


@dataclass(frozen=True)
class EpochMean:
    """Written as the mean over the measured epochs of `key` (`missing` for an epoch that lacks it)."""
    key: str
    missing: float | None = None


COPIED, COPIED_IF_SET = Copied(), Copied(if_set=True)


# --- the model --------------------------------------------------------------------------------

Seconds = Annotated[float, Field(ge=0)]  # finite (no NaN, no infinity) and not negative
Positive = Annotated[float, Field(gt=0)]
Count = Annotated[int, Field(ge=0)]
Share = Annotated[float, Field(ge=0, le=1)]
Amount = Annotated[float, Field(ge=0)]  # a count or a mean of counts, bytes or bytes/s: finite, not negative
Nothing = Literal[0, "", None]  # an empty value where a record is optional reads as none


def _a_date(text: str) -> str:
    """A run's date must be one: runs are ordered by it (history), where a non-date sorts first."""
    try:
        dt.datetime.fromisoformat(text)
    except ValueError:
        raise ValueError("not a date; allowed: an ISO 8601 date and time, e.g. 2026-11-27T18:30:00+00:00") from None
    return text


IsoDate = Annotated[str, AfterValidator(_a_date)]


class Loose(BaseModel):
    """Types are strict (no text for numbers), numbers finite; keys we do not read are allowed."""
    model_config = ConfigDict(extra="allow", strict=True, allow_inf_nan=False)


def optional(tp, *names: str) -> dict:
    """Fields that may be missing or null, all of type `tp` (for create_model)."""
    return {name: (tp | None, None) for name in names}


Stats = create_model("Stats", __base__=Loose, median=(Positive, ...), data=(list[Seconds], []),
                     rounds=(Count | None, None), **optional(Seconds, "iqr", "q1", "q3", "min", "max", "mean"))
Card = create_model("Card", __base__=Loose, name=(str, ...), source=(str | None, None),
                    features_only_acc=(Share | None, None), source_path=(str | None, None),
                    # a typed graph (bench/datasets/typed_hub.py): its target type, per node type its
                    # count and feature width, per relation its edges and the relation it reverses
                    target=(str | None, None), node_types=(dict[str, dict] | None, None),
                    relations=(dict[str, dict] | None, None),
                    **optional(Count, "num_nodes", "num_edges", "feature_dim", "num_classes", "num_train",
                               "num_val", "num_test", "num_graphs"))


class CellSettings(Loose):
    world_size: Annotated[int, Field(ge=1)] | None = None  # scaling efficiency divides by it


Percent = Annotated[float, Field(ge=0, le=100)]
# GPU utilisation and PCIe traffic in the measured epochs, a rank's or the cell's (bench/machine/gpu_sampler.py)
GpuUtil = create_model("GpuUtil", __base__=Loose,
                       **optional(Percent, "util_mean_pct", "util_max_pct", "util_min_rank_pct", "mem_util_mean_pct"),
                       **optional(Amount, "h2d_mb_per_s", "d2h_mb_per_s", "h2d_bytes_per_epoch", "device_used_max_bytes"),
                       **optional(Count, "samples", "epochs", "ranks"))

RankEntry = create_model("RankEntry", __base__=Loose, rank=(Count, ...), gpu_util=(GpuUtil | None, None),
                         startup_phases=(dict[str, Seconds] | None, None), gpu_peaks=(dict[str, Count] | None, None),
                         **optional(Count, "peak_rss_bytes", "peak_pss_bytes", "peak_gpu_bytes", "gpu_device_used_bytes"),
                         **optional(Seconds, "loader_stall", "compute_s", "comm_s", "epoch_s"))


Partition = create_model("Partition", __base__=Loose, reused=(bool | None, None), edge_cut=(Share | None, None),
                         num_parts=(Count | None, None), **optional(Seconds, "seconds", "balance"))
# A typed cell's work per hop (bench/backends/stages.py TYPED): by node type, and by relation `src:name:dst`
TypedWork = create_model("TypedWork", __base__=Loose, **optional(dict[str, list[Amount]], "hop_nodes", "hop_edges"))
HopsAndLayers = optional(list[Amount], "hop_nodes", "hop_edges", "layer_nodes", "layer_edges")
# Work per training seed, over the full batches (`over: full`) or all counted batches (`over: all`);
# a link cell's negatives per positive seed edge
PerSeed = create_model("PerSeed", __base__=Loose, over=(Literal["full", "all"] | None, None),
                       typed=(TypedWork | None, None), **optional(Amount, "counted", "negatives"), **HopsAndLayers)
# Per-batch means of the work over the `counted` batches per epoch (older files: every batch)
Work = create_model("Work", __base__=Loose, per_seed=(PerSeed | None, None), typed=(TypedWork | None, None),
                    **optional(Amount, "batches", "counted", "input_nodes", "feature_bytes", "copy_bytes"),
                    **HopsAndLayers)


class Evaluation(Loose):
    epoch: Annotated[int, Field(ge=1)]
    val_acc: Share | None = None  # a link cell's: its validation MRR


# The model a cell trained (bench/backends/base.py; `same_layer_edges`: bench/backends/layer_edges.py)
ModelInfo = create_model(
    "ModelInfo", __base__=Loose, name=(str, ...), parameters=(Count, ...), embedding_parameters=(Count | None, None),
    heads=(Annotated[int, Field(ge=1)] | None, None), init=(str | None, None), same_layer_edges=(bool | None, None),
    weight_decay=(Annotated[float, Field(ge=0)] | None, None))


# Training to a validation-accuracy target (bench/run/to_target.py)
ToTarget = create_model(
    "ToTarget", __base__=Loose, target=(Annotated[float, Field(gt=0, le=1)], ...), reached=(bool, ...),
    best_val_acc=(Share | None, None), epochs_run=(Count | None, None), clock=(str | None, None),
    evaluations=(list[Evaluation] | None, None), **optional(Seconds, "seconds", "train_s", "eval_s"),
    **optional(Annotated[int, Field(ge=1)], "epochs", "best_epoch", "eval_every", "max_epochs"))


# A paired comparison the cell took part in (bench/run/paired.py): the second cell's epoch time over
# the first's, over live workers' turns (`paired`) or else over their runs one after the other
# (its figures agree with one another and name the file's cells: bench/publish/results.py pair_problems)
PairEntry = create_model(
    "PairEntry", __base__=Loose, axis=(str, ...), first=(str, ...), second=(str, ...), paired=(bool, ...),
    within=(Annotated[float, Field(gt=0, lt=1)], 0.03), rounds=(Count, 0), ratio=(Positive | None, None),
    ci95=(list[Positive] | None, None), settled=(Literal["inside", "outside"] | None, None), reason=(str | None, None),
    launches=(Count | None, None), reading=(Literal[READINGS] | None, None),
    **optional(Amount, "first_waiting_cpu", "second_waiting_cpu"))
MAX_PAIRS = 10_000  # pairs in one list: more is no run's (refused before any is read: a million print a million lines)
Pairs = Annotated[list[PairEntry], Field(max_length=MAX_PAIRS)]


class ExtraInfo(Loose):
    """A measured cell's metrics: only the fields that say which cell it is are required (REQUIRED_EXTRA);
    every metric defaults to None, so an older file reads as not recorded."""
    backend: str
    stack: str | int | None  # shown as text and used as a key only
    dataset: Card
    settings: CellSettings
    cell_id: str  # last: "extra_info lacks ..." names it after the others, as it always has
    pairs: Pairs | None = None  # the paired comparisons it took part in
    versions: Annotated[dict[str, str | None] | Nothing, COPIED] = None  # package -> version
    seeds_per_s: Seconds | None = None
    edges_per_s: Seconds | None = None
    loader_stall: Seconds | None = None
    peak_rss_bytes: Count | None = None
    peak_pss_bytes: Count | None = None
    val_acc: Annotated[Share | None, COPIED] = None
    test_acc: Annotated[Share | None, COPIED] = None  # sampled with the training fanouts
    startup_s: Annotated[Seconds | None, COPIED] = None
    compute_s: Seconds | None = None
    comm_s: Annotated[Seconds | None, EpochMean("comm_s", missing=0.0)] = None  # DDP's all-reduce
    batches_per_epoch: Count | None = None
    # seeds trained per epoch, all ranks (fewer than the training split where a sampler drops some)
    seeds_per_epoch: Annotated[Amount | None, EpochMean("seeds")] = None
    cpu_s_per_epoch: Annotated[Seconds | None, EpochMean("cpu_s")] = None  # the training process's CPU seconds
    total_pss_bytes: Count | None = None
    peak_gpu_bytes: Count | None = None
    warmup_epoch_s: list[Seconds] | None = None
    ranks: list[RankEntry] | None = None
    partition: Annotated[Partition | None, COPIED_IF_SET] = None  # pyg-dist's partitioning
    device: Annotated[dict | None, COPIED] = None
    stages: dict[str, Seconds] | None = None
    loader_worker_s: dict[str, Seconds] | None = None
    work: Work | None = None
    profile: bool | None = None
    gpu_util: Annotated[GpuUtil | None, COPIED] = None
    gpu_util_reason: str | None = None  # why nothing was sampled
    to_target: Annotated[ToTarget | None, COPIED_IF_SET] = None  # where the cell trained to a target
    test_acc_full: Annotated[Share | None, COPIED] = None
    graph_index_dtype: Annotated[dict | None, COPIED] = None  # the sampling graph's index dtypes
    sampler: Annotated[str | None, COPIED] = None  # which implementation sampled the neighbourhoods
    memory_breakdown: Annotated[list | None, COPIED] = None  # by rank: bench/machine/memory_breakdown.py
    is_baseline: bool = False  # the suite's baseline cell (its speedups are against it)
    other_load: Share | None = None  # the share of the machine other work took meanwhile (bench/machine/load.py)
    runner_cpu_share: Amount | None = None  # the runner's memory sampler's CPU, a share of one core
    notes: list[str] | None = None  # what the session noted about the cell (oversubscribed cores, ...)
    # what each of these holds: their columns' doc (bench/publish/columns.py)
    startup_phases: Annotated[dict[str, Seconds] | None, COPIED_IF_SET] = None
    gpu_device_used_bytes: Annotated[Count | None, COPIED_IF_SET] = None
    gpu_peaks: Annotated[dict[str, Count] | None, COPIED_IF_SET] = None
    model: Annotated[ModelInfo | None, COPIED_IF_SET] = None  # the model trained (none: the loader alone)
    # the link task (bench/backends/link.py): MRR and Hits@K against the split's fixed negatives
    val_mrr: Annotated[Share | None, COPIED_IF_SET] = None
    test_mrr: Annotated[Share | None, COPIED_IF_SET] = None
    val_hits: Annotated[dict[str, Share | None] | None, COPIED_IF_SET] = None
    test_hits: Annotated[dict[str, Share | None] | None, COPIED_IF_SET] = None
    link_split: Annotated[dict | None, COPIED_IF_SET] = None
    link_notes: Annotated[list[str] | None, COPIED_IF_SET] = None
    leaks: Annotated[dict[str, Count] | None, COPIED_IF_SET] = None


REQUIRED_EXTRA = tuple(name for name, f in ExtraInfo.model_fields.items() if f.is_required())
# extra_info field -> where the writer takes it from (the fields it computes itself are not here)
WRITTEN_FROM_RECORD: dict[str, Copied | EpochMean] = {
    name: source for name, f in ExtraInfo.model_fields.items()
    for source in f.metadata if isinstance(source, (Copied, EpochMean))}


class Benchmark(Loose):
    extra_info: ExtraInfo
    stats: Stats


# gpu_memory: status oom on a GPU, the device's memory when it failed
Unmeasured = create_model("Unmeasured", __base__=Loose, id=(str, ...), status=(Literal[UNMEASURED_STATUSES], ...),
                          settings=(CellSettings | None, None), gpu_memory=(dict | None, None),
                          **optional(str, "reason", "backend", "dataset"))


Meta = create_model("Meta", __base__=Loose, schema_version=(int, ...), cells=(list[str] | None, None),
                    pairs=(Pairs | None, None),  # each pair once (the cells' entries hold them too)
                    backends_not_run=(list[str] | None, None),  # backends --stack/--mode left without a cell
                    started_at=(IsoDate | None, None), **optional(str, "suite", "description", "baseline"))


Cpu = create_model("Cpu", __base__=Loose, brand_raw=(str | None, None), count=(Count | None, None))
# devices: nvidia-smi --query-gpu, parsed (bench/machine/gpu_facts.py)
Gpu = create_model("Gpu", __base__=Loose, devices=(list[dict] | None, None), topology_matrix=(dict | None, None),
                   nccl_env=(dict[str, str] | None, None), **optional(list[str], "gpus", "mig_mode"),
                   **optional(str, "topology", "cuda_visible_devices"))
Ceilings = create_model(
    "Ceilings", __base__=Loose, usable_cores=(Count | None, None), gather_bytes_per_s=(dict[str, Amount] | None, None),
    disk=(dict[str, dict[str, Amount | None]] | None, None), notes=(list[str] | None, None),
    **optional(Amount, "memcpy_bytes_per_s", "h2d_pinned_bytes_per_s", "h2d_pageable_bytes_per_s"))


OurMachine = create_model(
    "OurMachine", __base__=Loose, gpu=(Gpu | None, None), ceilings=(Ceilings | None, None), stacks=(dict[str, dict[str, str | bool | None]] | None, None),
    **optional(str, "kernel", "version", "container_image", "container_revision"),
    **optional(Count, "cpu_count_logical", "cpu_count_physical", "memory_total_bytes"))
MachineInfo = create_model(
    "MachineInfo", __base__=Loose, cpu=(Cpu | None, None), gnnbench=(OurMachine | None, None),
    **optional(str, "node", "machine", "processor", "system", "release", "python_version"))


Commit = create_model("Commit", __base__=Loose, id=(str | None, None), dirty=(bool | None, None))


class ResultFile(Loose):
    datetime: IsoDate | None = None
    commit_info: Commit | None = None
    machine_info: MachineInfo | None = None
    gnnbench: Meta
    benchmarks: list[Benchmark]
    unmeasured: list[Unmeasured] = []


# --- checking a file on read ------------------------------------------------------------------

def problems(path: Path, data: dict) -> list[str]:
    """What is wrong with a result file's content, one line each naming the key path (empty: fine)."""
    try:
        ResultFile.model_validate(data)
    except ValidationError as exc:
        return [f"{path}: {_where(err['loc'], data)}: {_what(err)}" for err in exc.errors()]
    return []


def _where(loc: tuple, data: dict) -> str:
    """`benchmarks[2] (cell X).stats.median`: the key path, with the cell it is in."""
    text = ""
    for i, part in enumerate(loc):
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
        if i == 1 and loc[0] in ("benchmarks", "unmeasured") and isinstance(part, int):
            entry = data[loc[0]][part]
            if loc[0] == "benchmarks" and isinstance(entry, dict):
                entry = entry.get("extra_info")
            cell = entry.get(_ID_KEY[loc[0]]) if isinstance(entry, dict) else None
            if isinstance(cell, str):
                text += f" (cell {cell})"
    return text


def _what(err: dict) -> str:
    if err["type"] == "missing":
        return "required key is missing"
    if err["type"] == "literal_error":
        return f"{err['input']!r} is not allowed; allowed: {err['ctx']['expected']}"
    shown = repr(err["input"])
    return f"{err['msg']} (got {shown if len(shown) <= 60 else shown[:57] + '...'})"
