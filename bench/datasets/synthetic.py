"""Synthetic graphs: an RMAT (Graph500-style) generator with labels and features that carry signal.

Structure: RMAT recursively drops each edge into one quadrant of the adjacency matrix with
probabilities (a, b, c, d), which yields the power-law degrees of real graphs; vertex ids are then
permuted (as Graph500 does) so that degree does not follow the id. The graph is made undirected,
without self-loops or duplicate edges.

Signal: each node draws random class scores, which are smoothed over its neighbourhood a few
times, and its label is the best score. Neighbours therefore tend to share labels (homophily),
and a GNN that aggregates neighbours beats one that looks at a node alone. Features are a class
centroid plus Gaussian noise. Everything is deterministic by seed.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bench.datasets import hub

DEFAULTS = {"scale": 12, "edge_factor": 8, "feature_dim": 64, "num_classes": 8, "seed": 0,
            "a": 0.57, "b": 0.19, "c": 0.19, "smoothing_rounds": 4, "self_weight": 0.3,
            "feature_signal": 0.25,
            "train_frac": 0.6, "val_frac": 0.2, "test_frac": None}  # test_frac None: the rest


def rmat_edges(scale: int, edge_factor: int, a: float, b: float, c: float,
               rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Directed RMAT edges on 2**scale nodes, one bit of each endpoint per recursion level."""
    num_edges = edge_factor << scale
    src = np.zeros(num_edges, dtype=np.int64)
    dst = np.zeros(num_edges, dtype=np.int64)
    for level in range(scale):
        r = rng.random(num_edges)
        src_bit = r >= a + b                                  # quadrants c and d: lower half
        dst_bit = ((r >= a) & (r < a + b)) | (r >= a + b + c)  # quadrants b and d: right half
        src |= src_bit.astype(np.int64) << level
        dst |= dst_bit.astype(np.int64) << level
    perm = rng.permutation(1 << scale)
    return perm[src], perm[dst]


def neighbour_mean(values: np.ndarray, edge_index: np.ndarray, num_nodes: int) -> np.ndarray:
    src, dst = edge_index
    deg = np.bincount(dst, minlength=num_nodes).astype(np.float64)
    out = np.stack([np.bincount(dst, weights=values[src, k], minlength=num_nodes)
                    for k in range(values.shape[1])], axis=1)
    return out / np.maximum(deg, 1.0)[:, None]


def balanced_argmax(scores: np.ndarray, iterations: int = 200) -> np.ndarray:
    """Argmax after per-class offsets that equalise class sizes: without them, smoothing over
    power-law hubs lets a few classes swallow most nodes."""
    n, k = scores.shape
    offsets = np.zeros(k)
    step = 0.5 * scores.std()
    for _ in range(iterations):
        labels = (scores + offsets).argmax(axis=1)
        offsets -= step * (np.bincount(labels, minlength=k) / n - 1.0 / k)
    return (scores + offsets).argmax(axis=1).astype(np.int64)


def generate(params: dict) -> dict[str, np.ndarray]:
    p = {**DEFAULTS, **params}
    rng = np.random.default_rng(p["seed"])
    n = 1 << p["scale"]
    src, dst = rmat_edges(p["scale"], p["edge_factor"], p["a"], p["b"], p["c"], rng)
    keep = src != dst
    src, dst = src[keep], dst[keep]
    edge_index, indptr = hub.csc_from_coo(np.concatenate([src, dst]), np.concatenate([dst, src]), n)

    scores = rng.normal(size=(n, p["num_classes"]))
    for _ in range(p["smoothing_rounds"]):
        scores = p["self_weight"] * scores + neighbour_mean(scores, edge_index, n)
    labels = balanced_argmax(scores)

    centroids = rng.normal(size=(p["num_classes"], p["feature_dim"]))
    # drawn in row blocks (the same values as one draw: numpy's Generator streams them in order)
    # so a multi-GB feature matrix never exists in float64
    features = np.empty((n, p["feature_dim"]), dtype=np.float32)
    block = max(1, (256 << 20) // (8 * p["feature_dim"]))
    for start in range(0, n, block):
        rows = slice(start, min(start + block, n))
        features[rows] = p["feature_signal"] * centroids[labels[rows]] + rng.normal(size=(rows.stop - start, p["feature_dim"]))
    train, val, test = hub.split_indices(n, p["train_frac"], p["val_frac"], rng, p["test_frac"])
    return {"edge_index": edge_index, "csc_indptr": indptr, "features": features, "labels": labels,
            "train_idx": train, "val_idx": val, "test_idx": test}


# The parameters a suite or a command line may set, with their types and bounds (suite
# validation builds its schema from them: bench/datasets/params.py); the rest are fixed by DEFAULTS.
FRACTION = {"gt": 0, "lt": 1}
PARAMS = {"scale": (int, {"ge": 4, "le": 26}), "edge_factor": (int, {"ge": 1, "le": 64}),
          "feature_dim": (int, {"ge": 1}), "num_classes": (int, {"ge": 2}), "seed": (int, {}),
          # split fractions: a small training split keeps epochs short on a large graph
          "train_frac": (float, FRACTION), "val_frac": (float, FRACTION),
          "test_frac": (float | None, FRACTION)}  # None: the rest
USER_PARAMS = tuple(PARAMS)


def check_params(params: dict) -> None:
    total = params["train_frac"] + params["val_frac"] + (params["test_frac"] or 0)
    if total > 1:
        raise ValueError(f"train_frac + val_frac + test_frac is {total:g}; at most 1")


def canonical_params(params: dict) -> dict:
    unknown = set(params) - set(USER_PARAMS)
    if unknown:
        raise ValueError(f"unknown synthetic parameter(s) {', '.join(sorted(unknown))}; allowed: {', '.join(USER_PARAMS)}")
    return {k: params.get(k, DEFAULTS[k]) for k in USER_PARAMS}


# What `gnnbench datasets list|info` say about sizes before the graph is generated.
SIZES_NOTE = ("synthetic sizes follow its parameters: synthetic:scale=S,edge_factor=F,feature_dim=D,num_classes=C,"
              "seed=N (nodes 2^S, edges at most 2·F·2^S)")
ESTIMATE_ORIGIN = "upper bounds before generation"


def expected_stats(params: dict) -> dict:
    """Upper bounds before generation: RMAT's duplicate edges and self-loops only remove edges."""
    p = {**DEFAULTS, **params}
    n = 1 << p["scale"]
    n_train, n_val = int(p["train_frac"] * n), int(p["val_frac"] * n)
    n_test = n - n_train - n_val if p["test_frac"] is None else int(p["test_frac"] * n)
    return {"num_nodes": n, "num_edges": 2 * p["edge_factor"] * n, "feature_dim": p["feature_dim"],
            "num_classes": p["num_classes"], "num_train": n_train, "num_val": n_val,
            "num_test": n_test}


def materialise(spec: dict, cache: Path, data_root: Path | None = None) -> Path:
    params = {**DEFAULTS, **spec.get("params", {})}
    arrays = generate(params)
    src, dst = arrays["edge_index"]
    homophily = float((arrays["labels"][src] == arrays["labels"][dst]).mean()) if src.size else 0.0
    return hub.write(spec, cache, arrays, extra_meta={"num_classes": params["num_classes"],
                                                      "edge_homophily": round(homophily, 4)})
