"""Disk-backed stores built from the dataset hub before a cell starts (on the host, once, so
ranks never race to build them): `prepare(store, dataset_dir, task)`.

    lmdb (node datasets)    bench/stores/lmdb_features.py: node features, one row per key
    lmdb (graph datasets)   bench/stores/lmdb_graphs.py: one serialised small graph per key
    graphbolt-disk, sqlite  nothing to prepare here: GraphBolt maps the hub's features.npy, and
                            PyG's OnDiskDataset is written by its own code inside the pyg stack
"""

from __future__ import annotations

from pathlib import Path

from bench.stores.lmdb_env import StoreError

__all__ = ["StoreError", "prepare"]


def prepare(store: str, dataset_dir: Path, task: str = "node", say=print) -> Path | None:
    """Build the store a cell reads, if it is built here and not built yet; returns its path."""
    if store != "lmdb":
        return None
    if task == "graph":
        from bench.stores import lmdb_graphs

        return lmdb_graphs.build(dataset_dir, progress=_progress(say, "graphs"))
    from bench.stores import lmdb_features

    return lmdb_features.build(dataset_dir, progress=_progress(say, "rows"))


def _progress(say, unit: str):
    def show(done: int, total: int) -> None:
        say(f"\r  building LMDB store: {done:,}/{total:,} {unit}   ", end="" if done < total else "\n")
    return show
