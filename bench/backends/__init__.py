"""The systems under test, by name. A new backend is one module under bench/backends/ with a
`Pipeline` class (a subclass of bench.backends.base.Pipeline) plus one line in BACKENDS, which says
everything the rest of gnnbench needs to know about it, so no other file names a backend. Plain
data, so the host validates suites without importing a framework.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field

from bench.modes import MODES
from bench.tasks import TASKS


AMP_DTYPES = {"bf16": "bfloat16", "fp16": "float16"}  # the `amp` setting's values (besides "off") and torch dtypes


@dataclass(frozen=True)
class BackendInfo:
    """One backend's registry line."""
    module: str
    stack: str
    modes: tuple[str, ...]  # names in bench.modes.MODES
    stores: tuple[str, ...] = ("memory",)  # names in bench.stores.STORES
    task: str = "node"  # the one task it trains, a name in bench.tasks.TASKS
    mode_chart: bool = False  # the site draws its epoch time per mode as grouped bars
    options: tuple[str, ...] = ()  # the optional settings it honours (bench/run/suite.py Settings)
    # memory model (bench/run/memory_plan.py): bytes of structure the framework builds per node and
    # per edge; once per node where it is the hub's own maps, not a copy per rank
    structure_bytes_per_node: int = 0
    structure_bytes_per_edge: int = 0
    structure_on_hub_maps: bool = False
    # by figure of the equal-work check (bench/publish/stages.py): why the framework's is the larger
    work_notes: dict[str, str] = field(default_factory=dict)
    seeds_are_training_seeds: bool = True  # False: its seeds are rows read (feature-gather)
    models: tuple[str, ...] = ("sage",)  # the `model` values it trains (`none` is every backend's)
    plain_loop: str | None = None  # its examples' loop in bench/harness_costs/plain_loops.py (fidelity)
    # each rank of a GPU cell sees its own GPU alone; False where the framework maps its peers' GPU
    # memory itself (WholeGraph)
    one_gpu_per_rank: bool = True
    host_features_once: bool = False  # features in host memory once per node, a slice per rank (WholeGraph)
    lifecycle: str | None = None  # its pipeline's line in bench/publish/lifecycle.py LIFECYCLE
    unverified_on_gpu: str | None = None  # what no GPU run has shown of it yet: a note on its GPU cells


# GraphBolt's work beside PyG's, by figure of the equal-work check (BackendInfo.work_notes)
GRAPHBOLT_WORK_NOTES = {f"hop{k}_{what}": "GraphBolt samples each hop for all the nodes reached before it (a "
                                          "layer's destination nodes include the seeds again), where PyG samples "
                                          "for the hop's new nodes only"
                        for k in range(2, 6) for what in ("nodes", "edges")}
# what the GraphBolt backends share: DGL 2.1's modes and stores, the fused CSC's indptr (8 B per node)
GRAPHBOLT = dict(stack="dgl", modes=("cpu-cpu", "cpu-cuda", "pinned-cuda", "cuda-cuda"), mode_chart=True,
                 stores=("memory", "lmdb", "graphbolt-disk"), structure_bytes_per_node=8,
                 work_notes=GRAPHBOLT_WORK_NOTES)
PYG_LOADER = "PyG NeighborLoader (+ DDP)"


BACKENDS: dict[str, BackendInfo] = {
    # NeighborLoader's own CSC: colptr (8 B per node), row and permutation (16 B per edge)
    "pyg-neighbor": BackendInfo("bench.backends.pyg_node", "pyg", ("cpu-cpu", "cpu-cuda"), ("memory", "lmdb"),
                                options=("pin_memory", "amp", "trim_to_layer"),
                                structure_bytes_per_node=8, structure_bytes_per_edge=16, plain_loop="pyg_loop",
                                lifecycle=PYG_LOADER,
                                work_notes={"layer": "PyG's layers compute every node they are given: the whole "
                                                     "sampled subgraph, or with trim_to_layer the hops the layer "
                                                     "still needs"}),
    # GraphBolt's fused CSC sampling graph: indptr (8 B per node), indices (8 B per edge)
    "dgl-graphbolt": BackendInfo("bench.backends.dgl_graphbolt", **GRAPHBOLT, structure_bytes_per_edge=8,
                                 structure_on_hub_maps=True, options=("amp", "gpu_cache", "same_layer_edges"),
                                 plain_loop="graphbolt_loop", lifecycle="DGL GraphBolt"),
    # typed graphs (bench/backends/typed.py: the shared R-GCN / R-GAT), PyG's HeteroData per relation
    "pyg-hetero": BackendInfo("bench.backends.pyg_hetero", "pyg", ("cpu-cpu", "cpu-cuda"), ("memory", "lmdb"),
                              task="typed-node", models=("rgcn", "rgat"),
                              options=("pin_memory", "amp", "trim_to_layer"), structure_bytes_per_node=8,
                              structure_bytes_per_edge=16, plain_loop="pyg_hetero_loop",
                              work_notes={"layer": "PyG's HeteroConv computes every node of every type it is "
                                                   "given: the whole sampled subgraph in every layer, or with "
                                                   "trim_to_layer the hops the layer still needs"}),
    "dgl-graphbolt-hetero": BackendInfo("bench.backends.dgl_graphbolt_hetero", **GRAPHBOLT, task="typed-node",
                                        models=("rgcn", "rgat"), options=("amp", "same_layer_edges"),
                                        # the fused CSC: indptr, indices and a type byte per edge
                                        structure_bytes_per_edge=9, plain_loop="graphbolt_hetero_loop"),
    "feature-gather": BackendInfo("bench.backends.feature_gather", "pyg", ("cpu-cpu",), ("memory", "lmdb"),
                                  seeds_are_training_seeds=False, lifecycle=PYG_LOADER),
    "pyg-dist": BackendInfo("bench.backends.pyg_dist", "pyg-dist", ("cpu-cpu",), options=("amp",),
                            lifecycle="PyG torch_geometric.distributed"),
    # link prediction (bench/backends/link.py): seeds are training edges of the hub's link split.
    # neg_mode: only PyG has both (GraphBolt's sample_uniform_negative is triplet)
    "pyg-link": BackendInfo("bench.backends.pyg_link", "pyg", ("cpu-cpu", "cpu-cuda"), ("memory", "lmdb"),
                            task="link", options=("pin_memory", "amp", "neg_mode"),
                            structure_bytes_per_node=8, structure_bytes_per_edge=16, plain_loop="pyg_link_loop"),
    "dgl-graphbolt-link": BackendInfo("bench.backends.dgl_graphbolt_link", **GRAPHBOLT, task="link",
                                      options=("amp", "gpu_cache", "same_layer_edges"),
                                      structure_bytes_per_edge=8, plain_loop="graphbolt_link_loop"),
    "pyg-graphs": BackendInfo("bench.backends.pyg_graphs", "pyg", ("cpu-cpu", "cpu-cuda"),
                              ("memory", "lmdb", "sqlite"), task="graph", options=("pin_memory", "amp"),
                              lifecycle=PYG_LOADER),
    # cuGraph-PyG: GPU sampling over a distributed cuGraph graph, features in WholeGraph; GPU images
    # only (docker/requirements-cugraph-pyg.txt), written as cugraph-gnn's gcn_dist_mnmg.py
    "cugraph-pyg": BackendInfo("bench.backends.cugraph_pyg", "cugraph-pyg", ("cuda-cuda",), one_gpu_per_rank=False,
                               host_features_once=True, lifecycle="cuGraph-PyG / WholeGraph",
                               unverified_on_gpu="cuGraph-PyG has never run in this gnnbench (written as "
                                                 "cugraph-gnn's gcn_dist_mnmg.py; docs/gpus.md lists what differs)"),
}

ALL_MODES = tuple(m for m in MODES if any(m in info.modes for info in BACKENDS.values()))
assert all(m in MODES for info in BACKENDS.values() for m in info.modes), "a backend names an undeclared mode"
assert all(info.task in TASKS for info in BACKENDS.values()), "a backend names an undeclared task (bench/tasks.py)"


def load_pipeline_class(name: str):
    """A backend's Pipeline class (importing its framework: stack side)."""
    return importlib.import_module(BACKENDS[name].module).Pipeline
