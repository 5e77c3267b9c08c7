"""The edge split of a plain dataset for the link task, stored once beside it so that every framework
trains on the same graph and scores the same candidates: in `link-val<V>-test<T>-neg<K>-seed<S>/`,
the message-passing graph less the held-out edges (both directions where undirected; self-loops
stay), train/val/test_pos.npy ([K, 2]; one per pair where undirected), val/test_neg.npy ([V, K]
destinations per positive, uniform from a fixed seed). A GIVEN split (OGB's, a user's files) is
written by its source into `link-given/` (`write_given`), with per-positive or shared ([M, 2])
negatives and the `protocol` that scores it (PROTOCOLS); a dataset with one is always read with it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.datasets import graph_checks, hub

FORMAT = 1
VAL_FRACTION = 0.05
TEST_FRACTION = 0.05
EVAL_NEGATIVES = 100  # negatives per validation/test positive (OGB's ogbl-citation2 takes 1,000)
SPLIT_SEED = 0
# How a split is scored (bench/backends/link.py follows meta.json's `protocol`)
PROTOCOLS = {
    "mrr+hits": "MRR and Hits@10/50/100, each positive against its own negatives (a made split)",
    "mrr": "MRR, each positive against its own negatives (OGB's ogbl-citation2: 1,000 per edge)",
    "hits@50": "Hits@50, every positive against one shared set of negative pairs (OGB's ogbl-collab)",
}
NEGATIVES = ("per-positive", "shared")
GIVEN_FOLDER = "link-given"
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

    num_nodes = property(lambda self: int(self.meta["num_nodes"]))
    undirected = property(lambda self: bool(self.meta["undirected"]))
    protocol = property(lambda self: self.meta.get("protocol", "mrr+hits"))
    # whether every positive is ranked against one shared set of negative pairs ([M, 2])
    shared_negatives = property(lambda self: self.meta.get("negatives", "per-positive") == "shared")

    def positives(self, split: str) -> np.ndarray:
        return getattr(self, f"{split}_pos")

    def negatives(self, split: str) -> np.ndarray:
        return getattr(self, f"{split}_neg")

    def card(self) -> dict:
        """What a result carries about the split."""
        keys = ("val_fraction", "test_fraction", "eval_negatives", "seed", "undirected", "num_train_edges",
                "num_train_pos", "num_val_pos", "num_test_pos", "protocol", "negatives", "given", "origin")
        return {k: self.meta[k] for k in keys if k in self.meta}


def folder_name(val: float = VAL_FRACTION, test: float = TEST_FRACTION, negatives: int = EVAL_NEGATIVES,
                seed: int = SPLIT_SEED) -> str:
    return f"link-val{val:g}-test{test:g}-neg{negatives}-seed{seed}"


def split_dir(dataset_dir: Path, **params) -> Path:
    return Path(dataset_dir) / folder_name(**params)


def split_edges(edge_index: np.ndarray, num_nodes: int, val: float = VAL_FRACTION, test: float = TEST_FRACTION,
                negatives: int = EVAL_NEGATIVES, seed: int = SPLIT_SEED) -> tuple[dict[str, np.ndarray], dict]:
    """The split's arrays and its meta (counts), deterministically from `seed`."""
    if not (0 < val < 1 and 0 < test < 1 and val + test < 1):
        raise hub.DatasetError(f"link split: val {val:g} and test {test:g} must each be in (0, 1) and sum below 1")
    if negatives < 1:
        raise hub.DatasetError(f"link split: negatives per held-out edge must be at least 1 (got {negatives})")
    n = np.int64(num_nodes)
    keys, undirected = _undirected_keys(edge_index, n)
    s, d = np.divmod(keys, n)
    candidate = (s < d) if undirected else s != d  # one per unordered pair where undirected
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
    held_keys = _pair_keys(np.concatenate([val_pos, test_pos]), n, undirected)
    graph = _message_passing(keys[~np.isin(keys, held_keys)], int(n))
    arrays = {**graph, "train_pos": train_pos, "val_pos": val_pos, "test_pos": test_pos,
              # the negatives come from a stream of their own, after the split's draws
              "val_neg": rng.integers(0, n, size=(len(val_pos), negatives), dtype=np.int64),
              "test_neg": rng.integers(0, n, size=(len(test_pos), negatives), dtype=np.int64)}
    meta = {"val_fraction": val, "test_fraction": test, "eval_negatives": negatives, "seed": seed,
            "protocol": "mrr+hits", "negatives": "per-positive", "given": False,
            **_counts(arrays, undirected, n, len(keys))}
    return arrays, meta


def _counts(arrays: dict, undirected: bool, n: int, num_edges: int) -> dict:
    """What every split's meta.json counts."""
    return {"format": FORMAT, "undirected": undirected, "num_nodes": int(n), "num_edges": int(num_edges),
            "num_train_edges": int(arrays["edge_index"].shape[1]),
            **{f"num_{s}_pos": int(len(arrays[f"{s}_pos"])) for s in ("train", "val", "test")}}


def _undirected_keys(edge_index: np.ndarray, n: np.int64) -> tuple[np.ndarray, bool]:
    """The graph's unique edge keys (src * n + dst) and whether every non-loop edge's reverse is there."""
    src, dst = (np.asarray(edge_index[i], dtype=np.int64) for i in (0, 1))
    keys = np.unique(src * n + dst)
    s, d = np.divmod(keys, n)
    not_loop = s != d
    reversed_keys = np.sort(d[not_loop] * n + s[not_loop])
    return keys, bool(not_loop.any()) and np.array_equal(reversed_keys, np.sort(keys[not_loop]))


def _pair_keys(pairs: np.ndarray, n: np.int64, undirected: bool) -> np.ndarray:
    """The keys of pairs [K, 2], and of their reverses where the graph is undirected."""
    pairs = np.asarray(pairs, dtype=np.int64)
    out = pairs[:, 0] * n + pairs[:, 1]
    return np.concatenate([out, pairs[:, 1] * n + pairs[:, 0]]) if undirected else out


def _message_passing(kept_keys: np.ndarray, n: int) -> dict[str, np.ndarray]:
    """The training graph's arrays (edge_index, CSC, GraphBolt's copies) from its edge keys."""
    train_src, train_dst = np.divmod(kept_keys, np.int64(n))  # keys are src * n + dst
    edge_index, indptr = hub.csc_from_coo(train_src, train_dst, n)
    return {"edge_index": edge_index, "csc_indptr": indptr, **hub.graphbolt_arrays(edge_index, indptr, n)}


def _bad(where: str, problem: str, allowed: str) -> hub.DatasetError:
    return hub.DatasetError(f"{where}: {problem}; allowed: {allowed}")


def _checked(array, where: str, n: int, what: str, positives: int | None = None) -> np.ndarray:
    """Node-id pairs [K >= 1, 2] (`positives`: K destinations per positive, [positives, K]) as int64,
    each id in 0..n-1, else one line naming `where`."""
    a = np.asarray(array)
    shape = "[K, 2] (source, destination)" if positives is None else f"[{positives}, K] (a row per positive)"
    allowed = f"{what} as an integer array {shape}, node ids 0..{n - 1}, K >= 1"
    if not np.issubdtype(a.dtype, np.integer):
        raise _bad(where, f"dtype {a.dtype}", allowed)
    if a.ndim != 2 or (a.shape[1] != 2 if positives is None else a.shape[0] != positives or a.shape[1] < 1):
        for_rows = "" if positives is None else f" for {positives} positives"
        raise _bad(where, f"shape {tuple(a.shape)}{for_rows}", allowed)
    if a.shape[0] == 0:
        raise _bad(where, "no pairs", allowed)
    a = a.astype(np.int64)
    bad = (a < 0) | (a >= n)
    if bad.any():
        position = tuple(int(i) for i in np.argwhere(bad)[0])
        raise _bad(where, f"{list(position)} = {a[position]} is not a node id", allowed)
    return a


def check_given(given: dict, where: dict[str, str], num_nodes: int, negatives: str) -> dict[str, np.ndarray]:
    """A given split's arrays checked (shapes, dtypes, node ids; one line naming the file), as int64."""
    if negatives not in NEGATIVES:
        raise hub.DatasetError(f"link split: unknown negatives {negatives!r}; known: {', '.join(NEGATIVES)}")
    out = {name: _checked(given[name], where[name], num_nodes, f"the {name.split('_')[0]} edges")
           for name in ("train_pos", "val_pos", "test_pos")}
    for s in ("val", "test"):
        shared = negatives == "shared"
        out[f"{s}_neg"] = _checked(given[f"{s}_neg"], where[f"{s}_neg"], num_nodes,
                                   "negative pairs shared by every positive" if shared
                                   else "negative destinations per positive", None if shared else len(out[f"{s}_pos"]))
    return out


def check_disjoint(given: dict, where: dict[str, str]) -> None:
    """No pair of a user's given split in two of its training, validation and test pairs."""
    if found := graph_checks.shared_pair({k: given[k] for k in ("train_pos", "val_pos", "test_pos")}):
        name, other, pair = found
        raise _bad(where[name], f"the pair {list(pair)} is in {where[other]} too",
                   "training, validation and test pairs that share none")


def given_edges(edge_index: np.ndarray, num_nodes: int, given: dict, where: dict[str, str], protocol: str,
                negatives: str) -> tuple[dict[str, np.ndarray], dict]:
    """A given split's arrays and meta; `where`: each array's file (and key) for messages."""
    if protocol not in PROTOCOLS:
        raise hub.DatasetError(f"link split: unknown protocol {protocol!r}; known: {', '.join(PROTOCOLS)}")
    n = np.int64(num_nodes)
    given = check_given(given, where, int(n), negatives)
    keys, undirected = _undirected_keys(edge_index, n)
    held_keys = _pair_keys(np.concatenate([given["val_pos"], given["test_pos"]]), n, undirected)
    # the training seeds: one per pair where undirected (source < destination), no self-loops, none held out
    train = given["train_pos"][given["train_pos"][:, 0] != given["train_pos"][:, 1]]
    if undirected:
        train = np.sort(train, axis=1)
    train_keys = np.unique(train[:, 0] * n + train[:, 1])
    seeds = train_keys[~np.isin(train_keys, held_keys)]
    if seeds.size == 0:
        raise _bad(where["train_pos"], "no training edge is left once the validation and test pairs are taken out",
                   "training edges other than the held-out ones")
    graph_keys = keys[~np.isin(keys, held_keys)]
    arrays = {**_message_passing(graph_keys, int(n)), "train_pos": np.stack(np.divmod(seeds, n), axis=1),
              **{k: given[k] for k in ("val_pos", "test_pos", "val_neg", "test_neg")}}
    meta = {"given": True, "protocol": protocol, "negatives": negatives,
            "eval_negatives": int(given["val_neg"].shape[0 if negatives == "shared" else 1]),
            **_counts(arrays, undirected, n, len(keys)),
            # where the given split's held-out pairs were also in its graph or training edges: taken out
            # (a held-out pair left in the message-passing graph leaks its answer)
            "held_out_removed": {"graph_edges": int(len(keys) - len(graph_keys)),
                                 "train_pos": int(len(train_keys) - len(seeds))},
            "sources": dict(where)}
    return arrays, meta


def write_given(dataset_dir: Path, given: dict, where: dict[str, str], protocol: str, negatives: str,
                origin: str) -> Path:
    """The dataset's given split, written once into GIVEN_FOLDER; `origin`: where it came from. Refused (or
    cut short), it takes the dataset converted for it along: the next try refuses it again."""
    there = (Path(dataset_dir) / GIVEN_FOLDER / "meta.json").is_file()
    try:
        return _built(Path(dataset_dir) / GIVEN_FOLDER, dataset_dir, lambda data: given_edges(
            data.edge_index, data.num_nodes, given, where, protocol, negatives), origin=origin)
    except BaseException:
        if not there:
            hub.discard(Path(dataset_dir))
        raise


def _built(target: Path, dataset_dir: Path, make, **extra_meta) -> Path:
    """`target` verified where it is there, else `make(the dataset)`'s (arrays, meta) written there once."""
    if (target / "meta.json").is_file():
        verify(target)
        return target
    data = hub.load(dataset_dir, mmap=True, features_mmap=True)
    arrays, meta = make(data)
    meta.update(dataset=data.meta["name"], **extra_meta)
    with hub.atomic_dir(target) as tmp:
        if tmp is not None:
            for name in ARRAYS:
                np.save(tmp / f"{name}.npy", arrays[name])
            hub.record_checksums(tmp)
            (tmp / "meta.json").write_text(json.dumps(meta, indent=2))
    return target


def has_given(dataset_dir: Path) -> bool:
    """Whether the dataset's split is given by its source (then it is the only split read)."""
    try:
        return bool(json.loads((Path(dataset_dir) / "meta.json").read_text()).get("link_split_given"))
    except (OSError, ValueError):
        return False


def _folder(dataset_dir: Path, **params) -> Path:
    """The split's folder: the given one where the dataset has one (it must be there), else `params`'s."""
    if not has_given(dataset_dir):
        return split_dir(dataset_dir, **params)
    target = Path(dataset_dir) / GIVEN_FOLDER
    if not (target / "meta.json").is_file():
        raise hub.DatasetError(f"{dataset_dir}: its source gives an edge split, and {target} is missing or was not "
                               f"finished; delete {dataset_dir} and prepare the dataset again")
    return target


def ensure(dataset_dir: Path, val: float = VAL_FRACTION, test: float = TEST_FRACTION,
           negatives: int = EVAL_NEGATIVES, seed: int = SPLIT_SEED) -> Path:
    """The split's folder under a materialised plain dataset (its given one where it has one), built once."""
    return _built(_folder(dataset_dir, val=val, test=test, negatives=negatives, seed=seed), dataset_dir,
                  lambda data: split_edges(data.edge_index, data.num_nodes, val, test, negatives, seed))


def verify(folder: Path) -> None:
    hub.verify(folder, None, "link split", f"delete {folder} and run the suite again to rebuild it")


def load(dataset_dir: Path, check: bool = True, **params) -> LinkSplit:
    """The split of a dataset (its given split, else the made split of `params`), mapped read-only."""
    folder = _folder(dataset_dir, **params)
    if not (folder / "meta.json").is_file():
        raise hub.DatasetError(f"{folder}: no link split here; the preparation step builds it before a link cell "
                               "(run the suite, or bench.datasets.link_split.ensure)")
    meta, read = hub.opened(folder, False, lambda meta: meta.get("format") != FORMAT and
                            f"has link-split format {meta.get('format')}, this gnnbench reads {FORMAT}")
    if check:
        verify(folder)
    return LinkSplit(path=folder, meta=meta, **{name: read(name, True) for name in ARRAYS})
