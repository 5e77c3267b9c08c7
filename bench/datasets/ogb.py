"""OGB's datasets through the `ogb` package's own loaders (pyg stack: ogb needs torch), one module
for three sources: `ogb:NAME` (ogbn-arxiv, ogbn-products, ogbn-papers100M: NodePropPredDataset),
`ogb-link:NAME` (LINK: ogbl-collab, ogbl-citation2 with their own edge split and protocol) and
`ogb-typed:ogbn-mag` (TYPED: papers, authors, institutions, fields of study; the venue the label).
Where the raw files are looked for: docs/datasets.md. The graphs are made undirected (as the
frameworks' examples do for arxiv); nodes without a label (papers100M) get label -1, in no split.
ogbn-mag: only papers have features (the others get a learnable embedding, as in DGL's R-GCN example).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import tempfile
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from bench.datasets import hub, link_split, typed_hub

# Published sizes (OGB's documentation), edges in both directions (papers100M's an upper bound).
KNOWN_STATS = {  # hub.sizes(nodes, edges, feature_dim, classes, train, val, test)
    "ogbn-arxiv": hub.sizes(169343, 2315598, 128, 40, 90941, 29799, 48603),
    "ogbn-products": hub.sizes(2449029, 123718280, 100, 47, 196615, 39323, 2213091),
    "ogbn-papers100M": hub.sizes(111059956, 3231371744, 128, 172, 1207179, 125265, 214338),
}
SPLITS = {"ogbn-products": "sales_ranking"}  # OGB's split folder; else "time"
RELEASE = {"ogbn-mag": 2}  # OGB's master.csv `version` (else 1): ogb asks on stdin without RELEASE_v<N>.txt
EXTRA_RAW = {"ogbl-collab": ("edge_weight", "edge_year"), "ogbl-citation2": ("node_year",)}
# how each link dataset is scored (link_split.PROTOCOLS) and the form of its negatives
PROTOCOL = {"ogbl-collab": ("hits@50", "shared"), "ogbl-citation2": ("mrr", "per-positive")}
# the split dict's keys: the positives' (one [E, 2], or source and target [E]) and the negatives'
SPLIT_KEYS = {"ogbl-collab": (("edge", "[E, 2]"), ("edge_neg", "[M, 2]")),
              "ogbl-citation2": (("source_node", "target_node", "[E]"), ("target_node_neg", "[E, 1000]"))}
TARGET = {"ogbn-mag": "paper"}
PARTS = (("train", "train"), ("val", "valid"), ("test", "test"))  # our split names, OGB's


def split_dir(name: str) -> str:
    return f"split/{SPLITS.get(name, 'time')}"


def expected_files(name: str) -> list[str]:
    if name in TARGET:  # OGB's heterogeneous layout
        target = TARGET[name]
        return ["raw/num-node-dict.csv.gz", "raw/triplet-type-list.csv.gz", "raw/nodetype-has-label.csv.gz",
                f"raw/node-feat/{target}/node-feat.csv.gz", f"raw/node-label/{target}/node-label.csv.gz",
                f"{split_dir(name)}/nodetype-has-split.csv.gz",
                *(f"{split_dir(name)}/{target}/{part}.csv.gz" for part in ("train", "valid", "test"))]
    if name in EXTRA_RAW:  # a link dataset: the split's *.pt are torch dicts
        return ["raw/edge.csv.gz", "raw/num-node-list.csv.gz", "raw/num-edge-list.csv.gz", "raw/node-feat.csv.gz",
                *(f"raw/{extra}.csv.gz" for extra in EXTRA_RAW[name]),
                *(f"{split_dir(name)}/{part}.pt" for part in ("train", "valid", "test"))]
    raw = (["raw/data.npz", "raw/node-label.npz"] if name == "ogbn-papers100M" else
           ["raw/edge.csv.gz", "raw/node-feat.csv.gz", "raw/node-label.csv.gz", "raw/num-node-list.csv.gz",
            "raw/num-edge-list.csv.gz"])
    return raw + [f"{split_dir(name)}/{part}.csv.gz" for part in ("train", "valid", "test")]


def graph_arrays(graph) -> dict[str, np.ndarray]:
    """OGB's graph made undirected, and its features, as hub.write takes them."""
    src, dst = (np.asarray(a, dtype=np.int64) for a in graph["edge_index"])
    edge_index, indptr = hub.csc_from_coo(np.concatenate([src, dst]), np.concatenate([dst, src]),
                                          int(graph["num_nodes"]))
    return {"edge_index": edge_index, "csc_indptr": indptr,
            "features": np.asarray(graph["node_feat"], dtype=np.float32)}


def materialise(spec: dict, cache: Path, data_root: Path | None) -> Path:
    name = spec["params"]["name"]
    with opened(spec, cache, data_root, "nodeproppred.NodePropPredDataset") as (dataset, _, source_dir):
        graph, labels = dataset[0]
        split = dataset.get_idx_split()
    labels = np.nan_to_num(np.asarray(labels, dtype=np.float64).reshape(-1), nan=-1).astype(np.int64)
    arrays = {**graph_arrays(graph), "labels": labels,
              **{f"{ours}_idx": np.asarray(split[theirs], dtype=np.int64) for ours, theirs in PARTS}}
    return hub.write(spec, cache, arrays, expected=KNOWN_STATS[name] if source_dir is None else None)


@contextlib.contextmanager
def opened(spec: dict, cache: Path, data_root: Path | None, dataset_class: str, offline_hint: str = ""):
    """OGB's own dataset class (`ogb.<dataset_class>`) on the data root's raw copy (linked into a scratch
    folder for ogb's processed copy), else downloaded: (dataset, the raw folder, the data root's copy or None)."""
    os.environ.setdefault("OUTDATED_IGNORE", "1")  # ogb would otherwise ask PyPI for its newest version
    module, _, class_name = dataset_class.rpartition(".")
    dataset_class = getattr(importlib.import_module(f"ogb.{module}"), class_name)
    name = spec["params"]["name"]
    folder_name, required = name.replace("-", "_"), expected_files(name)  # OGB's folder: `-` as `_`
    source_dir = hub.find_raw(data_root, "ogb", folder_name, required)
    with tempfile.TemporaryDirectory(dir=cache) as scratch:
        if source_dir is None:
            dataset, raw = hub.download(  # ogb's own download and checks
                spec["name"], cache, data_root, "ogb", folder_name, required,
                lambda root: (dataset_class(name, root=str(root)), root / folder_name), offline_hint)
        else:
            work = Path(scratch) / folder_name
            (work / "processed").mkdir(parents=True)  # ogb's processed copy: here, never in the data root
            for part in ("raw", "split"):
                (work / part).symlink_to(source_dir / part, target_is_directory=True)
            (work / f"RELEASE_v{RELEASE.get(name, 1)}.txt").touch()
            with hub.reading_raw(spec["name"], source_dir):
                dataset = dataset_class(name, root=scratch)
            raw = source_dir
        with hub.reading_raw(spec["name"], raw):
            yield dataset, raw, source_dir


def _field(split: dict, part: str, key: str, where: Path, shape: str):
    """One array of OGB's split dict, as numpy; a missing one is one line naming the file."""
    found = split.get(part)
    if not isinstance(found, dict) or key not in found:
        have = ", ".join(map(str, found)) if isinstance(found, dict) else type(found).__name__
        raise hub.DatasetError(f"{where}: no {key!r} (has: {have or 'nothing'}); allowed: OGB's split dict with "
                               f"{key!r} {shape}")
    value = found[key]
    return np.asarray(value.numpy() if hasattr(value, "numpy") else value)


def given_split(name: str, split: dict, split_dir: Path) -> tuple[dict, dict]:
    """A link dataset's split dict as link_split.write_given takes it: the arrays, and where each came from."""
    (*pos_keys, pos_shape), (neg_key, neg_shape) = SPLIT_KEYS[name]
    given, where = {}, {}
    for ours, part in PARTS:
        file = split_dir / f"{part}.pt"
        pos = [_field(split, part, key, file, pos_shape) for key in pos_keys]
        if len(pos) == 2 and (pos[0].ndim != 1 or pos[0].shape != pos[1].shape):
            raise hub.DatasetError(f"{file}: source_node {tuple(pos[0].shape)} and target_node {tuple(pos[1].shape)} "
                                   "differ; allowed: two arrays [E] of the same length")
        given[f"{ours}_pos"] = pos[0] if len(pos) == 1 else np.stack(pos, axis=1)
        where[f"{ours}_pos"] = f"{file}: {', '.join(pos_keys)}"
        if ours != "train":
            given[f"{ours}_neg"] = _field(split, part, neg_key, file, neg_shape)
            where[f"{ours}_neg"] = f"{file}: {neg_key}"
    return given, where


def materialise_link(spec: dict, cache: Path, data_root: Path | None) -> Path:
    name = spec["params"]["name"]
    hint = (f"; get them with `python -c \"from ogb.linkproppred import LinkPropPredDataset; "
            f"LinkPropPredDataset('{name}', root='DATA_ROOT')\"`")
    with opened(spec, cache, data_root, "linkproppred.LinkPropPredDataset", hint) as (dataset, raw, source_dir):
        graph = dataset[0]
        split = dataset.get_edge_split()
    n = int(graph["num_nodes"])
    empty = np.zeros(0, dtype=np.int64)
    arrays = {**graph_arrays(graph), "labels": np.full(n, -1, dtype=np.int64), "train_idx": empty, "val_idx": empty,
              "test_idx": empty}
    protocol, negatives = PROTOCOL[name]
    given, where = given_split(name, split, raw / split_dir(name))
    given = link_split.check_given(given, where, n, negatives)  # a bad split file fails before anything is written
    path = hub.write(spec, cache, arrays, expected=LINK.KNOWN_STATS[name] if source_dir is None else None,
                     extra_meta={"raw": str(source_dir) if source_dir else "downloaded", "link_split_given": True,
                                 "features_only_acc": None})
    link_split.write_given(path, given, where, protocol, negatives, origin=f"OGB's split ({raw / 'split'})")
    return path


def materialise_typed(spec: dict, cache: Path, data_root: Path | None) -> Path:
    """ogb's typed graph into the typed hub (typed_hub.write)."""
    target = TARGET[spec["params"]["name"]]
    with opened(spec, cache, data_root, "nodeproppred.NodePropPredDataset") as (dataset, _, source_dir):
        graph, labels = dataset[0]
        split = dataset.get_idx_split()
    counts = {t: int(n) for t, n in graph["num_nodes_dict"].items()}
    features = {t: None for t in counts}
    for t, x in (graph.get("node_feat_dict") or {}).items():
        features[t] = None if x is None else np.asarray(x, dtype=np.float32)
    relations = {tuple(r): (np.asarray(e[0], dtype=np.int64), np.asarray(e[1], dtype=np.int64))
                 for r, e in graph["edge_index_dict"].items()}
    y = np.nan_to_num(np.asarray(labels[target], dtype=np.float64).reshape(-1), nan=-1).astype(np.int64)
    splits = {f"{ours}_idx": np.asarray(split[theirs][target], dtype=np.int64) for ours, theirs in PARTS}
    return typed_hub.write(spec, cache, counts, features, target, y, splits, relations,
                           extra_meta={"raw": str(source_dir) if source_dir else "downloaded"})


# the sources `ogb-link` and `ogb-typed` (bench.datasets.SOURCES names them by attribute)
LINK = SimpleNamespace(
    # published sizes: edges an upper bound (collab repeats a pair); no labels, no node split
    KNOWN_STATS={"ogbl-collab": hub.sizes(235868, 2 * 1179052, 128, 0, 0, 0, 0),
                 "ogbl-citation2": hub.sizes(2927963, 2 * 30387995, 128, 0, 0, 0, 0)},
    SIZES_NOTE=("ogb-link:NAME     OGB's link datasets with their own split and protocol: ogbl-collab "
                "(Hits@50, shared negatives), ogbl-citation2 (MRR, 1,000 negatives per edge)"),
    tasks=lambda params: ("link",),  # no node labels
    materialise=materialise_link,
)
TYPED = SimpleNamespace(
    SHAPE="typed",  # bench/tasks.py: serves the typed-node task
    # published sizes, edges with the hub's reverses; per node type too, so the memory estimate before
    # preparation counts the papers' features only (bench/run/memory_plan.py)
    KNOWN_STATS={"ogbn-mag": {**hub.sizes(1939743, 2 * 21111007, 128, 349, 629571, 64879, 41939),
                              "node_types": {"author": {"count": 1134649, "feature_dim": 0},
                                             "field_of_study": {"count": 59965, "feature_dim": 0},
                                             "institution": {"count": 8740, "feature_dim": 0},
                                             "paper": {"count": 736389, "feature_dim": 128}}}},
    SIZES_NOTE=("ogb-typed:ogbn-mag  OGB's typed graph (paper, author, institution, field_of_study; papers "
                "only have features): 1.9 M nodes, 21 M edges (42 M with the reverses)"),
    materialise=materialise_typed,
    load=typed_hub.load_for_source,  # its own `load` (hub.load_dataset)
)
