"""One set of weights in both frameworks' models: each parameter of the shared models by PyG's name
and by DGL's, read both ways (tests/test_parity.py). Stack side, either stack.

    PyG (SAGEConv, HeteroConv, GATConv)               DGL (SAGEConv, HeteroGraphConv, GraphConv, GATConv)
    <layer>.lin_l.weight  (neighbours' mean)          <layer>.conv.fc_neigh.weight
    <layer>.lin_l.bias                                <layer>.conv.fc_self.bias (DGL keeps the bias there)
    <layer>.lin_r.weight  (the root)                  <layer>.conv.fc_self.weight
    R-GCN: <l>.relations.conv.convs.<s___r___d>.lin_l.weight   <l>.relations.conv.mods.r.lin.weight
    R-GAT: <l>.conv.convs.<s___r___d>.att_src | att_dst        <l>.conv.mods.r.conv.attn_l | attn_r
           .lin_src.weight | .lin_dst.weight                   .conv.fc_src.weight | .conv.fc_dst.weight
           .bias                                               .conv.bias (hidden), .bias (output layer)
    anything else (embeddings, R-GCN's self-loop, the link decoder's MLP): the same name
"""

from __future__ import annotations

import re

_RELATION = r"(?P<pre>.*)\.convs\.<[^>]*?___(?P<rel>[^>]*?)___[^>]*>\."
# (PyG's name, DGL's candidates): the first rule whose pattern matches (shapes are the same on both sides)
RULES = [
    (_RELATION + r"lin_l\.weight$", [r"\g<pre>.mods.\g<rel>.lin.weight"]),
    (_RELATION + r"att_src$", [r"\g<pre>.mods.\g<rel>.conv.attn_l"]),
    (_RELATION + r"att_dst$", [r"\g<pre>.mods.\g<rel>.conv.attn_r"]),
    (_RELATION + r"lin_(?P<end>src|dst)\.weight$", [r"\g<pre>.mods.\g<rel>.conv.fc_\g<end>.weight"]),
    (_RELATION + r"bias$", [r"\g<pre>.mods.\g<rel>.conv.bias", r"\g<pre>.mods.\g<rel>.bias"]),
    (r"(?P<pre>.*)\.lin_l\.weight$", [r"\g<pre>.conv.fc_neigh.weight"]),
    (r"(?P<pre>.*)\.lin_l\.bias$", [r"\g<pre>.conv.fc_self.bias"]),
    (r"(?P<pre>.*)\.lin_r\.weight$", [r"\g<pre>.conv.fc_self.weight"]),
]


def dgl_name(pyg_name: str, dgl_names) -> str:
    """DGL's name of PyG's parameter `pyg_name` among `dgl_names` (KeyError naming it where absent)."""
    for pattern, candidates in RULES:
        if match := re.match(pattern, pyg_name):
            names = [match.expand(c) for c in candidates]
            if found := [name for name in names if name in dgl_names]:
                return found[0]
            raise KeyError(f"{pyg_name}: DGL's model has none of {names}")
    if pyg_name in dgl_names:
        return pyg_name
    raise KeyError(f"{pyg_name}: DGL's model has no parameter of that name")


def to_dgl(pyg_tensors: dict, dgl_names) -> dict:
    """PyG-named tensors (a state dict) under DGL's names."""
    return {dgl_name(name, dgl_names): tensor for name, tensor in pyg_tensors.items()}


def to_pyg(dgl_tensors: dict, pyg_names) -> dict:
    """DGL-named tensors (parameters, gradients) under PyG's names `pyg_names`."""
    return {name: dgl_tensors[dgl_name(name, dgl_tensors)] for name in pyg_names}
