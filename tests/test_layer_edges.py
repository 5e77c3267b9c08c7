"""`same_layer_edges` (bench/backends/layer_edges.py) on GraphBolt's real sampler, in the dgl stack:
the datapipe only notes where each layer's newly reached nodes begin (a few ints cross from a loader
worker), the rewrite runs where the model's blocks are made, gives each node reached a hop earlier
the next layer's in-edges (the edges PyG's layers compute over; tests/test_parity.py holds the model
to PyG's on them), and reads no tensor's value: the blocks take no more host reads than GraphBolt's
own minibatch.blocks, and the rewrite runs on meta tensors, which have no values to read (issue 61:
the rewrite read one value per layer, a device sync in the CUDA modes, and its tensors crossed the
worker processes)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bench import stacks
from tests.conftest import require_stacks

pytestmark = pytest.mark.stacks

REPO = Path(__file__).resolve().parents[1]

CHECK = r"""
import os, sys
os.environ["DGLBACKEND"] = "pytorch"
import dgl.graphbolt as gb
import numpy as np
import torch
from bench.backends import layer_edges

rng = np.random.default_rng(0)
n = 300
src, dst = rng.integers(0, n, 3000), rng.integers(0, n, 3000)
order = np.lexsort((src, dst))
indptr = np.concatenate([[0], np.cumsum(np.bincount(dst, minlength=n))])
graph = gb.fused_csc_sampling_graph(torch.from_numpy(indptr), torch.from_numpy(src[order]))
items = gb.ItemSet(torch.arange(0, n, 3), names="seed_nodes")
pipe = gb.ItemSampler(items, batch_size=16).sample_neighbor(graph, [4, 6, 10])  # input layer first
pipe = pipe.transform(layer_edges.attach).copy_to(torch.device("cpu"))
batches = list(gb.DataLoader(pipe, num_workers=int(sys.argv[1])))


def in_edges(rows, cols, indptr, indices, count):
    # each of the first `count` destination nodes: the sorted global ids of its sources
    return [sorted(rows[indices[indptr[j]:indptr[j + 1]]].tolist()) for j in range(count)]


assert all(set(type(v) for v in getattr(mb, layer_edges.STARTS).values()) == {int} for mb in batches)
checked = 0
for mb in batches:
    layers = mb.sampled_subgraphs
    rewritten = [csc[None] for csc in layer_edges.first_hop_csc(mb)]
    for i, sg in enumerate(layers):
        indptr_i, indices_i = rewritten[i]
        rows, cols = sg.original_row_node_ids, sg.original_column_node_ids
        assert indptr_i.numel() == cols.numel() + 1 and int(indptr_i[-1]) == indices_i.numel()
        if i + 1 < len(layers):  # the nodes reached a hop earlier: the next (rewritten) layer's in-edges
            inner = layers[i + 1]
            reached = inner.original_column_node_ids.numel()
            assert torch.equal(cols[:reached], inner.original_column_node_ids)
            mine = in_edges(rows, cols, indptr_i, indices_i, reached)
            theirs = in_edges(inner.original_row_node_ids, None, *rewritten[i + 1], reached)
            assert mine == theirs
            # the nodes first reached here keep what GraphBolt sampled for them
            own = sg.sampled_csc
            tail = slice(int(own.indptr[reached]), None)
            assert torch.equal(indices_i[int(indptr_i[reached]):], own.indices[tail])
            checked += reached


reads = []
guarded = ("item", "tolist", "__int__", "__index__", "__bool__", "__float__")
saved = {name: getattr(torch.Tensor, name) for name in guarded}


def counted(name):
    def read(self, *args, **kwargs):
        reads.append(name)
        return saved[name](self, *args, **kwargs)
    return read


def host_reads(call) -> int:
    reads.clear()
    for name in guarded:
        setattr(torch.Tensor, name, counted(name))
    try:
        call()
    finally:
        for name, method in saved.items():
            setattr(torch.Tensor, name, method)
    return len(reads)


# DGL's create_block reads each relation's largest index on the host (its sanity check), for
# GraphBolt's own minibatch.blocks too: the blocks of PyG's edges, rewritten there, read no more
# the blocks' index dtype is GraphBolt's own (int32 where it fits: DGL's kernels run slower on int64);
# minibatch.blocks casts the sampled tensors in place, so ours are made first
assert [b.idtype for b in layer_edges.blocks(batches[1], True)] == [b.idtype for b in batches[1].blocks] == [torch.int32] * 3
mb = batches[0]
assert host_reads(lambda: layer_edges.attach(mb)) == 1  # the starts' one tolist, of host memory
ours = [host_reads(lambda: layer_edges.blocks(mb, True)) for mb in batches]
theirs = [host_reads(lambda: mb.blocks) for mb in batches]
assert ours == theirs, (ours, theirs)
assert sum(host_reads(lambda: layer_edges.layer_edge_counts(mb, True)) for mb in batches) == 0
blocks = layer_edges.blocks(batches[-1], True)
assert [b.num_dst_nodes() for b in blocks] == [sg.original_column_node_ids.numel() for sg in batches[-1].sampled_subgraphs]
assert [b.num_edges() for b in blocks] == layer_edges.layer_edge_counts(batches[-1], True)

# the rewrite on meta tensors (shapes, no values: any read of one raises), as on a device
# (GraphBolt's own classes check their indptr's last value: the same fields in plain objects)
from types import SimpleNamespace as fields
meta = fields(sampled_subgraphs=[fields(sampled_csc=fields(indptr=sg.sampled_csc.indptr.to("meta"),
                                                           indices=sg.sampled_csc.indices.to("meta")))
                                 for sg in batches[-1].sampled_subgraphs])
setattr(meta, layer_edges.STARTS, getattr(batches[-1], layer_edges.STARTS))
on_meta = layer_edges.first_hop_csc(meta)
assert [c[None][1].numel() for c in on_meta] == layer_edges.layer_edge_counts(batches[-1], True)
assert all(t.is_meta for c in on_meta for t in c[None])

# a batch trained on the CPU has no attach step: blocks reads its starts from the host tensors, the same
mb = batches[2]
noted = dict(getattr(mb, layer_edges.STARTS))
before = [(b.num_edges(), b.edges()) for b in layer_edges.blocks(mb, True)]
delattr(mb, layer_edges.STARTS)
after = [(b.num_edges(), b.edges()) for b in layer_edges.blocks(mb, True)]
assert getattr(mb, layer_edges.STARTS) == noted
assert all(n == m and all(torch.equal(x, y) for x, y in zip(e, f)) for (n, e), (m, f) in zip(before, after))
# and a batch elsewhere without it is refused, not read from its device
delattr(meta, layer_edges.STARTS)
try:
    layer_edges.first_hop_csc(meta)
except RuntimeError as error:
    assert "without `layer_edges.attach`" in str(error)
else:
    raise AssertionError("a meta (device) batch without attach was rewritten")
print("checked", checked)
"""


@pytest.mark.parametrize("workers", [0, 1])
def test_graphbolt_layers_take_the_edges_of_the_hop_that_first_reached_each_node(workers):
    """From a loader worker too (the attribute crosses the process boundary with the minibatch)."""
    require_stacks("dgl")
    proc = subprocess.run([str(stacks.get("dgl").python), "-c", CHECK, str(workers)], cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert int(proc.stdout.split()[-1]) > 0  # some node reached a hop earlier was checked
