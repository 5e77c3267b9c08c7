"""OGB's typed node-property dataset ogbn-mag (papers, authors, institutions, fields of study; the
paper's venue is the label) through ogb's `NodePropPredDataset` into the typed hub (typed_hub.py):
`ogb-typed:ogbn-mag`. Raw files found or downloaded as bench/datasets/ogb.py does (expected_files:
OGB's heterogeneous layout). Only papers have features (the model gives the other types a
learnable embedding, as DGL's R-GCN example does); the hub adds each relation's reverse.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bench.datasets import hub, ogb, typed_hub

SHAPE = "typed"  # bench/tasks.py: serves the typed-node task
TARGET = {"ogbn-mag": "paper"}
RELEASE = {"ogbn-mag": 2}  # OGB's master.csv `version`: ogb asks on stdin without RELEASE_v<N>.txt
SPLIT = {"ogbn-mag": "time"}
# Published sizes (OGB's documentation), edges with the hub's reverses; per node type too, so the memory
# estimate before preparation counts the papers' features only (bench/run/memory_plan.py).
KNOWN_STATS = {  # hub.sizes(nodes, edges, feature_dim, classes, train, val, test)
    "ogbn-mag": {**hub.sizes(1939743, 2 * 21111007, 128, 349, 629571, 64879, 41939),
                 "node_types": {"author": {"count": 1134649, "feature_dim": 0},
                                "field_of_study": {"count": 59965, "feature_dim": 0},
                                "institution": {"count": 8740, "feature_dim": 0},
                                "paper": {"count": 736389, "feature_dim": 128}}},
}
SIZES_NOTE = ("ogb-typed:ogbn-mag  OGB's typed graph (paper, author, institution, field_of_study; papers "
              "only have features): 1.9 M nodes, 21 M edges (42 M with the reverses)")


def expected_files(name: str) -> list[str]:
    target = TARGET[name]
    return ["raw/num-node-dict.csv.gz", "raw/triplet-type-list.csv.gz", "raw/nodetype-has-label.csv.gz",
            f"raw/node-feat/{target}/node-feat.csv.gz", f"raw/node-label/{target}/node-label.csv.gz",
            f"split/{SPLIT[name]}/nodetype-has-split.csv.gz",
            *(f"split/{SPLIT[name]}/{target}/{part}.csv.gz" for part in ("train", "valid", "test"))]


def _read(dataset, name: str) -> tuple[dict, dict, dict, np.ndarray, dict]:
    """ogb's graph as typed_hub.write takes it: counts, features, relations, labels, splits."""
    graph, labels = dataset[0]
    split = dataset.get_idx_split()
    target = TARGET[name]
    counts = {t: int(n) for t, n in graph["num_nodes_dict"].items()}
    features = {t: None for t in counts}
    for t, x in (graph.get("node_feat_dict") or {}).items():
        features[t] = None if x is None else np.asarray(x, dtype=np.float32)
    relations = {tuple(r): (np.asarray(e[0], dtype=np.int64), np.asarray(e[1], dtype=np.int64))
                 for r, e in graph["edge_index_dict"].items()}
    y = np.nan_to_num(np.asarray(labels[target], dtype=np.float64).reshape(-1), nan=-1).astype(np.int64)
    splits = {ours: np.asarray(split[theirs][target], dtype=np.int64)
              for ours, theirs in (("train_idx", "train"), ("val_idx", "valid"), ("test_idx", "test"))}
    return counts, features, relations, y, splits


def materialise(spec: dict, cache: Path, data_root: Path | None) -> Path:
    name = spec["params"]["name"]
    with ogb.opened(spec, cache, data_root, "nodeproppred.NodePropPredDataset", expected_files(name),
                    release=RELEASE[name]) as (dataset, _, source_dir):
        counts, features, relations, labels, splits = _read(dataset, name)
    return typed_hub.write(spec, cache, counts, features, TARGET[name], labels, splits, relations,
                           extra_meta={"raw": str(source_dir) if source_dir else "downloaded"})


load = typed_hub.load_for_source  # its own `load` (hub.load_dataset)
