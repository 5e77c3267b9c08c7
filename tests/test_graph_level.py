"""Graph-level datasets end to end: the molecules generator, the LMDB graph store, suite
validation of graph/node pairings, and pyg-graphs through `pytest suites/` on all three stores."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bench import datasets
from bench.run import suite
from bench.datasets import molecules
from bench.stores import StoreError, lmdb_graphs, prepare
from tests.conftest import REPO, require_stacks, run_suite_text

SMALL = {"count": 600, "min_nodes": 8, "max_nodes": 20, "feature_dim": 8, "num_classes": 4, "seed": 3}


def make(cache: Path, **params) -> Path:
    spec = datasets.parse_name("molecules:" + ",".join(f"{k}={v}" for k, v in {**SMALL, **params}.items()))
    return molecules.materialise(spec, cache)


@pytest.fixture
def dataset(tmp_path) -> Path:
    return make(tmp_path)


@pytest.fixture(autouse=True)
def _fresh_environments():
    yield
    lmdb_graphs.close_all()  # a test that rewrites a store must not meet a cached environment


# --- the generator -------------------------------------------------------------------------

def test_generator_is_deterministic_and_sized_as_asked(tmp_path):
    a, b = make(tmp_path / "a"), make(tmp_path / "b")
    da, db = molecules.load(a), molecules.load(b)
    for name in molecules.ARRAYS:
        assert np.array_equal(getattr(da, name), getattr(db, name)), name
    assert da.meta == db.meta
    sizes = np.diff(da.node_ptr)
    assert da.num_graphs == 600 and sizes.min() >= 8 and sizes.max() <= 20
    assert da.x.shape == (da.node_ptr[-1], 8) and da.x.dtype == np.float32
    assert da.edge_index.dtype == np.int64 and da.edge_index.shape == (2, da.edge_ptr[-1])
    assert set(np.unique(da.y)) == {0, 1, 2, 3}
    splits = np.concatenate([da.train_idx, da.val_idx, da.test_idx])
    assert np.array_equal(np.sort(splits), np.arange(600))
    card = da.card()
    assert card["num_graphs"] == 600 and card["num_nodes"] == int(sizes.sum())
    assert (card["num_train"], card["num_val"], card["num_test"]) == (480, 60, 60)
    expected = molecules.expected_stats(da.meta["params"])
    assert expected["num_nodes"] == card["num_nodes"] and expected["num_edges"] >= card["num_edges"]


def test_another_seed_gives_other_graphs(tmp_path):
    a, b = molecules.load(make(tmp_path, seed=3)), molecules.load(make(tmp_path, seed=4))
    assert not np.array_equal(a.node_ptr, b.node_ptr)


def test_graphs_are_undirected_local_and_free_of_duplicates(dataset):
    d = molecules.load(dataset)
    for g in range(0, d.num_graphs, 37):
        x, edges, _ = d.graph(g)
        n = x.shape[0]
        assert edges.min() >= 0 and edges.max() < n and not (edges[0] == edges[1]).any()
        pairs = set(map(tuple, edges.T.tolist()))
        assert len(pairs) == edges.shape[1]  # no duplicates
        assert pairs == {(b, a) for a, b in pairs}  # both directions
        assert edges.shape[1] >= 2 * (n - 1)  # connected: at least a spanning tree


def test_materialise_is_atomic(tmp_path, monkeypatch):
    spec = datasets.parse_name("molecules:count=50")

    def broken(*args, **kwargs):
        raise OSError("disk full (simulated)")
        yield  # noqa: unreachable - a generator like the real one

    monkeypatch.setattr(molecules, "_generate", broken)
    with pytest.raises(OSError, match="disk full"):
        molecules.materialise(spec, tmp_path)
    assert list((tmp_path / "datasets").iterdir()) == []  # neither the final name nor a temp dir


def test_names_and_bad_params():
    spec = datasets.parse_name("molecules:count=20000,max_nodes=30")
    assert spec["params"] == {**molecules.DEFAULTS, "count": 20000, "max_nodes": 30}
    assert datasets.tasks("molecules") == ("graph",) and "node" in datasets.tasks("synthetic")
    with pytest.raises(ValueError, match="unknown molecules parameter.*allowed: count"):
        datasets.parse_name("molecules:atoms=3")
    with pytest.raises(ValueError, match="not key=value"):
        datasets.parse_name("molecules:count")
    with pytest.raises(ValueError, match="min_nodes"):
        datasets.parse_name("molecules:min_nodes=30,max_nodes=10")


def test_datasets_info_command(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "bench.cli", "datasets", "info", "molecules:count=1000"],
                          capture_output=True, text=True, cwd=REPO, env={**os.environ, "GNNBENCH_CACHE": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    assert "molecules:count=1000" in proc.stdout and "1,000 graphs" in proc.stdout
    assert "pyg-graphs" in proc.stdout and "pyg-neighbor" not in proc.stdout  # only backends that take it


# --- the LMDB graph store ------------------------------------------------------------------

def test_store_reads_equal_the_source_bit_for_bit(dataset):
    path = prepare("lmdb", dataset, task="graph", say=lambda *a, **k: None)
    assert path == lmdb_graphs.store_dir(dataset)
    d = molecules.load(dataset)
    store = lmdb_graphs.LmdbGraphs(path, lmdb_graphs.fingerprint(dataset))
    assert len(store) == d.num_graphs
    ids = list(range(d.num_graphs)) + [5, 5, 0]  # all, plus repeats and out of order
    for g, (x, edges, label) in zip(ids, store.get_many(ids)):
        x0, e0, l0 = d.graph(g)
        assert x.dtype == np.float32 and edges.dtype == np.int64
        assert x.tobytes() == x0.tobytes() and edges.tobytes() == e0.tobytes() and label == l0
    assert prepare("lmdb", dataset, task="graph", say=lambda *a, **k: None) == path  # reused, not rebuilt


COLLATE_CHECK = """
import sys, torch
from bench.datasets import hub
from bench.backends import pyg_graphs
from torch_geometric.data import Batch
data = hub.load_dataset("molecules", sys.argv[1], features_in_memory=False)
ids = [7, 3, 3, 0, data.num_graphs - 1, 42]
reference = Batch.from_data_list([pyg_graphs.graph_dataset(data, "memory")[g] for g in ids])
for store in ("memory", "lmdb", "sqlite"):
    graphs = pyg_graphs.graph_dataset(data, store)
    ours = pyg_graphs.Batches(graphs)[ids]
    theirs = Batch.from_data_list([graphs[g] for g in ids])  # the store's own per-graph Data
    for key in ("x", "edge_index", "y", "batch", "ptr"):
        assert torch.equal(getattr(ours, key), getattr(theirs, key)), (store, key)
        assert torch.equal(getattr(ours, key), getattr(reference, key)), (store, key)
    assert ours.num_graphs == len(ids)
print("same")
"""


def test_every_store_reads_a_batch_as_pygs_collate_would(dataset):
    """Each store reads a batch's graphs in one call and one collate lays them out: the tensors
    must equal PyG's `Batch.from_data_list` of the store's own per-graph `Data`, for every store."""
    require_stacks("pyg")
    from bench import stacks

    prepare("lmdb", dataset, task="graph", say=lambda *a, **k: None)
    proc = subprocess.run([str(stacks.get("pyg").python), "-c", COLLATE_CHECK, str(dataset)], cwd=REPO,
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("same"), proc.stderr[-2000:]


def test_records_are_framework_neutral_and_zero_copy():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    edges = np.array([[0, 1, 1, 2], [1, 0, 2, 1]], dtype=np.int64)
    raw = lmdb_graphs.encode(x, edges, 2)
    assert raw[:4] == b"GRF1" and len(raw) == 24 + edges.nbytes + x.nbytes
    x1, e1, label = lmdb_graphs.decode(raw)
    assert np.array_equal(x1, x) and np.array_equal(e1, edges) and label == 2
    assert not x1.flags.owndata and not e1.flags.writeable  # views of the record
    with pytest.raises(ValueError, match="not a graph record"):
        lmdb_graphs.decode(raw[:-4])


def test_failing_build_leaves_no_store(dataset, monkeypatch):
    def broken(*args):
        raise OSError("disk full (simulated)")

    monkeypatch.setattr(lmdb_graphs, "encode", broken)
    with pytest.raises(OSError, match="disk full"):
        lmdb_graphs.build(dataset)
    assert list((dataset / "stores").iterdir()) == []


def test_missing_store(dataset):
    with pytest.raises(StoreError) as info:
        lmdb_graphs.LmdbGraphs(lmdb_graphs.store_dir(dataset))
    assert "LMDB graph store" in str(info.value) and "is missing" in str(info.value)
    assert "run the suite again" in str(info.value)


def test_corrupt_store(dataset):
    path = lmdb_graphs.build(dataset)
    lmdb_graphs.close_all()
    data_file = path / "data.mdb"
    data_file.write_bytes(b"\x00garbage" * 4096)
    with pytest.raises(StoreError) as info:
        lmdb_graphs.build(dataset)  # the host's check before a cell
    assert str(path) in str(info.value) and "delete the folder and run again" in str(info.value)


def test_truncated_store_is_named_not_a_crash(dataset):
    # reading a page past the end of a memory-mapped file would kill the process (SIGBUS)
    path = lmdb_graphs.build(dataset)
    lmdb_graphs.close_all()
    data_file = path / "data.mdb"
    with open(data_file, "r+b") as f:
        f.truncate(data_file.stat().st_size // 2)
    with pytest.raises(StoreError, match=r"truncated .*delete the folder and run again"):
        lmdb_graphs.LmdbGraphs(path, lmdb_graphs.fingerprint(dataset))


def test_store_of_another_dataset_version(tmp_path):
    dataset = make(tmp_path)
    lmdb_graphs.build(dataset)
    lmdb_graphs.close_all()
    meta = json.loads((dataset / "meta.json").read_text())
    (dataset / "meta.json").write_text(json.dumps({**meta, "num_edges": meta["num_edges"] + 2}))  # a rebuild
    with pytest.raises(StoreError) as info:
        lmdb_graphs.build(dataset)
    message = str(info.value)
    assert "another version of dataset" in message and "fingerprint" in message
    assert str(lmdb_graphs.store_dir(dataset)) in message and "delete the folder" in message


def test_map_size_too_small_by_parameter_and_env(dataset, monkeypatch):
    with pytest.raises(StoreError) as info:
        lmdb_graphs.build(dataset, map_size=64 * 1024)
    message = str(info.value)
    assert "map size 65536 bytes is too small" in message and "GNNBENCH_LMDB_MAP_SIZE" in message
    assert not lmdb_graphs.store_dir(dataset).exists()
    monkeypatch.setenv("GNNBENCH_LMDB_MAP_SIZE", str(64 * 1024))
    with pytest.raises(StoreError, match="too small"):
        prepare("lmdb", dataset, task="graph", say=lambda *a, **k: None)
    monkeypatch.setenv("GNNBENCH_LMDB_MAP_SIZE", "")
    assert lmdb_graphs.build(dataset).is_dir()  # the computed size suffices


def test_reads_in_forked_workers(dataset):
    """Each DataLoader-style child process opens its own environment after a fork."""
    import multiprocessing as mp

    store = lmdb_graphs.LmdbGraphs(lmdb_graphs.build(dataset), lmdb_graphs.fingerprint(dataset))
    parent = store.get(3)[0].tobytes()  # opened in the parent before forking
    with mp.get_context("fork").Pool(2) as pool:
        children = pool.map(_read_x_bytes, [(store, 3)] * 2)
    assert children == [parent, parent]


def _read_x_bytes(args):
    store, g = args
    return store.get(g)[0].tobytes()


# --- suites: pairing graph- and node-level backends and datasets -------------------------

GRAPH_SUITE = """
name: graphs
datasets:
  mol: {source: molecules, params: {count: 300}}
backends: [pyg-graphs]
settings: {store: [memory, lmdb, sqlite], num_workers: [0, 2]}
"""


def suite_error(write_suite, text):
    path = write_suite(text)
    with pytest.raises(suite.SuiteError) as info:
        suite.load(path)
    return str(info.value), path


def test_graph_suite_expands_over_its_stores(write_suite):
    s, _ = suite.load(write_suite(GRAPH_SUITE))
    ids = [c.id for c in suite.expand(s)]
    assert len(ids) == 6 and "pyg-graphs/mol/mode=cpu-cpu/workers=0/ws=1/store=sqlite" in ids


def test_shorthand_name_in_a_suite(write_suite):
    s, _ = suite.load(write_suite(GRAPH_SUITE.replace("{source: molecules, params: {count: 300}}",
                                                      "molecules:count=300,max_nodes=12")))
    assert s.datasets["mol"].params.max_nodes == 12 and s.datasets["mol"].params.count == 300


def test_node_backend_on_graph_dataset_is_named(write_suite):
    msg, path = suite_error(write_suite, GRAPH_SUITE.replace("[pyg-graphs]", "[pyg-graphs, pyg-neighbor]"))
    assert str(path) in msg and "'pyg-neighbor' trains the 'node' task" in msg and "mol: graph" in msg


def test_graph_dataset_without_graph_backend_is_named(write_suite):
    text = GRAPH_SUITE.replace("[pyg-graphs]", "[pyg-neighbor]").replace(
        "  mol:", "  g: {source: synthetic, params: {scale: 6}}\n  mol:")
    msg, path = suite_error(write_suite, text)
    assert str(path) in msg and "datasets.mol: serves graph, and no backend" in msg and "graph: pyg-graphs" in msg


def test_mixed_suite_pairs_each_backend_with_its_own_task(write_suite):
    text = GRAPH_SUITE.replace("[pyg-graphs]", "[pyg-graphs, pyg-neighbor]").replace(
        "  mol:", "  g: {source: synthetic, params: {scale: 6}}\n  mol:")
    s, _ = suite.load(write_suite(text))
    pairs = {(c.backend, c.dataset) for c in suite.expand(s)}
    assert pairs == {("pyg-graphs", "mol"), ("pyg-neighbor", "g")}


def test_zero_cells_is_an_error_naming_the_file(write_suite):
    msg, path = suite_error(write_suite, GRAPH_SUITE.replace("[memory, lmdb, sqlite]", "graphbolt-disk"))
    assert str(path) in msg and "zero cells" in msg


def test_bad_molecules_params(write_suite):
    msg, _ = suite_error(write_suite, GRAPH_SUITE.replace("count: 300", "count: 300, atoms: 3"))
    assert "datasets.mol.params.atoms: unknown key" in msg and "max_nodes" in msg
    msg, _ = suite_error(write_suite, GRAPH_SUITE.replace("count: 300", "count: 300, min_nodes: 9, max_nodes: 5"))
    assert "max_nodes 5 is below min_nodes 9" in msg


# --- end to end through `pytest suites/` ---------------------------------------------------

E2E_SUITE = """
name: graphs-e2e
datasets:
  mol: {source: molecules, params: {count: 1500, min_nodes: 8, max_nodes: 16, feature_dim: 8}}
backends: [pyg-graphs]
settings:
  store: [memory, lmdb, sqlite]
  num_workers: [0, 2]
  batch_size: 64
  fanout: [1, 1]
  epochs: 2
  warmup_epochs: 1
  hidden: 32
  timeout: 300
include:
  - {model: none, num_workers: 0}
"""


@pytest.fixture(scope="module")
def graph_run(tmp_path_factory):
    require_stacks("pyg")
    root = tmp_path_factory.mktemp("graphs")
    proc, out = run_suite_text(E2E_SUITE, root, root / "hub", name="graphs")
    assert proc.returncode == 0, proc.stdout[-3000:]
    return json.loads(out.read_text()), root / "hub"


def test_every_store_and_worker_count_trains_above_chance(graph_run):
    result, _ = graph_run
    by_id = {b["extra_info"]["cell_id"]: b["extra_info"] for b in result["benchmarks"]}
    assert result["unmeasured"] == []
    sage = [i for i in by_id if "model=none" not in i]
    assert len(sage) == 6 and {by_id[i]["settings"]["store"] for i in sage} == {"memory", "lmdb", "sqlite"}
    assert {by_id[i]["settings"]["num_workers"] for i in sage} == {0, 2}
    for cell_id in sage:
        info = by_id[cell_id]
        assert info["val_acc"] > 0.4 and info["test_acc"] > 0.4, cell_id  # chance: 0.25
        assert info["dataset"]["num_graphs"] == 1500 and info["dataset"]["num_train"] == 1200
        assert info["seeds_per_s"] > 0 and info["edges_per_s"] > info["seeds_per_s"]


def test_loader_alone_reads_every_training_graph(graph_run):
    result, _ = graph_run
    alone = [b for b in result["benchmarks"] if b["extra_info"]["settings"]["model"] == "none"]
    assert {b["extra_info"]["settings"]["store"] for b in alone} == {"memory", "lmdb", "sqlite"}
    for bench in alone:
        info = bench["extra_info"]
        assert info["val_acc"] is None
        assert info["seeds_per_s"] * bench["stats"]["mean"] == pytest.approx(1200, rel=1e-6)


def test_stores_were_built_once_beside_the_dataset(graph_run):
    _, cache = graph_run
    (dataset,) = (cache / "datasets").iterdir()
    assert sorted(p.name for p in (dataset / "stores").iterdir()) == ["lmdb-graphs", "sqlite-graphs"]
    assert (dataset / "stores" / "sqlite-graphs" / "processed" / "sqlite.db").is_file()
