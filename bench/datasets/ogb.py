"""OGB node-property datasets (ogbn-arxiv, ogbn-products, ogbn-papers100M) through the `ogb`
package's own `NodePropPredDataset` (pyg stack: ogb needs torch), and `opened`, how every OGB
source (ogb_typed.py, ogb_link.py) reads its raw files.

Raw files are looked for under DATA_ROOT/ogbn_NAME/ (OGB's layout: raw/, split/) or
DATA_ROOT/ogb/ogbn_NAME/, else ogb downloads them into the cache (unless GNNBENCH_OFFLINE is set).
The graph is made undirected (as the frameworks' examples do for arxiv); nodes without a label
(papers100M) get label -1 and are in no split.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import tempfile
from pathlib import Path

import numpy as np

from bench.datasets import hub

# Published sizes (OGB's documentation), edges in both directions (papers100M's an upper bound).
KNOWN_STATS = {  # hub.sizes(nodes, edges, feature_dim, classes, train, val, test)
    "ogbn-arxiv": hub.sizes(169343, 2315598, 128, 40, 90941, 29799, 48603),
    "ogbn-products": hub.sizes(2449029, 123718280, 100, 47, 196615, 39323, 2213091),
    "ogbn-papers100M": hub.sizes(111059956, 3231371744, 128, 172, 1207179, 125265, 214338),
}
SPLITS = {"ogbn-arxiv": "time", "ogbn-products": "sales_ranking", "ogbn-papers100M": "time"}


def folder(name: str) -> str:
    return name.replace("-", "_")


def expected_files(name: str) -> list[str]:
    if name == "ogbn-papers100M":
        raw = ["raw/data.npz", "raw/node-label.npz"]
    else:
        raw = ["raw/edge.csv.gz", "raw/node-feat.csv.gz", "raw/node-label.csv.gz",
               "raw/num-node-list.csv.gz", "raw/num-edge-list.csv.gz"]
    return raw + [f"split/{SPLITS[name]}/{part}.csv.gz" for part in ("train", "valid", "test")]


def materialise(spec: dict, cache: Path, data_root: Path | None) -> Path:
    name = spec["params"]["name"]
    with opened(spec, cache, data_root, "nodeproppred.NodePropPredDataset", expected_files(name)) as (dataset, _, source_dir):
        graph, labels = dataset[0]
        split = dataset.get_idx_split()
    n = int(graph["num_nodes"])
    src, dst = graph["edge_index"]
    edge_index, indptr = hub.csc_from_coo(np.concatenate([src, dst]), np.concatenate([dst, src]), n)
    labels = np.nan_to_num(np.asarray(labels, dtype=np.float64).reshape(-1), nan=-1).astype(np.int64)
    arrays = {"edge_index": edge_index, "csc_indptr": indptr,
              "features": np.asarray(graph["node_feat"], dtype=np.float32), "labels": labels,
              "train_idx": np.asarray(split["train"], dtype=np.int64),
              "val_idx": np.asarray(split["valid"], dtype=np.int64),
              "test_idx": np.asarray(split["test"], dtype=np.int64)}
    return hub.write(spec, cache, arrays, expected=KNOWN_STATS[name] if source_dir is None else None)


@contextlib.contextmanager
def opened(spec: dict, cache: Path, data_root: Path | None, dataset_class: str, required: list[str],
           release: int = 1, offline_hint: str = ""):
    """OGB's own dataset class (`ogb.<dataset_class>`) on the data root's raw copy (linked into a
    scratch folder for ogb's processed copy), else downloaded: yields (dataset, the raw folder, the
    data root's copy or None)."""
    os.environ.setdefault("OUTDATED_IGNORE", "1")  # ogb would otherwise ask PyPI for its newest version
    module, _, class_name = dataset_class.rpartition(".")
    dataset_class = getattr(importlib.import_module(f"ogb.{module}"), class_name)
    folder_name = folder(spec["params"]["name"])
    source_dir = hub.find_raw(data_root, "ogb", folder_name, required)
    with tempfile.TemporaryDirectory(dir=cache) as scratch:
        if source_dir is None:
            dataset, raw = hub.download(  # ogb's own download and checks
                spec["name"], cache, data_root, "ogb", folder_name, required,
                lambda root: (dataset_class(spec["params"]["name"], root=str(root)), root / folder_name), offline_hint)
        else:
            work = Path(scratch) / folder_name
            work.mkdir()
            for part in ("raw", "split"):
                (work / part).symlink_to(source_dir / part, target_is_directory=True)
            (work / "processed").mkdir()  # ogb writes its processed copy here, never into the data root
            (work / f"RELEASE_v{release}.txt").touch()  # the version ogb expects; without it ogb asks on stdin
            with hub.reading_raw(spec["name"], source_dir):
                dataset = dataset_class(spec["params"]["name"], root=scratch)
            raw = source_dir
        with hub.reading_raw(spec["name"], raw):
            yield dataset, raw, source_dir
