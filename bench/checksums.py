"""Content checksums of the folders gnnbench builds (hub datasets, LMDB stores), so a file changed
after its build is named, never read as the data: each file's size, mtime (ns) and SHA-256, a file
re-hashed on open only where its mtime changed (GNNBENCH_VERIFY=full: every file; docs/stores.md).
Stdlib only: imported by the host and inside every stack.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path

from bench.paths import write_atomic

CHECKSUMS = "checksums.json"
VERIFY_ENV = "GNNBENCH_VERIFY"
MODES = ("quick", "full")
FORMAT = 1


class ChecksumError(RuntimeError):
    """A file of a built folder is missing or is not what was built; names it and the fix."""


def mode() -> str:
    value = os.environ.get(VERIFY_ENV, "").strip().lower() or "quick"
    if value not in MODES:
        raise ChecksumError(f"{VERIFY_ENV}={os.environ[VERIFY_ENV]!r}: expected one of {', '.join(MODES)}")
    return value


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            digest.update(chunk)
    return digest.hexdigest()


def _entry(path: Path, digest: str | None = None) -> dict:
    st = path.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": digest or sha256(path)}


def record(folder: Path, names) -> None:
    """Write the folder's CHECKSUMS for `names` (call when the files are final and closed)."""
    folder = Path(folder)
    write_atomic(folder / CHECKSUMS, json.dumps({"format": FORMAT, "files": {n: _entry(folder / n) for n in names}}))


def recorded(folder: Path) -> bool:
    return (Path(folder) / CHECKSUMS).is_file()


def verify(folder: Path, what: str, fix: str) -> None:
    """Check every file the folder's CHECKSUMS lists; ChecksumError names `what`, the file and `fix`."""
    folder = Path(folder)
    try:
        manifest = json.loads((folder / CHECKSUMS).read_text())
        files = manifest["files"]
    except FileNotFoundError:
        raise ChecksumError(f"{what} {folder} has no {CHECKSUMS} (half deleted, or built by an older "
                            f"gnnbench); {fix}") from None
    except (ValueError, KeyError, TypeError):
        raise ChecksumError(f"{what} {folder}: {CHECKSUMS} is unreadable; {fix}") from None
    full = mode() == "full"
    refreshed = False
    for name, want in files.items():
        path = folder / name
        try:
            st = path.stat()
        except FileNotFoundError:
            raise ChecksumError(f"{what} {folder}: {name} is missing or corrupt (not there); {fix}") from None
        if st.st_size != want["size"]:
            change = "truncated" if st.st_size < want["size"] else "grown"
            raise ChecksumError(f"{what} {folder}: {name} is missing or corrupt ({change} to {st.st_size} bytes "
                                f"since it was built with {want['size']}); {fix}")
        if not full and st.st_mtime_ns == want["mtime_ns"]:
            continue
        got = sha256(path)
        if got != want["sha256"]:
            raise ChecksumError(f"{what} {folder}: {name} is missing or corrupt (changed since it was built: "
                                f"SHA-256 {got[:16]}..., built with {want['sha256'][:16]}...); {fix}")
        if st.st_mtime_ns != want["mtime_ns"]:
            files[name] = _entry(path, got)  # same bytes, new times (a copy): cheap again next time
            refreshed = True
    if refreshed:
        with contextlib.suppress(OSError):  # a read-only copy: it is re-hashed on each open, still checked
            write_atomic(folder / CHECKSUMS, json.dumps(manifest))

