"""The systems under test, by name. A new backend is one module under bench/backends/ with a
`Pipeline` class (a subclass of bench.backends.base.Pipeline) plus one line in BACKENDS: the
line says everything the rest of gnnbench needs to know about it (its stack, modes, stores,
task, memory model and chart hint), so no other file names a backend.

This registry is plain data so the host can validate suites without importing any framework;
the module itself is imported only inside its stack's interpreter.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from bench.modes import MODES
from bench.stores import STORES  # noqa: F401 - re-exported: the `store` setting's registry


@dataclass(frozen=True)
class BackendInfo:
    module: str
    stack: str
    modes: tuple[str, ...]  # names in bench.modes.MODES (what each means is declared there)
    stores: tuple[str, ...] = ("memory",)  # names in bench.stores.STORES
    task: str = "node"  # "node": node classification on a graph; "graph": a collection of small graphs
    mode_chart: bool = False  # the site draws its epoch time per mode as grouped bars
    # The optional settings it honours (bench/run/suite.py: Settings): pin_memory, amp, gpu_cache
    options: tuple[str, ...] = ()
    # Memory model (bench/datasets/memory.py): bytes of graph structure the framework builds on
    # top of the hub's arrays, per node (counted num_nodes + 1 times: CSC pointers) and per edge.
    structure_bytes_per_node: int = 0
    structure_bytes_per_edge: int = 0


BACKENDS: dict[str, BackendInfo] = {
    # NeighborLoader's own CSC: colptr (8 B per node), row and permutation (16 B per edge)
    "pyg-neighbor": BackendInfo("bench.backends.pyg_neighbor", "pyg", ("cpu-cpu", "cpu-cuda"), ("memory", "lmdb"),
                                options=("pin_memory", "amp"),
                                structure_bytes_per_node=8, structure_bytes_per_edge=16),
    # GraphBolt's fused CSC sampling graph: indptr (8 B per node), indices (8 B per edge)
    "dgl-graphbolt": BackendInfo("bench.backends.dgl_graphbolt", "dgl",
                                 ("cpu-cpu", "cpu-cuda", "pinned-cuda", "cuda-cuda"),
                                 ("memory", "lmdb", "graphbolt-disk"), mode_chart=True,
                                 options=("amp", "gpu_cache"),
                                 structure_bytes_per_node=8, structure_bytes_per_edge=8),
    "feature-gather": BackendInfo("bench.backends.feature_gather", "pyg", ("cpu-cpu",), ("memory", "lmdb")),
    "pyg-dist": BackendInfo("bench.backends.pyg_dist", "pyg-dist", ("cpu-cpu",), options=("amp",)),
    "pyg-graphs": BackendInfo("bench.backends.pyg_graphs", "pyg", ("cpu-cpu", "cpu-cuda"),
                              ("memory", "lmdb", "sqlite"), task="graph", options=("pin_memory", "amp")),
}

ALL_MODES = tuple(m for m in MODES if any(m in info.modes for info in BACKENDS.values()))
assert all(m in MODES for info in BACKENDS.values() for m in info.modes), "a backend names an undeclared mode"


def load_pipeline_class(name: str):
    return importlib.import_module(BACKENDS[name].module).Pipeline
