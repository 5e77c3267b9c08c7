"""What each GraphBolt layer computes over: the `same_layer_edges` setting (GraphBolt backends and
plain loops). PyG's layers see a node's in-edges from the hop that first reached it; GraphBolt
samples every layer again, so in `minibatch.blocks` a seed's input layer averages fanout[-1] fresh
neighbours: with unequal fanouts, two different GNNs. `true`: every layer over the edges PyG's would
(`blocks`, in the training process where the model's blocks are made: the `forward_backward` stage;
where the batch goes to a GPU, the datapipe's `attach` first notes where each layer's newly reached nodes
begin, on the CPU `blocks` reads that itself); `false`:
`minibatch.blocks`.
"""

from __future__ import annotations

import dgl
import torch

STARTS = "layer_edge_starts"  # on the minibatch: {(layer, edge type): indptr[reached]} (attach)


def first_hop(layers: list[tuple], starts: list[int]) -> list[tuple]:
    """Each layer's (indptr, indices), input layer first, the in-edges of every destination the
    next layer also has replaced by the next layer's (rewritten first); starts[i]: layer i's indptr
    at its first destination the next layer lacks, a host int (no value of a tensor read here)."""
    layers = list(layers)
    for i in range(len(layers) - 2, -1, -1):  # from the seeds' layer inwards, each on its rewritten successor
        (indptr, indices), (inner_indptr, inner_indices) = layers[i], layers[i + 1]
        reached, edges = inner_indptr.numel(), inner_indices.numel() + indices.numel() - starts[i]
        # written once, straight into the index dtype the block takes (no int64 copy converted after: at
        # 0 workers the rewrite runs in the training step, and each pass over the indices showed there)
        dtype = index_dtype(indptr.numel(), edges)
        new_indptr = torch.empty(indptr.numel(), dtype=dtype, device=indptr.device)
        new_indptr[:reached].copy_(inner_indptr)
        new_indptr[reached:].copy_(indptr[reached:]).add_(inner_indptr[-1] - starts[i])
        new_indices = torch.empty(edges, dtype=dtype, device=indices.device)
        new_indices[:inner_indices.numel()].copy_(inner_indices)
        new_indices[inner_indices.numel():].copy_(indices[starts[i]:])
        layers[i] = (new_indptr, new_indices)
    return layers


def index_dtype(indptr_size: int, edges: int) -> torch.dtype:
    """The smallest index dtype that holds a layer, as GraphBolt's minibatch.blocks picks it."""
    return torch.int32 if max(indptr_size - 2, edges) <= torch.iinfo(torch.int32).max else torch.int64


def _layers(subgraphs) -> list[dict]:
    """Each layer's {edge type: (indptr, indices)}, an untyped graph's under None."""
    return [{k: (c.indptr, c.indices) for k, c in (csc.items() if isinstance(csc, dict) else [(None, csc)])}
            for csc in (s.sampled_csc for s in subgraphs)]


def attach(minibatch):
    """The datapipe step of `same_layer_edges: true`, where GraphBolt samples: each layer's STARTS
    (a few ints: nothing else crosses from a loader worker), sampled on a GPU copied to the host
    without waiting (read by `blocks` once the features are fetched)."""
    layers = _layers(minibatch.sampled_subgraphs)
    keys = [(i, k) for i in range(len(layers) - 1) for k in layers[i]]
    at = [layers[i][k][0][layers[i + 1][k][0].numel() - 1] for i, k in keys]
    at = torch.stack(at) if at else torch.zeros(0, dtype=torch.int64)
    if at.device.type == "cpu":
        setattr(minibatch, STARTS, dict(zip(keys, at.tolist())))  # host memory's values: no device read
    else:
        done = torch.cuda.Event()
        setattr(minibatch, STARTS, (keys, at.to("cpu", non_blocking=True), done))  # into pinned memory
        done.record()
    return minibatch


def noting(pipe, trains_on_gpu: bool):
    """The datapipe with `attach` where `same_layer_edges` needs it: a batch that goes to a GPU (its starts
    noted on the host before it moves); a batch trained on the CPU has no such step (`starts` reads them)."""
    return pipe.transform(attach) if trains_on_gpu else pipe


def starts(minibatch) -> dict:
    """The minibatch's STARTS as host ints (a GPU's copy waited for: by now long done). A batch trained on
    the CPU has no `attach` step (a datapipe step costs more than reading a few ints of host memory here):
    read now."""
    found = getattr(minibatch, STARTS, None)
    if found is None:
        indptr = next(iter(_layers(minibatch.sampled_subgraphs)[0].values()))[0]  # a batch's tensors share a device
        if indptr.device.type != "cpu":
            raise RuntimeError("same_layer_edges: a batch on a GPU without `layer_edges.attach` in its datapipe "
                               "(its starts would be read from the device in the training step)")
        found = getattr(attach(minibatch), STARTS)
    if isinstance(found, tuple):
        keys, host, done = found
        done.synchronize()  # the copy's own event: not a wait for the device's later work
        setattr(minibatch, STARTS, found := dict(zip(keys, host.tolist())))
    return found


def first_hop_csc(minibatch) -> list[dict]:
    """first_hop per edge type ({edge type: (indptr, indices)} per layer, an untyped graph's under None)."""
    layers, at = _layers(minibatch.sampled_subgraphs), starts(minibatch)
    # GraphBolt gives every layer every edge type (fused_csc_sampling_graph)
    by_type = {t: first_hop([layer[t] for layer in layers], [at[i, t] for i in range(len(layers) - 1)])
               for t in layers[0]}
    return [{t: cscs[i] for t, cscs in by_type.items()} for i in range(len(layers))]


def blocks(minibatch, same: bool) -> list:
    """The model's DGL blocks: over first_hop_csc (`same`, the rewrite here), else minibatch.blocks."""
    if not same:
        return minibatch.blocks
    out = []
    for subgraph, csc in zip(minibatch.sampled_subgraphs, first_hop_csc(minibatch)):
        rows, cols = subgraph.original_row_node_ids, subgraph.original_column_node_ids
        if isinstance(rows, dict):
            data = {tuple(etype.split(":")): _csc(*v) for etype, v in csc.items()}
            out.append(dgl.create_block(data, num_src_nodes={t: v.size(0) for t, v in rows.items()},
                                        num_dst_nodes={t: v.size(0) for t, v in cols.items()}))
        else:
            out.append(dgl.create_block(_csc(*csc[None]), num_src_nodes=rows.size(0), num_dst_nodes=cols.size(0)))
    return out


def _csc(indptr, indices) -> tuple:
    """A DGL "csc" graph-data entry in the smallest index dtype that holds it, as minibatch.blocks makes its
    own: DGL's kernels on int64 indices cost GraphBolt about 1 % of its epoch (smoke graph, 0 workers)."""
    dtype = index_dtype(indptr.numel(), indices.numel())
    edge_ids = torch.arange(indices.size(0), dtype=dtype, device=indptr.device)
    return "csc", (indptr.to(dtype), indices.to(dtype), edge_ids)


def layer_edge_counts(minibatch, same: bool) -> list[int]:
    """The edges each layer computes over, input layer first (the work counts' layer_edges): with
    `same`, from STARTS and the tensors' sizes, nothing rewritten."""
    layers = _layers(minibatch.sampled_subgraphs)
    counts = [sum(indices.numel() for _, indices in layer.values()) for layer in layers]
    if same:
        at = starts(minibatch)
        for i in range(len(layers) - 2, -1, -1):  # the seeds' side's rewritten count, plus what follows starts[i]
            counts[i] = counts[i + 1] + sum(layers[i][k][1].numel() - at[i, k] for k in layers[i])
    return counts
