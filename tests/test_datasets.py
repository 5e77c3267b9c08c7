"""The dataset hub and the synthetic generator: determinism, structure, signal, atomic writes."""

import json

import numpy as np
import pytest

from bench.datasets import hub, synthetic


def test_generator_is_deterministic_by_seed():
    a, b = synthetic.generate({"scale": 10}), synthetic.generate({"scale": 10})
    c = synthetic.generate({"scale": 10, "seed": 1})
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert not np.array_equal(a["edge_index"], c["edge_index"])


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


def test_labels_and_features_carry_signal():
    g = synthetic.generate({"scale": 12, "num_classes": 8})
    labels, x, (src, dst) = g["labels"], g["features"], g["edge_index"]
    chance = 1 / 8
    counts = np.bincount(labels, minlength=8)
    assert counts.min() > 0.5 * counts.mean()  # balanced classes: chance really is 1/8
    assert (labels[src] == labels[dst]).mean() > 1.5 * chance  # homophily
    train, test = g["train_idx"], g["test_idx"]
    centroids = np.stack([x[train][labels[train] == k].mean(0) for k in range(8)])
    predicted = ((x[test][:, None, :] - centroids[None]) ** 2).sum(-1).argmin(1)
    assert (predicted == labels[test]).mean() > 2 * chance


def test_splits_are_disjoint_and_cover_the_nodes():
    g = synthetic.generate({"scale": 9})
    parts = [g["train_idx"], g["val_idx"], g["test_idx"]]
    joined = np.concatenate(parts)
    assert joined.size == g["labels"].size == np.unique(joined).size


def test_materialise_writes_once_and_loads(tmp_path):
    spec = {"name": "tiny", "source": "synthetic", "params": {"scale": 8}}
    path = synthetic.materialise(spec, tmp_path)
    assert hub.is_materialised(spec, tmp_path) and path == hub.dataset_dir(spec, tmp_path)
    data = hub.load(path)
    assert data.card()["num_nodes"] == 256 and data.features.dtype == np.float32
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
