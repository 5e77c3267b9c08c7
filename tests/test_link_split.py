"""The link task's edge split (bench/datasets/link_split.py): deterministic, undirected pairs held
out in both directions, fixed negatives, stored once with checksums."""

from __future__ import annotations

import numpy as np
import pytest

from bench.datasets import hub, link_split, synthetic


@pytest.fixture(scope="module")
def small_graph(tmp_path_factory):
    cache = tmp_path_factory.mktemp("cache")
    spec = {"name": "s8", "source": "synthetic", "params": synthetic.canonical_params({"scale": 8, "edge_factor": 8})}
    return synthetic.materialise(spec, cache)


def keys(edge_index, n):
    return set((np.asarray(edge_index[0]) * n + np.asarray(edge_index[1])).tolist())


def test_held_out_pairs_leave_the_message_passing_graph_in_both_directions(small_graph):
    link_split.ensure(small_graph)
    split = link_split.load(small_graph)
    full = hub.load(small_graph)
    n = full.num_nodes
    train = keys(split.edge_index, n)
    assert split.undirected  # the synthetic graph stores both directions
    for s, d in np.concatenate([split.val_pos, split.test_pos]):
        assert s * n + d not in train and d * n + s not in train
        assert s * n + d in keys(full.edge_index, n)  # a real edge of the dataset
    # every training positive is in the message-passing graph, both ways; nothing else went missing
    for s, d in split.train_pos:
        assert s * n + d in train and d * n + s in train
    assert len(train) == len(keys(full.edge_index, n)) - 2 * (len(split.val_pos) + len(split.test_pos))
    assert split.val_neg.shape == (len(split.val_pos), link_split.EVAL_NEGATIVES)
    assert split.val_neg.min() >= 0 and split.val_neg.max() < n
    # the CSC agrees with the edge list, and GraphBolt's copies with both
    assert split.csc_indptr[-1] == split.edge_index.shape[1]
    assert np.array_equal(split.graphbolt_indices, split.edge_index[0])
    assert split.graphbolt_indices.dtype == np.int32


def test_the_split_is_deterministic_and_seeded(small_graph):
    full = hub.load(small_graph)
    a, _ = link_split.split_edges(full.edge_index, full.num_nodes, seed=3)
    b, _ = link_split.split_edges(full.edge_index, full.num_nodes, seed=3)
    c, _ = link_split.split_edges(full.edge_index, full.num_nodes, seed=4)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert not np.array_equal(a["val_pos"], c["val_pos"])


def test_a_directed_graph_splits_single_edges():
    edge_index = np.array([[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 3], [1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 5, 9]])
    arrays, meta = link_split.split_edges(edge_index, 10, val=0.1, test=0.1, negatives=3)
    assert not meta["undirected"] and meta["num_val_pos"] == 1 and meta["num_test_pos"] == 1
    assert meta["num_train_edges"] == 10 and arrays["val_neg"].shape == (1, 3)


def test_a_changed_file_is_named(small_graph):
    folder = link_split.ensure(small_graph, seed=7)
    np.save(folder / "val_neg.npy", np.zeros((2, 2), dtype=np.int64))
    with pytest.raises(hub.DatasetError, match="val_neg.npy"):
        link_split.load(small_graph, seed=7)


def test_bad_fractions_are_one_clear_error():
    with pytest.raises(hub.DatasetError, match="val 0.6 and test 0.5"):
        link_split.split_edges(np.array([[0], [1]]), 2, val=0.6, test=0.5)
