"""Typed graphs end to end through the real stacks, the way users run a suite: PyG's HeteroData
NeighborLoader and GraphBolt's typed sampling graph train the same R-GCN on a small IGBH-shaped
graph; both record their work per node type and relation, and reach about the same accuracy, at
one rank and at two (DDP over gloo: every seed trained once per epoch, in as many steps, on both
sides)."""

from __future__ import annotations

import json

import pytest

from bench.publish import results, stages
from tests.conftest import require_stacks, run_suite_text

pytestmark = pytest.mark.stacks

SUITE = """
name: hetero-tiny
datasets:
  igbh-s2:
    source: typed-synthetic
    params: {scale: 2, feature_dim: 32, num_classes: 4, seed: 0}
backends: [pyg-hetero, dgl-graphbolt-hetero]
settings:
  mode: cpu-cpu
  batch_size: 128
  fanout: [5, 5]
  epochs: 4
  warmup_epochs: 2
  model: rgcn
  hidden: 32
  lr: 0.01
  work_budget: 1
  timeout: 300
  store: [memory, lmdb]
exclude:
  - {backend: pyg-hetero, store: lmdb}
include:
  - {store: memory, world_size: 2}
"""
TYPES = {"paper", "author", "institute", "fos"}
ACCURACY_TOLERANCE = 0.05  # validation accuracy points apart, same epochs, 400 validation papers


@pytest.fixture(scope="module")
def hetero_run(tmp_path_factory, cache_dir):
    require_stacks("pyg", "dgl")
    proc, out = run_suite_text(SUITE, tmp_path_factory.mktemp("hetero"), cache_dir, name="hetero-tiny")
    assert proc.returncode == 0, proc.stdout[-3000:]
    return out


def test_both_frameworks_record_typed_work(hetero_run):
    results.read(hetero_run)  # the result format, typed fields included
    benchmarks = {b["extra_info"]["cell_id"]: b["extra_info"] for b in json.loads(hetero_run.read_text())["benchmarks"]}
    assert set(benchmarks) == {f"{backend}/igbh-s2/mode=cpu-cpu/workers=0/ws={ws}/store={store}/model=rgcn"
                               for backend, store, ws in (("pyg-hetero", "memory", 1), ("dgl-graphbolt-hetero", "memory", 1),
                                                          ("dgl-graphbolt-hetero", "lmdb", 1), ("pyg-hetero", "memory", 2),
                                                          ("dgl-graphbolt-hetero", "memory", 2))}
    for cell_id, info in benchmarks.items():
        assert info["dataset"]["target"] == "paper" and set(info["dataset"]["node_types"]) == TYPES
        typed = info["work"]["typed"]
        assert set(typed["hop_nodes"]) == TYPES and len(typed["hop_edges"]) == 8, cell_id
        # the typed breakdown adds up to the plain per-hop lists
        for hop, total in enumerate(info["work"]["hop_nodes"]):
            assert sum(v[hop] for v in typed["hop_nodes"].values()) == pytest.approx(total), cell_id
        for hop, total in enumerate(info["work"]["hop_edges"]):
            assert sum(v[hop] for v in typed["hop_edges"].values()) == pytest.approx(total), cell_id
        assert typed["hop_nodes"]["paper"][0] == pytest.approx(info["work"]["hop_nodes"][0])  # seeds are papers
        assert all(v[0] == 0 for t, v in typed["hop_nodes"].items() if t != "paper")
        # the seeds' own hop reaches papers through cites and the reverses of written_by and topic
        assert typed["hop_edges"]["fos:rev_topic:paper"][0] > 0 and typed["hop_edges"]["paper:topic:fos"][0] == 0
        assert info["work"]["per_seed"]["typed"]["hop_edges"]["paper:cites:paper"][0] <= 5 + 1e-9  # fanout 5
        assert info["model"]["name"] == "rgcn" and info["model"]["embedding_parameters"] == 0
        assert 0.25 < info["val_acc"] <= 1, cell_id  # above chance (4 classes)
    pyg = benchmarks["pyg-hetero/igbh-s2/mode=cpu-cpu/workers=0/ws=1/store=memory/model=rgcn"]
    dgl = benchmarks["dgl-graphbolt-hetero/igbh-s2/mode=cpu-cpu/workers=0/ws=1/store=memory/model=rgcn"]
    assert "typed: " in pyg["sampler"] and dgl["sampler"].startswith("graphbolt")
    assert pyg["model"]["parameters"] == dgl["model"]["parameters"]  # the same model on both sides
    # from one initialisation, GraphBolt's layers over PyG's edges (same_layer_edges, the default)
    assert pyg["model"]["init"] == dgl["model"]["init"] and pyg["model"]["same_layer_edges"]
    assert dgl["settings"]["same_layer_edges"] is True and dgl["model"]["same_layer_edges"] is True
    # the first hop samples the seeds' neighbours the same way in both frameworks: equal per seed
    for relation, values in pyg["work"]["per_seed"]["typed"]["hop_edges"].items():
        theirs = dgl["work"]["per_seed"]["typed"]["hop_edges"][relation][0]
        assert values[0] == pytest.approx(theirs, rel=0.1, abs=0.05), relation


@pytest.mark.parametrize("world_size", [1, 2])
def test_validation_accuracies_agree_at_the_same_epochs(hetero_run, world_size):
    benchmarks = [b["extra_info"] for b in json.loads(hetero_run.read_text())["benchmarks"]]
    memory = [b for b in benchmarks if b["settings"]["store"] == "memory" and b["settings"]["world_size"] == world_size]
    assert {b["backend"] for b in memory} == {"pyg-hetero", "dgl-graphbolt-hetero"}
    assert all(b["settings"]["epochs"] == 4 and b["settings"]["warmup_epochs"] == 2 for b in memory)
    pyg, dgl = sorted(memory, key=lambda b: b["backend"] != "pyg-hetero")
    # the same work per epoch: every training seed once (PyG: each rank a seeded half; GraphBolt's
    # DistributedItemSampler: each rank a run of whole batches, dropping none here), in as many steps
    num_train = pyg["dataset"]["num_train"]
    assert pyg["seeds_per_epoch"] == dgl["seeds_per_epoch"] == num_train
    assert pyg["batches_per_epoch"] == dgl["batches_per_epoch"] == -(-num_train // (128 * world_size))
    assert abs(pyg["val_acc"] - dgl["val_acc"]) <= ACCURACY_TOLERANCE, (pyg["val_acc"], dgl["val_acc"])


def test_the_pages_show_the_typed_work(hetero_run):
    typed = [c for c in results.read(hetero_run).cells if c.measured]
    assert all(stages.typed_work(c) for c in typed)
    from bench.publish import columns

    shown = [c.header for c in columns.markdown_columns(typed, ["all"])]
    assert "model" in shown and "nodes / batch by type" in shown
    column = next(c for c in columns.CELL_COLUMNS if c.header == "nodes / batch by type")
    assert all(t in column.text(typed[0]) for t in TYPES - {"institute"})
