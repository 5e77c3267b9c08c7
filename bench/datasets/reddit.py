"""Reddit (posts linked by shared commenters) through PyG's own `Reddit` class.

Runs inside the pyg stack. Raw files (reddit_data.npz, reddit_graph.npz) are looked for under
DATA_ROOT/Reddit/raw or DATA_ROOT/reddit/Reddit/raw; failing that, PyG downloads them into the cache,
unless GNNBENCH_OFFLINE is set. PyG processes in a scratch folder that links to the raw files.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from bench.datasets import hub

RAW_FILES = ["reddit_data.npz", "reddit_graph.npz"]
STATS = hub.sizes(232965, 114615892, 602, 41, 153431, 23831, 55703)  # PyG's documentation


def expected_stats(params: dict) -> dict:
    return STATS


def materialise(spec: dict, cache: Path, data_root: Path | None) -> Path:
    from torch_geometric.datasets import Reddit  # the pyg stack only

    raw = hub.find_raw(data_root, "reddit", "Reddit/raw", RAW_FILES)
    downloaded = raw is None
    if raw is None:
        if hub.offline():
            raise hub.missing_raw_error(spec["name"], data_root, "reddit", "Reddit/raw", RAW_FILES,
                                        "downloads are off (GNNBENCH_OFFLINE)")
        root = hub.download_root(cache, "reddit")
        try:
            Reddit(str(root))
        except Exception as exc:  # noqa: BLE001
            raise hub.missing_raw_error(spec["name"], data_root, "reddit", "Reddit/raw", RAW_FILES,
                                        f"downloading them failed ({type(exc).__name__}: {exc})") from exc
        raw = root / "raw"
    with tempfile.TemporaryDirectory(dir=cache) as scratch:
        (Path(scratch) / "raw").symlink_to(raw, target_is_directory=True)
        with hub.reading_raw(spec["name"], raw):
            data = Reddit(scratch)[0]
    ei = data.edge_index.numpy()
    edge_index, indptr = hub.csc_from_coo(ei[0], ei[1], data.num_nodes)
    idx = lambda mask: np.flatnonzero(mask.numpy()).astype(np.int64)  # noqa: E731
    arrays = {"edge_index": edge_index, "csc_indptr": indptr, "features": data.x.numpy().astype(np.float32),
              "labels": data.y.numpy().astype(np.int64), "train_idx": idx(data.train_mask),
              "val_idx": idx(data.val_mask), "test_idx": idx(data.test_mask)}
    return hub.write(spec, cache, arrays, expected=STATS if downloaded else None)
