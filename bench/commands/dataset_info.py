"""What `gnnbench datasets list|info` show: sizes, and the memory each backend will need."""

from __future__ import annotations

from pathlib import Path

import psutil

from bench import datasets
from bench.backends import BACKENDS
from bench.datasets import hub, typed_hub, user_graph
from bench.run import memory_plan as memory
from bench.datasets.ready import sizes as dataset_stats
from bench.tasks import TASKS

WORLD_SIZES = (1, 2, 4)


def _mib(n: int) -> str:
    return f"{n / 2**20:,.0f} MiB"


def list_lines(cache: Path) -> list[str]:
    header = f"{'dataset':<26}{'nodes':>13}{'edges':>15}{'feat':>6}{'classes':>8}{'train/val/test':>26}  in cache"
    lines = [header, "-" * len(header)]
    for name in datasets.known_names():
        spec = datasets.parse_name(name)
        s = dataset_stats(spec, cache)
        cached = "yes" if hub.is_materialised(spec, cache) else "no"
        split = f"{s['num_train']:,}/{s['num_val']:,}/{s['num_test']:,}"
        lines.append(f"{name:<26}{s['num_nodes']:>13,}{s['num_edges']:>15,}{s['feature_dim']:>6}"
                     f"{s['num_classes']:>8}{split:>26}  {cached}")
    # the parametric sources say how their sizes follow their parameters
    notes = (getattr(datasets.source_module(source), "SIZES_NOTE", None) for source in datasets.SOURCES)
    return lines + [note for note in notes if note]


def info_lines(spec: dict, cache: Path) -> list[str]:
    s = dataset_stats(spec, cache)
    measured = hub.is_materialised(spec, cache)
    origin = f"measured (in the hub at {hub.dataset_dir(spec, cache)})" if measured else getattr(
        datasets.source_module(spec["source"]), "ESTIMATE_ORIGIN", user_graph.SIZES_ORIGIN
        if datasets.user_files(spec["source"]) else "published sizes (not prepared yet)")
    served = datasets.tasks(spec)
    shapes = {TASKS[t].shape for t in served}
    graphs = f"{s['num_graphs']:,} graphs, " if "collection" in shapes else ""
    if not measured and datasets.user_files(spec["source"]):
        origin += f"; `gnnbench datasets check {spec['source']}:PATH` checks and converts it"
    lines = [f"{spec['name']}: {origin}",
             f"  {graphs}nodes {s['num_nodes']:,}, edges {s['num_edges']:,}, feature width {s['feature_dim']}, "
             f"classes {s['num_classes']}, split {s['num_train']:,} / {s['num_val']:,} / {s['num_test']:,} (train/val/test)",
             f"  hub on disk: about {_mib(memory.hub_bytes(s))}",
             "  memory per backend (each DDP rank holds its own; the hub's maps are shared):"]
    if measured and datasets.user_files(spec["source"]):  # where it came from, how it was read and made
        lines[2:2] = user_graph.report_lines(hub.read_meta(hub.dataset_dir(spec, cache) / "meta.json"))
    if measured and "typed" in shapes:  # per node type and per relation (bench/datasets/typed_hub.py)
        lines[2:2] = typed_hub.info_lines(hub.read_meta(hub.dataset_dir(spec, cache) / "meta.json"))
    available = psutil.virtual_memory().available
    for backend, backend_info in BACKENDS.items():
        if backend_info.task not in served:
            continue  # only the backends whose task this dataset serves (bench/tasks.py)
        e = memory.estimate(s, backend)
        totals = ", ".join(f"ws={ws}: {_mib(e['per_rank_bytes'] * ws + e['shared_bytes'])}" for ws in WORLD_SIZES)
        lines.append(f"    {backend:<14} graph {_mib(e['graph_bytes'])}, features {_mib(e['feature_bytes'])}, "
                     f"per rank {_mib(e['per_rank_bytes'])} + shared {_mib(e['shared_bytes'])}; total {totals}")
        verdict = memory.refusal(e["per_rank_bytes"] + e["shared_bytes"], available, f"one rank of {backend}")
        if verdict:
            lines.append(f"    {'':<14} {verdict}")
    lines.append(f"  available now: {_mib(available)}")
    return lines
