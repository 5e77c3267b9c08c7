"""OGB's link-property datasets through ogb's `LinkPropPredDataset`, into the hub with their own
edge split (link_split.py's given split) and protocol: `ogb-link:ogbl-collab` (valid/test `edge`
ranked against `edge_neg`, pairs shared by every positive: Hits@50) and `ogb-link:ogbl-citation2`
(each valid/test pair against its own 1,000 `target_node_neg`: MRR).

Raw files found or downloaded as bench/datasets/ogb.py does (expected_files; the split's
split/time/*.pt are torch dicts). The message-passing graph is OGB's training graph made
undirected; a held-out pair that is also a training edge leaves it, counted in the split's
meta.json. No node labels: the link task only.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bench.datasets import hub, link_split, ogb

RELEASE = {"ogbl-collab": 1, "ogbl-citation2": 1}  # OGB's master.csv `version`: ogb asks on stdin without it
SPLIT = {"ogbl-collab": "time", "ogbl-citation2": "time"}
EXTRA_RAW = {"ogbl-collab": ("edge_weight", "edge_year"), "ogbl-citation2": ("node_year",)}
# how each is scored (link_split.PROTOCOLS) and the form of its negatives
PROTOCOL = {"ogbl-collab": ("hits@50", "shared"), "ogbl-citation2": ("mrr", "per-positive")}
# the split dict's keys: the positives' (one [E, 2], or source and target [E]) and the negatives'
SPLIT_KEYS = {"ogbl-collab": (("edge", "[E, 2]"), ("edge_neg", "[M, 2]")),
              "ogbl-citation2": (("source_node", "target_node", "[E]"), ("target_node_neg", "[E, 1000]"))}
# Published sizes (OGB's documentation): edges an upper bound (collab repeats a pair); no labels, no node split.
KNOWN_STATS = {  # hub.sizes(nodes, edges, feature_dim, classes, train, val, test)
    "ogbl-collab": hub.sizes(235868, 2 * 1179052, 128, 0, 0, 0, 0),
    "ogbl-citation2": hub.sizes(2927963, 2 * 30387995, 128, 0, 0, 0, 0),
}
SIZES_NOTE = ("ogb-link:NAME     OGB's link datasets with their own split and protocol: ogbl-collab "
              "(Hits@50, shared negatives), ogbl-citation2 (MRR, 1,000 negatives per edge)")


def tasks(params: dict) -> tuple[str, ...]:
    return ("link",)  # no node labels


def expected_files(name: str) -> list[str]:
    raw = ["raw/edge.csv.gz", "raw/num-node-list.csv.gz", "raw/num-edge-list.csv.gz", "raw/node-feat.csv.gz",
           *(f"raw/{extra}.csv.gz" for extra in EXTRA_RAW[name])]
    return raw + [f"split/{SPLIT[name]}/{part}.pt" for part in ("train", "valid", "test")]


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
    """OGB's split dict as link_split.write_given takes it: the arrays, and where each came from."""
    (*pos_keys, pos_shape), (neg_key, neg_shape) = SPLIT_KEYS[name]
    given, where = {}, {}
    for ours, part in (("train", "train"), ("val", "valid"), ("test", "test")):
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


def materialise(spec: dict, cache: Path, data_root: Path | None) -> Path:
    name = spec["params"]["name"]
    hint = (f"; get them with `python -c \"from ogb.linkproppred import LinkPropPredDataset; "
            f"LinkPropPredDataset('{name}', root='DATA_ROOT')\"`")
    with ogb.opened(spec, cache, data_root, "linkproppred.LinkPropPredDataset", expected_files(name),
                    release=RELEASE[name], offline_hint=hint) as (dataset, raw, source_dir):
        graph = dataset[0]
        split = dataset.get_edge_split()
    n = int(graph["num_nodes"])
    src, dst = (np.asarray(a, dtype=np.int64) for a in graph["edge_index"])
    edge_index, indptr = hub.csc_from_coo(np.concatenate([src, dst]), np.concatenate([dst, src]), n)
    empty = np.zeros(0, dtype=np.int64)
    arrays = {"edge_index": edge_index, "csc_indptr": indptr,
              "features": np.asarray(graph["node_feat"], dtype=np.float32),
              "labels": np.full(n, -1, dtype=np.int64), "train_idx": empty, "val_idx": empty, "test_idx": empty}
    protocol, negatives = PROTOCOL[name]
    given, where = given_split(name, split, raw / "split" / SPLIT[name])
    given = link_split.check_given(given, where, n, negatives)  # a bad split file fails before anything is written
    path = hub.write(spec, cache, arrays, expected=KNOWN_STATS[name] if source_dir is None else None,
                     extra_meta={"raw": str(source_dir) if source_dir else "downloaded", "link_split_given": True,
                                 "features_only_acc": None})
    link_split.write_given(path, given, where, protocol, negatives, origin=f"OGB's split ({raw / 'split'})")
    return path
