"""An LMDB node-feature store, built once from a hub dataset and read by PyG and GraphBolt.
Keys are 8-byte big-endian chunk numbers (key order is row order: the build appends), each value
`rows_per_key` float32 rows, as many as fit in one 4 KiB page (py-lmdb touches every page of a
value it returns), so a gather pays per chunk, not per row. numpy + lmdb only (host and stacks).
"""

from __future__ import annotations

import hashlib
import json
import struct
import time
from pathlib import Path

import numpy as np

from bench.stores.lmdb_env import MAP_SIZE_ENV, LmdbReader, StoreError, finish, writing

__all__ = ["StoreError", "LmdbFeatures", "MAP_SIZE_ENV", "build", "reader", "store_dir", "fingerprint"]

FORMAT_VERSION = 2  # 1: one row per key, read by copies (rebuilt when found)
PAGE_BYTES = 4096
VALUE_HEADER_BYTES = 16  # LMDB's node header before a value on its overflow pages
PROGRESS_UNIT = "rows"  # what build() reports progress in (bench.stores.prepare)
_KEY = struct.Struct(">Q")


def default_rows_per_key(dim: int) -> int:
    """As many float32 rows of width `dim` as fit in one page with LMDB's header; at least one."""
    return max(1, (PAGE_BYTES - VALUE_HEADER_BYTES) // (dim * 4))


def store_dir(dataset_dir: Path, rows_per_key: int | None = None) -> Path:
    if rows_per_key is None:
        dim = json.loads((Path(dataset_dir) / "meta.json").read_text())["feature_dim"]
        rows_per_key = default_rows_per_key(dim)
    return Path(dataset_dir) / "stores" / f"lmdb-features-r{rows_per_key}"


def fingerprint(dataset_dir: Path) -> str:
    """What the store must match: a hash of the hub dataset's metadata (a rebuilt dataset changes it)."""
    return hashlib.sha256((Path(dataset_dir) / "meta.json").read_bytes()).hexdigest()[:16]


def needed_map_size(num_rows: int, dim: int, rows_per_key: int) -> int:
    """Data plus LMDB's B-tree and overflow-page slack (values above a page get whole pages)."""
    pages = -(-(dim * 4 * rows_per_key + VALUE_HEADER_BYTES) // PAGE_BYTES)
    chunks = -(-num_rows // rows_per_key)
    return int(chunks * pages * PAGE_BYTES * 1.1 + chunks * 64 + 2**24)


def build(dataset_dir: Path, rows_per_key: int | None = None, map_size: int | None = None,
          progress=None) -> Path:
    """Build the store next to the hub dataset unless a valid one is there (atomically: lmdb_env.writing)."""
    dataset_dir = Path(dataset_dir)
    return build_rows(dataset_dir, dataset_dir / "features.npy", store_dir(dataset_dir, rows_per_key), rows_per_key,
                      map_size, progress)


def build_rows(dataset_dir: Path, features_file: Path, target: Path, rows_per_key: int | None = None,
               map_size: int | None = None, progress=None) -> Path:
    """A store at `target` of one feature array of a hub dataset (a graph's, or one node type's)."""
    if LmdbFeatures.reuse(target, fingerprint(dataset_dir)):
        return target
    features = np.load(features_file, mmap_mode="r")
    rows, dim = features.shape
    rows_per_key = rows_per_key or default_rows_per_key(dim)
    with writing(target, "LMDB store", needed_map_size(rows, dim, rows_per_key),
                 f"{rows} rows of {dim} float32 ({rows * dim * 4} bytes of data)", map_size) as env:
        if env is None:
            return target  # another process built the same store first
        started = time.perf_counter()
        chunk_rows = max(rows_per_key, (64 << 20) // (dim * 4) // rows_per_key * rows_per_key)
        for start in range(0, rows, chunk_rows):  # one write transaction per ~64 MiB
            block = np.ascontiguousarray(features[start:start + chunk_rows], dtype=np.float32)
            with env.begin(write=True) as txn:
                items = ((_KEY.pack((start + i) // rows_per_key), block[i:i + rows_per_key].tobytes())
                         for i in range(0, len(block), rows_per_key))
                txn.cursor().putmulti(items, append=True)
            if progress:
                progress(min(start + chunk_rows, rows), rows)
        finish(env, {"format": FORMAT_VERSION, "fingerprint": fingerprint(dataset_dir), "rows": rows,
                     "dim": dim, "dtype": "float32", "rows_per_key": rows_per_key,
                     "dataset": json.loads((dataset_dir / "meta.json").read_text()).get("name"),
                     "build_s": round(time.perf_counter() - started, 3)})
    return target


class LmdbFeatures(LmdbReader):
    """Read-only rows of one LMDB feature store (opening and checks: bench/stores/lmdb_env.py)."""

    LABEL, FORMAT_VERSION, REQUIRED = "LMDB store", FORMAT_VERSION, ("rows", "dim", "rows_per_key")

    def __init__(self, path: Path, expected_fingerprint: str | None = None):
        super().__init__(path, expected_fingerprint)
        self.rows, self.dim = self.meta["rows"], self.meta["dim"]
        self.rows_per_key = self.meta["rows_per_key"]

    def check(self) -> None:
        """Read the last row: a truncated file fails here rather than in the middle of an epoch."""
        self.gather(np.array([self.rows - 1]))

    @property
    def shape(self) -> tuple[int, int]:
        return self.rows, self.dim

    def gather(self, ids) -> np.ndarray:
        """Rows `ids` (any order, repeats allowed) as a new float32 array [len(ids), dim]."""
        import lmdb

        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        out = np.empty((ids.size, self.dim), dtype=np.float32)
        if ids.size == 0:
            return out
        if ids.min() < 0 or ids.max() >= self.rows:
            raise IndexError(f"row ids outside 0..{self.rows - 1} in a gather from {self.path}")
        k = self.rows_per_key
        order = np.argsort(ids, kind="stable")  # the chunks in key order, each chunk's rows together
        chunk_of = ids[order] // k
        starts = np.flatnonzero(np.diff(chunk_of, prepend=-1))
        ends = np.append(starts[1:], ids.size)
        local = ids[order] - chunk_of * k  # row within its chunk
        try:
            # buffers: values are views of the map, valid until the transaction ends
            with self._open().begin(buffers=True) as txn:
                for chunk, s, e in zip(chunk_of[starts].tolist(), starts.tolist(), ends.tolist()):
                    value = txn.get(_KEY.pack(chunk))
                    if value is None:
                        raise self._unusable("it lacks rows it should hold")
                    block = np.frombuffer(value, dtype=np.float32).reshape(-1, self.dim)
                    out[order[s:e]] = block[local[s:e]]
                del block, value  # no view of the map outlives the transaction
        except lmdb.Error as exc:
            raise self._unusable(f"read failed ({type(exc).__name__}: {exc})") from None
        return out


def reader(data) -> LmdbFeatures:  # the store interface (bench/stores/__init__.py)
    """The store built for a loaded hub dataset, checked against the dataset it was built from."""
    return LmdbFeatures(store_dir(data.path), fingerprint(data.path))

