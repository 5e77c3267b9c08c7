"""What the typed-node backends (pyg-hetero, dgl-graphbolt-hetero) share: the one model both train
and the shape of their typed work counts.

The model (`model: rgcn | rgat`), built around a framework's own per-relation layers:
    rgcn   R-GCN (Schlichtkrull et al.; PyG's RGCNConv, DGL's RelGraphConv and its typed GraphBolt
           example's RelGraphConvLayer): per relation the mean of the destination's neighbours
           through the relation's own weight, summed across relations (PyG's
           HeteroConv(SAGEConv(root_weight=False, bias=False), "sum"), DGL's HeteroGraphConv of
           GraphConv(norm="right", weight=False) through a Linear, "sum"), plus the destination's own
           row through one self-loop weight with the layer's one bias (`rgcn_layer`; one per node
           type only where the types' input widths differ, which one matrix cannot take). Before
           issue 49 `rgcn` was a per-relation GraphSAGE (a root weight and a bias per relation)
    rgat   per relation a GAT layer with `heads` heads, no self-loops, summed across relations;
           hidden layers concatenate their heads (hidden / heads each), the output layer averages
           them
len(fanout) layers, `hidden` wide, ReLU and dropout between them, logits on the target type.
One initialisation on both sides (base.same_start).
A node type without features gets a learnable embedding as wide as the target's features (DGL's
typed example does this; PyG's downloads metapath2vec embeddings, which an offline benchmark
cannot): a dense torch.nn.Embedding trained by the same Adam, so it counts in the model's
parameters and memory on both sides. The one module on both sides, so initialised (N(0, 1)) and
optimised (dense Adam: rows a batch does not read still move by their Adam moments) the same way;
DGL's GraphBolt R-GCN example (examples/sampling/graphbolt/rgcn/hetero_rgcn.py) does the same, a
dense dgl.nn.HeteroEmbedding of torch Embeddings in the model's Adam, not sparse embeddings.
Plain Python and torch: imported inside the stacks only.
"""

from __future__ import annotations

from bench.backends.initialisation import same_start
from bench.settings import DROPOUT, CellSettings


def embedding_width(data) -> int:
    """The width a featureless type's embedding has: the target's feature width."""
    return int(data.meta["node_types"][data.target]["feature_dim"]) or 64


def input_widths(data) -> dict[str, int]:
    """Each node type's input width: its features', or its embedding's."""
    width = embedding_width(data)
    return {t: int(info["feature_dim"]) or width for t, info in data.meta["node_types"].items()}


def typed_model(layer, data, settings: CellSettings):
    """The shared typed model. `layer(in_widths, out_width, heads, concat)` makes one framework
    layer over every relation, called as layer(x_dict, graph) -> {destination type: rows}; the
    model is called as model(x_dict, node_ids, [graph per layer]): `x_dict` the fetched features,
    `node_ids` each featureless type's sampled ids (its embedding rows)."""
    import torch
    import torch.nn.functional as F

    kind, hidden, layers = settings.model, settings.hidden, len(settings.fanout)
    heads = settings.heads if kind == "rgat" else 1
    widths = input_widths(data)
    featureless = [t for t, info in data.meta["node_types"].items() if not info["feature_dim"]]
    target, classes = data.target, data.num_classes

    class TypedGNN(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embeddings = torch.nn.ModuleDict(
                {t: torch.nn.Embedding(data.counts[t], widths[t]) for t in featureless})
            dims = [widths] + [dict.fromkeys(widths, hidden)] * (layers - 1)
            self.layers = torch.nn.ModuleList(
                layer(dims[i], hidden if i < layers - 1 else classes, heads, i < layers - 1)
                for i in range(layers))

        def forward(self, x_dict: dict, node_ids: dict, graphs: list):
            x = dict(x_dict)
            for t, emb in self.embeddings.items():
                if t in node_ids:
                    x[t] = emb(node_ids[t].to(emb.weight.device).long())
            for i, (conv, graph) in enumerate(zip(self.layers, graphs)):
                x = conv(x, graph)
                if i < len(self.layers) - 1:
                    x = {t: F.dropout(F.relu(v), p=DROPOUT, training=self.training) for t, v in x.items()}
            return x[target]

    model = TypedGNN()
    same_start(model)
    return model


def rgcn_layer(relations, in_widths: dict, out_width: int, dst_rows):
    """R-GCN's layer around a framework's hetero conv: `relations(x_dict, graph)` -> {destination
    type: the relations' mean messages through their own weights, summed}; `dst_rows(x_dict,
    graph)` -> {type: its destination nodes' own rows}. Adds each destination's own row through one
    self-loop weight and the layer's bias (a self-loop weight per type where the input widths
    differ). A type without messages (no relation into it sampled an edge) keeps its own term."""
    import torch

    widths = set(in_widths.values())

    class RGCNLayer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.relations = relations
            self.loop = (torch.nn.Linear(widths.pop(), out_width) if len(widths) == 1 else
                         torch.nn.ModuleDict({t: torch.nn.Linear(w, out_width) for t, w in in_widths.items()}))

        def forward(self, x_dict: dict, graph):
            out = self.relations(x_dict, graph)
            for t, rows in dst_rows(x_dict, graph).items():
                own = (self.loop[t] if isinstance(self.loop, torch.nn.ModuleDict) else self.loop)(rows)
                out[t] = out[t] + own if t in out else own
            return out

    return RGCNLayer()


def per_head(out_width: int, heads: int, concat: bool) -> int:
    """A GAT head's width: hidden layers share the width among their heads (concatenated); the
    output layer's heads are each as wide as the output (averaged)."""
    return out_width // heads if concat else out_width


def typed_counts(hop_nodes: dict[str, list[int]], hop_edges: dict[str, list[int]]) -> tuple[list[int], list[int], dict]:
    """Per-type and per-relation counts as a Work row takes them: the totals over types per hop
    (the plain work lists, compared as for untyped cells) and the typed breakdown."""
    hops_n = max((len(v) for v in hop_nodes.values()), default=0)
    hops_e = max((len(v) for v in hop_edges.values()), default=0)
    nodes = [sum(v[i] for v in hop_nodes.values() if i < len(v)) for i in range(hops_n)]
    edges = [sum(v[i] for v in hop_edges.values() if i < len(v)) for i in range(hops_e)]
    return nodes, edges, {"hop_nodes": hop_nodes, "hop_edges": hop_edges}
