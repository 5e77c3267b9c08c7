"""The dataset hub and the synthetic generator: determinism, structure, signal, atomic writes."""

import json

import numpy as np
import pytest

from bench import datasets
from bench.datasets import baseline, hub, synthetic


def test_generator_is_deterministic_by_seed():
    a, b = synthetic.generate({"scale": 10}), synthetic.generate({"scale": 10})
    c = synthetic.generate({"scale": 10, "seed": 1})
    assert all(np.array_equal(a[k], b[k]) and a[k].dtype == b[k].dtype for k in a)
    assert not np.array_equal(a["edge_index"], c["edge_index"])
    assert not np.array_equal(a["features"], c["features"])


def test_generator_is_deterministic_across_chunks(monkeypatch):
    """Edges made in several chunks (as on a large graph) are those of one seed, every time."""
    monkeypatch.setattr(synthetic, "CHUNK_EDGES", 1000)
    a, b = synthetic.generate({"scale": 10}), synthetic.generate({"scale": 10})
    assert all(np.array_equal(a[k], b[k]) for k in a)


def test_structure_is_shared_and_features_follow_the_store(tmp_path):
    """Ranks map the structure, labels and splits from the hub's files (one copy in the page
    cache for all of them), in the dtypes PyG and GraphBolt take as they are; the features are
    read into the process only for the in-memory store."""
    path = synthetic.materialise({"name": "tiny", "source": "synthetic", "params": {"scale": 8}}, tmp_path)
    in_memory = hub.load_dataset("synthetic", path, features_in_memory=True)
    on_disk = hub.load_dataset("synthetic", path, features_in_memory=False)
    for data in (in_memory, on_disk):
        for name in ("edge_index", "csc_indptr", "labels", "train_idx", "val_idx", "test_idx"):
            array = getattr(data, name)
            assert isinstance(array, np.memmap) and not array.flags.writeable, name
            assert array.dtype == np.int64
        assert data.edge_index[0].flags.c_contiguous  # CSC indices as one contiguous row
    assert not isinstance(in_memory.features, np.memmap) and isinstance(on_disk.features, np.memmap)
    assert isinstance(hub.load_dataset("synthetic", path, mmap=True).features, np.memmap)  # sizes only


def test_graphbolt_arrays_are_int32_maps_kept_with_the_hub(tmp_path):
    """GraphBolt's graph is built from the hub's own int32 copies of the CSC (as its OnDiskDataset
    casts them where the sizes allow), written once with the dataset and checksummed, mapped by
    every rank: no rank casts a copy of its own."""
    path = synthetic.materialise({"name": "tiny", "source": "synthetic", "params": {"scale": 8}}, tmp_path)
    data = hub.load_dataset("synthetic", path)
    for name, source in (("graphbolt_indices", data.edge_index[0]), ("graphbolt_indptr", data.csc_indptr)):
        array = getattr(data, name)
        assert isinstance(array, np.memmap) and not array.flags.writeable and array.dtype == np.int32, name
        assert np.array_equal(array, source), name
    assert {"graphbolt_indices.npy", "graphbolt_indptr.npy"} <= set(json.loads((path / "checksums.json").read_text())["files"])
    assert json.loads((path / "meta.json").read_text())["format"] == hub.FORMAT_VERSION == 2


def test_graphbolt_arrays_stay_int64_where_the_sizes_do_not_fit():
    edge_index, indptr = np.zeros((2, 3), dtype=np.int64), np.array([0, 3], dtype=np.int64)
    small = hub.graphbolt_arrays(edge_index, indptr, num_nodes=2**31 - 1)
    assert small["graphbolt_indices"].dtype == np.int32 and small["graphbolt_indptr"].dtype == np.int32
    big = hub.graphbolt_arrays(edge_index, indptr, num_nodes=2**31)
    assert big["graphbolt_indices"].dtype == np.int64 and big["graphbolt_indptr"].dtype == np.int32


def test_a_new_hub_format_takes_a_new_folder(monkeypatch, tmp_path):
    """Format-1 folders (no GraphBolt arrays) are never read by this gnnbench, and stay for an
    older checkout sharing the cache: the format is part of the folder's key."""
    spec = {"name": "tiny", "source": "synthetic", "params": {"scale": 8}}
    now = hub.spec_key(spec)
    monkeypatch.setattr(hub, "FORMAT_VERSION", 1)
    assert hub.spec_key(spec) != now


def test_graph_is_undirected_simple_and_power_law():
    g = synthetic.generate({"scale": 12, "edge_factor": 8})
    src, dst = g["edge_index"]
    n = g["labels"].size
    assert not np.any(src == dst)
    forward = set(zip(src.tolist(), dst.tolist()))
    assert len(forward) == src.size and all((d, s) in forward for s, d in list(forward)[:2000])
    degree = np.bincount(dst, minlength=n)
    assert degree.max() > 20 * degree.mean()  # heavy tail: hubs far above the mean
    assert np.array_equal(np.diff(g["csc_indptr"]), degree)


def test_neighbourhood_carries_what_the_features_lack():
    """Features alone are weak; a node's neighbours mostly share its class, so averaging them
    (what a GNN's mean aggregation does) predicts far better than the features alone."""
    g = synthetic.generate({"scale": 12, "num_classes": 8})
    labels, x, (src, dst) = g["labels"], g["features"], g["edge_index"]
    chance = 1 / 8
    counts = np.bincount(labels, minlength=8)
    assert counts.min() > 0.5 * counts.mean()  # balanced classes: chance really is 1/8
    assert (labels[src] == labels[dst]).mean() > 0.7  # strong homophily
    train, test = g["train_idx"], g["test_idx"]
    alone = baseline.features_only_accuracy(x, labels, train, test)
    deg = np.maximum(np.diff(g["csc_indptr"]), 1)[:, None]
    neighbours = np.stack([np.bincount(dst, weights=x[src, k], minlength=x.shape[0]) for k in range(x.shape[1])], 1) / deg
    with_neighbours = baseline.features_only_accuracy(np.hstack([x, neighbours]), labels, train, test)
    assert 1.5 * chance < alone < 0.6  # some signal, far from enough
    assert with_neighbours > alone + 0.2


def test_rmat_levels_keep_their_probabilities():
    """The lookup tables hold each joint outcome's probability to 2^-20; community levels keep
    RMAT's marginals (so degrees are RMAT's) and keep an edge in its half as asked."""
    levels = synthetic.level_probabilities(6, 0.57, 0.19, 0.19, community_levels=2, within=0.9)
    assert np.allclose(levels[0], (0.57, 0.19, 0.19, 0.05)) and len(levels) == 6
    a, b, c, d = levels[-1]
    assert abs((a + b) - 0.76) < 1e-12 and abs((a + c) - 0.76) < 1e-12 and abs(a + d - 0.9) < 1e-12
    table = synthetic.quadrant_table(levels[:2])
    assert table.size == 1 << synthetic.TABLE_BITS
    src_bits, dst_bits = table & 3, table >> 2
    # P(source bit 1 of level 0) = c + d of level 0
    assert abs(np.mean(src_bits & 1) - (0.19 + 0.05)) < 2 ** -19
    assert abs(np.mean((src_bits >> 1) == (dst_bits >> 1)) - 0.57 - 0.05) < 2 ** -19
    with pytest.raises(ValueError, match="within_community"):
        synthetic.level_probabilities(6, 0.57, 0.19, 0.19, 2, within=0.1)


def test_generator_version_is_part_of_the_cache_key(monkeypatch):
    """Arrays that change for the same parameters get a new hub folder, never an old one's."""
    spec = {"name": "tiny", "source": "synthetic", "params": {"scale": 8}}
    before = hub.spec_key(spec)
    monkeypatch.setattr(synthetic, "VERSION", synthetic.VERSION + 1)
    assert hub.spec_key(spec) != before
    planetoid = {"name": "cora", "source": "planetoid", "params": {"name": "Cora"}}
    assert hub.spec_key(planetoid) == hub.spec_key(planetoid)  # sources without VERSION: unchanged


def test_splits_are_disjoint_and_cover_the_connected_nodes():
    g = synthetic.generate({"scale": 9})
    parts = [g["train_idx"], g["val_idx"], g["test_idx"]]
    joined = np.concatenate(parts)
    connected = np.flatnonzero(np.diff(g["csc_indptr"]) > 0)
    assert joined.size == np.unique(joined).size and np.array_equal(np.sort(joined), connected)


def test_materialise_writes_once_and_loads(tmp_path):
    spec = {"name": "tiny", "source": "synthetic", "params": {"scale": 8}}
    path = synthetic.materialise(spec, tmp_path)
    assert hub.is_materialised(spec, tmp_path) and path == hub.dataset_dir(spec, tmp_path)
    data = hub.load(path)
    assert data.card()["num_nodes"] == 256 and data.features.dtype == np.float32
    assert 0 < data.card()["features_only_acc"] < 1 and 0 < data.card()["edge_homophily"] <= 1
    other = {**spec, "params": {"scale": 9}}
    assert hub.dataset_dir(other, tmp_path) != path  # parameters are part of the key


def test_failed_write_leaves_no_folder(tmp_path):
    spec = {"name": "bad", "source": "synthetic", "params": {}}
    arrays = synthetic.generate({"scale": 6})
    arrays["features"] = arrays["features"][:-1]  # one row short
    with pytest.raises(hub.DatasetError, match="features have 63 rows for 64 nodes"):
        hub.write(spec, tmp_path, arrays)
    assert list((tmp_path / "datasets").iterdir()) == []


def test_corrupt_array_is_a_clear_error(tmp_path):
    spec = {"name": "tiny", "source": "synthetic", "params": {"scale": 6}}
    path = synthetic.materialise(spec, tmp_path)
    (path / "labels.npy").write_bytes(b"not numpy")
    with pytest.raises(hub.DatasetError, match="labels.npy is missing or corrupt"):
        hub.load(path)
    meta = json.loads((path / "meta.json").read_text())
    (path / "meta.json").write_text(json.dumps({**meta, "format": 99}))
    with pytest.raises(hub.DatasetError, match="hub format 99"):
        hub.load(path)
