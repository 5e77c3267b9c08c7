"""An LMDB graph store: one small graph per key (8-byte big-endian graph ids), built once from a
materialised graph-level dataset (bench/datasets/molecules.py) and read by the graph-level backends.
A value is a framework-neutral record, no pickle: a 24-byte little-endian header (HEADER), the
edges (int64 [2, num_edges], local node ids, 8-byte aligned), then x (float32 [num_nodes, dim]).
Conventions as lmdb_features.py. numpy + lmdb only (host and stacks).
"""

from __future__ import annotations

import struct
import time
from pathlib import Path

import numpy as np

from bench.stores.lmdb_env import LmdbReader, close_all, finish, writing
from bench.stores.lmdb_features import fingerprint
from bench.datasets import molecules

FORMAT_VERSION = 1
MAGIC = b"GRF1"
HEADER = struct.Struct("<4sIIIq")  # 24 bytes: keeps the int64 edges 8-byte aligned
_KEY = struct.Struct(">Q")
PAGE = 4096
BATCH_BYTES = 64 << 20  # one write transaction per ~64 MiB of records
PROGRESS_UNIT = "graphs"  # what build() reports progress in (bench.stores.prepare)


def store_dir(dataset_dir: Path) -> Path:
    return Path(dataset_dir) / "stores" / "lmdb-graphs"


def encode(x: np.ndarray, edge_index: np.ndarray, label: int) -> bytes:
    n, dim = x.shape
    header = HEADER.pack(MAGIC, n, edge_index.shape[1], dim, int(label))
    return b"".join((header, np.ascontiguousarray(edge_index, dtype=np.int64).tobytes(),
                     np.ascontiguousarray(x, dtype=np.float32).tobytes()))


def decode(raw: bytes) -> tuple[np.ndarray, np.ndarray, int]:
    """(x [n, F] float32, edge_index [2, e] int64, label): read-only views of `raw`."""
    magic, n, e, dim, label = HEADER.unpack_from(raw)
    if magic != MAGIC or len(raw) != HEADER.size + 16 * e + 4 * n * dim:
        raise ValueError(f"not a graph record (magic {magic!r}, {len(raw)} bytes for {n} nodes, {e} edges)")
    edge_index = np.frombuffer(raw, dtype=np.int64, count=2 * e, offset=HEADER.size).reshape(2, e)
    x = np.frombuffer(raw, dtype=np.float32, count=n * dim, offset=HEADER.size + 16 * e).reshape(n, dim)
    return x, edge_index, int(label)


def record_bytes(node_counts: np.ndarray, edge_counts: np.ndarray, dim: int) -> np.ndarray:
    return HEADER.size + 16 * np.asarray(edge_counts, dtype=np.int64) + 4 * dim * np.asarray(node_counts, dtype=np.int64)


def needed_map_size(node_counts: np.ndarray, edge_counts: np.ndarray, dim: int) -> int:
    """Data plus LMDB's slack: a value above about half a page gets whole overflow pages, a
    smaller one shares a leaf page (counted at twice its size for the B-tree's free space)."""
    sizes = record_bytes(node_counts, edge_counts, dim)
    overflow = sizes > PAGE // 2 - 64
    pages = -(-(sizes[overflow] + 16) // PAGE)
    return int((pages.sum() * PAGE + 2 * (sizes[~overflow] + 32).sum()) * 1.1 + sizes.size * 64 + 2**24)


def build(dataset_dir: Path, map_size: int | None = None, progress=None) -> Path:
    """Build the store next to the dataset unless a valid one is there (atomically: lmdb_env.writing)."""
    dataset_dir = Path(dataset_dir)
    target = store_dir(dataset_dir)
    if LmdbGraphs.reuse(target, fingerprint(dataset_dir)):
        return target
    data = molecules.load(dataset_dir, mmap=True)
    count, dim = data.num_graphs, data.feature_dim
    node_counts, edge_counts = np.diff(data.node_ptr), np.diff(data.edge_ptr)
    sizes = record_bytes(node_counts, edge_counts, dim)
    with writing(target, "LMDB graph store", needed_map_size(node_counts, edge_counts, dim),
                 f"{count} graphs ({int(sizes.sum())} bytes of records)", map_size) as env:
        if env is None:
            return target  # another process built the same store first
        started = time.perf_counter()
        cumulative = np.cumsum(sizes)
        start = 0
        while start < count:
            # graphs up to the next ~64 MiB boundary (at least one)
            end = min(max(start + 1, int(np.searchsorted(cumulative, cumulative[start] + BATCH_BYTES))), count)
            with env.begin(write=True) as txn:
                items = ((_KEY.pack(g), encode(*data.graph(g))) for g in range(start, end))
                txn.cursor().putmulti(items, append=True)
            start = end
            if progress:
                progress(start, count)
        finish(env, {"format": FORMAT_VERSION, "fingerprint": fingerprint(dataset_dir), "graphs": count,
                     "feature_dim": dim, "num_nodes": int(data.node_ptr[-1]), "num_edges": int(data.edge_ptr[-1]),
                     "dataset": data.meta.get("name"), "build_s": round(time.perf_counter() - started, 3)})
    return target


__all__ = ["LmdbGraphs", "build", "reader", "store_dir", "close_all"]


class LmdbGraphs(LmdbReader):
    """Read-only graphs of one LMDB graph store (opening and checks: bench/stores/lmdb_env.py)."""

    LABEL, FORMAT_VERSION, REQUIRED = "LMDB graph store", FORMAT_VERSION, ("graphs", "feature_dim")

    def __init__(self, path: Path, expected_fingerprint: str | None = None):
        super().__init__(path, expected_fingerprint)
        self.count, self.feature_dim = self.meta["graphs"], self.meta["feature_dim"]

    def __len__(self) -> int:
        return self.count

    def check(self) -> None:
        """Read the last graph: a truncated file fails here rather than in the middle of an epoch."""
        self.get_many([self.count - 1])

    def get(self, g: int) -> tuple[np.ndarray, np.ndarray, int]:
        return self.get_many([g])[0]

    def get_many(self, ids) -> list[tuple[np.ndarray, np.ndarray, int]]:
        """Graphs `ids` (any order, repeats allowed), each (x, edge_index, label), in one getmulti."""
        import lmdb

        ids = [int(g) for g in ids]
        if not ids:
            return []
        if min(ids) < 0 or max(ids) >= self.count:
            raise IndexError(f"graph ids outside 0..{self.count - 1} in a read from {self.path}")
        try:
            with self._open().begin() as txn:
                found = dict(txn.cursor().getmulti([_KEY.pack(g) for g in set(ids)]))
        except lmdb.Error as exc:
            raise self._unusable(f"read failed ({type(exc).__name__}: {exc})") from None
        out = []
        for g in ids:
            raw = found.get(_KEY.pack(g))
            try:
                if raw is None:
                    raise ValueError("no such key")
                out.append(decode(raw))
            except (ValueError, struct.error) as exc:
                raise self._unusable(f"graph {g} is missing or corrupt ({exc})") from None
        return out

    def read_many(self, ids):
        """Graphs `ids` as one batch of columns (molecules.GraphColumns), in one transaction."""
        return molecules.GraphColumns.of(self.get_many(ids))


def reader(data) -> LmdbGraphs:  # the store interface (bench/stores/__init__.py)
    """The store built for a loaded graph collection, checked against the dataset it was built from."""
    return LmdbGraphs(store_dir(data.path), fingerprint(data.path))

