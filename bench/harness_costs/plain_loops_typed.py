"""The plain loops of the typed-node backends (pyg-hetero, dgl-graphbolt-hetero), as the frameworks'
own typed examples write them, without gnnbench around them (bench/harness_costs/plain_loops.py runs
them and says what is timed):

    pyg_hetero_loop       PyG's examples/hetero/to_hetero_mag.py: a HeteroData in memory, NeighborLoader
                          with `input_nodes=(target type, train ids)`, the loss on the first
                          `batch[target].batch_size` rows
    graphbolt_hetero_loop DGL 2.1's examples/sampling/graphbolt/rgcn/hetero_rgcn.py: a typed
                          FusedCSCSamplingGraph, ItemSetDict on the target type, ItemSampler ->
                          sample_neighbor (a fanout tensor per layer, a value per edge type) ->
                          fetch_feature per node type -> copy_to -> DataLoader

The model is the harness's own (bench/backends/typed.py typed_model with each backend's per-relation
layer), not each example's: what fidelity measures is the loop around it. The hub's arrays stand in
for the examples' downloads (ogbn-mag through `ogb`, which the dgl stack lacks). Stack-side.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from bench.backends.typed import typed_model
from bench.harness_costs.plain_loops import layer_edges_of, loader_only, on_device


def pyg_hetero_loop(data, s):
    """PyG's examples/hetero way: HeteroData with every type's features, NeighborLoader over it."""
    from torch_geometric.loader import NeighborLoader

    from bench.backends.pyg_hetero import hetero_data, hetero_layer  # each stack has one framework: imported where its loop runs

    graph = hetero_data(data)  # the hub's arrays, read as the cell reads them
    loader = NeighborLoader(graph, num_neighbors=list(s.fanout),
                            input_nodes=(data.target, torch.from_numpy(np.asarray(data.train_idx))),
                            batch_size=s.batch_size, shuffle=True, num_workers=s.num_workers,
                            persistent_workers=s.num_workers > 0, pin_memory=bool(s.pin_memory))
    if s.model == "none":
        return loader_only(loader)
    device, to_device = on_device(s)
    model = typed_model(hetero_layer(s.model, data.relations), data, s).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=s.lr, weight_decay=s.weight_decay)
    featureless = [t for t, x in data.features.items() if x is None]
    layers, target = len(s.fanout), data.target

    def epoch():
        model.train()
        for batch in loader:
            batch = to_device(batch)
            optimizer.zero_grad()
            size = batch[target].batch_size
            ids = {t: batch[t].n_id for t in featureless}  # a featureless type's embedding rows
            out = model(batch.x_dict, ids, [batch.edge_index_dict] * layers)[:size]
            F.cross_entropy(out, batch[target].y[:size]).backward()
            optimizer.step()

    return epoch


def graphbolt_hetero_loop(data, s):
    """DGL 2.1's GraphBolt R-GCN example (hetero_rgcn.py), its CPU path and cpu-cuda's copy_to(device)."""
    import dgl.graphbolt as gb

    from bench.backends.dgl_graphbolt_hetero import hetero_layer  # each stack has one framework: imported where its loop runs

    # the graph as OnDiskDataset builds it: GraphBolt's dtypes (the hub's copies), read into the process
    arrays = {n: torch.from_numpy(np.array(data.graphbolt[n]))
              for n in ("indptr", "indices", "node_type_offset", "type_per_edge")}
    ids = data.meta["graphbolt"]
    graph = gb.fused_csc_sampling_graph(arrays["indptr"], arrays["indices"],
                                        node_type_offset=arrays["node_type_offset"],
                                        type_per_edge=arrays["type_per_edge"],
                                        node_type_to_id=ids["node_type_to_id"], edge_type_to_id=ids["edge_type_to_id"])
    featured = {t: x for t, x in data.features.items() if x is not None}
    features = gb.BasicFeatureStore({("node", t, "feat"): gb.TorchBasedFeature(torch.from_numpy(x))
                                     for t, x in featured.items()})
    target = data.target
    seeds = np.asarray(data.train_idx).astype(str(graph.indices.dtype).removeprefix("torch."))
    itemset = gb.ItemSetDict({target: gb.ItemSet(
        (torch.from_numpy(seeds), torch.from_numpy(np.asarray(data.labels)[data.train_idx])),
        names=("seed_nodes", "labels"))})
    num_etypes = len(ids["edge_type_to_id"])
    # the example's fanouts: a tensor per layer, one value per edge type, input layer first
    fanouts = [torch.full((num_etypes,), f, dtype=torch.int64) for f in reversed(s.fanout)]
    pipe = gb.ItemSampler(itemset, batch_size=s.batch_size, shuffle=True)
    pipe = pipe.sample_neighbor(graph, fanouts)
    pipe, blocks = layer_edges_of(pipe, s)
    pipe = pipe.fetch_feature(features, node_feature_keys={t: ["feat"] for t in featured})
    device, _ = on_device(s)
    pipe = pipe.copy_to(device)
    loader = gb.DataLoader(pipe, num_workers=s.num_workers)
    if s.model == "none":
        return loader_only(loader)
    model = typed_model(hetero_layer(s.model, data.relations), data, s).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=s.lr, weight_decay=s.weight_decay)
    featureless = [t for t, x in data.features.items() if x is None]

    def epoch():
        model.train()
        for minibatch in loader:
            x = {t: minibatch.node_features[(t, "feat")] for t in featured}
            ids = {t: minibatch.input_nodes[t] for t in featureless if t in minibatch.input_nodes}
            out = model(x, ids, blocks(minibatch))
            loss = F.cross_entropy(out, minibatch.labels[target])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

    return epoch
