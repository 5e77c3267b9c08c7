"""A small graph written in each format of a user's own graph (bench/datasets/user_graph.py), from
the synthetic source's hub arrays, so a conversion can be checked against them (a round trip).
Used by tests/test_own_graph.py and the bad-file catalogue of tests/test_bad_inputs.py."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import yaml

from bench import datasets
from bench.datasets import hub

SPLITS = ("train", "val", "test")
SYNTHETIC = "synthetic:scale=8,feature_dim=16,num_classes=4"


def reference(cache: Path) -> hub.HubDataset:
    """The synthetic graph every format is written from (its hub: the expected arrays)."""
    return hub.load(datasets.materialiser("synthetic")(datasets.parse_name(SYNTHETIC), Path(cache)), mmap=False)


def directed_half(ref: hub.HubDataset) -> np.ndarray:
    """Each undirected edge once (source < destination), in a shuffled order: what a user's
    directed edge list of this graph looks like."""
    ei = ref.edge_index[:, ref.edge_index[0] < ref.edge_index[1]]
    return ei[:, np.random.default_rng(3).permutation(ei.shape[1])]


def write_npy(ref: hub.HubDataset, folder: Path, layout: str = "2xE", splits: str = "idx") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    ei = directed_half(ref).astype(np.int32)
    np.save(folder / "edge_index.npy", ei if layout == "2xE" else np.ascontiguousarray(ei.T))
    np.save(folder / "features.npy", ref.features.astype(np.float64))
    np.save(folder / "labels.npy", ref.labels)
    for s in SPLITS:
        ids = getattr(ref, f"{s}_idx")
        if splits == "idx":
            np.save(folder / f"{s}_idx.npy", ids)
        else:
            mask = np.zeros(ref.num_nodes, dtype=bool)
            mask[ids] = True
            np.save(folder / f"{s}_mask.npy", mask)
    return folder


def write_graphbolt(ref: hub.HubDataset, folder: Path, seed_name: str = "seeds", edge_format: str = "numpy",
                    label_feature: bool = True) -> Path:
    """A GraphBolt OnDiskDataset folder (DGL 2.2+ names the set's ids `seeds`, 2.1 `seed_nodes`)."""
    (folder / "set").mkdir(parents=True, exist_ok=True)
    if edge_format == "numpy":
        np.save(folder / "edges.npy", ref.edge_index)
    else:
        np.savetxt(folder / "edges.csv", directed_half(ref).T, fmt="%d", delimiter=",")
    np.save(folder / "feat.npy", ref.features)
    task = {"name": "node_classification", "num_classes": int(ref.labels.max()) + 1}
    for split, key in zip(SPLITS, ("train_set", "validation_set", "test_set")):
        ids = getattr(ref, f"{split}_idx")
        np.save(folder / f"set/{split}.npy", ids)
        np.save(folder / f"set/{split}_labels.npy", ref.labels[ids])
        task[key] = [{"data": [{"name": seed_name, "format": "numpy", "path": f"set/{split}.npy"},
                               {"name": "labels", "format": "numpy", "path": f"set/{split}_labels.npy"}]}]
    features = [{"domain": "node", "name": "feat", "format": "numpy", "path": "feat.npy", "in_memory": True}]
    if label_feature:  # every node's label (the sets' labels cover their own nodes only)
        np.save(folder / "label.npy", ref.labels)
        features.append({"domain": "node", "name": "label", "format": "numpy", "path": "label.npy"})
    meta = {"dataset_name": "own", "graph": {"nodes": [{"num": ref.num_nodes}],
                                             "edges": [{"format": edge_format,
                                                        "path": "edges.npy" if edge_format == "numpy" else "edges.csv"}]},
            "feature_data": features, "tasks": [task]}
    (folder / "metadata.yaml").write_text(yaml.safe_dump(meta, sort_keys=False))
    return folder


def write_edge_list(ref: hub.HubDataset, folder: Path, fmt: str = "parquet", ids: str = "int",
                    features: str = "columns") -> Path:
    """edges.* (src, dst, a weight column) and nodes.* (id, label, split, features), the node
    rows in a shuffled order; ids `int` (100 + 7 i), `0..N-1`, `sparse` (100003 i + 11) or `str`
    (n00042)."""
    import pyarrow as pa
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    n = ref.num_nodes
    node_id = {"int": np.arange(n) * 7 + 100,  # dense: looked up in a table
               "0..N-1": np.arange(n),  # the id is the node
               "sparse": np.arange(n) * 100_003 + 11,  # binary search
               "str": np.array([f"n{i:05d}" for i in range(n)])}[ids]
    split = np.full(n, "", dtype=object)
    for s in SPLITS:
        split[getattr(ref, f"{s}_idx")] = "valid" if s == "val" else s
    order = np.random.default_rng(4).permutation(n)
    cols = {"id": pa.array(node_id[order]), "label": pa.array(ref.labels[order]),
            "split": pa.array(split[order].tolist(), pa.string())}
    rows = ref.features[order]
    if features == "list" and fmt == "parquet":
        cols["feat"] = pa.array(list(rows), pa.list_(pa.float32()))
    elif features == "list":
        cols["feat"] = pa.array(["[" + ", ".join(repr(float(v)) for v in row) + "]" for row in rows])
    else:
        cols.update({f"f{j}": pa.array(rows[:, j]) for j in range(rows.shape[1])})
    ei = directed_half(ref)
    edges = pa.table({"src": pa.array(node_id[ei[0]]), "dst": pa.array(node_id[ei[1]]),
                      "weight": pa.array(np.ones(ei.shape[1]))})
    write = (lambda t, name: pcsv.write_csv(t, folder / f"{name}.csv")) if fmt == "csv" else \
        (lambda t, name: pq.write_table(t, folder / f"{name}.parquet"))
    write(pa.table(cols), "nodes")
    write(edges, "edges")
    return folder


PYG_WRITER = """
import sys, numpy as np, torch
from torch_geometric.data import Data, InMemoryDataset
src, out, how = sys.argv[1:4]
ei = np.load(src + '/edge_index.npy')
n = np.load(src + '/labels.npy').shape[0]
masks = {}
for s in ('train', 'val', 'test'):
    m = torch.zeros(n, dtype=torch.bool); m[torch.from_numpy(np.load(src + f'/{s}_idx.npy'))] = True
    masks[f'{s}_mask'] = m
data = Data(x=torch.from_numpy(np.load(src + '/features.npy')), y=torch.from_numpy(np.load(src + '/labels.npy')),
            edge_index=torch.from_numpy(ei.astype(np.int64)), edge_weight=torch.ones(ei.shape[1]), **masks)
if how == 'data':
    torch.save(data, out)
elif how == 'in-memory-dataset':
    InMemoryDataset.save([data], out)
elif how == 'two-graphs':
    InMemoryDataset.save([data, data], out)
elif how == 'pickled-object':
    import datetime  # any class beyond tensors and PyG's: a pickle a safe load refuses
    torch.save({'data': data, 'when': datetime.date(2026, 11, 25)}, out)
"""


def write_pyg_file(python: Path, npy_folder: Path, out: Path, how: str = "data") -> Path:
    """A PyG file written by the pyg stack's interpreter from an npy folder (2 x E edges, ids)."""
    subprocess.run([str(python), "-c", PYG_WRITER, str(npy_folder), str(out), how], check=True, timeout=300)
    return out
