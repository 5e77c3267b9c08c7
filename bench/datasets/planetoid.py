"""Planetoid citation graphs (Cora, CiteSeer, PubMed) through PyG's own `Planetoid` class.

Runs inside the pyg stack. The raw files are looked for under DATA_ROOT/NAME/raw (the layout
PyG itself uses); they are copied into a scratch folder first so PyG's processing never writes
into a shared data root.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import numpy as np

from bench.datasets import hub


def materialise(spec: dict, cache: Path, data_root: Path | None) -> Path:
    from torch_geometric.datasets import Planetoid  # the pyg stack only

    name = spec.get("params", {}).get("name", "Cora")
    if data_root is None:
        raise hub.DatasetError(
            f"dataset {spec['name']!r}: Planetoid {name} needs a data root holding {name}/raw/ "
            "(option --data-root or GNNBENCH_DATA_ROOT)")
    raw = Path(data_root) / name / "raw"
    if not raw.is_dir():
        raise hub.DatasetError(f"dataset {spec['name']!r}: no Planetoid raw files at {raw} "
                               f"(expected ind.{name.lower()}.x, .y, .graph, ... as PyG downloads them)")
    with tempfile.TemporaryDirectory(dir=cache) as scratch:
        shutil.copytree(raw, Path(scratch) / name / "raw")
        data = Planetoid(scratch, name)[0]
    n = data.num_nodes
    ei = data.edge_index.numpy()
    edge_index, indptr = hub.csc_from_coo(ei[0], ei[1], n)
    idx = lambda mask: np.flatnonzero(mask.numpy()).astype(np.int64)  # noqa: E731
    arrays = {"edge_index": edge_index, "csc_indptr": indptr,
              "features": data.x.numpy().astype(np.float32), "labels": data.y.numpy().astype(np.int64),
              "train_idx": idx(data.train_mask), "val_idx": idx(data.val_mask), "test_idx": idx(data.test_mask)}
    return hub.write(spec, cache, arrays)
