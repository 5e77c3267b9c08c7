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


def write_collab_like(root: Path, scale: int = 8, negatives: int = 200) -> dict:
    """Writes ROOT/ogbl_collab/{raw,split/time}/... in OGB's layout for ogbl-collab (needs torch:
    the split is torch-saved dicts, so it runs in the pyg stack): the training edges once per pair
    in raw/edge.csv.gz (ogb adds the reverses), with weights and years; valid (2018) and test (2019)
    edges with `edge_neg`, negative pairs shared by every positive, none of them an edge. One valid
    pair is also a training edge of an earlier year, as collab repeats pairs. Returns the counts."""
    import torch

    rng = np.random.default_rng(7)
    g = synthetic.generate({"scale": scale, "feature_dim": 16, "num_classes": 4})
    src, dst = g["edge_index"]
    pairs = np.stack([src[src < dst], dst[src < dst]], axis=1)
    n = g["labels"].size
    year = rng.choice([2015, 2016, 2017, 2018, 2019], size=len(pairs), p=[0.3, 0.3, 0.2, 0.1, 0.1])
    train, valid, test = pairs[year < 2018], pairs[year == 2018], pairs[year == 2019]
    train = np.concatenate([train, valid[:1]])  # the same pair, an earlier year
    train_year = np.concatenate([year[year < 2018], [2016]])
    edges = {(int(a), int(b)) for a, b in pairs} | {(int(b), int(a)) for a, b in pairs}
    neg = []
    while len(neg) < negatives:
        a, b = (int(v) for v in rng.integers(0, n, size=2))
        if a != b and (a, b) not in edges:
            neg.append((a, b))
    base = root / "ogbl_collab"
    _csv(base / "raw" / "edge.csv.gz", train)
    _csv(base / "raw" / "edge_weight.csv.gz", np.ones(len(train), dtype=np.int64))
    _csv(base / "raw" / "edge_year.csv.gz", train_year)
    _csv(base / "raw" / "node-feat.csv.gz", np.round(g["features"], 5))
    _csv(base / "raw" / "num-node-list.csv.gz", [n])
    _csv(base / "raw" / "num-edge-list.csv.gz", [len(train)])
    split = base / "split" / "time"
    split.mkdir(parents=True)
    torch.save({"edge": torch.from_numpy(train), "weight": torch.ones(len(train), dtype=torch.long),
                "year": torch.from_numpy(train_year)}, split / "train.pt")
    for part, pos, y in (("valid", valid, 2018), ("test", test, 2019)):
        torch.save({"edge": torch.from_numpy(pos), "weight": torch.ones(len(pos), dtype=torch.long),
                    "year": torch.full((len(pos),), y), "edge_neg": torch.tensor(neg)}, split / f"{part}.pt")
    return {"num_nodes": n, "train": len(train), "valid": len(valid), "test": len(test), "negatives": negatives}


def write_citation2_like(root: Path, scale: int = 8, negatives: int = 1000) -> dict:
    """Writes ROOT/ogbl_citation2/{raw,split/time}/... in OGB's layout for ogbl-citation2 (needs
    torch): directed citations, the training ones in raw/edge.csv.gz; for some papers one citation
    held out for valid and one for test (`source_node`, `target_node`), each with its own
    `target_node_neg` (1,000 per edge, none the paper's own citation). Returns the counts."""
    import torch

    rng = np.random.default_rng(11)
    g = synthetic.generate({"scale": scale, "feature_dim": 16, "num_classes": 4})
    src, dst = g["edge_index"]
    once = src < dst  # a citation from the lower id to the higher
    cites = np.stack([src[once], dst[once]], axis=1)
    n = g["labels"].size
    order = rng.permutation(len(cites))
    held = {"valid": [], "test": []}
    used_sources, kept = set(), []
    for i in order:
        s, d = (int(v) for v in cites[i])
        part = "valid" if len(held["valid"]) < 40 else "test" if len(held["test"]) < 40 else None
        if part and s not in used_sources:
            held[part].append((s, d))
            used_sources.add(s)
        else:
            kept.append((s, d))
    train = np.array(sorted(kept), dtype=np.int64)
    base = root / "ogbl_citation2"
    _csv(base / "raw" / "edge.csv.gz", train)
    _csv(base / "raw" / "node-feat.csv.gz", np.round(g["features"], 5))
    _csv(base / "raw" / "node_year.csv.gz", np.full(n, 2019))
    _csv(base / "raw" / "num-node-list.csv.gz", [n])
    _csv(base / "raw" / "num-edge-list.csv.gz", [len(train)])
    split = base / "split" / "time"
    split.mkdir(parents=True)
    torch.save({"source_node": torch.from_numpy(train[:, 0]), "target_node": torch.from_numpy(train[:, 1])},
               split / "train.pt")
    for part in ("valid", "test"):
        pos = np.array(held[part], dtype=np.int64)
        neg = rng.integers(0, n, size=(len(pos), negatives))
        neg = np.where(neg == pos[:, 1:2], (neg + 1) % n, neg)  # never the positive's own destination
        torch.save({"source_node": torch.from_numpy(pos[:, 0]), "target_node": torch.from_numpy(pos[:, 1]),
                    "target_node_neg": torch.from_numpy(neg)}, split / f"{part}.pt")
    return {"num_nodes": n, "train": len(train), "valid": 40, "test": 40, "negatives": negatives}
