"""The plain training loops the frameworks' own examples write, without gnnbench around them.

    python -m bench.harness_costs.plain_loops [--side-by-side] CELL_JSON DATASET_DIR

Run inside a cell's stack by `gnnbench fidelity`, to measure what the harness costs: the same
graph, fanout, batch size, model width, learning rate and DataLoader workers as the cell, built
as PyG's `examples/` (NeighborLoader + SAGEConv) and DGL's GraphBolt node-classification example
(ItemSampler -> sample_neighbor -> fetch_feature -> copy_to -> DataLoader) build them, timed per
epoch with perf_counter and nothing else: no runner, no memory sampler, no per-stage clocks.
A GraphBolt loop computes its layers over what the cell's `same_layer_edges` says (layer_edges_of),
so a pair compares one model with itself.
This module runs every plain loop and holds the node cells'; the typed cells' loops are in
plain_loops_typed.py, the link cells' in plain_loops_link.py (a backend's loop is found by its task:
bench/harness_costs/__init__.py PLAIN_LOOP_MODULES, loop_of).
Only the hub's arrays are read through gnnbench (reading the dataset is not what is compared).
A `model: none` cell (the loader alone) is held against the same loader iterated with nothing
else (loader_only), as the frameworks' loader benchmarks time one.
Threads: the cell's, from the same core budget (bench/machine/core_budget.py). A cpu-cuda cell's loop
trains on the GPU as the examples do (on_device): the model there, each batch copied there
(PyG: `batch.to(device)`, pinned by the loader and copied non_blocking where the cell sets
`pin_memory`; GraphBolt: `copy_to(device)` last), the GPU synchronised before each clock is read
(timed). Without a GPU (or a CUDA build of the stack) it prints {"skipped": why} and trains
nothing (main). GraphBolt's graph: the
hub's int32 copies, as GraphBolt's OnDiskDataset builds it (read into the process: the example
loads its graph whole).
Prints one JSON line: {"epochs": [seconds of each measured epoch], "warmup": [...], "cpu": [this
process's CPU seconds of each measured epoch], "threads": N}; with --side-by-side (side_by_side)
"harness" and "harness_cpu" beside the plain loop's "epochs" and "cpu", and no "warmup".
"""

from __future__ import annotations

import importlib
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from bench.backends import BACKENDS
from bench.backends import load_pipeline_class
from bench.backends.base import device_of
from bench.backends.stages import cuda_sync
from bench.harness_costs import PLAIN_LOOP_MODULES
from bench.run.worker import run_epoch
from bench.datasets import hub
from bench.run.worker import set_threads
from bench.settings import DROPOUT, CellSettings


def pyg_loop(data, s):
    """PyG's examples/ way: a Data in memory, NeighborLoader over the training nodes, SAGEConv."""
    from torch_geometric.data import Data
    from torch_geometric.loader import NeighborLoader
    from torch_geometric.nn import SAGEConv

    graph = Data(x=torch.from_numpy(data.features), edge_index=torch.from_numpy(data.edge_index),
                 y=torch.from_numpy(data.labels), num_nodes=data.num_nodes)
    loader = NeighborLoader(graph, num_neighbors=list(s.fanout), input_nodes=torch.from_numpy(data.train_idx),
                            batch_size=s.batch_size, shuffle=True, num_workers=s.num_workers,
                            persistent_workers=s.num_workers > 0, pin_memory=bool(s.pin_memory))

    class SAGE(torch.nn.Module):
        def __init__(self, dims):
            super().__init__()
            self.convs = torch.nn.ModuleList(SAGEConv(a, b) for a, b in zip(dims, dims[1:]))

        def forward(self, x, edge_index):
            for i, conv in enumerate(self.convs):
                x = conv(x, edge_index)
                if i < len(self.convs) - 1:
                    x = F.dropout(x.relu(), p=DROPOUT, training=self.training)
            return x

    if s.model == "none":
        return loader_only(loader)
    device, to_device = on_device(s)
    model = SAGE(dims(data, s)).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=s.lr, weight_decay=s.weight_decay)

    def epoch():
        model.train()
        for batch in loader:
            batch = to_device(batch)
            optimizer.zero_grad()
            out = model(batch.x, batch.edge_index)[:batch.batch_size]
            F.cross_entropy(out, batch.y[:batch.batch_size]).backward()
            optimizer.step()

    return epoch


def graphbolt_loop(data, s):
    """DGL 2.1's GraphBolt node-classification example, its CPU storage path: on the CPU, or (cpu-cuda)
    copy_to(device) last."""
    import dgl.graphbolt as gb
    import dgl.nn as dglnn

    # the graph as OnDiskDataset builds it: int32 indices and seeds where the sizes allow (the hub's copies)
    graph = gb.fused_csc_sampling_graph(torch.from_numpy(np.array(data.graphbolt_indptr)),
                                        torch.from_numpy(np.array(data.graphbolt_indices)))
    features = gb.BasicFeatureStore({("node", None, "feat"): gb.TorchBasedFeature(torch.from_numpy(data.features))})
    # the seeds and their labels as OnDiskDataset reads them from its files: arrays, no torch op on them
    seeds = data.train_idx.astype(str(graph.indices.dtype).removeprefix("torch."))
    itemset = gb.ItemSet((torch.from_numpy(seeds), torch.from_numpy(data.labels[data.train_idx])),
                         names=("seed_nodes", "labels"))
    pipe = gb.ItemSampler(itemset, batch_size=s.batch_size, shuffle=True)
    pipe = pipe.sample_neighbor(graph, list(reversed(s.fanout)))  # GraphBolt: input layer first
    pipe, blocks = layer_edges_of(pipe, s)
    pipe = pipe.fetch_feature(features, node_feature_keys=["feat"])
    device, _ = on_device(s)
    pipe = pipe.copy_to(device)  # the example copies to its device last
    loader = gb.DataLoader(pipe, num_workers=s.num_workers)

    class SAGE(torch.nn.Module):
        def __init__(self, dims):
            super().__init__()
            self.layers = torch.nn.ModuleList(dglnn.SAGEConv(a, b, "mean") for a, b in zip(dims, dims[1:]))

        def forward(self, blocks, x):
            for i, (layer, block) in enumerate(zip(self.layers, blocks)):
                x = layer(block, x)
                if i < len(self.layers) - 1:
                    x = F.dropout(F.relu(x), p=DROPOUT, training=self.training)
            return x

    if s.model == "none":
        return loader_only(loader)
    model = SAGE(dims(data, s)).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=s.lr, weight_decay=s.weight_decay)

    def epoch():
        model.train()
        for minibatch in loader:
            out = model(blocks(minibatch), minibatch.node_features["feat"])
            loss = F.cross_entropy(out, minibatch.labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

    return epoch


def layer_edges_of(pipe, s: dict):
    """A GraphBolt loop's datapipe with the cell's `same_layer_edges` step after its sampling, as the
    cell's (bench/backends/layer_edges.py), and what gives a minibatch's blocks: the same model
    on both sides of a fidelity pair. False: the example's own minibatch.blocks."""
    from bench.backends import layer_edges
    from bench.backends.dgl_graphbolt import same_layer_edges

    same = same_layer_edges(s)
    return (pipe.transform(layer_edges.attach) if same else pipe), lambda minibatch: layer_edges.blocks(minibatch, same)


def on_device(s):
    """The cell's training device (bench/backends/base.py device_of: cuda:0 in cpu-cuda) and how a
    PyG loop copies a batch there, as PyG's examples do: `batch.to(device)`, non_blocking where the
    loader pinned it (`pin_memory`, as the harness's to_device)."""
    device = device_of(s.mode)
    return device, lambda batch: batch.to(device, non_blocking=bool(s.pin_memory))


def loader_only(loader):
    """A `model: none` cell's plain loop: the loader iterated and nothing else, as the frameworks' own
    loader benchmarks time it (PyG's benchmark/loader/neighbor_loader.py: `for _ in loader`; GraphBolt's
    example with its training step left out)."""
    def epoch():
        for _ in loader:
            pass

    return epoch


def loop_of(backend: str):
    """The backend's plain loop, as its registry line names it (BackendInfo.plain_loop), from the
    module of its task (PLAIN_LOOP_MODULES: this one for node cells, a sibling for typed and link)."""
    info = BACKENDS[backend]
    if info.task == "node":  # this module's own (which runs as __main__)
        return globals()[info.plain_loop]
    return getattr(importlib.import_module(PLAIN_LOOP_MODULES[info.task]), info.plain_loop)


def dims(data, s) -> list[int]:
    return [data.features.shape[1]] + [s.hidden] * (len(s.fanout) - 1) + [data.num_classes]


def timed(epoch, sync=None) -> tuple[float, float]:
    """One epoch's (wall seconds, this process's CPU seconds); `sync` (a GPU cell's: stages.cuda_sync)
    waits for the GPU before each clock is read, so the epoch holds its own kernels and no other's."""
    if sync:
        sync()
    start, cpu_start = time.perf_counter(), time.process_time()
    epoch()
    if sync:
        sync()
    return time.perf_counter() - start, time.process_time() - cpu_start


def side_by_side(cell: dict, data, s) -> dict:
    """The harness's pipeline epoch (bench/run/worker.py run_epoch, its stage clocks as the cell sets
    them) and the plain loop's, built on the same data in this one process, epochs interleaved
    (harness first in even pairs, plain first in odd): what the two loops cost with the process
    around them the same. Returns {"epochs"/"cpu": the plain loop's, "harness"/"harness_cpu": ...}."""
    pipe = load_pipeline_class(cell["backend"])(data, s)
    epochs = iter(range(s.warmup_epochs + s.epochs))

    batches = []

    def harness_epoch():
        pipe.epoch = next(epochs)  # numbered as the worker numbers them (a link cell checks leaks in epoch 0 only)
        batches.append(run_epoch(pipe, profile=pipe.profile)["batches"])

    sides = {"harness": harness_epoch, "plain": loop_of(cell["backend"])(data, s)}
    for _ in range(s.warmup_epochs):
        for epoch in sides.values():
            epoch()
    found = {"harness": [], "plain": []}
    for i in range(s.epochs):
        for name in (("harness", "plain") if i % 2 == 0 else ("plain", "harness")):
            found[name].append(timed(sides[name], cuda_sync(pipe.device)))
    leaks = getattr(pipe, "leaks", None)  # a link cell's leak check: which of the harness's batches it read
    return {"epochs": [w for w, _ in found["plain"]], "cpu": [c for _, c in found["plain"]],
            "harness": [w for w, _ in found["harness"]], "harness_cpu": [c for _, c in found["harness"]],
            "harness_batches": batches, **({"harness_leak_checked": leaks["batches"]} if leaks else {})}


def main(argv: list[str]) -> int:
    """`CELL_JSON DATASET_DIR`: the plain loop alone; `--side-by-side CELL_JSON DATASET_DIR`: it and
    the harness's pipeline in this one process (side_by_side)."""
    together = argv[:1] == ["--side-by-side"]
    cell_json, dataset_dir = argv[1:] if together else argv
    cell = json.loads(cell_json)
    s = CellSettings.from_dict(cell["settings"])
    threads = set_threads(s).threads  # the cell's own thread count (the core budget), set the same way
    why = load_pipeline_class(cell["backend"]).unavailable(s.mode, 1)  # a GPU mode here: no GPU, or a CPU build
    if why:
        print(json.dumps({"skipped": why}))
        return 0
    torch.manual_seed(s.seed)
    np.random.seed(s.seed)
    data = hub.load_dataset(cell["dataset"]["source"], Path(dataset_dir), features_in_memory=True)
    if together:
        print(json.dumps({**side_by_side(cell, data, s), "threads": threads}))
        return 0
    epoch = loop_of(cell["backend"])(data, s)
    times, cpu = [], []
    for _ in range(s.warmup_epochs + s.epochs):
        seconds, cpu_seconds = timed(epoch, cuda_sync(device_of(s.mode)))
        times.append(seconds)
        cpu.append(cpu_seconds)
    w = s.warmup_epochs
    print(json.dumps({"warmup": times[:w], "epochs": times[w:], "cpu": cpu[w:], "threads": threads}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
