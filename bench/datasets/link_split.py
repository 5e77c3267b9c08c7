"""The edge split of a plain dataset for the link task: which edges are training seeds (and the
message-passing graph), which are validation and test positives, and the fixed negatives each
validation and test positive is ranked against, stored once beside the dataset so that every
framework trains on the same graph and scores the same candidates.

Layout (under the dataset's hub folder, one folder per split's parameters):
    link-val<V>-test<T>-neg<K>-seed<S>/
        meta.json            the parameters, the counts, whether the graph was undirected (written last)
        checksums.json       size, mtime and SHA-256 of every .npy (bench/checksums.py), checked on load
        edge_index.npy       int64 [2, E_train]: the message-passing graph, sorted by destination
                             (the dataset's edges less the validation and test edges, both directions
                             of each where the graph is undirected)
        csc_indptr.npy       int64 [N + 1] over destinations (the same edges in CSC form)
        graphbolt_indices.npy, graphbolt_indptr.npy   the CSC in GraphBolt's dtypes (int32 where
                             they fit), as the hub keeps them for the plain graph
        train_pos.npy        int64 [P, 2]: the training seed edges (source, destination); for an
                             undirected graph one per pair (source < destination)
        val_pos.npy, test_pos.npy   int64 [V, 2], [T, 2]: the held-out positives, likewise
        val_neg.npy, test_neg.npy   int64 [V, K], [T, K]: K negative destinations per positive,
                             uniform over all nodes from a fixed seed (kept as drawn: neither side
                             filters false negatives, as neither framework's sampler does)

A graph is undirected when every edge's reverse is stored too: then each unordered pair is split
as one, and a held-out pair leaves the message-passing graph in both directions. Self-loops stay
in the training graph and are never held out. numpy only: the host (preparation) and every stack
(the backends) import it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench import checksums
from bench.datasets import hub

FORMAT = 1
VAL_FRACTION = 0.05
TEST_FRACTION = 0.05
EVAL_NEGATIVES = 100  # negatives per validation/test positive (OGB's ogbl-citation2 takes 1,000)
SPLIT_SEED = 0
ARRAYS = ("edge_index", "csc_indptr", "graphbolt_indices", "graphbolt_indptr", "train_pos", "val_pos", "val_neg",
          "test_pos", "test_neg")


@dataclass
class LinkSplit:
    """A loaded split (arrays memory-mapped read-only)."""
    path: Path
    meta: dict
    edge_index: np.ndarray
    csc_indptr: np.ndarray
    graphbolt_indices: np.ndarray
    graphbolt_indptr: np.ndarray
    train_pos: np.ndarray
    val_pos: np.ndarray
    val_neg: np.ndarray
    test_pos: np.ndarray
    test_neg: np.ndarray

    @property
    def num_nodes(self) -> int:
        return int(self.meta["num_nodes"])

    @property
    def undirected(self) -> bool:
        return bool(self.meta["undirected"])

    def positives(self, split: str) -> np.ndarray:
        return getattr(self, f"{split}_pos")

    def negatives(self, split: str) -> np.ndarray:
        return getattr(self, f"{split}_neg")

    def card(self) -> dict:
        """What a result carries about the split."""
        return {k: self.meta[k] for k in ("val_fraction", "test_fraction", "eval_negatives", "seed", "undirected",
                                          "num_train_edges", "num_train_pos", "num_val_pos", "num_test_pos")}


def folder_name(val: float = VAL_FRACTION, test: float = TEST_FRACTION, negatives: int = EVAL_NEGATIVES,
                seed: int = SPLIT_SEED) -> str:
    return f"link-val{val:g}-test{test:g}-neg{negatives}-seed{seed}"


def split_dir(dataset_dir: Path, **params) -> Path:
    return Path(dataset_dir) / folder_name(**params)


def _check(val: float, test: float, negatives: int) -> None:
    if not (0 < val < 1 and 0 < test < 1 and val + test < 1):
        raise hub.DatasetError(f"link split: val {val:g} and test {test:g} must each be in (0, 1) and sum below 1")
    if negatives < 1:
        raise hub.DatasetError(f"link split: negatives per held-out edge must be at least 1 (got {negatives})")


def split_edges(edge_index: np.ndarray, num_nodes: int, val: float = VAL_FRACTION, test: float = TEST_FRACTION,
                negatives: int = EVAL_NEGATIVES, seed: int = SPLIT_SEED) -> tuple[dict[str, np.ndarray], dict]:
    """The split's arrays and its meta (counts), deterministically from `seed`."""
    _check(val, test, negatives)
    src, dst = (np.asarray(edge_index[i], dtype=np.int64) for i in (0, 1))
    n = np.int64(num_nodes)
    keys = np.unique(src * n + dst)
    s, d = np.divmod(keys, n)
    not_loop = s != d
    reversed_keys = np.sort(d[not_loop] * n + s[not_loop])
    undirected = bool(not_loop.any()) and np.array_equal(reversed_keys, np.sort(keys[not_loop]))
    candidate = (s < d) if undirected else not_loop  # one per unordered pair where undirected
    pairs = np.stack([s[candidate], d[candidate]], axis=1)
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(pairs))
    n_val, n_test = int(val * len(pairs)), int(test * len(pairs))
    if n_val < 1 or n_test < 1:
        raise hub.DatasetError(f"link split: {len(pairs)} candidate edges give {n_val} validation and {n_test} test "
                               "edges; the graph is too small for these fractions")
    val_pos = pairs[np.sort(order[:n_val])]
    test_pos = pairs[np.sort(order[n_val:n_val + n_test])]
    train_pos = pairs[np.sort(order[n_val + n_test:])]
    held = np.concatenate([val_pos, test_pos])
    held_keys = held[:, 0] * n + held[:, 1]
    if undirected:
        held_keys = np.concatenate([held_keys, held[:, 1] * n + held[:, 0]])
    kept = keys[~np.isin(keys, held_keys)]
    train_src, train_dst = np.divmod(kept, n)  # keys are src * n + dst
    train_edge_index, indptr = hub.csc_from_coo(train_src, train_dst, int(n))
    arrays = {"edge_index": train_edge_index, "csc_indptr": indptr,
              **hub.graphbolt_arrays(train_edge_index, indptr, int(n)),
              "train_pos": train_pos, "val_pos": val_pos, "test_pos": test_pos,
              # the negatives come from a stream of their own, after the split's draws
              "val_neg": rng.integers(0, n, size=(len(val_pos), negatives), dtype=np.int64),
              "test_neg": rng.integers(0, n, size=(len(test_pos), negatives), dtype=np.int64)}
    meta = {"format": FORMAT, "val_fraction": val, "test_fraction": test, "eval_negatives": negatives, "seed": seed,
            "undirected": undirected, "num_nodes": int(n), "num_edges": int(len(keys)),
            "num_train_edges": int(train_edge_index.shape[1]), "num_train_pos": int(len(train_pos)),
            "num_val_pos": int(len(val_pos)), "num_test_pos": int(len(test_pos))}
    return arrays, meta


def ensure(dataset_dir: Path, val: float = VAL_FRACTION, test: float = TEST_FRACTION,
           negatives: int = EVAL_NEGATIVES, seed: int = SPLIT_SEED) -> Path:
    """The split's folder under a materialised plain dataset, built once (atomically: a
    half-written folder is never seen under its name) and checked against its checksums after."""
    target = split_dir(dataset_dir, val=val, test=test, negatives=negatives, seed=seed)
    if (target / "meta.json").is_file():
        verify(target)
        return target
    data = hub.load(dataset_dir, mmap=True, features_mmap=True)
    arrays, meta = split_edges(data.edge_index, data.num_nodes, val, test, negatives, seed)
    meta["dataset"] = data.meta["name"]
    with hub.atomic_dir(target) as tmp:
        if tmp is not None:
            for name in ARRAYS:
                np.save(tmp / f"{name}.npy", arrays[name])
            hub.record_checksums(tmp)
            (tmp / "meta.json").write_text(json.dumps(meta, indent=2))
    return target


def verify(folder: Path) -> None:
    try:
        checksums.verify(folder, "link split", f"delete {folder} and run the suite again to rebuild it")
    except checksums.ChecksumError as exc:
        raise hub.DatasetError(str(exc)) from None


def load(dataset_dir: Path, check: bool = True, **params) -> LinkSplit:
    """The split of a dataset (default parameters unless given), memory-mapped read-only."""
    folder = split_dir(dataset_dir, **params)
    if not (folder / "meta.json").is_file():
        raise hub.DatasetError(f"{folder}: no link split here; the preparation step builds it before a link cell "
                               "(run the suite, or bench.datasets.link_split.ensure)")
    meta = hub.read_meta(folder / "meta.json")
    if meta.get("format") != FORMAT:
        raise hub.DatasetError(f"{folder} has link-split format {meta.get('format')}, this gnnbench reads {FORMAT}; "
                               "delete the folder to rebuild it")
    if check:
        verify(folder)
    return LinkSplit(path=folder, meta=meta, **{name: np.load(folder / f"{name}.npy", mmap_mode="r")
                                                for name in ARRAYS})
