"""Reddit (posts linked by shared commenters) through PyG's own `Reddit` class (pyg stack).

Raw files (reddit_data.npz, reddit_graph.npz) are looked for under DATA_ROOT/Reddit/raw or
DATA_ROOT/reddit/Reddit/raw, else downloaded into the cache (unless GNNBENCH_OFFLINE is set).
PyG processes in a scratch folder that links to them.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from bench.datasets import hub
from bench.datasets.planetoid import pyg_arrays

RAW_FILES = ["reddit_data.npz", "reddit_graph.npz"]
STATS = hub.sizes(232965, 114615892, 602, 41, 153431, 23831, 55703)  # PyG's documentation


def expected_stats(params: dict) -> dict:
    return STATS


def materialise(spec: dict, cache: Path, data_root: Path | None) -> Path:
    from torch_geometric.datasets import Reddit  # the pyg stack only

    raw = hub.find_raw(data_root, "reddit", "Reddit/raw", RAW_FILES)
    downloaded = raw is None
    if raw is None:
        def fetch(root: Path) -> Path:
            Reddit(str(root))  # PyG's own download
            return root / "raw"

        raw = hub.download(spec["name"], cache, data_root, "reddit", "Reddit/raw", RAW_FILES, fetch)
    with tempfile.TemporaryDirectory(dir=cache) as scratch:
        (Path(scratch) / "raw").symlink_to(raw, target_is_directory=True)
        with hub.reading_raw(spec["name"], raw):
            data = Reddit(scratch)[0]
    return hub.write(spec, cache, pyg_arrays(data), expected=STATS if downloaded else None)
