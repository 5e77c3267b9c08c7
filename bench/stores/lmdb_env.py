"""Opening gnnbench's LMDB stores for reading, one way for every store kind: one read-only,
lock-free environment per store and process (py-lmdb refuses a path twice in a process, and an
environment must not cross a fork). Every way a store can be unusable ends in one StoreError
naming the store and the fix; a truncated file is caught before any read (a read past the end of
the map is SIGBUS).
"""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from pathlib import Path

from bench import checksums
from bench.datasets.hub import atomic_dir, discard

META_KEY = b"__meta__"
MAP_SIZE_ENV = "GNNBENCH_LMDB_MAP_SIZE"  # bytes; overrides the map size computed from the data
REBUILD = "delete the folder and run again to rebuild it"
_OPEN: dict[str, tuple[int, object]] = {}


class StoreError(RuntimeError):
    """A store that cannot be used; the message names the store and the fix."""


def open_readonly(path: Path, label: str):
    """The environment of the store at `path` for this process; `label` names the store kind in errors."""
    import lmdb

    key = os.fspath(path)
    pid, env = _OPEN.get(key, (None, None))  # the hot path: no filesystem call
    if env is not None and pid == os.getpid():
        return env
    if env is not None:
        env.close()  # inherited across a fork
        del _OPEN[key]
    if not (Path(path) / "data.mdb").is_file():
        raise StoreError(f"{label} {path} is missing (no data.mdb); it is built by `gnnbench run` before "
                         "a cell with `store: lmdb` starts: run the suite again, or delete the folder if it "
                         "is half there")
    try:
        env = lmdb.open(str(path), readonly=True, lock=False, readahead=False, subdir=True, max_readers=1024)
    except lmdb.Error as exc:
        raise StoreError(f"{label} {path} cannot be opened ({type(exc).__name__}: {exc}); {REBUILD}") from None
    try:
        needed = (env.info()["last_pgno"] + 1) * env.stat()["psize"]
    except lmdb.Error as exc:
        env.close()
        raise StoreError(f"{label} {path} is corrupt ({type(exc).__name__}: {exc}); {REBUILD}") from None
    actual = (Path(path) / "data.mdb").stat().st_size
    if actual < needed:
        env.close()
        raise StoreError(f"{label} {path} is truncated ({actual} bytes, its pages need {needed}); {REBUILD}")
    _OPEN[key] = (os.getpid(), env)
    return env


@contextmanager
def writing(target: Path, label: str, needed: int, contents: str, map_size: int | None = None):
    """A new environment for a store's build in a folder that becomes `target` when the block ends
    without error (hub.atomic_dir); None where another process built it first."""
    import lmdb

    map_size = map_size or int(os.environ.get(MAP_SIZE_ENV) or needed)
    with atomic_dir(target, marker=checksums.CHECKSUMS) as tmp:
        if tmp is None:
            yield None
            return
        env = lmdb.open(str(tmp), map_size=map_size, subdir=True, readahead=False, sync=False,
                        metasync=False, writemap=False, max_dbs=0)
        try:
            yield env
        except lmdb.MapFullError:
            raise StoreError(f"{label} {target}: map size {map_size} bytes is too small for {contents}; "
                             f"unset {MAP_SIZE_ENV} or raise it to at least {needed}") from None
        finally:
            env.close()
        checksums.record(tmp, ["data.mdb"])  # closed, so final: written last, the finished mark


def finish(env, meta: dict) -> None:
    """Write the `__meta__` record last (its presence means the build finished) and flush."""
    with env.begin(write=True) as txn:
        txn.put(META_KEY, json.dumps(meta).encode())
    env.sync(True)


def close(path: Path) -> None:
    pid, env = _OPEN.pop(os.fspath(path), (None, None))
    if env is not None and pid == os.getpid():
        env.close()


def close_all() -> None:
    for key in list(_OPEN):
        close(key)


def read_meta(path: Path, label: str, format_version: int, expected_fingerprint: str | None,
              required: tuple[str, ...] = ()) -> dict:
    """The store's `__meta__` record, checked; the environment is closed again on any error."""
    import lmdb

    try:
        try:
            with open_readonly(path, label).begin() as txn:
                raw = txn.get(META_KEY)
        except lmdb.Error as exc:
            raise StoreError(f"{label} {path} is corrupt ({type(exc).__name__}: {exc}); {REBUILD}") from None
        if raw is None:
            raise StoreError(f"{label} {path} has no {META_KEY.decode()} record: it was not built by "
                             f"gnnbench or its build did not finish; {REBUILD}")
        try:
            meta = json.loads(raw)
        except ValueError:
            raise StoreError(f"{label} {path} has an unreadable {META_KEY.decode()} record; {REBUILD}") from None
        if meta.get("format") != format_version or any(k not in meta for k in required):
            raise StoreError(f"{label} {path} has format {meta.get('format')} (or is another kind of "
                             f"store), this gnnbench reads {format_version}; {REBUILD}")
        if expected_fingerprint and meta.get("fingerprint") != expected_fingerprint:
            raise StoreError(f"{label} {path} was built from another version of dataset "
                             f"{meta.get('dataset')!r} (fingerprint {meta.get('fingerprint')}, the dataset "
                             f"has {expected_fingerprint}); {REBUILD}")
        return meta
    except StoreError:
        close(path)
        raise


class LmdbReader:
    """What every store reader shares: the checked `__meta__`, its environment opened per process
    (no handle held: a reader pickles into DataLoader workers); subclasses set LABEL and check()."""

    LABEL = "LMDB store"
    FORMAT_VERSION = 1
    REQUIRED: tuple[str, ...] = ()

    def __init__(self, path: Path, expected_fingerprint: str | None = None):
        self.path = Path(path)
        if (self.path / "data.mdb").is_file():  # else read_meta says it is missing and how it is built
            try:
                checksums.verify(self.path, self.LABEL, REBUILD)  # once per reader, not per read
            except checksums.ChecksumError as exc:
                raise StoreError(str(exc)) from None
        self.meta = read_meta(self.path, self.LABEL, self.FORMAT_VERSION, expected_fingerprint, self.REQUIRED)

    def _open(self):
        return open_readonly(self.path, self.LABEL)

    def _unusable(self, what: str) -> StoreError:
        return StoreError(f"{self.LABEL} {self.path}: {what}; {REBUILD}")

    def close(self) -> None:
        close(self.path)

    @classmethod
    def _other_format(cls, path: Path) -> bool:
        """Whether the store at `path` records another format than this reader's."""
        try:
            with open_readonly(path, cls.LABEL).begin() as txn:
                raw = txn.get(META_KEY)
            return raw is not None and json.loads(raw).get("format") != cls.FORMAT_VERSION
        except Exception:  # noqa: BLE001 - corrupt or odd: the checks that follow say what is wrong
            return False
        finally:
            close(path)

    @classmethod
    def reuse(cls, path: Path, expected_fingerprint: str) -> bool:
        """True when a finished store at `path` passes its checks (else StoreError); False, whatever is
        there removed for a clean build, where there is none, half of one, or another format's."""
        if not (checksums.recorded(path) and (Path(path) / "data.mdb").is_file()) or cls._other_format(path):
            if Path(path).exists():
                discard(Path(path))
            return False
        existing = cls(path, expected_fingerprint)
        try:
            existing.check()
        finally:
            existing.close()
        return True
