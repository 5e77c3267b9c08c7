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


def write_mag_like(root: Path, scale: int = 1) -> dict:
    """Writes ROOT/ogbn_mag/{raw,split/time}/... in OGB's heterogeneous raw layout (as ogbn-mag:
    paper, author, institution, field_of_study; features on papers only) from the IGBH-shaped
    generator, and returns what a reader must find: counts, relations as given, labels, splits."""
    from bench.datasets import typed_synthetic

    g = typed_synthetic.generate({"scale": scale, "feature_dim": 16, "num_classes": 4, "features": "target"})
    rename = {"paper": "paper", "author": "author", "institute": "institution", "fos": "field_of_study"}
    counts = {rename[t]: n for t, n in g["counts"].items()}
    rel = g["relations"]
    relations = {  # ogbn-mag's four relations, each given once
        ("author", "affiliated_with", "institution"): rel[("author", "affiliated_to", "institute")],
        ("author", "writes", "paper"): rel[("paper", "written_by", "author")][::-1],
        ("paper", "cites", "paper"): rel[("paper", "cites", "paper")],
        ("paper", "has_topic", "field_of_study"): rel[("paper", "topic", "fos")],
    }
    base = root / "ogbn_mag"
    raw = base / "raw"
    types = sorted(counts)
    raw.mkdir(parents=True)
    with gzip.open(raw / "num-node-dict.csv.gz", "wt") as f:  # a header row, then the counts
        f.write(",".join(types) + "\n" + ",".join(str(counts[t]) for t in types) + "\n")
    with gzip.open(raw / "nodetype-has-label.csv.gz", "wt") as f:
        f.write(",".join(types) + "\n" + ",".join(str(t == "paper") for t in types) + "\n")
    _csv(raw / "triplet-type-list.csv.gz", [np.array(r) for r in relations])
    for r, (s, d) in relations.items():
        folder = raw / "relations" / "___".join(r)
        _csv(folder / "edge.csv.gz", np.stack([s, d], axis=1))
        _csv(folder / "num-edge-list.csv.gz", [s.size])
        _csv(folder / "edge_reltype.csv.gz", np.zeros(s.size, dtype=np.int64))
    _csv(raw / "node-feat" / "paper" / "node-feat.csv.gz", np.round(g["features"]["paper"], 5))
    _csv(raw / "node-feat" / "paper" / "node_year.csv.gz", np.full(counts["paper"], 2019))
    _csv(raw / "node-label" / "paper" / "node-label.csv.gz", g["labels"])
    split = base / "split" / "time"
    split.mkdir(parents=True)
    with gzip.open(split / "nodetype-has-split.csv.gz", "wt") as f:
        f.write(",".join(types) + "\n" + ",".join(str(t == "paper") for t in types) + "\n")
    for part, key in (("train", "train_idx"), ("valid", "val_idx"), ("test", "test_idx")):
        _csv(split / "paper" / f"{part}.csv.gz", g["splits"][key])
    return {"counts": counts, "relations": relations, "labels": g["labels"], "splits": g["splits"],
            "features": np.round(g["features"]["paper"], 5)}
