"""Planetoid citation graphs (Cora, CiteSeer, PubMed) through PyG's own `Planetoid` class.

Runs inside the pyg stack. Raw files are looked for under DATA_ROOT/NAME/raw (PyG's own layout)
or DATA_ROOT/planetoid/NAME/raw; failing that, PyG downloads them (with its progress output)
into the cache, unless GNNBENCH_OFFLINE is set. They are copied into a scratch folder first,
so PyG's processing never writes into a shared data root.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import numpy as np

from bench.datasets import hub

# Published sizes (PyG's documentation), known before any download; edges are directed pairs.
KNOWN_STATS = {  # hub.sizes(nodes, edges, feature_dim, classes, train, val, test)
    "Cora": hub.sizes(2708, 10556, 1433, 7, 140, 500, 1000),
    "CiteSeer": hub.sizes(3327, 9104, 3703, 6, 120, 500, 1000),
    "PubMed": hub.sizes(19717, 88648, 500, 3, 60, 500, 1000),
}


def raw_files(name: str) -> list[str]:
    return [f"ind.{name.lower()}.{part}" for part in ("x", "tx", "allx", "y", "ty", "ally", "graph", "test.index")]


def expected_stats(params: dict) -> dict:
    return KNOWN_STATS[params["name"]]


def materialise(spec: dict, cache: Path, data_root: Path | None) -> Path:
    from torch_geometric.datasets import Planetoid  # the pyg stack only

    name = spec["params"]["name"]
    raw = hub.find_raw(data_root, "planetoid", f"{name}/raw", raw_files(name))
    downloaded = raw is None
    if raw is None:
        if hub.offline():
            raise hub.missing_raw_error(spec["name"], data_root, "planetoid", f"{name}/raw", raw_files(name),
                                        "downloads are off (GNNBENCH_OFFLINE)")
        root = hub.download_root(cache, "planetoid")
        try:
            Planetoid(str(root), name)  # downloads into the cache, with PyG's own progress output
        except Exception as exc:  # noqa: BLE001 - any download failure becomes the same clear error
            raise hub.missing_raw_error(spec["name"], data_root, "planetoid", f"{name}/raw", raw_files(name),
                                        f"downloading them failed ({type(exc).__name__}: {exc})") from exc
        raw = root / name / "raw"
    with tempfile.TemporaryDirectory(dir=cache) as scratch:
        shutil.copytree(raw, Path(scratch) / name / "raw")
        with hub.reading_raw(spec["name"], raw):
            data = Planetoid(scratch, name)[0]
    n = data.num_nodes
    ei = data.edge_index.numpy()
    edge_index, indptr = hub.csc_from_coo(ei[0], ei[1], n)
    idx = lambda mask: np.flatnonzero(mask.numpy()).astype(np.int64)  # noqa: E731
    arrays = {"edge_index": edge_index, "csc_indptr": indptr,
              "features": data.x.numpy().astype(np.float32), "labels": data.y.numpy().astype(np.int64),
              "train_idx": idx(data.train_mask), "val_idx": idx(data.val_mask), "test_idx": idx(data.test_mask)}
    return hub.write(spec, cache, arrays, expected=KNOWN_STATS.get(name) if downloaded else None)
