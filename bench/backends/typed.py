"""What the typed-node backends (pyg-hetero, dgl-graphbolt-hetero) share: the one model both train
(`model: rgcn | rgat`, around each framework's per-relation layers, summed across relations) and
the shape of their typed work counts. rgcn: per relation the neighbours' mean through its own
weight, plus the destination's row through a self-loop weight (`rgcn_layer`); rgat: per relation a
GAT layer with `heads` heads, no self-loops. A featureless node type gets a learnable Embedding, as
DGL's GraphBolt R-GCN example does (PyG's downloads metapath2vec embeddings: not offline). Stack side.
"""

from __future__ import annotations

from itertools import zip_longest

from bench.backends.initialisation import same_start
from bench.settings import DROPOUT, CellSettings


def input_widths(data) -> dict[str, int]:
    """Each node type's input width: its features', or its embedding's (the target's feature width)."""
    width = int(data.meta["node_types"][data.target]["feature_dim"]) or 64
    return {t: int(info["feature_dim"]) or width for t, info in data.meta["node_types"].items()}


def typed_model(layer, data, settings: CellSettings, trim=None):
    """The shared typed model, model(x_dict, featureless types' node ids, [graph per layer]), from
    `layer(in_widths, out_width, heads, concat)`: one framework layer over every relation; `trim` as
    graphsage's (base.py: PyG's trim_to_layer, where the call passes `hops`)."""
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

        def forward(self, x_dict: dict, node_ids: dict, graphs: list, hops=None):
            x = dict(x_dict)
            for t, emb in self.embeddings.items():
                if t in node_ids:
                    x[t] = emb(node_ids[t].to(emb.weight.device).long())
            for i, (conv, graph) in enumerate(zip(self.layers, graphs)):
                if trim is not None and hops is not None:
                    x, graph = trim(i, x, graph, hops)
                x = conv(x, graph)
                if i < len(self.layers) - 1:
                    x = {t: F.dropout(F.relu(v), p=DROPOUT, training=self.training) for t, v in x.items()}
            return x[target]

    model = TypedGNN()
    same_start(model)
    return model


def rgcn_layer(relations, in_widths: dict, out_width: int, dst_rows):
    """R-GCN's layer around a framework's hetero conv `relations(x_dict, graph)`: adds each
    destination's own row (`dst_rows(x_dict, graph)`) through the self-loop weight and bias (one
    per node type only where the input widths differ)."""
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
    """A GAT head's width: hidden layers' heads share the width; the output layer's are each whole."""
    return out_width // heads if concat else out_width


def typed_counts(hop_nodes: dict[str, list[int]], hop_edges: dict[str, list[int]]) -> tuple[list[int], list[int], dict]:
    """(nodes per hop, edges per hop: totals over types, the typed breakdown) for a BatchWork."""
    nodes, edges = ([sum(h) for h in zip_longest(*d.values(), fillvalue=0)] for d in (hop_nodes, hop_edges))
    return nodes, edges, {"hop_nodes": hop_nodes, "hop_edges": hop_edges}
