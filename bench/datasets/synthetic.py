"""Synthetic graphs: an RMAT (Graph500-style) generator with communities, labels that follow them, and
features too weak alone, so that a model must read the neighbourhood. The top ceil(log2 C) levels
of RMAT's recursion keep both endpoints in one half with probability `within_community`
(marginals, so degrees, unchanged): id ranges become communities, a node's class its range; ids
are then permuted. Undirected, without self-loops or duplicates; nodes without an edge are in no
split. One random draw decides several levels through a 2^20-entry lookup table. Deterministic by seed.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bench import datasets
from bench.datasets import hub

VERSION = 2  # bumped whenever the same parameters give other arrays (part of the hub folder's key)

DEFAULTS = {"scale": 12, "edge_factor": 8, "feature_dim": 64, "num_classes": 8, "seed": 0,
            "a": 0.57, "b": 0.19, "c": 0.19, "within_community": 0.95, "feature_signal": 0.15,
            "train_frac": 0.6, "val_frac": 0.2, "test_frac": None}  # test_frac None: the rest

TABLE_BITS = 20       # resolution of the quadrant lookup tables
LEVELS_PER_TABLE = 4  # recursion levels decided by one table lookup (4^4 outcomes)
CHUNK_EDGES = 1 << 22  # edges made at a time (their working arrays stay small)


def level_probabilities(scale: int, a: float, b: float, c: float, community_levels: int,
                        within: float) -> list[tuple[float, float, float, float]]:
    """(a, b, c, d) of each recursion level, bit 0 first, the top `community_levels` biased within."""
    d = 1 - a - b - c
    across = (1 - within) / 2
    if not (0 < within < 1 and across <= min(a + b, a + c) and a + b + across < 1):
        raise ValueError(f"within_community={within} does not fit RMAT's a={a}, b={b}, c={c}")
    community = (a + b - across, across, across, 1 - (a + b - across) - 2 * across)
    community_levels = min(community_levels, scale)
    return [(a, b, c, d)] * (scale - community_levels) + [community] * community_levels


def quadrant_table(levels: list[tuple[float, ...]], bits: int = TABLE_BITS) -> np.ndarray:
    """A 2^bits lookup table: a uniform `bits`-bit number -> the quadrants of len(levels) levels."""
    k = len(levels)
    joint = np.ones(1)
    for p in levels:  # outcome index: base-4 digits, the first level most significant
        joint = np.outer(joint, p).ravel()
    slots = joint * (1 << bits)
    counts = np.floor(slots).astype(np.int64)
    counts[np.argsort(counts - slots, kind="stable")[:(1 << bits) - counts.sum()]] += 1
    outcomes = np.arange(4 ** k)
    src_bits, dst_bits = np.zeros_like(outcomes), np.zeros_like(outcomes)
    for level in range(k):
        quadrant = (outcomes // 4 ** (k - 1 - level)) % 4  # 0: a, 1: b, 2: c, 3: d
        src_bits |= (quadrant >> 1) << level
        dst_bits |= (quadrant & 1) << level
    return np.repeat((src_bits | dst_bits << k).astype(np.uint8), counts)


def rmat_edges(scale: int, edge_factor: int, levels: list[tuple[float, ...]],
               rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Directed RMAT edges on 2**scale nodes (uint32 ids, before any permutation)."""
    num_edges = edge_factor << scale
    groups = [(start, levels[start:start + LEVELS_PER_TABLE]) for start in range(0, scale, LEVELS_PER_TABLE)]
    tables = [quadrant_table(group) for _, group in groups]
    per_draw = 64 // TABLE_BITS  # table indices cut from one 64-bit draw
    mask = np.uint64((1 << TABLE_BITS) - 1)
    src, dst = np.empty(num_edges, np.uint32), np.empty(num_edges, np.uint32)
    for start in range(0, num_edges, CHUNK_EDGES):
        size = min(CHUNK_EDGES, num_edges - start)
        s, d = src[start:start + size], dst[start:start + size]
        s[:], d[:] = 0, 0
        for i, ((level, group), table) in enumerate(zip(groups, tables)):
            if i % per_draw == 0:
                raw = rng.bit_generator.random_raw(size)
            outcome = table[(raw >> np.uint64(TABLE_BITS * (i % per_draw))) & mask]
            k = len(group)
            s |= (outcome & ((1 << k) - 1)).astype(np.uint32) << np.uint32(level)
            d |= (outcome >> k).astype(np.uint32) << np.uint32(level)
    return src, dst


def undirected_csc(src: np.ndarray, dst: np.ndarray, scale: int) -> tuple[np.ndarray, np.ndarray]:
    """Both directions of every edge, self-loops and duplicates dropped: (edge_index, csc_indptr)."""
    n = 1 << scale
    keep = src != dst
    src, dst = src[keep], dst[keep]
    m = src.size
    keys = np.empty(2 * m, dtype=np.int64)
    np.left_shift(dst, scale, out=keys[:m], dtype=np.int64)
    keys[:m] |= src
    np.left_shift(src, scale, out=keys[m:], dtype=np.int64)
    keys[m:] |= dst
    del src, dst
    keys.sort()
    fresh = np.empty(keys.size, dtype=bool)
    fresh[:1] = True
    np.not_equal(keys[1:], keys[:-1], out=fresh[1:])
    keys = keys[fresh]
    del fresh
    edge_index = np.empty((2, keys.size), dtype=np.int64)
    np.bitwise_and(keys, n - 1, out=edge_index[0])
    np.right_shift(keys, scale, out=edge_index[1])
    del keys
    indptr = np.searchsorted(edge_index[1], np.arange(n + 1, dtype=np.int64)).astype(np.int64)
    return edge_index, indptr


def generate(params: dict) -> dict[str, np.ndarray]:
    p = {**DEFAULTS, **params}
    rng = np.random.default_rng(p["seed"])
    scale, classes = p["scale"], p["num_classes"]
    n = 1 << scale
    community_levels = int(np.ceil(np.log2(classes)))
    levels = level_probabilities(scale, p["a"], p["b"], p["c"], community_levels, p["within_community"])
    src, dst = rmat_edges(scale, p["edge_factor"], levels, rng)
    perm = rng.permutation(n).astype(np.uint32)
    # a node's class is its community: its id range before the permutation
    labels = np.empty(n, dtype=np.int64)
    labels[perm] = (np.arange(n, dtype=np.int64) * classes) >> scale
    np.take(perm, src, out=src)
    np.take(perm, dst, out=dst)
    del perm
    edge_index, indptr = undirected_csc(src, dst, scale)
    del src, dst

    centroids = (p["feature_signal"] * rng.standard_normal((classes, p["feature_dim"]))).astype(np.float32)
    # noise drawn in float32 row blocks, straight into the matrix (no float64 copy of it)
    features = np.empty((n, p["feature_dim"]), dtype=np.float32)
    block = max(1, (64 << 20) // (4 * p["feature_dim"]))
    for start in range(0, n, block):
        rows = features[start:start + block]
        rng.standard_normal(rows.shape, dtype=np.float32, out=rows)
        rows += centroids[labels[start:start + block]]
    connected = np.flatnonzero(np.diff(indptr) > 0)
    train, val, test = hub.split_indices(n, p["train_frac"], p["val_frac"], rng, p["test_frac"], among=connected)
    return {"edge_index": edge_index, "csc_indptr": indptr, "features": features, "labels": labels,
            "train_idx": train, "val_idx": val, "test_idx": test}


# what a suite or a command line may set (bench/datasets/params.py); the rest are fixed by DEFAULTS
FRACTION = {"gt": 0, "lt": 1}
PARAMS = {"scale": (int, {"ge": 4, "le": 26}), "edge_factor": (int, {"ge": 1, "le": 64}),
          "feature_dim": (int, {"ge": 1}), "num_classes": (int, {"ge": 2, "le": 256}), "seed": (int, {}),
          # split fractions (of the nodes with an edge): a small training split keeps epochs short
          "train_frac": (float, FRACTION), "val_frac": (float, FRACTION),
          "test_frac": (float | None, FRACTION)}  # None: the rest


def check_params(params: dict) -> None:
    total = params["train_frac"] + params["val_frac"] + (params["test_frac"] or 0)
    if total > 1:
        raise ValueError(f"train_frac + val_frac + test_frac is {total:g}; at most 1")


def canonical_params(params: dict) -> dict:
    return datasets.declared_params("synthetic", params)


SIZES_NOTE = ("synthetic sizes follow its parameters: synthetic:scale=S,edge_factor=F,feature_dim=D,num_classes=C,"
              "seed=N (nodes 2^S, edges at most 2·F·2^S, splits over the nodes with an edge)")
ESTIMATE_ORIGIN = "upper bounds before generation"


def expected_stats(params: dict) -> dict:
    """Upper bounds before generation (duplicates, self-loops and unconnected nodes only remove)."""
    p = {**DEFAULTS, **params}
    n = 1 << p["scale"]
    return hub.sizes(n, 2 * p["edge_factor"] * n, p["feature_dim"], p["num_classes"], *split_sizes(n, p))


def split_sizes(n: int, p: dict) -> tuple[int, int, int]:
    """(train, val, test) of `n` nodes as hub.split_indices splits them with p's fractions."""
    n_train, n_val = int(p["train_frac"] * n), int(p["val_frac"] * n)
    return n_train, n_val, n - n_train - n_val if p["test_frac"] is None else int(p["test_frac"] * n)


def materialise(spec: dict, cache: Path, data_root: Path | None = None) -> Path:
    params = {**DEFAULTS, **spec.get("params", {})}
    arrays = generate(params)
    src, dst = arrays["edge_index"]
    homophily = float(np.count_nonzero(arrays["labels"][src] == arrays["labels"][dst]) / max(src.size, 1))
    return hub.write(spec, cache, arrays, extra_meta={
        "num_classes": params["num_classes"], "edge_homophily": round(homophily, 4), "generator": VERSION})
