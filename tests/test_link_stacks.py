"""The link task through the real stacks (PyG's LinkNeighborLoader, DGL 2.1's GraphBolt link
pipeline): a tiny link suite end to end, both frameworks' validation MRR at the same epochs and
exclusion, the leak named with exclusion none, and a planted leak (a pipeline that forgets its
exclusion) failing the cell with the leak named."""

from __future__ import annotations

import json

import pytest

from bench.backends.link import PLANT_LEAK_ENV
from bench.publish import results
from tests.conftest import require_stacks, run_suite_text

pytestmark = pytest.mark.stacks

DATASET = """
datasets:
  rmat-s11:
    source: synthetic
    params: {scale: 11, edge_factor: 8, feature_dim: 32, num_classes: 8}
"""
# suites/link.yaml's graph and training (fanout [10, 5], batch 512, 1 + 3 epochs). Validation MRR
# moves with the seed and, at one seed, from run to run (GraphBolt's sampling is not repeatable:
# results/link-seeds-cpu), so one seed's pair can be more than 0.02 apart without either pipeline
# being wrong (a load run here: 0.0209): the frameworks are compared by their means over seeds 0-2.
TINY_LINK = """
name: tiny-link
datasets:
  rmat-s12:
    source: synthetic
    params: {scale: 12, edge_factor: 8, feature_dim: 32, num_classes: 8}
backends: [pyg-link, dgl-graphbolt-link]
settings:
  exclusion: [none, reverse]
  neg_ratio: 1
  fanout: [10, 5]  # unequal: each layer computes over the same edges in both (same_layer_edges: bench/backends/layer_edges.py)
  batch_size: 512
  epochs: 3
  warmup_epochs: 1
  timeout: 600
include:
  - {exclusion: reverse, neg_ratio: [1, 5]}
  - {neg_ratio: 1, exclusion: [none, reverse], seed: [1, 2]}
"""
SEEDS = (0, 1, 2)
# the MRR both frameworks reach at the same epochs and exclusion, within this (issue 37)
MRR_WITHIN = 0.02


@pytest.fixture(scope="module")
def tiny_link(tmp_path_factory, cache_dir):
    require_stacks("pyg", "dgl")
    # 14 cells, about 13 s each on a quiet 2-core machine (results/link-seeds-cpu), several times that under load
    proc, out = run_suite_text(TINY_LINK, tmp_path_factory.mktemp("link"), cache_dir, name="tiny-link", timeout=2400)
    assert proc.returncode == 0, proc.stdout[-3000:]
    return {b["extra_info"]["cell_id"]: b["extra_info"] for b in json.loads(out.read_text())["benchmarks"]}, out


def test_both_frameworks_train_link_cells_with_the_full_contract(tiny_link):
    cells, out = tiny_link
    results.read(out)  # the contract, as the reader checks it
    assert {c.split("/")[0] for c in cells} == {"pyg-link", "dgl-graphbolt-link"}
    assert len(cells) == 6 + 8  # and seeds 1 and 2 of the neg_ratio 1 cells
    for info in cells.values():
        assert 0 < info["val_mrr"] <= 1 and 0 < info["test_mrr"] <= 1
        assert set(info["test_hits"]) == {"10", "50", "100"}
        assert info["test_hits"]["10"] <= info["test_hits"]["50"] <= info["test_hits"]["100"]
        assert info["link_split"]["eval_negatives"] == 100 and info["link_split"]["undirected"]
        assert any("not filtered" in note for note in info["link_notes"])
        per_seed = info["work"]["per_seed"]
        assert per_seed["negatives"] == info["settings"]["neg_ratio"]  # negatives per positive, as asked
        assert per_seed["hop_edges"][0] > 0
        assert info["seeds_per_s"] > 0  # positive seed edges per second


def test_exclusion_none_says_the_accuracy_includes_the_leak(tiny_link):
    cells, _ = tiny_link
    for cell_id, info in cells.items():
        leaks = info["leaks"]
        if info["settings"]["exclusion"] == "none":
            assert leaks["leaked_batches"] > 0, cell_id  # each batch's own seed edges are in its graph
            assert "includes the leak" in info["link_notes"][0]
        else:
            assert leaks["leaked_edges"] == 0 and leaks["batches"] > 0, cell_id


def test_both_frameworks_reach_the_same_validation_mrr(tiny_link):
    """Means over three seeds, at the same epochs and exclusion, within 0.02 (issue 37)."""
    cells, _ = tiny_link
    for exclusion in ("none", "reverse"):
        by_backend: dict[str, list[float]] = {}
        for info in cells.values():
            if info["settings"]["exclusion"] == exclusion and info["settings"]["neg_ratio"] == 1:
                by_backend.setdefault(info["backend"], []).append(info["val_mrr"])
        assert {b: len(v) for b, v in by_backend.items()} == {"pyg-link": len(SEEDS), "dgl-graphbolt-link": len(SEEDS)}
        means = {b: sum(v) / len(v) for b, v in by_backend.items()}
        assert abs(means["pyg-link"] - means["dgl-graphbolt-link"]) <= MRR_WITHIN, (exclusion, by_backend)
        assert min(min(v) for v in by_backend.values()) > 0.08  # learned: chance ranks a positive among 100 at about 0.05


def test_graphbolt_input_layer_computes_over_the_edges_pyg_sampled(tiny_link):
    """At fanout [10, 5] GraphBolt samples the seeds' second hop again; its input layer computes
    over their first hop's edges instead (same_layer_edges: bench/backends/layer_edges.py), as
    PyG's layers run on its one sampled subgraph: per seed edge, GraphBolt's input-layer edges are
    PyG's sampled edges (both hops), not GraphBolt's own second hop's, and its output layer's are
    the first hop's."""
    cells, _ = tiny_link
    for exclusion in ("none", "reverse"):
        work = {info["backend"]: info["work"]["per_seed"] for info in cells.values()
                if info["settings"]["exclusion"] == exclusion and info["settings"]["neg_ratio"] == 1
                and info["settings"]["seed"] == 0}
        pyg, graphbolt = work["pyg-link"], work["dgl-graphbolt-link"]
        assert graphbolt["layer_edges"][0] == pytest.approx(sum(pyg["hop_edges"]), rel=0.03), (exclusion, work)
        assert graphbolt["layer_edges"][0] > graphbolt["hop_edges"][1] * 1.1  # not the resampled second hop
        assert graphbolt["layer_edges"][1] == pytest.approx(pyg["hop_edges"][0], rel=0.03), (exclusion, work)


def test_a_pipeline_that_forgets_its_exclusion_fails_with_the_leak_named(tmp_path, cache_dir):
    require_stacks("pyg", "dgl")
    text = "name: planted-leak\n" + DATASET + """
backends: [pyg-link, dgl-graphbolt-link]
settings: {exclusion: reverse, fanout: [5, 5], batch_size: 256, epochs: 1, warmup_epochs: 0, timeout: 300}
"""
    proc, out = run_suite_text(text, tmp_path, cache_dir, name="planted-leak", env={PLANT_LEAK_ENV: "1"})
    unmeasured = {u["id"]: u for u in json.loads(out.read_text())["unmeasured"]}
    assert {i.split("/")[0] for i in unmeasured} == {"pyg-link", "dgl-graphbolt-link"}, proc.stdout[-3000:]
    for cell in unmeasured.values():
        assert cell["status"] == "failed"
        assert "SeedEdgeLeakError: seed-edge leak with exclusion reverse" in cell["reason"].splitlines()[0]
