"""A cold page cache for disk-backed stores (`page_cache: cold`), and how much of a file is cached.
`evict` first drops this process's own mappings' page-table entries (madvise: the kernel never
evicts a page a process maps), then the file's clean pages (posix_fadvise DONTNEED); pages other
processes map stay cached, and it says what share. Linux only.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os
from pathlib import Path

PAGE = mmap.PAGESIZE
MADV_DONTNEED = 4
_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_ubyte)]


def resident(path: Path, length: int | None = None) -> tuple[int, int]:
    """(pages of the file in the page cache, pages of the file), of its first `length` bytes if given."""
    import numpy as np

    size = min(os.path.getsize(path), length or os.path.getsize(path))
    pages = -(-size // PAGE)
    if size == 0:
        return 0, 0
    with open(path, "rb") as f, mmap.mmap(f.fileno(), size, prot=mmap.PROT_READ) as mapped:
        address = np.frombuffer(mapped, dtype=np.uint8).ctypes.data  # ctypes refuses a read-only buffer
        vector = (ctypes.c_ubyte * pages)()
        if _libc.mincore(address, size, vector) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"mincore on {path}: {os.strerror(err)}")
        return sum(v & 1 for v in bytes(vector)), pages


def resident_share(paths) -> float:
    """Share of the pages of `paths` in the page cache (0 for no pages)."""
    counts = [resident(p) for p in paths]
    total = sum(t for _, t in counts)
    return sum(r for r, _ in counts) / total if total else 0.0


def evict(paths) -> float:
    """Drop `paths` from the page cache; the share of their pages still cached (others' maps)."""
    paths = [Path(p) for p in paths]
    for path in paths:
        _unmap_pages_of(path)
        with open(path, "rb") as f:
            os.fdatasync(f.fileno())  # DONTNEED drops clean pages only: a file just written is flushed first
            os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    return resident_share(paths)


def _unmap_pages_of(path: Path) -> None:
    """Zap this process's page-table entries for the file's unchanged mappings, so fadvise may drop them."""
    target = os.stat(path)
    for line in Path("/proc/self/maps").read_text().splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) < 6:
            continue
        span, perms, _, device, inode, _name = fields
        if int(inode) != target.st_ino or os.makedev(*(int(x, 16) for x in device.split(":"))) != target.st_dev:
            continue
        if perms[3] == "p" and "w" in perms:
            continue  # a private writable mapping may hold changes that DONTNEED would discard
        start, end = (int(x, 16) for x in span.split("-"))
        if _libc.madvise(start, end - start, MADV_DONTNEED) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"madvise on a mapping of {path}: {os.strerror(err)}")
