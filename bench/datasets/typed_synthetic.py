"""A synthetic typed graph shaped like IGBH (MLPerf's R-GAT graph), the typed suites' offline default:
papers (the target), authors, institutes, fields of study (RELATIONS; the hub adds the reverses).
scale=100 has IGBH-tiny's sizes (550 k nodes), scale=1 5,500. Edges per source node are Poisson
with IGBH-tiny's means, destinations drawn by power-law popularity, of the source's latent class
with probability `within`; features are a weak class centroid plus noise, so the model must
aggregate over relations. `features: target`: only papers have features. Deterministic by seed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import numpy as np

from bench.datasets import baseline, typed_hub
from bench.datasets import hub
from bench.datasets.synthetic import FRACTION, check_params, split_sizes  # noqa: F401 - the same split rule
from bench.datasets.user_graph import RowReader

SHAPE = "typed"  # bench/tasks.py: serves the typed-node task
VERSION = 1
TARGET = "paper"
# IGBH-tiny's counts per unit of scale (scale=100 is IGBH-tiny)
NODES_PER_SCALE = {"paper": 1000, "author": 3570.41, "institute": 87.38, "fos": 842.2}
# (src, name, dst): mean edges per source node (IGBH-tiny's)
RELATIONS = {("paper", "cites", "paper"): 5.474, ("paper", "written_by", "author"): 4.714,
             ("author", "affiliated_to", "institute"): 0.911, ("paper", "topic", "fos"): 10.5}
POPULARITY = 2.5  # u**POPULARITY of a uniform u picks a class's member: low ranks are popular

DEFAULTS = {"scale": 1, "feature_dim": 128, "features": "all", "num_classes": 19, "seed": 0, "within": 0.8,
            "feature_signal": 0.08, "train_frac": 0.6, "val_frac": 0.2, "test_frac": None}
PARAMS = {"scale": (int, {"ge": 1, "le": 10_000}), "feature_dim": (int, {"ge": 1, "le": 4096}),
          "features": (Literal["all", "target"], {}), "num_classes": (int, {"ge": 2, "le": 256}),
          "seed": (int, {}), "within": (float, FRACTION), "feature_signal": (float, {"ge": 0}),
          "train_frac": (float, FRACTION), "val_frac": (float, FRACTION), "test_frac": (float | None, FRACTION)}


def counts(scale: int) -> dict[str, int]:
    return {t: max(1, int(round(per * scale))) for t, per in NODES_PER_SCALE.items()}


class _Picker:
    """Draws nodes of one type by class with power-law popularity (not by id)."""

    def __init__(self, classes: np.ndarray, num_classes: int, rng: np.random.Generator):
        self.members = rng.permutation(classes.size)
        self.members = self.members[np.argsort(classes[self.members], kind="stable")]
        self.sizes, self.num_classes = np.bincount(classes, minlength=num_classes), num_classes
        self.starts = np.concatenate([[0], np.cumsum(self.sizes)[:-1]])

    def draw(self, wanted: np.ndarray, within: float, rng: np.random.Generator) -> np.ndarray:
        """One node per class in `wanted`: of that class with probability `within`, else of any."""
        cls = np.where(rng.random(wanted.size) < within, wanted, rng.integers(0, self.num_classes, wanted.size))
        empty = self.sizes[cls] == 0
        if empty.any():
            cls[empty] = rng.choice(np.flatnonzero(self.sizes), int(empty.sum()))
        rank = np.floor(self.sizes[cls] * rng.random(wanted.size) ** POPULARITY).astype(np.int64)
        return self.members[self.starts[cls] + np.minimum(rank, self.sizes[cls] - 1)]


FEATURE_BLOCK_ROWS = 1 << 16  # rows of features drawn at a time (the same draws as one call)


def _graph(p: dict) -> tuple[np.random.Generator, dict, dict, dict]:
    """The random generator after the relations, the counts, every node's class, the relations."""
    rng = np.random.default_rng(p["seed"])
    sizes, classes_n = counts(p["scale"]), p["num_classes"]
    classes = {t: rng.integers(0, classes_n, n) for t, n in sizes.items()}
    pickers = {t: _Picker(c, classes_n, rng) for t, c in classes.items()}
    relations = {}
    for (src, name, dst), mean in RELATIONS.items():
        degree = rng.poisson(mean, sizes[src])
        s = np.repeat(np.arange(sizes[src], dtype=np.int64), degree)
        d = pickers[dst].draw(classes[src][s], p["within"], rng)
        if src == dst:
            keep = s != d
            s, d = s[keep], d[keep]
        relations[(src, name, dst)] = (s, d)
    return rng, sizes, classes, relations


def _feature_blocks(classes: np.ndarray, p: dict, rng: np.random.Generator):
    """One type's features a block of rows at a time (the same numbers as one whole draw)."""
    centroids = (p["feature_signal"] * rng.standard_normal((p["num_classes"], p["feature_dim"]))).astype(np.float32)
    for start in range(0, classes.size, FEATURE_BLOCK_ROWS):
        rows = classes[start:start + FEATURE_BLOCK_ROWS]
        x = rng.standard_normal((rows.size, p["feature_dim"]), dtype=np.float32)
        x += centroids[rows]
        yield x


def _has_features(node_type: str, p: dict) -> bool:
    return p["features"] == "all" or node_type == TARGET


def generate(params: dict) -> dict:
    """The typed arrays typed_hub.write takes (relations without their reverses), whole."""
    p = {**DEFAULTS, **params}
    rng, sizes, classes, relations = _graph(p)
    features = {t: np.concatenate(list(_feature_blocks(classes[t], p, rng))) if _has_features(t, p) else None
                for t in sizes}
    train, val, test = hub.split_indices(sizes[TARGET], p["train_frac"], p["val_frac"], rng, p["test_frac"])
    return {"counts": sizes, "features": features, "target": TARGET, "labels": classes[TARGET].astype(np.int64),
            "splits": {"train_idx": train, "val_idx": val, "test_idx": test}, "relations": relations}


SIZES_NOTE = ("typed-synthetic (IGBH-shaped: paper, author, institute, fos) sizes follow typed-synthetic:scale=S: "
              "5,500·S nodes; S=100 is IGBH-tiny's 550 k nodes (about 2.4 M edges, 4.8 M with reverses)")
ESTIMATE_ORIGIN = "expected sizes before generation (edges: their expectation, with the reverses)"


def expected_stats(params: dict) -> dict:
    p = {**DEFAULTS, **params}
    sizes = counts(p["scale"])
    edges = 2 * sum(int(mean * sizes[src]) for (src, _, _), mean in RELATIONS.items())
    return hub.sizes(sum(sizes.values()), edges, p["feature_dim"], p["num_classes"], *split_sizes(sizes[TARGET], p))


def materialise(spec: dict, cache: Path, data_root: Path | None = None) -> Path:
    """Generated straight into the hub with generate()'s numbers, never the whole graph at once."""
    p = {**DEFAULTS, **spec.get("params", {})}
    rng, sizes, classes, relations = _graph(p)
    with typed_hub.writing(spec, cache, sizes) as w:
        if w is None:
            return hub.dataset_dir(spec, cache)  # another process finished it first
        for relation in list(relations):
            w.relation(relation, *relations.pop(relation))
        for t in sizes:
            if _has_features(t, p):
                w.features(t, (sizes[t], p["feature_dim"]), _feature_blocks(classes[t], p, rng))
        train, val, test = hub.split_indices(sizes[TARGET], p["train_frac"], p["val_frac"], rng, p["test_frac"])
        labels = classes[TARGET].astype(np.int64)
        x = RowReader(w.folder / f"features-{TARGET}.npy")  # the sampled rows only, read back
        acc = baseline.features_only_accuracy(x, labels, train, test)
        w.finish(TARGET, labels, {"train_idx": train, "val_idx": val, "test_idx": test},
                 extra_meta={"generator": VERSION, "features_only_acc": None if acc is None else round(acc, 4)})
    return hub.dataset_dir(spec, cache)


load = typed_hub.load_for_source  # its own `load` (hub.load_dataset)
