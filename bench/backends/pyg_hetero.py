"""PyG on a typed graph: `NeighborLoader` over `HeteroData`, the shared R-GCN / R-GAT (typed.py)
from PyG's HeteroConv over SAGEConv (mean, no root weight, no bias) or GATConv per relation; one
fanout per hop for every relation. Ranks, modes and stores as pyg-neighbor's.
"""

from __future__ import annotations

import numpy as np
import torch
from torch_geometric.data import HeteroData
from torch_geometric.nn import GATConv, HeteroConv, SAGEConv

from bench.backends import base, stages
from bench.backends.pyg_node import (CscGraphStore, RowFeatureStore, SampledFromHub, neighbor_sampler_in_use,
                                     read_off_hops, trim_layer)
from bench.backends.typed import per_head, rgcn_layer, typed_counts, typed_model
from bench.stores import features_in_memory, open_store


def hetero_layer(kind: str, relations: list[tuple[str, str, str]]):
    """One PyG layer over every relation, summed (HeteroConv), for the shared typed model."""

    def make(in_widths: dict, out: int, heads: int, concat: bool):
        def conv(src: str, dst: str):
            pair = (in_widths[src], in_widths[dst])
            if kind == "rgat":
                return GATConv(pair, per_head(out, heads, concat), heads=heads, concat=concat, add_self_loops=False)
            return SAGEConv(pair, out, aggr="mean", root_weight=False, bias=False)  # R-GCN's W_r on the mean

        layer = _EdgesSecond(HeteroConv({r: conv(r[0], r[2]) for r in relations}, aggr="sum"))
        # PyG's layers compute every node they are given: each type's destination rows are all its rows
        return layer if kind == "rgat" else rgcn_layer(layer, in_widths, out, lambda x, _: x)

    return make


class _EdgesSecond(torch.nn.Module):
    """HeteroConv under `.conv`, so its parameters are named as DGL's layer's (weight_names.py)."""

    def __init__(self, conv):
        super().__init__()
        self.conv = conv

    def forward(self, x_dict, edge_index_dict):
        return self.conv(x_dict, edge_index_dict)


class Pipeline(base.TypedHooks, SampledFromHub, base.TrainingPipeline):
    hetero_layer = staticmethod(hetero_layer)
    index_dtype = {"indices": "int64", "indptr": "int64"}  # PyG's edge_index and the hub's CSC per relation

    def __init__(self, data, settings):
        self.target, self.relations = data.target, data.relations
        self.featureless = [t for t, x in data.features.items() if x is None]
        super().__init__(data, settings)

    @property
    def sampler(self) -> str:
        found = neighbor_sampler_in_use()
        if found.startswith("torch-sparse"):
            return found + "; typed: torch_sparse.hetero_neighbor_sample, per-hop counts read off the batch"
        return found + "; typed: hetero_neighbor_sample, per-hop counts reported by the sampler"

    def make_model(self, data):
        """The shared typed model; with `trim_to_layer` each layer on the hops it still needs (PyG's way)."""
        return typed_model(hetero_layer(self.settings.model, data.relations), data, self.settings,
                           trim=trim_layer if self.settings.trim_to_layer else None)

    def _graph(self, data, store: str):
        if not features_in_memory(store):
            graph = CscGraphStore()
            for r in data.relations:
                graph.put_csc(r, data.edge_index[r][0], data.csc_indptr[r], (data.counts[r[0]], data.counts[r[2]]))
            return RowFeatureStore(open_store(store, "typed-node", data), data.labels, data.target), graph
        return hetero_data(data)

    def forward(self, model, batch):
        x = {t: batch[t].x for t in batch.node_types if "x" in batch[t]}
        ids = {t: batch[t].n_id for t in self.featureless}
        size, layers = batch[self.target].batch_size, len(self.settings.fanout)
        hops = typed_hops(batch, self.target, layers) if self.settings.trim_to_layer else None
        out = model(x, ids, [batch.edge_index_dict] * layers, hops=hops)
        return out[:size], batch[self.target].y[:size]

    def count(self, batch) -> tuple[int, int]:
        return int(batch[self.target].batch_size), sum(int(batch[r].edge_index.size(1)) for r in batch.edge_types)

    def work(self, batch):
        hop_nodes, hop_edges = typed_hops(batch, self.target, len(self.settings.fanout))
        nodes, edges, typed = typed_counts(hop_nodes, {":".join(r): v for r, v in hop_edges.items()})
        xs = [batch[t].x for t in batch.node_types if "x" in batch[t]]
        return stages.subgraph_work(nodes, edges, sum(nodes), stages.tensor_bytes(xs), self.settings.model != "none",
                                    self.settings.trim_to_layer, typed=typed)


def typed_hops(batch, target: str, num_hops: int) -> tuple[dict[str, list[int]], dict[tuple, list[int]]]:
    """({node type: [seeds, nodes first reached at hop 1, ...]}, {relation: [edges of hop 1, ...]})
    of a HeteroData batch: pyg-lib's, or read off torch-sparse's (pyg_node.read_off_hops)."""
    types, relations = batch.node_types, batch.edge_types
    reported_n = {t: batch[t].get("num_sampled_nodes") for t in types}
    reported_e = {r: batch[r].get("num_sampled_edges") for r in relations}
    if all(v is not None for v in reported_n.values()) and all(v is not None for v in reported_e.values()):
        return ({t: [int(n) for n in v] for t, v in reported_n.items()},
                {r: [int(e) for e in v] for r, v in reported_e.items()})
    seeds = {t: int(batch[target].batch_size) if t == target else 0 for t in types}
    return read_off_hops({r: batch[r].edge_index.numpy() for r in relations}, seeds,
                         {t: int(batch[t].num_nodes) for t in types}, num_hops)


def hetero_data(data) -> HeteroData:
    """The typed hub's graph in memory as PyG's HeteroData (the plain loop reads it so too)."""
    hetero = HeteroData()
    for t, count in data.counts.items():
        if data.features[t] is not None:
            hetero[t].x = torch.from_numpy(data.features[t])
        hetero[t].num_nodes = count
    hetero[data.target].y = torch.from_numpy(np.asarray(data.labels))
    for r in data.relations:
        hetero[r].edge_index = torch.from_numpy(np.asarray(data.edge_index[r]))
    return hetero
