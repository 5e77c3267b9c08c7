"""The worker: runs one cell inside its stack's interpreter and writes what it measured.

    python -m bench.run.worker CELL_JSON DATASET_DIR OUT_JSON

Memory is sampled from outside, by the runner. torch is imported inside functions only: the host
imports this module too and has no framework."""

from __future__ import annotations

import datetime as dt
import gc
import importlib.metadata
import inspect
import json
import os
import platform
import resource
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from bench.backends import BACKENDS, load_pipeline_class
from bench.backends.base import (INITIALISATION, Unavailable, device_of, one_gpu_env, rank_and_world, rank_gpus,
                                 seed_everything, select_device, unwrap)
from bench.backends.stages import LINK_COUNTS, LISTS, EpochClock, add_typed, cuda_sync, take_stamp
from bench.datasets import hub
from bench.machine import core_budget, gpu_affinity, gpu_sampler
from bench.machine.gpu_facts import worker_facts
from bench.machine.memory_breakdown import PhaseMemory, model_optimizer_bytes
from bench.modes import mode as mode_of
from bench.settings import CellSettings
from bench.paths import OPTIONAL_PROBES, PROBE_MODULES, running_stack_sampler
from bench.run import cuda_oom, to_target, turns as paired_turns
from bench.run.lifeline import progress, tie_to_parent
from bench.stores import features_in_memory, files_of, page_cache
from bench.tasks import TASKS, Task

NO_ACCURACY = dict.fromkeys(("val_acc", "test_acc", "test_acc_full"))  # what a task's own evaluation leaves unset
INIT_TIMEOUT_S = 300  # init_process_group: seconds to wait for every rank
# Test hook: GNNBENCH_FAULT=KIND[:ID_PART][@RANK],... makes the matching cells crash, hang or raise a
# CUDA out-of-memory error in their first measured epoch, or ("slowN") each measured epoch N % longer
FAULT_ENV = "GNNBENCH_FAULT"
SLOW_FAULT, SLOW_BY = "slow", 0.05  # "slowN": a busy-wait of N % of each measured epoch, at its end ("slow": 5 %)


def rank_barrier(dist, settings: CellSettings) -> None:
    """A barrier on this rank's own GPU under NCCL (torch 2.2 would guess rank % GPUs; newer torch warns)."""
    nccl = mode_of(settings.mode).backend_for_ranks == "nccl"  # then LOCAL_RANK's GPU (select_device)
    dist.barrier(**({"device_ids": [device_of(settings.mode).index]} if nccl else {}))


def run_epoch(pipe, on_batch=None, profile: bool = False, planted: float = 0.0) -> dict:
    """One pass over the training loader; stall = time blocked in next() on the loader. With
    `profile`, also the epoch's stages, loader worker-seconds and work (bench/backends/stages.py).
    `planted`: a busy-wait of that share of the epoch at its end (the `slowN` fault), so the epoch
    reads exactly 1 + planted of what it took."""
    clock = EpochClock(cuda_sync(pipe.device), pipe.settings.work_budget, pipe.settings.batch_size) if profile else None
    comm_before = pipe.allreduce_seconds()
    stall, seeds, edges, batches = 0.0, 0, 0, 0
    replayed = replayed_batches(pipe)
    pipe.synchronize()
    start, cpu_start = time.perf_counter(), time.process_time()
    iterator = iter(pipe.train_loader) if replayed is None else iter(replayed)  # a loader's start is in the epoch
    while True:
        t = time.perf_counter()
        batch = next(iterator, None)
        blocked = time.perf_counter() - t
        stall += blocked
        if clock is not None:
            clock.loaded(blocked, batch)
        if batch is None:
            break
        if on_batch is not None:
            on_batch(batches)
        s, e = pipe.count(batch)
        seeds, edges, batches = seeds + s, edges + e, batches + 1
        if clock is not None:
            clock.count(pipe.work, batch)
            clock.begin_step()
            pipe.step(batch, clock)
        else:
            pipe.step(batch)
    pipe.synchronize()
    if planted:
        until = time.perf_counter() + planted * (time.perf_counter() - start)
        while time.perf_counter() < until:  # work, not a sleep: no thread parked and woken again
            pass
    seconds = time.perf_counter() - start
    comm = None if comm_before is None else pipe.allreduce_seconds() - comm_before  # DDP's all-reduce (None: untimed)
    stats = {"seconds": seconds, "stall_s": min(stall, seconds), "comm_s": comm, "seeds": seeds, "edges": edges,
             # cpu_s: this process's CPU seconds (not its loader workers'): a busy machine moves it far less
             "batches": batches, "cpu_s": time.process_time() - cpu_start}
    if clock is not None:
        stats.update(stages=clock.split(seconds, comm), loader_worker_s=clock.worker_seconds(),
                     work=clock.work.as_dict())
    return stats


def replayed_batches(pipe) -> list | None:
    """With `replay_batch`, the epoch's batches: the loader's first batch once for each batch of an epoch, sampled
    once, before the first epoch's clock starts (the model alone); None otherwise."""
    if not pipe.settings.replay_batch:
        return None
    if getattr(pipe, "_replayed", None) is None:
        first, count = None, 0
        for count, batch in enumerate(pipe.train_loader, 1):  # one pass to count, the first batch alone kept
            first = batch if first is None else first
        take_stamp(first)  # its loading came before the epoch: no stage of a step
        pipe._replayed = (first, count)
    first, count = pipe._replayed
    return [first] * count


def framework_versions(stack: str) -> dict[str, str]:
    """What imports in this interpreter, and in a pinned PyG stack where its sampler came from."""
    versions = {"python": platform.python_version()}
    for name in PROBE_MODULES.get(stack, []) + OPTIONAL_PROBES.get(stack, []):
        try:
            module = importlib.import_module(name)
        except Exception:  # noqa: BLE001 - a missing optional module is reported, not fatal
            continue
        versions[name] = str(getattr(module, "__version__", None) or importlib.metadata.version(name))
    if source := running_stack_sampler():
        versions["sampler_source"] = source
    return versions


def device_info() -> dict:
    import torch

    return {"cuda_available": torch.cuda.is_available(), "torch_cuda": torch.version.cuda,
            "num_threads": torch.get_num_threads(), **worker_facts(),  # NCCL version and settings
            **({"gpus": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]}
               if torch.cuda.is_available() else {})}


def set_threads(settings: CellSettings, world: int = 1):
    """Set this rank's torch intra-op threads from the core budget, or the `threads` setting; returns the budget."""
    import torch

    local_ranks = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    budget = core_budget.plan(core_budget.usable_cores(), local_ranks, settings.num_workers, settings.threads)
    torch.set_num_threads(budget.threads)
    return budget


def run_cell(cell: dict, dataset_dir: Path) -> dict | None:
    """Run one rank of a cell. Returns the record to write: the cell's on global rank 0, a note that
    its ranks ran on another node's first rank, else None."""
    memory = PhaseMemory()  # where this rank's memory goes, phase by phase
    memory.take("start")
    settings = cell["settings"]
    rank, world = rank_and_world()
    launched_at = float(os.environ.get("GNNBENCH_LAUNCHED_AT", time.time()))
    Pipeline = load_pipeline_class(cell["backend"])
    memory.take("imports")
    budget = set_threads(settings, world)  # before device_info, which records the count
    record = {"versions": framework_versions(BACKENDS[cell["backend"]].stack),
              "device": {**device_info(), "core_budget": budget.as_dict()}}
    if reason := Pipeline.unavailable(settings.mode, world):
        return skipped(record, reason, rank)
    started = StartupPhases(launched_at)  # start-up by phase: what a short GPU run pays before its first batch
    started.mark("imports")
    affinity, budget = take_device(settings, world, budget, started, Pipeline.before_cuda)
    record["device"]["core_budget"] = budget.as_dict()
    settings = settings.replace(num_workers=budget.workers)  # the workers the pipeline will start
    cell = {**cell, "settings": settings}
    join_process_group(settings, world)
    started.mark("process_group")

    seed_everything(settings.seed)
    # features read into each rank only where they are in memory and the mode keeps them on the rank
    # (not pinned once per node, not mapped straight to the GPU)
    private = features_in_memory(settings.store) and not mode_of(settings.mode).features_off_rank
    data = hub.load_dataset(cell["dataset"]["source"], dataset_dir, features_in_memory=private)
    memory.take("dataset")
    started.mark("dataset")
    try:
        pipe = Pipeline(data, settings)
    except Unavailable as exc:
        if world > 1:
            import torch.distributed as dist

            dist.destroy_process_group()
        return skipped(record, str(exc), rank)
    memory.take("pipeline")
    started.mark("pipeline")
    gpu_peaks = GpuPeaks(pipe)
    gpu_peaks.end("build")
    epochs = run_epochs(cell, pipe, dataset_dir, rank, world, started, affinity, gpu_peaks)
    memory.take("epochs")
    mine = rank_record(pipe, epochs, memory, rank, launched_at, started, affinity, gpu_peaks)
    mine["gpu_peaks"] = gpu_peaks.end("measured")
    ranks, accuracy = evaluate_and_gather(pipe, data, mine, rank, world, settings, TASKS[BACKENDS[cell["backend"]].task])
    getattr(pipe, "close", lambda: None)()  # a framework with communicators of its own (cuGraph, WholeGraph)
    memory.take("evaluation")
    if rank == 0 and mine["gpu_peaks"]:
        ranks[0]["gpu_peaks"] = gpu_peaks.end("evaluation")  # rank 0 evaluates after the ranks parted
    ranks[rank]["memory_breakdown"] = memory.breakdown(model_optimizer_bytes(pipe))  # with evaluation's peak
    if rank != 0:  # its node's first rank notes that this node's ranks ran; the others write nothing
        return ({**record, "status": "follower", "reason": "ranks of this node ran; rank 0 records the cell"}
                if int(os.environ.get("LOCAL_RANK", 0)) == 0 else None)
    return cell_record(cell, record, pipe, data, ranks, accuracy, epochs)


def skipped(record: dict, reason: str, rank: int) -> dict | None:
    """A cell the backend cannot run as asked: rank 0 records it skipped, with the reason."""
    return {**record, "status": "skipped", "reason": reason} if rank == 0 else None


def take_device(settings: CellSettings, world: int, budget: core_budget.Budget, started: StartupPhases,
                before_cuda=lambda device_index: None) -> tuple[gpu_affinity.Plan, core_budget.Budget]:
    """This rank's device, before NCCL and any CUDA work (a GPU's context is made, and timed, here, after
    the backend's `before_cuda`: an allocator of its own is set before torch allocates anything);
    then the rank on its GPU's CPU cores before it loads anything (bench/machine/gpu_affinity.py),
    its core budget that share of cores (`per-gpu` workers: the share less one)."""
    import torch

    select_device(settings.mode)
    if mode_of(settings.mode).needs_gpu:
        before_cuda(device_of(settings.mode).index or 0)
        torch.cuda.init()
        torch.zeros(1, device=device_of(settings.mode))
    started.mark("cuda_context")
    workers = settings.num_workers
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    affinity = gpu_affinity.pin_rank(device_of(settings.mode), rank_gpus(os.environ, local_world),
                                     int(os.environ.get("LOCAL_RANK", 0)), workers if isinstance(workers, int) else 0)
    if affinity.share:
        budget = core_budget.pinned(len(affinity.share), workers, settings.threads, settings.num_workers_rule)
        torch.set_num_threads(budget.threads)
        affinity.record.update(num_workers=budget.workers, torch_threads=budget.threads)
    return affinity, budget


def join_process_group(settings: CellSettings, world: int) -> None:
    """With several ranks, the process group, set up now rather than at NCCL's first collective
    (which would count it in the pipeline phase), and a barrier on the rank's device."""
    if world > 1:
        import torch.distributed as dist

        # a rank that never arrives fails the cell in minutes, not NCCL's default half hour
        backend = mode_of(settings.mode).backend_for_ranks
        dist.init_process_group(backend, timeout=dt.timedelta(seconds=INIT_TIMEOUT_S),
                                **eager_device(dist.init_process_group, backend, device_of(settings.mode)))
        rank_barrier(dist, settings)


def eager_device(init_process_group, backend: str, device) -> dict:
    """init_process_group's `device_id=` for an NCCL group where this torch has it, else nothing."""
    takes = backend == "nccl" and "device_id" in inspect.signature(init_process_group).parameters
    return {"device_id": device} if takes else {}


@dataclass
class Epochs:
    """A rank's epochs by kind (`beyond`: training on to the target), and what came with them."""
    target: to_target.Tracker | None
    not_sampled: str | None
    warmup: list[dict] = field(default_factory=list)
    measured: list[dict] = field(default_factory=list)
    beyond: list[dict] = field(default_factory=list)
    first_batch_at: float | None = None


class BatchHook:
    """Called before each batch's step: the first batch ends the start-up, and a test fault
    (FAULT_ENV) strikes in the first measured epoch; a `slowN` fault is a share of each measured epoch."""

    def __init__(self, started: StartupPhases, fault: str | None):
        self.started, self.fault, self.measuring = started, fault, False
        self.first_batch_at: float | None = None
        slow = fault[len(SLOW_FAULT):] if fault and fault.startswith(SLOW_FAULT) else None
        self.slow_share = None if slow is None else int(slow) / 100 if slow.isdigit() else SLOW_BY

    def planted(self) -> float:
        """The share of this epoch to busy-wait at its end (run_epoch): a `slowN` fault's, while measuring."""
        return self.slow_share if self.slow_share and self.measuring else 0.0

    def __call__(self, index: int) -> None:
        if self.first_batch_at is None:
            self.first_batch_at = time.time()
            self.started.mark("first_batch")
        if self.fault and self.slow_share is None and self.measuring and index == 1:
            inject(self.fault)


def run_epochs(cell: dict, pipe, dataset_dir: Path, rank: int, world: int, started: StartupPhases,
               affinity: gpu_affinity.Plan, gpu_peaks: GpuPeaks) -> Epochs:
    """The warm-up and measured epochs (a paired cell's in its turns), and with a target
    (bench/run/to_target.py) evaluations and epochs on to it; every rank starts an epoch together."""
    settings = cell["settings"]
    sampler, not_sampled = gpu_sampler.open_for(pipe.device)
    if not_sampled and not_sampled != gpu_sampler.CPU_ONLY and rank == 0:
        print(f"note: {not_sampled}", file=sys.stderr)
    hook = BatchHook(started, fault_for(cell["id"], rank))
    turns = paired_turns.from_env()  # a paired cell: its measured epochs run when the host says (bench/run/paired.py)
    total = settings.warmup_epochs + (turns.max_turns if turns else settings.epochs)
    done = Epochs(to_target.Tracker.of(settings, pipe, world), not_sampled)
    cold = files_of(settings.store, BACKENDS[cell["backend"]].task, dataset_dir) if settings.page_cache == "cold" else []
    with affinity.loader(pipe.train_loader):  # the loader workers' cores, from their first epoch on
        getattr(pipe, "check_leaks_apart", lambda: None)()  # a link cell's, where every epoch is measured
        for epoch in to_target.epochs(total, done.target):
            measuring = settings.warmup_epochs <= epoch < total
            if turns is not None and measuring and not turns.wait():
                break  # the host has its rounds
            hook.measuring = measuring
            if epoch == settings.warmup_epochs:
                gpu_peaks.end("warmup")  # the measured epochs' own peak, not warm-up's or the build's
            still_cached = page_cache.evict(cold) if cold else 0.0  # every epoch starts cold; what others map stays
            if still_cached > 0.05:
                print(f"rank {rank}: page_cache cold: {still_cached:.0%} of the store still cached", file=sys.stderr)
            if world > 1:
                import torch.distributed as dist

                rank_barrier(dist, settings)
            if sampler is not None and measuring:
                sampler.start()
            pipe.epoch = epoch
            stats = run_epoch(pipe, hook, profile=pipe.profile, planted=hook.planted())
            if sampler is not None and measuring:
                stats["gpu"] = sampler.stop()
            if stats["batches"] == 0:
                raise RuntimeError(f"rank {rank}: the training loader yielded no batch in epoch {epoch + 1} "
                                   f"(batch size {settings.batch_size}, {world} rank(s): fewer seeds than "
                                   "ranks x batch size, and the sampler drops uneven inputs?)")
            (done.measured if measuring else done.warmup if epoch < total else done.beyond).append(stats)
            if turns is not None and measuring:
                turns.done(stats["seconds"])
            if rank == 0:
                progress(epoch=epoch + 1, of=total, warmup=not measuring, seconds=round(stats["seconds"], 4),
                         beyond=epoch >= total)  # past the measured epochs, training to the target
            if done.target is not None:
                done.target.after_epoch(epoch + 1)
    done.first_batch_at = hook.first_batch_at
    return done


def rank_record(pipe, epochs: Epochs, memory: PhaseMemory, rank: int, launched_at: float, started: StartupPhases,
                affinity: gpu_affinity.Plan, gpu_peaks: GpuPeaks) -> dict:
    """What this rank measured, as rank 0 gathers it from every rank."""
    measured = epochs.measured
    return {"memory_breakdown": memory.breakdown(model_optimizer_bytes(pipe)), "rank": rank, "epochs": measured,
            "warmup": epochs.warmup, "startup_s": epochs.first_batch_at - launched_at,
            "self_max_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,  # KiB on Linux
            "peak_gpu_bytes": gpu_peaks.peak(), "gpu_device_used_bytes": gpu_peaks.device_used(),
            "startup_phases": started.seconds,
            "gpu_util": gpu_sampler.summarise([e.get("gpu") for e in measured]), "gpu_util_reason": epochs.not_sampled,
            "gpu_util_epochs": [e["gpu"] for e in measured if e.get("gpu")] or None,
            "cpu_affinity": affinity.record or None, "beyond": epochs.beyond}


def evaluate_and_gather(pipe, data, mine: dict, rank: int, world: int, settings: CellSettings, task: Task):
    """Every rank's record, and the accuracies (on every rank where the pipeline evaluates collectively,
    else on rank 0 alone after the ranks part)."""
    accuracy = evaluate(pipe, data, task, full=False) if getattr(pipe, "collective_eval", False) else None
    ranks = gather_and_part(pipe, mine, world, settings) if world > 1 else [mine]
    if accuracy is None:
        accuracy = evaluate(pipe, data, task, full=True) if rank == 0 else dict(NO_ACCURACY)
    return ranks, accuracy


def evaluate(pipe, data, task: Task, full: bool) -> dict:
    """Validation and test accuracy (with `full`, DGL's full-neighbourhood test accuracy too), or what
    the task's own evaluation records in their place (the link task's MRR and Hits@K: bench/tasks.py)."""
    if task.evaluation:
        return {**NO_ACCURACY, **getattr(pipe, task.evaluation)()}
    return {"val_acc": pipe.evaluate("val"), "test_acc": pipe.evaluate("test"),
            "test_acc_full": pipe.full_accuracy(data, "test") if full else None}


def gather_and_part(pipe, mine: dict, world: int, settings: CellSettings) -> list[dict]:
    """Every rank's record on every rank; then this rank leaves DDP and the process group."""
    import torch.distributed as dist

    ranks = [None] * world
    dist.all_gather_object(ranks, mine)
    # Leave DDP before evaluating on rank 0 alone: a DataLoader over datapipes makes a process group (a
    # collective) whenever torch.distributed is initialised, and DDP's reducer must not outlive it.
    pipe.model = unwrap(pipe.model)
    gc.collect()
    rank_barrier(dist, settings)
    dist.destroy_process_group()
    return ranks


def cell_record(cell: dict, record: dict, pipe, data, ranks: list[dict], accuracy: dict, epochs: Epochs) -> dict:
    return {**record, "status": "ok", "epochs": merge_ranks(ranks, "epochs"), "warmup": merge_ranks(ranks, "warmup"),
            "ranks": [rank_summary(r) for r in ranks], "graph_index_dtype": pipe.index_dtype,
            **{k: accuracy[k] for k in (*NO_ACCURACY, *TASKS[BACKENDS[cell["backend"]].task].records) if k in accuracy},
            "startup_s": max(r["startup_s"] for r in ranks), "self_max_rss_bytes": ranks[0]["self_max_rss_bytes"],
            "partition": getattr(pipe, "partition", None), "sampler": pipe.sampler, "model": model_summary(pipe),
            "dataset": {**data.card(), "name": cell["dataset"]["name"]},
            "memory_breakdown": [r.get("memory_breakdown") for r in ranks],  # by rank: bench/machine/memory_breakdown.py
            # start-up by phase (the slowest rank's each), the device-wide GPU memory and the GPU peaks
            # by phase (the busiest rank's each)
            "startup_phases": slowest_phases([r.get("startup_phases") for r in ranks]),
            "gpu_device_used_bytes": max((r["gpu_device_used_bytes"] for r in ranks if r.get("gpu_device_used_bytes")),
                                         default=None),
            "gpu_peaks": slowest_phases([r.get("gpu_peaks") for r in ranks]) or None,
            "gpu_util": gpu_sampler.across_ranks([r.get("gpu_util") for r in ranks]),
            "gpu_util_reason": epochs.not_sampled,
            "to_target": epochs.target and epochs.target.summary(
                [e["seconds"] for key in ("warmup", "epochs", "beyond") for e in merge_ranks(ranks, key)])}


def slowest_phases(per_rank: list[dict | None]) -> dict | None:
    """Per phase, the largest value any rank recorded (phases in the first rank's order)."""
    out: dict = {}
    for phases in per_rank:
        for phase, value in (phases or {}).items():
            out[phase] = max(out.get(phase, value), value)
    return out or None


class GpuPeaks:
    """The peak GPU memory of this rank's tensors per phase (`end(phase)`); empty on the CPU."""

    def __init__(self, pipe):
        device = getattr(pipe, "device", None)
        self.device = device if device is not None and device.type == "cuda" else None
        # torch's peak statistics count torch's own allocator alone: none where a backend swapped it (cuGraph-PyG's
        # RMM); the device-wide figure (device_used) still reads the driver
        self.torch_stats = self.device is not None and getattr(pipe, "torch_memory_stats", True)
        self.peaks: dict[str, int] = {}

    def peak(self) -> int | None:
        """The peak since the last end, or None on the CPU (and under another allocator)."""
        import torch

        return int(torch.cuda.max_memory_allocated(self.device)) if self.torch_stats else None

    def device_used(self) -> int | None:
        """The whole device's memory in use, as the driver sees it; None on the CPU."""
        if self.device is None:
            return None
        import torch

        free, total = torch.cuda.mem_get_info(self.device)
        return int(total - free)

    def end(self, phase: str) -> dict[str, int]:
        if self.torch_stats:
            import torch

            torch.cuda.synchronize(self.device)
            self.peaks[phase] = int(torch.cuda.max_memory_allocated(self.device))
            torch.cuda.reset_peak_memory_stats(self.device)
        return dict(self.peaks)


def model_summary(pipe) -> dict | None:
    """The model the cell trained: its setting, its parameters (learnable embeddings apart), heads."""
    if pipe.model is None:
        return None
    model = unwrap(pipe.model)
    settings = pipe.settings
    embedded = sum(p.numel() for name, p in model.named_parameters() if name.startswith("embeddings."))
    return {"name": settings.model, "parameters": int(sum(p.numel() for p in model.parameters())),
            "embedding_parameters": int(embedded), **({"heads": settings.heads} if settings.heads is not None else {}),
            # one initialisation for every task and framework; what the layers compute over (PyG's
            # edges: PyG's own, GraphBolt's with same_layer_edges true)
            "init": INITIALISATION, "same_layer_edges": getattr(pipe, "same_layer_edges", True),
            "weight_decay": settings.weight_decay}  # Adam's (the optimizer's other setting is lr)


class StartupPhases:
    """Seconds each start-up phase took, from launch, on this rank's clock."""

    def __init__(self, launched_at: float):
        self.last = launched_at
        self.seconds: dict[str, float] = {}

    def mark(self, phase: str) -> None:
        now = time.time()
        self.seconds[phase] = round(max(0.0, now - self.last), 6)
        self.last = now


def merge_ranks(ranks: list[dict], key: str) -> list[dict]:
    """Per epoch across ranks: the slowest rank's time, stage split and worker-seconds count; work
    and seeds are summed; waiting and communication averaged."""
    merged = []
    for per_rank in zip(*(r[key] for r in ranks)):
        slowest = max(per_rank, key=lambda e: e["seconds"])
        merged.append({
            "seconds": slowest["seconds"], "stall_s": sum(e["stall_s"] for e in per_rank) / len(per_rank),
            "comm_s": mean_or_none([e["comm_s"] for e in per_rank]),
            "seeds": sum(e["seeds"] for e in per_rank), "edges": sum(e["edges"] for e in per_rank),
            "batches": per_rank[0]["batches"], "cpu_s": slowest.get("cpu_s")})
        if "stages" in slowest:
            merged[-1].update(stages=slowest["stages"], loader_worker_s=slowest["loader_worker_s"],
                              work=sum_work([e["work"] for e in per_rank]))
    return merged


def mean_or_none(values: list) -> float | None:
    """The mean, or None where a value is (DDP's all-reduce untimed: `profile: false`)."""
    return None if None in values else sum(values) / len(values)


def sum_work(works: list[dict]) -> dict:
    """Work counts of several ranks' epochs, summed (full batches' apart too)."""
    out = {k: sum(w[k] for w in works) for k in ("batches", "input_nodes", "feature_bytes", "copy_bytes")}
    out["counted"] = sum(w.get("counted", w["batches"]) for w in works)
    _sum_parts(out, works)
    if fulls := [w["full"] for w in works if w.get("full")]:
        out["full"] = _sum_parts({"counted": sum(f["counted"] for f in fulls)}, fulls)
    return out


def _sum_parts(whole: dict, parts: list[dict]) -> dict:
    """Into `whole`: hop and layer lists, a link cell's seed edges and negatives, a typed cell's breakdowns."""
    whole.update({key: summed(parts, key) for key in LISTS})
    whole.update({key: sum(w[key] for w in parts) for key in LINK_COUNTS if all(key in w for w in parts)})
    if typed := summed_typed(parts):
        whole["typed"] = typed
    return whole


def summed(works: list[dict], key: str) -> list:
    """A hop or layer list summed over epochs or ranks, element by element (missing: [])."""
    lists = [w.get(key) or [] for w in works]
    return [sum(values[i] for values in lists if i < len(values)) for i in range(max(map(len, lists), default=0))]


def summed_typed(works: list[dict]) -> dict:
    """A typed cell's per-type and per-relation breakdowns (bench/backends/stages.py), summed; {} for others."""
    total: dict = {}
    for typed in filter(None, (w.get("typed") for w in works)):
        add_typed(total, typed)
    return total


def rank_summary(r: dict) -> dict:
    seconds, stall = (sum(e[key] for e in r["epochs"]) for key in ("seconds", "stall_s"))
    n = len(r["epochs"])
    return {"rank": r["rank"], "loader_stall": stall / seconds, "compute_s": (seconds - stall) / n,
            "comm_s": mean_or_none([e["comm_s"] for e in r["epochs"]]), "epoch_s": seconds / n,
            "self_max_rss_bytes": r["self_max_rss_bytes"], "startup_s": r["startup_s"],
            **{k: r.get(k) for k in ("peak_gpu_bytes", "gpu_device_used_bytes", "startup_phases", "gpu_peaks",
                                     "gpu_util", "gpu_util_epochs", "cpu_affinity")}}


def fault_for(cell_id: str, rank: int = 0) -> str | None:
    for rule in filter(None, os.environ.get(FAULT_ENV, "").split(",")):
        kind, _, target = rule.partition(":")
        id_part, _, only_rank = target.partition("@")
        if id_part in cell_id and (not only_rank or int(only_rank) == rank):
            return kind
    return None


def inject(fault: str) -> None:
    if fault == "crash":
        os.abort()
    if fault == "hang":
        while True:
            time.sleep(3600)
    if fault == "oom":  # what CUDA's allocator raises, so the oom record is exercised without a GPU
        import torch

        raise torch.cuda.OutOfMemoryError(f"CUDA out of memory. Tried to allocate 2.00 GiB ({FAULT_ENV}=oom)")
    raise ValueError(f"{FAULT_ENV}={fault!r}: expected 'crash', 'hang' or 'oom'")


def main(argv: list[str]) -> int:
    tie_to_parent()  # gone with gnnbench (or with torchrun's launcher), whatever ends it
    cell_json, dataset_dir, out_path = argv
    cell = json.loads(cell_json)
    cell["settings"] = CellSettings.from_dict(cell["settings"])  # the typed settings, unknown keys refused
    if mode_of(cell["settings"].mode).needs_gpu and BACKENDS[cell["backend"]].one_gpu_per_rank:  # before torch: CUDA reads it once
        os.environ.update(one_gpu_env(os.environ, int(os.environ.get("LOCAL_RANK", 0))))
    try:
        result = run_cell(cell, Path(dataset_dir))
    except Exception as exc:
        if not cuda_oom.is_cuda_oom(exc):
            raise
        return out_of_gpu_memory(exc, cell, out_path)
    if result is not None:
        write_record(result, out_path)
    return 0


def write_record(result: dict, out_path: str, tag: str = "") -> None:
    tmp = Path(f"{out_path}{tag}.tmp")
    tmp.write_text(json.dumps(result))
    tmp.rename(out_path)  # the runner never reads a half-written record


def out_of_gpu_memory(exc: BaseException, cell: dict, out_path: str) -> int:
    """A rank out of GPU memory writes the cell's `oom` record (bench/run/cuda_oom.py)."""
    rank, world = rank_and_world()
    traceback.print_exc()
    base = {"versions": framework_versions(BACKENDS[cell["backend"]].stack), "device": device_info()}
    write_record(cuda_oom.record(exc, rank, device_of(cell["settings"].mode), base), out_path, tag=f".rank{rank}")
    return cuda_oom.EXIT_CODE if world > 1 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
