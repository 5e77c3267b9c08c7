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


# --- a given split (OGB's, a user's files) ------------------------------------------------------

def _given(n: int = 10) -> tuple[np.ndarray, dict]:
    """An undirected ring of 10 nodes (both directions stored) and a split of it as given."""
    ring = np.array([[i, (i + 1) % n] for i in range(n)])
    edge_index = np.concatenate([ring, ring[:, ::-1]]).T
    given = {"train_pos": ring[:8], "val_pos": ring[8:9], "test_pos": ring[9:],
             "val_neg": np.array([[3, 4, 5]]), "test_neg": np.array([[5, 6, 7]])}
    return edge_index, given


WHERE = {k: f"/data/split/{k}.npy" for k in ("train_pos", "val_pos", "test_pos", "val_neg", "test_neg")}


def test_a_given_split_keeps_its_positives_and_takes_the_held_out_pairs_out_of_the_graph():
    edge_index, given = _given()
    given["train_pos"] = np.concatenate([given["train_pos"], [[9, 8], [0, 9]]])  # held-out pairs given as training too
    arrays, meta = link_split.given_edges(edge_index, 10, given, WHERE, "mrr", "per-positive")
    assert meta["given"] and meta["protocol"] == "mrr" and meta["undirected"]
    assert np.array_equal(arrays["val_pos"], [[8, 9]]) and np.array_equal(arrays["test_neg"], [[5, 6, 7]])
    train = keys(arrays["edge_index"], 10)
    for s, d in ((8, 9), (9, 0)):  # the held-out pairs leave the graph both ways, and the seeds
        assert s * 10 + d not in train and d * 10 + s not in train
    assert len(train) == 16 and meta["held_out_removed"] == {"graph_edges": 4, "train_pos": 2}
    assert {tuple(p) for p in arrays["train_pos"]} == {(i, i + 1) for i in range(8)}


def test_shared_negatives_are_pairs_with_the_hits_protocol():
    edge_index, given = _given()
    given["val_neg"], given["test_neg"] = np.array([[0, 5], [2, 7]]), np.array([[1, 6]])
    arrays, meta = link_split.given_edges(edge_index, 10, given, WHERE, "hits@50", "shared")
    assert meta["negatives"] == "shared" and meta["eval_negatives"] == 2 and arrays["val_neg"].shape == (2, 2)


@pytest.mark.parametrize("key, value, negatives, expected", [
    ("val_pos", np.array([[8, 9, 0]]), "per-positive", "/data/split/val_pos.npy: shape (1, 3); allowed: the val edges"),
    ("test_pos", np.array([[9, 10]]), "per-positive", "/data/split/test_pos.npy: [0, 1] = 10 is not a node id"),
    ("train_pos", np.array([[0.5, 1.0]]), "per-positive", "/data/split/train_pos.npy: dtype float64"),
    ("val_pos", np.zeros((0, 2), dtype=np.int64), "per-positive", "/data/split/val_pos.npy: no pairs"),
    ("val_neg", np.array([[1, 2], [3, 4]]), "per-positive", "/data/split/val_neg.npy: shape (2, 2) for 1 positives"),
    ("test_neg", np.array([[-1, 2, 3]]), "per-positive", "/data/split/test_neg.npy: [0, 0] = -1 is not a node id"),
    ("val_neg", np.array([1, 2, 3]), "shared", "/data/split/val_neg.npy: shape (3,); allowed: negative pairs"),
])
def test_a_bad_given_split_array_is_one_line_naming_its_file(key, value, negatives, expected):
    edge_index, given = _given()
    if negatives == "shared":
        given["test_neg"] = np.array([[1, 6]])
    given[key] = value
    with pytest.raises(hub.DatasetError) as err:
        link_split.given_edges(edge_index, 10, given, WHERE, "mrr", negatives)
    assert str(err.value).startswith(expected) and "\n" not in str(err.value)


def test_a_bad_ogb_split_dict_is_named_with_its_file_and_key(tmp_path):
    from bench.datasets import ogb

    pairs = np.array([[0, 1], [1, 2]])
    split = {"train": {"edge": pairs}, "valid": {"edge": pairs}, "test": {"edge": pairs, "edge_neg": pairs}}
    with pytest.raises(hub.DatasetError, match=r"^\S+/split/time/valid\.pt: no 'edge_neg' \(has: edge\); allowed: "
                                               r"OGB's split dict with 'edge_neg' \[M, 2\]$"):
        ogb.given_split("ogbl-collab", split, tmp_path / "split" / "time")
    split = {p: {"source_node": np.arange(3), "target_node": np.arange(2)} for p in ("train", "valid", "test")}
    with pytest.raises(hub.DatasetError, match=r"train\.pt: source_node \(3,\) and target_node \(2,\) differ"):
        ogb.given_split("ogbl-citation2", split, tmp_path / "split" / "time")


# --- a user's folder with its own split ----------------------------------------------------------

@pytest.fixture
def npy_graph(tmp_path, small_graph):
    from tests.own_graphs import write_npy

    return write_npy(hub.load(small_graph), tmp_path / "g"), hub.load(small_graph)


def _npy_spec(folder):
    from bench.datasets import npy_folder

    return {"name": f"npy:{folder}", "source": "npy", "params": npy_folder.canonical_params({"path": str(folder)})}


def test_an_npy_folder_with_link_files_is_read_with_its_own_split(npy_graph, tmp_path):
    from bench.datasets import npy_folder

    folder, ref = npy_graph
    made, _ = link_split.split_edges(ref.edge_index, ref.num_nodes, seed=5)  # any split, given as files
    for ours, file in {**npy_folder.LINK_POS, **npy_folder.LINK_NEG["per-positive"]}.items():
        np.save(folder / file, made[ours].astype(np.int32))
    dataset = npy_folder.materialise(_npy_spec(folder), tmp_path / "cache")
    assert link_split.ensure(dataset).name == link_split.GIVEN_FOLDER
    split = link_split.load(dataset)
    assert split.meta["given"] and split.protocol == "mrr+hits" and not split.shared_negatives
    assert np.array_equal(split.val_pos, made["val_pos"]) and np.array_equal(split.test_neg, made["test_neg"])
    assert keys(split.edge_index, ref.num_nodes) == keys(made["edge_index"], ref.num_nodes)
    assert split.card()["origin"] == f"the files in {folder}"


def test_an_npy_folder_without_link_files_gets_the_made_split(npy_graph, tmp_path):
    from bench.datasets import npy_folder

    folder, _ = npy_graph
    dataset = npy_folder.materialise(_npy_spec(folder), tmp_path / "cache")
    assert link_split.ensure(dataset).name == link_split.folder_name()
    assert link_split.load(dataset).protocol == "mrr+hits" and not link_split.load(dataset).meta["given"]


@pytest.mark.parametrize("files, expected", [
    ({"link_train.npy": [[0, 1]], "link_val.npy": [[1, 2]]}, "no negatives for the given link split"),
    ({"link_train.npy": [[0, 1]], "link_val.npy": [[1, 2]], "link_val_neg.npy": [[3]]},
     "the given link split lacks link_test.npy, link_test_neg.npy"),
    ({"link_val_neg.npy": [[3]], "link_test_neg_edges.npy": [[3, 4]]}, "both forms of negatives are there"),
    ({"link_train.npy": [[0, 1]], "link_val.npy": [[1, 2]], "link_test.npy": [[2, 3]],
      "link_val_neg_edges.npy": [[3, 4]], "link_test_neg_edges.npy": [[3, 4, 5]]},
     "link_test_neg_edges.npy: shape (1, 3); allowed: negative pairs shared by every positive"),
])
def test_a_bad_npy_link_split_is_one_line_and_nothing_is_written(npy_graph, tmp_path, files, expected):
    from bench.datasets import npy_folder

    folder, _ = npy_graph
    for name, value in files.items():
        np.save(folder / name, np.array(value))
    with pytest.raises(hub.DatasetError) as err:
        npy_folder.materialise(_npy_spec(folder), tmp_path / "cache")
    assert expected in str(err.value) and "\n" not in str(err.value)
    assert not list((tmp_path / "cache").rglob("meta.json"))


@pytest.mark.parametrize("shared, into, expected", [
    ("val_pos", "test_pos", ("link_test.npy", "link_val.npy")),
    ("train_pos", "val_pos", ("link_val.npy", "link_train.npy")),
])
def test_a_users_split_sharing_a_pair_between_its_parts_is_refused(npy_graph, tmp_path, shared, into, expected):
    """Issue 52: validation and test holding the same pair (scored twice), or a held-out pair also a
    training seed, was accepted; refused in one line naming both files, before anything is written."""
    from bench.datasets import npy_folder

    folder, ref = npy_graph
    made, _ = link_split.split_edges(ref.edge_index, ref.num_nodes, seed=5)
    made[into] = np.concatenate([made[into], made[shared][2:3]])
    negatives = into.replace("pos", "neg")
    made[negatives] = np.concatenate([made[negatives], made[negatives][:1]])  # a row for the added positive
    for ours, file in {**npy_folder.LINK_POS, **npy_folder.LINK_NEG["per-positive"]}.items():
        np.save(folder / file, made[ours])
    with pytest.raises(hub.DatasetError) as err:
        npy_folder.materialise(_npy_spec(folder), tmp_path / "cache")
    message = str(err.value)
    pair = list(map(int, made[shared][2]))
    assert message.startswith(f"{folder / expected[0]}: the pair {pair} is in {folder / expected[1]} too"), message
    assert "allowed: training, validation and test pairs that share none" in message and "\n" not in message
    assert not list((tmp_path / "cache").rglob("meta.json"))
