"""The LMDB node-feature store of a typed graph: one lmdb_features store per node type that has
features; the reader is {node type: LmdbFeatures}. numpy + lmdb only."""

from __future__ import annotations

import json
from pathlib import Path

from bench.stores.lmdb_features import LmdbFeatures, build_rows, default_rows_per_key, fingerprint

PROGRESS_UNIT = "rows"  # of each type's store in turn


def type_store_dir(dataset_dir: Path, node_type: str, dim: int) -> Path:
    return Path(dataset_dir) / "stores" / "lmdb-typed-features" / f"{node_type}-r{default_rows_per_key(dim)}"


def _featured(dataset_dir: Path) -> dict[str, int]:
    meta = json.loads((Path(dataset_dir) / "meta.json").read_text())
    return {t: int(info["feature_dim"]) for t, info in meta["node_types"].items() if info["feature_dim"]}


def build(dataset_dir: Path, progress=None) -> Path:
    """Each featured type's store, unless a valid one is there (atomic, as lmdb_features.build)."""
    dataset_dir = Path(dataset_dir)
    for node_type, dim in _featured(dataset_dir).items():
        build_rows(dataset_dir, dataset_dir / f"features-{node_type}.npy", type_store_dir(dataset_dir, node_type, dim),
                   progress=progress)
    return dataset_dir / "stores" / "lmdb-typed-features"


def reader(data) -> dict[str, LmdbFeatures]:  # the store interface (bench/stores/__init__.py)
    """Each featured type's store for a loaded typed dataset, checked against it."""
    return {t: LmdbFeatures(type_store_dir(data.path, t, dim), fingerprint(data.path))
            for t, dim in _featured(data.path).items()}
