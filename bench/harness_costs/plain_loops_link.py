"""The plain loops of the link backends (pyg-link, dgl-graphbolt-link), as the frameworks' own link
examples write them, without gnnbench around them (bench/harness_costs/plain_loops.py runs them and
says what is timed), over the hub's link split (bench/datasets/link_split.py) in place of the
examples' `ogb` downloads:

    pyg_link_loop        PyG's examples/graph_sage_unsup.py: a Data of the training graph,
                         LinkNeighborLoader over the training edges with `neg_sampling`, every
                         layer on the batch's whole subgraph, BCE on the positive and negative pairs
    graphbolt_link_loop  DGL 2.1's examples/sampling/graphbolt/link_prediction.py: an ItemSet of the
                         training edges named `node_pairs`, ItemSampler -> sample_uniform_negative ->
                         sample_neighbor -> exclude_seed_edges(include_reverse_edges=True) (where the
                         cell's exclusion is `reverse`) -> fetch_feature -> copy_to -> DataLoader, the
                         pairs and labels from `node_pairs_with_labels`

The cell's settings decide what the examples leave to their flags: negatives per positive
(`neg_ratio`), PyG's `neg_mode` (triplet, or binary as graph_sage_unsup.py draws them), and the
exclusion. PyG's examples exclude nothing and LinkNeighborLoader has no option for it, so with
`exclusion: reverse` the plain PyG loop wraps its loader's sampler in the same step the harness does
(bench/backends/pyg_link.py ExcludeSeedEdges: the task's definition, as the model is). The model is
the harness's own (the shared GraphSAGE encoder and bench/backends/link.py's decoder), computing over
the edges the cell's `same_layer_edges` says (plain_loops.layer_edges_of), so only the loop around
it differs. Not here: the harness's per-batch leakage check (the fidelity counts it as
harness cost). Stack-side.
"""

from __future__ import annotations

from functools import partial

import numpy as np
import torch
import torch.nn.functional as F

from bench.backends.base import graphsage
from bench.backends.link import link_model
from bench.datasets import link_split
from bench.harness_costs.plain_loops import layer_edges_of, loader_only, on_device


def shared_model(conv, data, s):
    """The harness's link model: the shared GraphSAGE encoder (out width `hidden`) and the decoder."""
    hidden = s.hidden
    encoder = graphsage(conv, data.features.shape[1], hidden, hidden, len(s.fanout))
    return link_model(encoder, hidden, s.decoder)


def pyg_link_loop(data, s):
    """PyG's graph_sage_unsup.py way: LinkNeighborLoader with negative sampling, SAGEConv (the shared encoder's)."""
    from torch_geometric.data import Data
    from torch_geometric.loader import LinkNeighborLoader
    from torch_geometric.sampler import NegativeSampling

    from bench.backends.pyg_node import PygNodePipeline  # each stack has one framework: imported where its loop runs

    split = link_split.load(data.path)
    graph = Data(x=torch.from_numpy(data.features), edge_index=torch.from_numpy(split.edge_index),
                 num_nodes=data.num_nodes)
    neg_mode = s.neg_mode
    loader = LinkNeighborLoader(graph, num_neighbors=list(s.fanout),
                                edge_label_index=torch.from_numpy(np.ascontiguousarray(split.train_pos.T)),
                                neg_sampling=NegativeSampling(neg_mode, amount=s.neg_ratio),
                                batch_size=s.batch_size, shuffle=True, num_workers=s.num_workers,
                                persistent_workers=s.num_workers > 0, pin_memory=bool(s.pin_memory))
    if s.exclusion == "reverse":  # the seed edges and their reverses, dropped after sampling
        from bench.backends.pyg_link import ExcludeSeedEdges  # each stack has one framework: imported where its loop runs

        sampler = loader.link_sampler
        sampler.sample_from_edges = ExcludeSeedEdges(sampler.sample_from_edges, split.num_nodes, neg_mode)
    if s.model == "none":
        return loader_only(loader)
    device, to_device = on_device(s)
    model = shared_model(PygNodePipeline.conv_factory(), data, s).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=s.lr, weight_decay=s.weight_decay)
    layers = len(s.fanout)

    def epoch():
        model.train()
        for batch in loader:
            batch = to_device(batch)
            optimizer.zero_grad()
            if neg_mode == "triplet":  # each positive's source against its `amount` negative destinations
                neg_dst = batch.dst_neg_index.reshape(len(batch.src_index), -1)
                src = torch.cat([batch.src_index, batch.src_index.repeat_interleave(neg_dst.shape[1])])
                dst = torch.cat([batch.dst_pos_index, neg_dst.reshape(-1)])
                label = torch.cat([torch.ones(len(batch.src_index), device=device),
                                   torch.zeros(neg_dst.numel(), device=device)])
            else:  # binary, as graph_sage_unsup.py: edge_label_index and edge_label
                src, dst = batch.edge_label_index
                label = batch.edge_label
            pred = model(batch.x, [batch.edge_index] * layers, src, dst)
            F.binary_cross_entropy_with_logits(pred, label).backward()
            optimizer.step()

    return epoch


def graphbolt_link_loop(data, s):
    """DGL 2.1's GraphBolt link_prediction.py, its CPU storage path, on the CPU or (cpu-cuda) copy_to(device)."""
    import dgl.graphbolt as gb

    from bench.backends.dgl_graphbolt import Pipeline  # each stack has one framework: imported where its loop runs

    split = link_split.load(data.path)
    # the training graph as OnDiskDataset builds it: int32 where the sizes allow (the split's copies)
    graph = gb.fused_csc_sampling_graph(torch.from_numpy(np.array(split.graphbolt_indptr)),
                                        torch.from_numpy(np.array(split.graphbolt_indices)))
    features = gb.BasicFeatureStore({("node", None, "feat"): gb.TorchBasedFeature(torch.from_numpy(data.features))})
    pairs = np.ascontiguousarray(split.train_pos).astype(str(graph.indices.dtype).removeprefix("torch."))
    itemset = gb.ItemSet(torch.from_numpy(pairs), names="node_pairs")
    pipe = gb.ItemSampler(itemset, batch_size=s.batch_size, shuffle=True)
    pipe = pipe.sample_uniform_negative(graph, s.neg_ratio)
    pipe = pipe.sample_neighbor(graph, list(reversed(s.fanout)))  # GraphBolt: input layer first
    if s.exclusion == "reverse":
        pipe = pipe.transform(partial(gb.exclude_seed_edges, include_reverse_edges=True))
    pipe, blocks = layer_edges_of(pipe, s)
    pipe = pipe.fetch_feature(features, node_feature_keys=["feat"])
    device, _ = on_device(s)
    pipe = pipe.copy_to(device)
    loader = gb.DataLoader(pipe, num_workers=s.num_workers)
    if s.model == "none":
        return loader_only(loader)
    model = shared_model(Pipeline.conv_factory(), data, s).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=s.lr, weight_decay=s.weight_decay)

    def epoch():
        model.train()
        for minibatch in loader:
            (src, dst), labels = minibatch.node_pairs_with_labels
            logits = model(minibatch.node_features["feat"], blocks(minibatch), src, dst)
            loss = F.binary_cross_entropy_with_logits(logits, labels.float())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

    return epoch
