"""`gnnbench datasets list|info|prepare|check`: the known datasets, their sizes and the memory each
backend will need; prepare one, or check and convert your own graph."""

from __future__ import annotations

import time
from pathlib import Path

import psutil

from bench import datasets
from bench.backends import BACKENDS
from bench.commands.common import add_cache_dir, add_data_root
from bench.datasets import hub, params, typed_hub, user_graph
from bench.datasets.ready import DatasetError, ready, reads_user_files, sizes as dataset_stats, sweep_stale
from bench.inputs import folder
from bench.paths import cache_dir
from bench.run import memory_plan as memory
from bench.run.prepare import StackHost

WORLD_SIZES = (1, 2, 4)  # the totals `datasets info` shows


def add_parser(sub, parents) -> None:
    ds = sub.add_parser("datasets", help="known datasets, their sizes and memory needs; prepare one")
    ds_sub = ds.add_subparsers(dest="datasets_command", required=True)
    ds_list = ds_sub.add_parser("list", parents=parents, help="the known datasets with their sizes")
    ds_info = ds_sub.add_parser("info", parents=parents, help="sizes and the memory each backend will need")
    ds_prep = ds_sub.add_parser("prepare", parents=parents, help="materialise a dataset into the hub (downloads if needed)")
    ds_check = ds_sub.add_parser("check", parents=parents,
                                 help="check your own graph's files (SOURCE:PATH) and convert them into the hub; "
                                      "a bad file is one error naming it (exit 2)")
    for p in (ds_list, ds_info, ds_prep, ds_check):
        add_cache_dir(p)
    for p in (ds_info, ds_prep):
        p.add_argument("name", help="e.g. planetoid:Cora, ogb:ogbn-arxiv, reddit, synthetic:scale=14, npy:/data/mygraph")
    ds_check.add_argument("name", metavar="SOURCE:PATH",
                          help="npy:DIR, pyg-file:FILE, graphbolt:DIR, edge-list:DIR or typed-npy:DIR (docs: Your own graph)")
    add_data_root(ds_prep, "raw files")


def run(args) -> int:
    cache = cache_dir(args.cache_dir, writable=args.datasets_command in ("prepare", "check"))
    if args.datasets_command == "list":
        print("\n".join(list_lines(cache)))
        return 0
    try:
        spec = datasets.parse_name(args.name)
        params.check_spec(spec)  # the rules a suite's `params` obey
    except ValueError as exc:
        raise DatasetError(f"{exc} (`gnnbench datasets list` shows the known datasets)") from None
    if args.datasets_command == "check":
        return check(spec, cache)
    if args.datasets_command == "prepare":
        sweep_stale(cache)
        if args.data_root:
            folder(f"--data-root {args.data_root}", args.data_root, writable=False)
        print(f"preparing {args.name} ...", flush=True)
        started = time.perf_counter()
        # the stack its source needs is installed if missing (StackHost install=True)
        done = ready(spec, cache, args.data_root, host=StackHost(cache, install=True), interactive=True)
        print(f"prepared in {time.perf_counter() - started:.1f} s" if done.built else "already in the hub")
    print("\n".join(info_lines(spec, cache)))
    return 0


def check(spec: dict, cache: Path) -> int:
    """`gnnbench datasets check SOURCE:PATH`: a user's graph checked and converted into the hub."""
    if not reads_user_files(spec):
        mine = [s for s in datasets.SOURCES if datasets.user_files(s)]
        raise DatasetError(f"{spec['name']}: `datasets check` reads your own graph's files; allowed: "
                           f"{', '.join(f'{s}:PATH' for s in mine)} (`gnnbench datasets prepare` for the others)")
    sweep_stale(cache)
    print(f"checking {spec['source']}:{spec['params'].get('path')} ...", flush=True)
    started = time.perf_counter()
    # the messages of a stack's interpreter come back as one line; its stack is installed if missing
    done = ready(spec, cache, None, host=StackHost(cache, install=True))
    print(f"ok: checked and converted in {time.perf_counter() - started:.1f} s" if done.built
          else "already checked and converted (its files are unchanged since)")
    print("\n".join(info_lines(spec, cache)))
    return 0


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
    for source in datasets.SOURCES:  # the parametric sources say how their sizes follow their parameters
        note = getattr(datasets.source_module(source), "SIZES_NOTE", None)
        if note:
            lines.append(note)
    return lines


def info_lines(spec: dict, cache: Path) -> list[str]:
    s = dataset_stats(spec, cache)
    measured = hub.is_materialised(spec, cache)
    if measured:
        origin = f"measured (in the hub at {hub.dataset_dir(spec, cache)})"
    else:
        origin = getattr(datasets.source_module(spec["source"]), "ESTIMATE_ORIGIN",
                         "published sizes (not prepared yet)")
    served = datasets.tasks(spec)
    graphs = f"{s['num_graphs']:,} graphs, " if "graph" in served else ""
    if not measured and datasets.user_files(spec["source"]):
        origin += f"; `gnnbench datasets check {spec['source']}:PATH` checks and converts it"
    lines = [f"{spec['name']}: {origin}",
             f"  {graphs}nodes {s['num_nodes']:,}, edges {s['num_edges']:,}, feature width {s['feature_dim']}, "
             f"classes {s['num_classes']}, split {s['num_train']:,} / {s['num_val']:,} / {s['num_test']:,} (train/val/test)",
             f"  hub on disk: about {_mib(memory.hub_bytes(s))}",
             "  memory per backend (each DDP rank holds its own; the hub's maps are shared):"]
    if measured and datasets.user_files(spec["source"]):  # where it came from, how it was read and made
        lines[2:2] = user_graph.report_lines(hub.read_meta(hub.dataset_dir(spec, cache) / "meta.json"))
    if measured and "typed-node" in served:  # per node type and per relation (bench/datasets/typed_hub.py)
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
