"""PyG's trim_to_layer (hierarchical neighbourhood sampling) in pyg-neighbor and pyg-hetero: which
cells it makes, and that it changes the work, not the model (the seeds' outputs the same, in the pyg
stack). Kept in `make test` (tests/test_stages.py, which runs trimmed cells, is nightly)."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from bench import stacks
from bench.run import suite
from tests.conftest import REPO, require_stacks

TINY = "rmat-s9"


def _in_pyg_stack(code: str) -> str:
    """`code` run by the pyg stack's Python with this checkout importable: its last line of output."""
    require_stacks("pyg")
    out = subprocess.run([str(stacks.get("pyg").python), "-c", code], cwd=REPO, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.splitlines()[-1]


def test_trim_to_layer_is_a_pyg_neighbor_setting_with_a_model(write_suite):
    base = f"""
name: t
datasets: {{{TINY}: {{source: synthetic, params: {{scale: 9}}}}}}
backends: [pyg-neighbor, dgl-graphbolt, feature-gather]
"""
    plain, _ = suite.load(write_suite(base))
    assert all(c.settings.trim_to_layer is False and "trim" not in c.id for c in suite.expand(plain))
    swept, _ = suite.load(write_suite(base + "settings: {trim_to_layer: [false, true], model: [sage, none]}\n",
                                      "swept.yaml"))
    trimmed = [c.id for c in suite.expand(swept) if c.settings.trim_to_layer]
    assert trimmed == [f"pyg-neighbor/{TINY}/mode=cpu-cpu/workers=0/ws=1/model=sage/trim_to_layer=True"]
    untrimmed = [c.id for c in suite.expand(swept) if not c.settings.trim_to_layer]
    assert f"dgl-graphbolt/{TINY}/mode=cpu-cpu/workers=0/ws=1/model=sage" in untrimmed  # no trim in its id
    with pytest.raises(suite.SuiteError, match=r"settings\.trim_to_layer"):
        suite.load(write_suite(base + "settings: {trim_to_layer: 1}\n", "bad.yaml"))
    with pytest.raises(suite.SuiteError, match="zero cells"):
        suite.load(write_suite(base.replace(", dgl-graphbolt, feature-gather", "").replace("pyg-neighbor", "dgl-graphbolt")
                               + "settings: {trim_to_layer: true}\n", "dgl.yaml"))


TRIM_CHECK = """
import json, torch
from torch_geometric.data import Data
from torch_geometric.loader import NeighborLoader
from torch_geometric.nn import SAGEConv
from bench.backends.base import graphsage
from bench.backends.pyg_node import HopCounts, hops_of, sampled_per_hop, trim_layer

torch.manual_seed(0)
data = Data(x=torch.randn(400, 8), edge_index=torch.randint(0, 400, (2, 3200)), num_nodes=400)
loader = NeighborLoader(data, num_neighbors=[5, 3], batch_size=32, input_nodes=torch.arange(100),
                        transform=HopCounts(2))
model = graphsage(lambda a, b: SAGEConv(a, b, aggr="mean"), 8, 16, 4, 2, trim=trim_layer).eval()
same, hops = [], []
for batch in loader:
    with torch.no_grad():
        whole = model(batch.x, [batch.edge_index] * 2)[:batch.batch_size]
        trimmed = model(batch.x, [batch.edge_index] * 2, hops=hops_of(batch, 2))[:batch.batch_size]
    same.append(bool(torch.allclose(whole, trimmed, atol=1e-5)))
    hops.append([list(hops_of(batch, 2)), list(sampled_per_hop(batch, 2, batch.num_nodes)), batch.num_nodes,
                 batch.edge_index.size(1)])
print(json.dumps({"same": same, "hops": hops}))
"""


def test_trim_to_layer_gives_the_seeds_the_same_outputs():
    """PyG's remedy changes the work, not the model: trimmed and untrimmed forwards agree at the
    seeds, on the hop counts HopCounts reads off torch-sparse's batches (or pyg-lib reports)."""
    got = json.loads(_in_pyg_stack(TRIM_CHECK))
    assert len(got["same"]) == 4 and all(got["same"])
    for (nodes, edges), counted, num_nodes, num_edges in got["hops"]:
        assert [nodes, edges] == counted and sum(nodes) == num_nodes and sum(edges) == num_edges


TYPED_TRIM_CHECK = """
import json, torch
from types import SimpleNamespace
from torch_geometric.data import HeteroData
from torch_geometric.loader import NeighborLoader
from bench.backends.pyg_hetero import hetero_layer, typed_hops
from bench.backends.pyg_node import trim_layer
from bench.backends.typed import typed_model

torch.manual_seed(0)
graph = HeteroData()
graph["paper"].x, graph["author"].x = torch.randn(300, 8), torch.randn(200, 8)
relations = [("paper", "cites", "paper"), ("author", "writes", "paper"), ("paper", "rev_writes", "author")]
writes = torch.stack([torch.randint(0, 200, (1200,)), torch.randint(0, 300, (1200,))])
for relation, edges in zip(relations, [torch.randint(0, 300, (2, 1500)), writes, writes.flip(0)]):
    graph[relation].edge_index = edges
data = SimpleNamespace(meta={"node_types": {"paper": {"feature_dim": 8}, "author": {"feature_dim": 8}}},
                       target="paper", counts={"paper": 300, "author": 200}, num_classes=4)
same = {}
for kind in ("rgcn", "rgat"):
    settings = SimpleNamespace(model=kind, hidden=16, fanout=[5, 3], heads=2)
    calls = []  # the model trims where it is given hops, and trimming drops rows at layer 1

    def trim(i, x, graph, hops):
        kept = trim_layer(i, x, graph, hops)
        calls.append(sum(v.size(0) for v in kept[0].values()) < sum(v.size(0) for v in x.values()))
        return kept
    model = typed_model(hetero_layer(kind, relations), data, settings, trim=trim).eval()
    seeds = ("paper", torch.arange(96))
    loader = NeighborLoader(graph, num_neighbors=[5, 3], batch_size=32, input_nodes=seeds)
    for batch in loader:
        x, graphs = {t: batch[t].x for t in batch.node_types}, [batch.edge_index_dict] * 2
        with torch.no_grad():
            whole = model(x, {}, graphs)[:32]
            trimmed = model(x, {}, graphs, hops=typed_hops(batch, "paper", 2))[:32]
        same.setdefault(kind, []).append(bool(torch.allclose(whole, trimmed, atol=1e-5)))
    same[kind + " smaller"] = calls
print(json.dumps(same))
"""


def test_typed_trim_to_layer_gives_the_seeds_the_same_outputs():
    """pyg-hetero's trim_to_layer (PyG's hierarchical sampling on HeteroData): the shared R-GCN and
    R-GAT give the seeds the same outputs on the typed hop counts, trimmed or not."""
    same = json.loads(_in_pyg_stack(TYPED_TRIM_CHECK))
    assert all(len(same[kind]) == 3 and all(same[kind]) for kind in ("rgcn", "rgat")), same
    # each forward trims at layers 0 and 1; at layer 1 it drops the last hop's rows
    assert all(same[kind + " smaller"] == [False, True] * 3 for kind in ("rgcn", "rgat")), same


def test_trim_to_layer_makes_pyg_hetero_cells_with_a_model(write_suite):
    base = """
name: t
datasets: {typed: {source: typed-synthetic, params: {scale: 1}}}
backends: [pyg-hetero, dgl-graphbolt-hetero]
settings: {model: [rgcn, none], trim_to_layer: [false, true]}
"""
    swept, _ = suite.load(write_suite(base))
    trimmed = [c.id for c in suite.expand(swept) if c.settings.trim_to_layer]
    assert trimmed == ["pyg-hetero/typed/mode=cpu-cpu/workers=0/ws=1/model=rgcn/trim_to_layer=True"]
