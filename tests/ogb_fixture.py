"""A small dataset written in OGB's raw on-disk format (as ogbn-arxiv), for ogb's own reader."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np

from bench.datasets import synthetic


def _csv(path: Path, rows) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as f:
        for row in rows:
            f.write(",".join(str(v) for v in np.atleast_1d(row)) + "\n")


def write_arxiv_like(root: Path, scale: int = 9) -> dict:
    """Writes ROOT/ogbn_arxiv/{raw,split/time}/... and returns what a reader must find."""
    g = synthetic.generate({"scale": scale, "feature_dim": 16, "num_classes": 4})
    src, dst = g["edge_index"]
    once = src < dst  # OGB stores arxiv's citations once, directed
    n = g["labels"].size
    base = root / "ogbn_arxiv"
    _csv(base / "raw" / "edge.csv.gz", np.stack([src[once], dst[once]], axis=1))
    _csv(base / "raw" / "node-feat.csv.gz", np.round(g["features"], 5))
    _csv(base / "raw" / "node-label.csv.gz", g["labels"])
    _csv(base / "raw" / "node_year.csv.gz", np.full(n, 2020))
    _csv(base / "raw" / "num-node-list.csv.gz", [n])
    _csv(base / "raw" / "num-edge-list.csv.gz", [int(once.sum())])
    for part, idx in (("train", g["train_idx"]), ("valid", g["val_idx"]), ("test", g["test_idx"])):
        _csv(base / "split" / "time" / f"{part}.csv.gz", idx)
    return {"num_nodes": n, "num_edges": int(src.size), "feature_dim": 16, "num_classes": 4,
            "num_train": g["train_idx"].size, "num_val": g["val_idx"].size, "num_test": g["test_idx"].size}
