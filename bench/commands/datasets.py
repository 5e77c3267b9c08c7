"""`gnnbench datasets list|info|prepare`: the known datasets, their sizes and memory needs; prepare one."""

from __future__ import annotations

import time
from pathlib import Path

from bench import datasets
from bench.commands import dataset_info
from bench.commands.common import add_cache_dir, add_data_root
from bench.datasets import params
from bench.datasets.ready import DatasetError, ready, reads_user_files, sweep_stale
from bench.inputs import folder
from bench.paths import cache_dir
from bench.run.prepare import StackHost


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
        print("\n".join(dataset_info.list_lines(cache)))
        return 0
    try:
        spec = datasets.parse_name(args.name)
        params.check_spec(spec)  # the rules a suite's `params` obey
    except ValueError as exc:
        raise DatasetError(f"{exc} (`gnnbench datasets list` shows the known datasets)") from None
    if args.datasets_command in ("prepare", "check"):
        prepare(args, spec, cache)
    print("\n".join(dataset_info.info_lines(spec, cache)))
    return 0


def prepare(args, spec: dict, cache: Path) -> None:
    """`datasets prepare NAME`, and `datasets check SOURCE:PATH`: a user's graph checked and converted
    into the hub. The stack its source needs is installed if missing (StackHost install=True)."""
    checking = args.datasets_command == "check"
    if checking and not reads_user_files(spec):
        mine = [s for s in datasets.SOURCES if datasets.user_files(s)]
        raise DatasetError(f"{spec['name']}: `datasets check` reads your own graph's files; allowed: "
                           f"{', '.join(f'{s}:PATH' for s in mine)} (`gnnbench datasets prepare` for the others)")
    data_root = None if checking else args.data_root
    if data_root:
        folder(f"--data-root {data_root}", data_root, writable=False)
    sweep_stale(cache)
    print(f"checking {spec['source']}:{spec['params'].get('path')} ..." if checking else f"preparing {args.name} ...",
          flush=True)
    started = time.perf_counter()
    # in `check` the messages of a stack's interpreter come back as one line
    done = ready(spec, cache, data_root, host=StackHost(cache, install=True), interactive=not checking)
    took = f"{time.perf_counter() - started:.1f} s"
    if checking:
        print(f"ok: checked and converted in {took}" if done.built
              else "already checked and converted (its files are unchanged since)")
    else:
        print(f"prepared in {took}" if done.built else "already in the hub")
