"""The plain training loops the frameworks' own examples write, without gnnbench around them.

    python -m bench.harness_costs.plain_loops [--side-by-side] CELL_JSON DATASET_DIR
    python -m bench.harness_costs.plain_loops --clocks CELL_JSON DATASET_DIR EPOCHS

Run in a cell's stack by `gnnbench fidelity`: the cell's settings built as the examples build them
(docs/results.md), timed per epoch and nothing else. One loop per backend (BackendInfo.plain_loop);
the node loops train the examples' own GraphSAGE, the typed and link loops the harness's model; a
`model: none` cell is its loader iterated alone. GraphBolt loops honour `same_layer_edges`, PyG's
link loop takes the harness's exclusion step (PyG has none). Without a usable GPU for a cpu-cuda
cell it prints {"skipped": why}; else one JSON line of epoch, warm-up and CPU seconds and threads
(--side-by-side: the harness's beside them; --clocks: the pipeline with stage clocks on and off).
"""

from __future__ import annotations

import json
import sys
import time
from functools import partial
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from bench import modes
from bench.backends import BACKENDS, load_pipeline_class
from bench.backends.base import device_of, graphsage, seed_everything
from bench.backends.link import link_model
from bench.backends.stages import cuda_sync
from bench.backends.typed import typed_model
from bench.datasets import hub, link_split
from bench.run.lifeline import tie_to_parent
from bench.run.worker import run_epoch, set_threads
from bench.settings import DROPOUT, CellSettings
from bench.stores import features_in_memory


# --- what every loop shares (each stack has one framework: a loop imports its own where it runs)


def pyg_loader_args(s) -> dict:
    """A PyG loader's batching, as the examples set it from their flags."""
    return dict(batch_size=s.batch_size, shuffle=True, num_workers=s.num_workers,
                persistent_workers=s.num_workers > 0, pin_memory=bool(s.pin_memory))


def graphbolt_graph(indptr, indices, **typed):
    """The graph as OnDiskDataset builds it: the hub's GraphBolt arrays, read into the process."""
    import dgl.graphbolt as gb

    return gb.fused_csc_sampling_graph(torch.from_numpy(np.array(indptr)), torch.from_numpy(np.array(indices)), **typed)


def as_graph_ids(ids, graph) -> torch.Tensor:
    """Seeds as OnDiskDataset reads them: arrays of the graph's index dtype, no torch op on them."""
    return torch.from_numpy(np.ascontiguousarray(ids).astype(str(graph.indices.dtype).removeprefix("torch.")))


def graphbolt_loader(pipe, s, featured: dict):
    """A GraphBolt datapipe's end after its sampling, noting each layer's start offsets where the cell
    matches PyG's layer edges (`layer_edges.attach`; the rewrite itself runs in `blocks`), over
    the `featured` arrays in memory ({node type: features}, type None untyped); (loader, blocks)."""
    import dgl.graphbolt as gb

    from bench.backends import layer_edges
    from bench.backends.dgl_graphbolt import same_layer_edges

    same = same_layer_edges(s)
    pipe = layer_edges.noting(pipe, modes.mode(s.mode).trains_on_gpu) if same else pipe
    features = gb.BasicFeatureStore({("node", t, "feat"): gb.TorchBasedFeature(torch.from_numpy(x))
                                     for t, x in featured.items()})
    keys = ["feat"] if None in featured else {t: ["feat"] for t in featured}
    pipe = pipe.fetch_feature(features, node_feature_keys=keys)
    pipe = pipe.copy_to(device_of(s.mode))
    return gb.DataLoader(pipe, num_workers=s.num_workers), lambda minibatch: layer_edges.blocks(minibatch, same)


def training(loader, s, model, loss_of, copy: bool = False):
    """The examples' epoch: per batch zero_grad, `loss_of(model, batch)`, backward, step (`model()`
    builds the model); `copy`: each batch copied to the device first, as PyG's examples do; `model:
    none`: the loader iterated alone, as PyG's loader benchmark does."""
    device = device_of(s.mode)
    if s.model != "none":
        model = model().to(device)
        optimizer = torch.optim.Adam(model.parameters(), lr=s.lr, weight_decay=s.weight_decay)

    def epoch():
        if s.model == "none":
            for _ in loader:
                pass
            return
        model.train()
        for batch in loader:
            batch = batch.to(device, non_blocking=bool(s.pin_memory)) if copy else batch
            optimizer.zero_grad()
            loss_of(model, batch).backward()
            optimizer.step()

    return epoch


def dims(data, s) -> list[int]:
    return [data.features.shape[1]] + [s.hidden] * (len(s.fanout) - 1) + [data.num_classes]


def pyg_loop(data, s):
    """PyG's examples/ way: a Data in memory, NeighborLoader over the training nodes, SAGEConv."""
    from torch_geometric.data import Data
    from torch_geometric.loader import NeighborLoader
    from torch_geometric.nn import SAGEConv

    graph = Data(x=torch.from_numpy(data.features), edge_index=torch.from_numpy(data.edge_index),
                 y=torch.from_numpy(data.labels), num_nodes=data.num_nodes)
    loader = NeighborLoader(graph, num_neighbors=list(s.fanout), input_nodes=torch.from_numpy(data.train_idx),
                            **pyg_loader_args(s))

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

    def loss(model, batch):
        return F.cross_entropy(model(batch.x, batch.edge_index)[:batch.batch_size], batch.y[:batch.batch_size])

    return training(loader, s, lambda: SAGE(dims(data, s)), loss, copy=True)


def graphbolt_loop(data, s):
    """DGL 2.1's GraphBolt node-classification example, its CPU storage path (cpu-cuda: copy_to last)."""
    import dgl.graphbolt as gb
    import dgl.nn as dglnn

    graph = graphbolt_graph(data.graphbolt_indptr, data.graphbolt_indices)
    itemset = gb.ItemSet((as_graph_ids(data.train_idx, graph), torch.from_numpy(data.labels[data.train_idx])),
                         names=("seed_nodes", "labels"))
    pipe = gb.ItemSampler(itemset, batch_size=s.batch_size, shuffle=True)
    pipe = pipe.sample_neighbor(graph, list(reversed(s.fanout)))  # GraphBolt: input layer first
    loader, blocks = graphbolt_loader(pipe, s, {None: data.features})

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

    def loss(model, minibatch):
        return F.cross_entropy(model(blocks(minibatch), minibatch.node_features["feat"]), minibatch.labels)

    return training(loader, s, lambda: SAGE(dims(data, s)), loss)


def pyg_hetero_loop(data, s):
    """PyG's examples/hetero way: HeteroData with every type's features, NeighborLoader over it."""
    from torch_geometric.loader import NeighborLoader

    from bench.backends.pyg_hetero import hetero_data, hetero_layer

    loader = NeighborLoader(hetero_data(data), num_neighbors=list(s.fanout),
                            input_nodes=(data.target, torch.from_numpy(np.asarray(data.train_idx))), **pyg_loader_args(s))
    featureless = [t for t, x in data.features.items() if x is None]
    layers, target = len(s.fanout), data.target

    def loss(model, batch):
        size = batch[target].batch_size
        ids = {t: batch[t].n_id for t in featureless}  # a featureless type's embedding rows
        out = model(batch.x_dict, ids, [batch.edge_index_dict] * layers)[:size]
        return F.cross_entropy(out, batch[target].y[:size])

    return training(loader, s, lambda: typed_model(hetero_layer(s.model, data.relations), data, s), loss, copy=True)


def graphbolt_hetero_loop(data, s):
    """DGL 2.1's GraphBolt R-GCN example (hetero_rgcn.py), its CPU path and cpu-cuda's copy_to(device)."""
    import dgl.graphbolt as gb

    from bench.backends.dgl_graphbolt_hetero import hetero_layer

    ids = data.meta["graphbolt"]
    graph = graphbolt_graph(data.graphbolt["indptr"], data.graphbolt["indices"],
                            node_type_offset=torch.from_numpy(np.array(data.graphbolt["node_type_offset"])),
                            type_per_edge=torch.from_numpy(np.array(data.graphbolt["type_per_edge"])),
                            node_type_to_id=ids["node_type_to_id"], edge_type_to_id=ids["edge_type_to_id"])
    featured = {t: x for t, x in data.features.items() if x is not None}
    target = data.target
    itemset = gb.ItemSetDict({target: gb.ItemSet(
        (as_graph_ids(data.train_idx, graph), torch.from_numpy(np.asarray(data.labels)[data.train_idx])),
        names=("seed_nodes", "labels"))})
    # the example's fanouts: a tensor per layer, one value per edge type, input layer first
    fanouts = [torch.full((len(ids["edge_type_to_id"]),), f, dtype=torch.int64) for f in reversed(s.fanout)]
    pipe = gb.ItemSampler(itemset, batch_size=s.batch_size, shuffle=True).sample_neighbor(graph, fanouts)
    loader, blocks = graphbolt_loader(pipe, s, featured)
    featureless = [t for t, x in data.features.items() if x is None]

    def loss(model, minibatch):
        x = {t: minibatch.node_features[(t, "feat")] for t in featured}
        ids = {t: minibatch.input_nodes[t] for t in featureless if t in minibatch.input_nodes}
        return F.cross_entropy(model(x, ids, blocks(minibatch)), minibatch.labels[target])

    return training(loader, s, lambda: typed_model(hetero_layer(s.model, data.relations), data, s), loss)


def link_model_of(conv, data, s):
    """The harness's link model: the shared GraphSAGE encoder (out width `hidden`) and the decoder."""
    return link_model(graphsage(conv, data.features.shape[1], s.hidden, s.hidden, len(s.fanout)), s.hidden, s.decoder)


def pyg_link_loop(data, s):
    """PyG's graph_sage_unsup.py way: LinkNeighborLoader with negative sampling, SAGEConv (the shared encoder's)."""
    from torch_geometric.data import Data
    from torch_geometric.loader import LinkNeighborLoader
    from torch_geometric.sampler import NegativeSampling

    from bench.backends.pyg_node import PygNodePipeline

    split = link_split.load(data.path)
    graph = Data(x=torch.from_numpy(data.features), edge_index=torch.from_numpy(split.edge_index),
                 num_nodes=data.num_nodes)
    neg_mode = s.neg_mode
    loader = LinkNeighborLoader(graph, num_neighbors=list(s.fanout),
                                edge_label_index=torch.from_numpy(np.ascontiguousarray(split.train_pos.T)),
                                neg_sampling=NegativeSampling(neg_mode, amount=s.neg_ratio), **pyg_loader_args(s))
    if s.exclusion == "reverse":  # the seed edges and their reverses, dropped after sampling
        from bench.backends.pyg_link import ExcludeSeedEdges

        sampler = loader.link_sampler
        sampler.sample_from_edges = ExcludeSeedEdges(sampler.sample_from_edges, split.num_nodes, neg_mode)
    device = device_of(s.mode)
    layers = len(s.fanout)

    def loss(model, batch):
        if neg_mode == "triplet":  # each positive's source against its `amount` negative destinations
            neg_dst = batch.dst_neg_index.reshape(len(batch.src_index), -1)
            src = torch.cat([batch.src_index, batch.src_index.repeat_interleave(neg_dst.shape[1])])
            dst = torch.cat([batch.dst_pos_index, neg_dst.reshape(-1)])
            label = torch.cat([torch.ones(len(batch.src_index), device=device),
                               torch.zeros(neg_dst.numel(), device=device)])
        else:  # binary, as graph_sage_unsup.py: edge_label_index and edge_label
            src, dst = batch.edge_label_index
            label = batch.edge_label
        return F.binary_cross_entropy_with_logits(model(batch.x, [batch.edge_index] * layers, src, dst), label)

    return training(loader, s, lambda: link_model_of(PygNodePipeline.conv_factory(), data, s), loss, copy=True)


def graphbolt_link_loop(data, s):
    """DGL 2.1's GraphBolt link_prediction.py, its CPU storage path, on the CPU or (cpu-cuda) copy_to(device)."""
    import dgl.graphbolt as gb

    from bench.backends.dgl_graphbolt import Pipeline

    split = link_split.load(data.path)
    graph = graphbolt_graph(split.graphbolt_indptr, split.graphbolt_indices)  # the training graph
    itemset = gb.ItemSet(as_graph_ids(split.train_pos, graph), names="node_pairs")
    pipe = gb.ItemSampler(itemset, batch_size=s.batch_size, shuffle=True)
    pipe = pipe.sample_uniform_negative(graph, s.neg_ratio)
    pipe = pipe.sample_neighbor(graph, list(reversed(s.fanout)))  # GraphBolt: input layer first
    if s.exclusion == "reverse":
        pipe = pipe.transform(partial(gb.exclude_seed_edges, include_reverse_edges=True))
    loader, blocks = graphbolt_loader(pipe, s, {None: data.features})

    def loss(model, minibatch):
        (src, dst), labels = minibatch.node_pairs_with_labels
        logits = model(minibatch.node_features["feat"], blocks(minibatch), src, dst)
        return F.binary_cross_entropy_with_logits(logits, labels.float())

    return training(loader, s, lambda: link_model_of(Pipeline.conv_factory(), data, s), loss)


def loop_of(backend: str):
    return globals()[BACKENDS[backend].plain_loop]


def timed(epoch, sync=None) -> tuple[float, float]:
    """One epoch's (wall seconds, this process's CPU seconds), `sync` before each clock is read."""
    if sync:
        sync()
    start, cpu_start = time.perf_counter(), time.process_time()
    epoch()
    if sync:
        sync()
    return time.perf_counter() - start, time.process_time() - cpu_start


def side_by_side(cell: dict, data, s) -> dict:
    """The harness's pipeline epochs and the plain loop's on the same data, interleaved in one process."""
    pipe = load_pipeline_class(cell["backend"])(data, s)
    getattr(pipe, "check_leaks_apart", lambda: None)()  # as the worker does
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
    for _ in range(s.epochs):
        # each epoch follows the other loop's (turning the order would run a loop twice in a row, cached)
        for name in ("harness", "plain"):
            found[name].append(timed(sides[name], cuda_sync(pipe.device)))
    leaks = getattr(pipe, "leaks", None)  # a link cell's leak check: which of the harness's batches it read
    return {"epochs": [w for w, _ in found["plain"]], "cpu": [c for _, c in found["plain"]],
            "harness": [w for w, _ in found["harness"]], "harness_cpu": [c for _, c in found["harness"]],
            "harness_batches": batches, **({"harness_leak_checked": leaks["batches"]} if leaks else {})}


def clocks(cell: dict, dataset_dir: Path, epochs: int) -> dict:
    """The cell's pipeline built with the stage clocks on and off (models from one seed), their
    epochs in interleaved pairs from the same seed: {"on": seconds of each epoch, "off": ...}."""
    settings = CellSettings.from_dict(cell["settings"])
    data = hub.load_dataset(cell["dataset"]["source"], dataset_dir,
                            features_in_memory=features_in_memory(settings.store))
    pipes = {}
    for profile in (True, False):
        seed_everything(settings.seed)  # both models start from the same weights
        pipes[profile] = load_pipeline_class(cell["backend"])(data, settings.replace(profile=profile))
        getattr(pipes[profile], "check_leaks_apart", lambda: None)()  # as the worker does
    for w in range(settings.warmup_epochs):
        for profile, pipe in pipes.items():
            pipe.epoch = w  # numbered as the worker numbers them: a link cell checks leaks in epoch 0 only
            run_epoch(pipe, profile=profile)
    seconds = {True: [], False: []}
    for i in range(epochs):
        for profile in (True, False):  # each epoch follows the other side's, as side_by_side's
            pipes[profile].epoch = settings.warmup_epochs + i
            pipes[profile].reseed(settings.seed + 1 + i)  # both epochs of the pair: the same batches
            stats = run_epoch(pipes[profile], profile=profile)
            if ("stages" in stats) != profile:  # the two sides must differ in exactly this
                raise RuntimeError(f"profile {profile}: the epoch {'lacks' if profile else 'has'} a stage split")
            seconds[profile].append(stats["seconds"])
    return {"on": seconds[True], "off": seconds[False]}


def main(argv: list[str]) -> int:
    """`[--side-by-side] CELL_JSON DATASET_DIR`: the plain loop alone, or beside the harness's;
    `--clocks CELL_JSON DATASET_DIR EPOCHS`: `clocks`."""
    tie_to_parent()  # every mode: gone within a second of the gnnbench that started it (SIGKILL too)
    if argv[:1] == ["--clocks"]:
        print(json.dumps(clocks(json.loads(argv[1]), Path(argv[2]), int(argv[3]))))
        return 0
    together = argv[:1] == ["--side-by-side"]
    cell_json, dataset_dir = argv[1:] if together else argv
    cell = json.loads(cell_json)
    s = CellSettings.from_dict(cell["settings"])
    threads = set_threads(s).threads  # the cell's own thread count (the core budget), set the same way
    why = load_pipeline_class(cell["backend"]).unavailable(s.mode, 1)  # a GPU mode here: no GPU, or a CPU build
    if why:
        print(json.dumps({"skipped": why}))
        return 0
    seed_everything(s.seed)
    data = hub.load_dataset(cell["dataset"]["source"], Path(dataset_dir), features_in_memory=True)
    if together:
        print(json.dumps({**side_by_side(cell, data, s), "threads": threads}))
        return 0
    epoch = loop_of(cell["backend"])(data, s)
    times, cpu = zip(*(timed(epoch, cuda_sync(device_of(s.mode))) for _ in range(s.warmup_epochs + s.epochs)))
    w = s.warmup_epochs
    print(json.dumps({"warmup": times[:w], "epochs": times[w:], "cpu": cpu[w:], "threads": threads}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
