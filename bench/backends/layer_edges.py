"""What each GraphBolt layer computes over: the `same_layer_edges` setting (GraphBolt backends and
plain loops). PyG's layers see a node's in-edges from the hop that first reached it; GraphBolt
samples every layer again, so in `minibatch.blocks` a seed's input layer averages fanout[-1] fresh
neighbours: with unequal fanouts, two different GNNs. `true`: every layer over the edges PyG's would
(`attach` in the datapipe, inside the `sample` stage; `blocks`); `false`: `minibatch.blocks`.
"""

from __future__ import annotations

import dgl
import torch

FIRST_HOP = "first_hop_csc"  # the attribute each sampled subgraph carries: its layer's (indptr, indices)


def first_hop(layers: list[tuple]) -> list[tuple]:
    """Each layer's (indptr, indices), input layer first, the in-edges of every destination the
    next layer also has replaced by the next layer's (rewritten first)."""
    layers = list(layers)
    for i in range(len(layers) - 2, -1, -1):  # from the seeds' layer inwards, each on its rewritten successor
        (indptr, indices), (inner_indptr, inner_indices) = layers[i], layers[i + 1]
        reached = inner_indptr.numel() - 1  # the destination nodes reached a hop earlier
        rest = indptr[reached:]
        layers[i] = (torch.cat([inner_indptr, rest[1:] - rest[0] + inner_indptr[-1]]),
                     torch.cat([inner_indices, indices[int(rest[0]):]]))  # one read, in the datapipe
    return layers


def first_hop_csc(subgraphs) -> list:
    """first_hop over GraphBolt's sampled subgraphs (a typed graph's per relation, {edge type: csc})."""
    cscs = [s.sampled_csc for s in subgraphs]
    if not isinstance(cscs[0], dict):
        return first_hop([(c.indptr, c.indices) for c in cscs])
    out = [dict() for _ in cscs]
    for etype in cscs[0]:  # GraphBolt gives every layer every edge type (fused_csc_sampling_graph)
        for i, csc in enumerate(first_hop([(c[etype].indptr, c[etype].indices) for c in cscs])):
            out[i][etype] = csc
    return out


def attach(minibatch):
    """The datapipe step of `same_layer_edges: true`: each sampled subgraph gets its FIRST_HOP CSC."""
    for subgraph, csc in zip(minibatch.sampled_subgraphs, first_hop_csc(minibatch.sampled_subgraphs)):
        setattr(subgraph, FIRST_HOP, csc)
    return minibatch


def blocks(minibatch, same: bool) -> list:
    """The model's DGL blocks: from the CSCs `attach` made (`same`), else minibatch.blocks."""
    if not same:
        return minibatch.blocks
    out = []
    for subgraph in minibatch.sampled_subgraphs:
        csc = getattr(subgraph, FIRST_HOP)
        rows, cols = subgraph.original_row_node_ids, subgraph.original_column_node_ids
        if isinstance(csc, dict):
            data = {tuple(etype.split(":")): _csc(*v) for etype, v in csc.items()}
            out.append(dgl.create_block(data, num_src_nodes={t: v.size(0) for t, v in rows.items()},
                                        num_dst_nodes={t: v.size(0) for t, v in cols.items()}))
        else:
            out.append(dgl.create_block(_csc(*csc), num_src_nodes=rows.size(0), num_dst_nodes=cols.size(0)))
    return out


def _csc(indptr, indices) -> tuple:
    """A DGL "csc" graph-data entry (one index dtype throughout, as DGL wants it)."""
    edge_ids = torch.arange(indices.size(0), dtype=indptr.dtype, device=indptr.device)
    return "csc", (indptr, indices.to(indptr.dtype), edge_ids)


def layer_edge_counts(minibatch, same: bool) -> list[int]:
    """The edges each layer computes over, input layer first (the work counts' layer_edges)."""
    counts = []
    for subgraph in minibatch.sampled_subgraphs:
        csc = getattr(subgraph, FIRST_HOP) if same else subgraph.sampled_csc
        cscs = csc.values() if isinstance(csc, dict) else [csc]
        counts.append(sum(int((c[1] if same else c.indices).numel()) for c in cscs))
    return counts
