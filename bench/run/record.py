"""What a run writes: one result document in pytest-benchmark's JSON format.

Each measured cell is a benchmark entry whose rounds are its measured epochs, with our metrics in
`extra_info`; a cell without a number is an entry of the top-level `unmeasured` list. The run's
own facts are the `gnnbench` key; `machine_info` is pytest-benchmark's plus ours. Derived scores
(speedups, scaling) are computed by bench.publish when the file is read."""

from __future__ import annotations

import datetime as dt
import os
import platform

import psutil

from bench import __version__, stacks
from bench.paths import repo_root
from bench.result_format import DATASET_FIELDS, SCHEMA_VERSION, WRITTEN_FROM_RECORD, EpochMean
from bench.stacks import external as external_stacks
from bench.run.runner import Outcome
from bench.run import cluster_env
from bench.backends.stages import LISTS
from bench.run.worker import summed, summed_typed
from bench.machine.gpu_facts import gpu_info

# pytest-benchmark names a benchmark after its test; both ways of running a suite (gnnbench run
# and pytest suites/) name a cell's entry as the pytest entry's test would be named.
TEST_FUNCTION = "test_cell"
TEST_FILE = "suites/test_suite.py"


def test_name(cell_id: str) -> str:
    return f"{TEST_FUNCTION}[{cell_id}]"


def benchmark_entry(outcome: Outcome, baseline: str | None) -> dict:
    """A measured cell as pytest-benchmark writes a benchmark: the rounds are its epochs."""
    from pytest_benchmark.stats import Stats

    stats = Stats()
    for epoch in outcome.record["epochs"]:
        stats.update(epoch["seconds"])
    cell = outcome.cell
    return {
        "group": cell.dataset, "name": test_name(cell.id), "fullname": f"{TEST_FILE}::{test_name(cell.id)}",
        "params": {"cell": cell.id}, "param": cell.id, "extra_info": extra_info(outcome, baseline),
        # how the rounds were taken: one epoch each, timed inside the cell's worker, no warm-up rounds
        # (warm-up epochs are extra_info.warmup_epoch_s)
        "options": {"disable_gc": False, "timer": "perf_counter", "min_rounds": len(stats.data),
                    "max_time": None, "min_time": None, "precision": None, "confidence": None, "warmup": False},
        "stats": {**stats.as_dict(), "data": list(stats.data), "iterations": 1},
    }


def unmeasured_entry(outcome: Outcome) -> dict:
    cell = outcome.cell
    return {"id": cell.id, "status": outcome.status, "reason": outcome.reason, "backend": cell.backend,
            "dataset": cell.dataset, "settings": cell.settings.as_dict(),
            # a rank out of GPU memory: the device's memory when it failed (bench/run/cuda_oom.py)
            **({"gpu_memory": outcome.record["gpu_memory"]} if outcome.record.get("gpu_memory") else {})}


def extra_info(outcome: Outcome, baseline: str | None = None) -> dict:
    """Our metrics of one measured cell (bench/result_format.py declares them)."""
    rec, cell = outcome.record, outcome.cell
    epochs, card = rec["epochs"], rec["dataset"]
    seconds, stall = (sum(e[key] for e in epochs) for key in ("seconds", "stall_s"))
    return {
        "cell_id": cell.id, "backend": cell.backend, "stack": cell.stack,
        "dataset": {k: card[k] for k in DATASET_FIELDS}
        | {k: card.get(k) for k in ("source", "num_train", "num_val", "num_test")}
        # where the dataset has them: graph-level, a model without edges, a user's graph's path, a typed graph's types
        | {k: card[k] for k in ("num_graphs", "features_only_acc", "source_path", "target", "node_types", "relations")
           if k in card},
        "settings": cell.settings.as_dict(),
        "seeds_per_s": sum(e["seeds"] for e in epochs) / seconds,
        "edges_per_s": sum(e["edges"] for e in epochs) / seconds,
        "loader_stall": stall / seconds, "compute_s": (seconds - stall) / len(epochs),
        "batches_per_epoch": epochs[0]["batches"], "peak_rss_bytes": outcome.peak_rss_bytes,
        "peak_pss_bytes": outcome.peak_pss_bytes, "total_pss_bytes": outcome.peak_pss_bytes,
        # GPU memory of the busiest rank (PyTorch's allocator peak); None where no GPU was used
        "peak_gpu_bytes": max((r["peak_gpu_bytes"] for r in rec.get("ranks") or [] if r.get("peak_gpu_bytes")),
                              default=None),
        "ranks": rank_entries(outcome), "warmup_epoch_s": [e["seconds"] for e in rec["warmup"]],
        "is_baseline": cell.id == baseline,
        "other_load": outcome.other_load,  # share of the machine other work took meanwhile (bench.machine.load)
        # the runner's memory sampler, beside the cell on the same cores: its CPU seconds per second of the cell
        "runner_cpu_share": (None if outcome.runner_cpu_s is None or not outcome.wall_s
                             else round(outcome.runner_cpu_s / outcome.wall_s, 5)),
        # where no GPU utilisation was sampled, why (a CPU cell, no nvidia-ml-py in the stack, ...)
        "gpu_util_reason": None if rec.get("gpu_util") else rec.get("gpu_util_reason"),
        **from_record(rec),
        **profile_info(epochs, cell.settings.profile),
    }


def from_record(rec: dict) -> dict:
    """The extra_info fields declared as the worker recorded them (`if_set` ones left out where empty) or
    as a mean over the measured epochs (`EpochMean`)."""
    out = {}
    for name, source in WRITTEN_FROM_RECORD.items():
        if isinstance(source, EpochMean):
            values = [e.get(source.key, source.missing) for e in rec["epochs"]]
            out[name] = None if any(v is None for v in values) else sum(values) / len(values)
        elif rec.get(name) or not source.if_set:
            out[name] = rec.get(name)
    return out


def profile_info(epochs: list[dict], profile: bool) -> dict:
    """The stage split and loader worker-seconds (means per epoch) and work counts (means per counted
    batch); None where the cell ran with `profile: false`."""
    if not profile or not all("stages" in e for e in epochs):
        return {"profile": bool(profile), "stages": None, "loader_worker_s": None, "work": None}
    n = len(epochs)
    stages = {k: sum(e["stages"][k] for e in epochs) / n for k in epochs[0]["stages"]}
    overlapped = [e["loader_worker_s"] for e in epochs if e["loader_worker_s"]]
    worker_s = ({k: sum(w.get(k, 0.0) for w in overlapped) / n for k in ("sample", "fetch")}
                if overlapped else None)
    works = [e["work"] for e in epochs]
    batches = sum(w["batches"] for w in works)
    counted = sum(w.get("counted", w["batches"]) for w in works)  # the batches whose work was counted
    work = {**{k: sum(w[k] for w in works) / counted for k in ("input_nodes", "feature_bytes")},
            "copy_bytes": sum(w["copy_bytes"] for w in works) / batches,  # every batch's, from the step
            "batches": batches / n, "counted": counted / n, "per_seed": per_seed(works),
            **_lists_per(works, counted)}  # a typed cell's too: per node type and relation
    return {"profile": True, "stages": stages, "loader_worker_s": worker_s, "work": work}


def _lists_per(works: list[dict], by: float) -> dict:
    """The hop and layer lists of `works` and a typed cell's breakdowns, summed and divided by `by`."""
    typed = summed_typed(works)
    return {**{key: [v / by for v in summed(works, key)] for key in LISTS},
            **({"typed": {key: {name: [v / by for v in values] for name, values in named.items()}
                          for key, named in typed.items()}} if typed else {})}


def per_seed(works: list[dict]) -> dict | None:
    """The work per training seed (bench/publish/stages.py), over the full batches where any was counted
    (a partial last batch shares fewer neighbours among its seeds), else over all counted batches."""
    fulls = [w["full"] for w in works if w.get("full") and w["full"].get("counted")]
    over, source = ("full", fulls) if fulls else ("all", works)
    hop_nodes = summed(source, "hop_nodes")
    if not hop_nodes or not hop_nodes[0]:
        return None
    # a link cell's seeds are its positive seed edges (hop_nodes[0]: their ends and the negatives')
    links = all("seed_edges" in w for w in source)
    seeds = sum(w["seed_edges"] for w in source) if links else hop_nodes[0]
    if not seeds:
        return None
    return {"over": over, "counted": sum(w.get("counted", w.get("batches", 0)) for w in source) / len(works),
            **_lists_per(source, seeds), **({"negatives": sum(w["negatives"] for w in source) / seeds} if links else {})}


def rank_entries(outcome: Outcome) -> list[dict]:
    """One entry per rank: its process tree's peak memory and where its epochs went."""
    out = []
    for r in outcome.record.get("ranks") or [{"rank": 0}]:
        rss, pss = outcome.rank_peaks.get(r["rank"], (r.get("self_max_rss_bytes"), None))
        out.append({"rank": r["rank"], "peak_rss_bytes": rss, "peak_pss_bytes": pss,
                    **{k: r.get(k) for k in ("loader_stall", "compute_s", "comm_s", "epoch_s",
                                             "peak_gpu_bytes")},
                    # its GPU's utilisation per measured epoch and over them, and the cores it ran on
                    **{k: r[k] for k in ("gpu_util", "gpu_util_epochs", "cpu_affinity", "startup_phases",
                                         "gpu_device_used_bytes", "gpu_peaks") if r.get(k)}})
    return out


def add_note(entry: dict, note: str) -> None:
    entry["extra_info"].setdefault("notes", []).append(note)


def run_pairs(done: list) -> list[dict]:
    """Every pair the finished cells' entries hold, once (both its cells hold it): the run's `pairs`."""
    found = {}
    for d in done:
        for pair in d.entry.get("extra_info", {}).get("pairs") or []:
            found.setdefault((pair["axis"], pair["first"], pair["second"]), pair)
    return list(found.values())


def document(done: list, meta: dict, ceilings: dict | None = None, commit_at_start: dict | None = None) -> dict:
    """The whole result file over finished cells, keys in pytest-benchmark's order, ours after them
    (`commit_at_start`: the checkout as the run began; see commit_info)."""
    import pytest_benchmark
    from pytest_benchmark.plugin import pytest_benchmark_generate_machine_info

    return {"machine_info": {**pytest_benchmark_generate_machine_info(), "gnnbench": machine_info(ceilings)},
            "commit_info": commit_info(commit_at_start), "benchmarks": [d.entry for d in done if d.measured],
            "datetime": dt.datetime.now(dt.timezone.utc).isoformat(), "version": pytest_benchmark.__version__,
            "gnnbench": {"schema_version": SCHEMA_VERSION, **meta},
            "unmeasured": [d.entry for d in done if not d.measured]}


def commit_info(at_start: dict | None = None) -> dict:
    """pytest-benchmark's commit description of the gnnbench checkout that ran. Given the one taken as the
    run began, that one, marked dirty where the checkout moved or was edited since: every launch's cell
    processes import the code there as they start, so a commit made during a run is not the code of all
    its cells (the end's description said so: a run's record named the commit made while it ran)."""
    from pytest_benchmark.utils import get_commit_info

    started_in = os.getcwd()
    os.chdir(repo_root())  # get_commit_info asks git about the current folder
    try:
        now = get_commit_info()
    finally:
        os.chdir(started_in)
    if at_start is None:
        return now
    if (now.get("id"), now.get("dirty")) == (at_start.get("id"), at_start.get("dirty")):
        return at_start
    return {**at_start, "dirty": True,
            "changed_during_run": f"at the end {now.get('id')}" + (" with uncommitted changes" if now.get("dirty") else "")}


def machine_info(ceilings: dict | None = None) -> dict:
    installed = {name: stacks.recorded_versions(s) for name, s in stacks.available().items() if s.installed}
    # interpreters the user registered (gnnbench stacks add), marked external, with a freeze hash
    installed.update({name: s.record() for name, s in external_stacks.registered().items()})
    return {
        "version": __version__, "stacks": installed, "cpu_count_logical": psutil.cpu_count(),
        "cpu_count_physical": psutil.cpu_count(logical=False),
        "memory_total_bytes": psutil.virtual_memory().total, "kernel": platform.release(),
        "gpu": gpu_info(),  # GPUs, clocks, MIG, topology, NCCL settings; None without nvidia-smi
        "container_image": os.environ.get("GNNBENCH_IMAGE"),
        "container_revision": os.environ.get("GNNBENCH_REVISION"),
        # the scheduler that started this node's run (SLURM's srun, a Kubeflow pod): job id, node list
        "cluster": cluster_info(),
        # what this machine can do at most (bench.machine.ceilings), the stages are held against it
        **({"ceilings": ceilings} if ceilings else {}),
    }


def cluster_info() -> dict | None:
    """The scheduler that started the run (bench.run.cluster_env), or None."""
    try:
        found = cluster_env.detect()
    except cluster_env.ClusterEnvError as exc:
        return {"error": str(exc)}
    return found.machine_info() if found else None
