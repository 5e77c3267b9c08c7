"""Where a cell's features (or graphs) live: the `store` setting, one registry of them.

A store is one line in STORES plus, where it is built from the hub, its module here, which (per
hub shape it holds: bench/tasks.py) provides
    build(dataset_dir, progress=None) -> Path   on the host, once, before any rank starts
    reader(data)                                inside a stack: node rows have gather(ids),
                                                rows, dim, shape; graphs have get(g),
                                                get_many(ids), read_many(ids), len()
    PROGRESS_UNIT                               what `build` counts ("rows", "graphs")
A store without a module is a framework's own format, read by the backend that offers it.
Plain data: the host and every stack import it.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path

from bench.stores.lmdb_env import StoreError
from bench.tasks import DEFAULT, SHAPES, TASKS

__all__ = ["STORES", "StoreError", "StoreInfo", "cold_files", "features_in_memory", "files_of", "open_store",
           "prepare"]


@dataclass(frozen=True)
class StoreInfo:
    what: str
    shapes: tuple[str, ...]  # the hub shapes it holds (bench/tasks.py; node and link read a plain graph's): its tasks
    # every rank holds the data in its own memory; otherwise memory-mapped, shared through the page cache
    per_rank_memory: bool = False
    modules: dict[str, str] = field(default_factory=dict)  # shape -> module that builds and opens it
    # shape -> glob patterns (under the dataset's folder) of the files a cold page cache evicts; none: in memory
    files: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def tasks(self) -> tuple[str, ...]:
        return tuple(name for name, task in TASKS.items() if task.shape in self.shapes)


STORES: dict[str, StoreInfo] = {
    "memory": StoreInfo("every rank holds the features (or graphs) in its own memory", SHAPES, per_rank_memory=True),
    "lmdb": StoreInfo("an LMDB store built once from the hub, memory-mapped read-only", SHAPES,
                      modules={"plain": "bench.stores.lmdb_features", "typed": "bench.stores.lmdb_typed_features",
                               "collection": "bench.stores.lmdb_graphs"},
                      files={"plain": ("stores/lmdb-features-*/data.mdb",),
                             "typed": ("stores/lmdb-typed-features/*/data.mdb",),
                             "collection": ("stores/lmdb-graphs/data.mdb",)}),
    "graphbolt-disk": StoreInfo("GraphBolt's own on-disk features: the hub's .npy memory-mapped "
                                "(in_memory=False)", ("plain", "typed"),
                                files={"plain": ("features.npy",), "typed": ("features-*.npy",)}),
    "sqlite": StoreInfo("PyG's OnDiskDataset with its sqlite backend, written by PyG's code in its stack",
                        ("collection",), files={"collection": ("stores/sqlite-graphs/**/*",)}),
}


def features_in_memory(store: str) -> bool:
    """Whether a cell with this store reads the dataset's features into each rank's memory."""
    return STORES[store].per_rank_memory


def cold_files(store: str, task: str) -> tuple[str, ...]:
    """The glob patterns of the files a store reads for a task (empty: it reads from memory)."""
    return STORES[store].files.get(TASKS[task].shape, ())


def files_of(store: str, task: str, dataset_dir: Path) -> list[Path]:
    """The files a cell with this store reads, found under the dataset's folder."""
    found = {p for pattern in cold_files(store, task) for p in Path(dataset_dir).glob(pattern) if p.is_file()}
    return sorted(found)


def _module(store: str, task: str):
    name = STORES[store].modules.get(TASKS[task].shape)
    return importlib.import_module(name) if name else None


def prepare(store: str, dataset_dir: Path, task: str = DEFAULT, say=print) -> Path | None:
    """Build the store a cell reads, if it is built here and not built yet; returns its path."""
    module = _module(store, task)
    if module is None:
        return None

    def progress(done: int, total: int) -> None:
        say(f"\r  building the {store} store: {done:,}/{total:,} {module.PROGRESS_UNIT}   ",
            end="" if done < total else "\n")
    return module.build(dataset_dir, progress=progress)


def open_store(store: str, task: str, data):
    """The reader of a built store for a loaded dataset (inside a stack)."""
    module = _module(store, task)
    if module is None:
        raise StoreError(f"store {store!r} has no {task}-level reader of its own ({STORES[store].what})")
    return module.reader(data)
