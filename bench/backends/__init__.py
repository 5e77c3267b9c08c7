"""The systems under test, by name. A new backend is one module under bench/backends/ with a
`Pipeline` class (see bench/backends/base.py) plus one line in BACKENDS.

This registry is plain data so the host can validate suites without importing any framework;
the module itself is imported only inside its stack's interpreter.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

CUDA_MODES = ("cpu-cuda", "pinned-cuda", "cuda-cuda")
# Where a backend's data lives (the `store` setting):
#   memory          every rank holds the features (or graphs) in its own memory
#   lmdb            an LMDB store built once from the hub (bench/stores/), memory-mapped read-only
#   graphbolt-disk  GraphBolt's own on-disk features: the hub's .npy memory-mapped (in_memory=False)
#   sqlite          PyG's OnDiskDataset with its sqlite backend (graph-level datasets)
STORES = ("memory", "lmdb", "graphbolt-disk", "sqlite")


@dataclass(frozen=True)
class BackendInfo:
    module: str
    stack: str
    modes: tuple[str, ...]  # "<where sampling runs>-<where training runs>"
    stores: tuple[str, ...] = ("memory",)
    task: str = "node"  # "node": node classification on a graph; "graph": a collection of small graphs
    mode_chart: bool = False  # the site draws its epoch time per mode as grouped bars


BACKENDS: dict[str, BackendInfo] = {
    "pyg-neighbor": BackendInfo("bench.backends.pyg_neighbor", "pyg", ("cpu-cpu", "cpu-cuda"),
                                ("memory", "lmdb")),
    "dgl-graphbolt": BackendInfo("bench.backends.dgl_graphbolt", "dgl",
                                 ("cpu-cpu", "cpu-cuda", "pinned-cuda", "cuda-cuda"),
                                 ("memory", "lmdb", "graphbolt-disk"), mode_chart=True),
    "feature-gather": BackendInfo("bench.backends.feature_gather", "pyg", ("cpu-cpu",), ("memory", "lmdb")),
    "pyg-dist": BackendInfo("bench.backends.pyg_dist", "pyg-dist", ("cpu-cpu",)),
    "pyg-graphs": BackendInfo("bench.backends.pyg_graphs", "pyg", ("cpu-cpu", "cpu-cuda"),
                              ("memory", "lmdb", "sqlite"), task="graph"),
}

ALL_MODES = tuple(dict.fromkeys(m for info in BACKENDS.values() for m in info.modes))


def load_pipeline_class(name: str):
    return importlib.import_module(BACKENDS[name].module).Pipeline
