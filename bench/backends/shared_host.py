"""One writable host copy per node of a hub array, for the ranks to pin in place: cudaHostRegister
(GraphBolt's pinned-cuda) needs writable memory, the hub's arrays are read-only maps. A node's first
rank copies the array into the cell's shared folder (GNNBENCH_SHARED_HOST, in /dev/shm), the others
map that file, as DGL's multi-GPU example pins its parent's one dataset in every rank.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import numpy as np

SHARED_HOST_ENV = "GNNBENCH_SHARED_HOST"
CHUNK_BYTES = 64 << 20  # copy in slices: the map's pages are read once, never all at once


def folder() -> Path | None:
    """The cell's shared folder, or None (a worker run by hand)."""
    found = os.environ.get(SHARED_HOST_ENV)
    return Path(found) if found and Path(found).is_dir() else None


def free_bytes(where: Path) -> int:
    """The bytes free in a file system."""
    stat = os.statvfs(where)
    return stat.f_bavail * stat.f_frsize


def node_copy(array, name: str, where: Path | None = None) -> np.ndarray:
    """`array` as a writable, C-contiguous array whose pages every rank of this node shares (a file
    in `where`, default the cell's shared folder); a private copy where there is none."""
    where = where if where is not None else folder()
    if where is None or (not (where / f"{name}.npy").exists() and free_bytes(where) < array.nbytes * 1.05):
        # too little room (a container's small /dev/shm): a map past a full tmpfs ends in SIGBUS
        return np.array(array, order="C", copy=True)
    path = where / f"{name}.npy"
    with open(where / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one rank copies; the others wait here, then map its file
        if not path.exists():
            partial = where / f"{name}.partial.npy"
            out = np.lib.format.open_memmap(partial, mode="w+", dtype=array.dtype, shape=array.shape)
            flat_in, flat_out = np.asarray(array).reshape(-1), out.reshape(-1)
            step = max(1, CHUNK_BYTES // max(1, array.dtype.itemsize))
            for start in range(0, flat_in.size, step):
                flat_out[start:start + step] = flat_in[start:start + step]
            out.flush()
            del out, flat_out
            partial.rename(path)  # whole or absent: a rank never maps a half-written copy
    return np.lib.format.open_memmap(path, mode="r+")
