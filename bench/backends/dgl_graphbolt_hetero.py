"""DGL GraphBolt on a typed graph: a typed `FusedCSCSamplingGraph` from the hub's fused arrays,
seeds in an `ItemSetDict` on the target type, one fanout tensor per layer (a value per edge type);
the shared R-GCN / R-GAT (typed.py) from DGL's HeteroGraphConv over GraphConv (norm "right", no bias)
or GATConv. Modes, datapipe, clocks and stores are the untyped GraphBolt backend's, per node type.
"""

from __future__ import annotations

import dgl.graphbolt as gb
import torch
from dgl.nn import GATConv, GraphConv, HeteroGraphConv

from bench import modes
from bench.backends import base, dgl_graphbolt, layer_edges
from bench.backends.dgl_graphbolt import host_tensor, moved
from bench.backends.typed import per_head, rgcn_layer

GRAPH_ARRAYS = ("indptr", "indices", "node_type_offset", "type_per_edge")


class _GatRelation(torch.nn.Module):
    """DGL's GATConv as the shared model has it: the output layer averages its heads and adds one
    bias (as PyG's GATConv with concat=False)."""

    def __init__(self, pair: tuple[int, int], out: int, heads: int, concat: bool):
        super().__init__()
        self.conv = GATConv(pair, per_head(out, heads, concat), heads, allow_zero_in_degree=True, bias=concat)
        self.concat = concat
        self.bias = None if concat else torch.nn.Parameter(torch.zeros(out))

    def forward(self, graph, feats):
        h = self.conv(graph, feats)
        return h.flatten(1) if self.concat else h.mean(1) + self.bias


class _MeanThroughWeight(torch.nn.Module):
    """R-GCN's term of one relation: the neighbours' mean (GraphConv, norm "right") through the
    relation's weight, a Linear (out x in) as PyG keeps it, so base.same_start reads its fan-in alike."""

    def __init__(self, in_width: int, out: int):
        super().__init__()
        self.mean = GraphConv(in_width, in_width, norm="right", weight=False, bias=False, allow_zero_in_degree=True)
        self.lin = torch.nn.Linear(in_width, out, bias=False)

    def forward(self, graph, feats):
        return self.lin(self.mean(graph, feats))


def hetero_layer(kind: str, relations: list[tuple[str, str, str]]):
    """One DGL layer over every relation, summed (HeteroGraphConv), for the shared typed model."""

    def make(in_widths: dict, out: int, heads: int, concat: bool):
        def conv(src: str, dst: str):
            if kind == "rgat":
                return _GatRelation((in_widths[src], in_widths[dst]), out, heads, concat)
            return _MeanThroughWeight(in_widths[src], out)

        layer = dgl_graphbolt.FeaturesFirst(HeteroGraphConv({name: conv(src, dst) for src, name, dst in relations},
                                                            aggregate="sum"))
        return layer if kind == "rgat" else rgcn_layer(layer, in_widths, out, _dst_rows)

    return make


def _dst_rows(x_dict: dict, block) -> dict:
    """A block's destination nodes' own rows: the first num_dst_nodes of each type's."""
    return {t: v[:block.num_dst_nodes(t)] for t, v in x_dict.items()}


def typed_graph(data, mode: modes.Mode, device):
    """GraphBolt's typed sampling graph from the hub's arrays, where the mode keeps it."""
    arrays = [host_tensor(data.graphbolt[n], mode.pinned) for n in GRAPH_ARRAYS]  # in the signature's order
    ids = data.meta["graphbolt"]
    return moved(gb.fused_csc_sampling_graph(*arrays, ids["node_type_to_id"], ids["edge_type_to_id"]), mode, device)


class Pipeline(base.TypedHooks, dgl_graphbolt.Pipeline):
    hetero_layer = staticmethod(hetero_layer)
    full_layer = None  # no layer-wise full-neighbourhood inference for typed graphs (yet)

    def __init__(self, data, settings):
        self.target, self.relations = data.target, data.relations
        self.featureless = [t for t, x in data.features.items() if x is None]
        self.edge_types = list(data.meta["graphbolt"]["edge_type_to_id"])  # in id order (typed_hub)
        self.feature_keys = {t: ["feat"] for t, x in data.features.items() if x is not None}
        super().__init__(data, settings)

    def place(self, data):
        return (typed_graph(data, self.mode, self.device),
                dgl_graphbolt.feature_store(data, self.settings, self.mode, self.device, typed=True))

    def item_sets(self, data) -> dict:
        return {split: gb.ItemSetDict({self.target: items}) for split, items in super().item_sets(data).items()}

    def fanouts(self) -> list:
        """One tensor per layer, input layer first, the hop's fanout for every edge type."""
        return [torch.full((len(self.edge_types),), f, dtype=torch.int64) for f in reversed(self.settings.fanout)]

    def forward(self, model, minibatch):
        x = {t: minibatch.node_features[(t, "feat")] for t in self.feature_keys}
        ids = {t: minibatch.input_nodes[t] for t in self.featureless if t in minibatch.input_nodes}
        return model(x, ids, layer_edges.blocks(minibatch, self.same_layer_edges)), minibatch.labels[self.target]

    def work(self, minibatch):
        """dgl_graphbolt.block_work, with its breakdown per node type and relation."""
        blocks = minibatch.sampled_subgraphs[::-1]

        def size(d, t):
            return int(d[t].numel()) if t in d and d[t] is not None else 0

        typed = {"hop_nodes": {t: [size(minibatch.seed_nodes, t)] + [size(b.original_row_node_ids, t)
                                                                   - size(b.original_column_node_ids, t) for b in blocks]
                               for t in minibatch.input_nodes},
                 "hop_edges": {r: [int(b.sampled_csc[r].indices.numel()) if r in b.sampled_csc else 0 for b in blocks]
                               for r in self.edge_types}}
        return dgl_graphbolt.block_work(minibatch, int(minibatch.seed_nodes[self.target].numel()),
                                        self.settings.model != "none", self.same_layer_edges, typed=typed)
