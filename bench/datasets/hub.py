"""The dataset hub: every dataset is materialised once into a neutral on-disk form, from which each
backend builds its own view (N backends and M datasets need N + M converters). One folder per
dataset (nodes 0..N-1): edge_index.npy (int64 [2, E], sorted by destination) and csc_indptr.npy,
features.npy (float32 [N, F]), labels.npy, train/val/test_idx.npy, GraphBolt's CSC in its dtypes
(graphbolt_indices/indptr.npy), a user's edge list's node_ids.npy; checksums.json; meta.json last.
The dtypes are those PyG and GraphBolt take as they are, so the arrays, memory-mapped, are shared
through the page cache by every rank and loader worker of a cell. numpy only: host and stacks.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
import time
import uuid
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from bench import checksums, locks
from bench.datasets import baseline

FORMAT_VERSION = 2  # 2: graphbolt_indices/indptr added (a new folder key: format-1 folders stay for older checkouts)
STAT_FIELDS = ("num_nodes", "num_edges", "feature_dim", "num_classes", "num_train", "num_val", "num_test")
ARRAYS = ("edge_index", "csc_indptr", "features", "labels", "train_idx", "val_idx", "test_idx",
          "graphbolt_indices", "graphbolt_indptr")


class DatasetError(RuntimeError):
    pass


def sizes(*stats: int) -> dict:
    """A dataset's statistics (nodes, edges, feature_dim, classes, train, val, test) by their STAT_FIELDS."""
    return dict(zip(STAT_FIELDS, stats, strict=True))


@dataclass
class Materialised:
    """What every materialised dataset has: its folder, its meta.json, and its statistics."""
    path: Path
    meta: dict

    CARD = ("name", "source", *STAT_FIELDS)  # the statistics every result carries
    OPTIONAL_CARD = ("features_only_acc", "edge_homophily", "source_path")  # where the dataset has them

    num_nodes = property(lambda self: int(self.meta["num_nodes"]))
    num_classes = property(lambda self: int(self.meta["num_classes"]))
    feature_dim = property(lambda self: int(self.meta["feature_dim"]))

    def card(self) -> dict:
        """The statistics every result carries (names are part of the results contract)."""
        return {**{k: self.meta[k] for k in self.CARD},
                **{k: self.meta[k] for k in self.OPTIONAL_CARD if k in self.meta}}


@dataclass
class HubDataset(Materialised):
    edge_index: np.ndarray
    csc_indptr: np.ndarray
    features: np.ndarray
    labels: np.ndarray
    train_idx: np.ndarray
    val_idx: np.ndarray
    test_idx: np.ndarray
    graphbolt_indices: np.ndarray
    graphbolt_indptr: np.ndarray


def spec_key(spec: dict) -> str:
    """A folder name that changes whenever anything that shapes the data changes, and only then."""
    from bench import datasets  # the registry: it imports the sources, which import this module

    params, version = spec.get("params", {}), None
    with suppress(KeyError, ImportError):  # a generator's VERSION (bumped when its arrays change)
        version = getattr(datasets.source_module(spec["source"]), "VERSION", None)
    # new arrays, or a user's edited files (their fingerprint): a new folder, never a stale one
    extra = {"version": version, "files": datasets.files_fingerprint(spec)}
    shape = {"source": spec["source"], "params": params, "format": FORMAT_VERSION,
             **{k: v for k, v in extra.items() if v is not None}}
    canonical = json.dumps(shape, sort_keys=True)
    readable = "-".join([spec["source"], *(str(params[k]) for k in ("name", "scale", "count") if k in params)])
    if isinstance(params.get("path"), str):
        readable += "-" + (re.sub(r"[^A-Za-z0-9._-]+", "_", Path(params["path"]).name).strip("._-")[:40] or "root")
    return f"{readable}-{hashlib.sha256(canonical.encode()).hexdigest()[:10]}"


def dataset_dir(spec: dict, cache: Path) -> Path:
    return Path(cache) / "datasets" / spec_key(spec)


def is_materialised(spec: dict, cache: Path) -> bool:
    return (dataset_dir(spec, cache) / "meta.json").is_file()


def write(spec: dict, cache: Path, arrays: dict[str, np.ndarray], extra_meta: dict | None = None,
          expected: dict | None = None) -> Path:
    """Write a dataset atomically; `expected`: published sizes to check (a fresh download's)."""
    target = dataset_dir(spec, cache)
    target.parent.mkdir(parents=True, exist_ok=True)
    _check_arrays(spec["name"], arrays)
    arrays = {**arrays, **graphbolt_arrays(arrays["edge_index"], arrays["csc_indptr"], int(arrays["labels"].shape[0]))}
    with atomic_dir(target) as tmp:
        if tmp is None:
            return target  # another process finished the same dataset first
        for name in ARRAYS:
            np.save(tmp / f"{name}.npy", arrays[name])
        meta = {
            "format": FORMAT_VERSION, "name": spec["name"], "source": spec["source"], "params": spec.get("params", {}),
            **sizes(int(arrays["labels"].shape[0]), int(arrays["edge_index"].shape[1]), int(arrays["features"].shape[1]),
                    int(arrays["labels"].max()) + 1, *(int(arrays[f"{s}_idx"].size) for s in ("train", "val", "test"))),
            **(extra_meta or {}),
        }
        check_stats(spec["name"], meta, expected)
        if "features_only_acc" not in meta:
            acc = baseline.features_only_accuracy(arrays["features"], arrays["labels"], arrays["train_idx"],
                                                  arrays["test_idx"])
            meta["features_only_acc"] = None if acc is None else round(acc, 4)
        record_checksums(tmp)
        (tmp / "meta.json").write_text(json.dumps(meta, indent=2))
    return target


def graphbolt_dtype(count: int) -> type:
    """The smallest index dtype GraphBolt's OnDiskDataset takes for ids below `count`."""
    return np.int32 if count < 2**31 else np.int64


def graphbolt_arrays(edge_index: np.ndarray, csc_indptr: np.ndarray, num_nodes: int) -> dict[str, np.ndarray]:
    """The CSC in GraphBolt's dtypes, as its OnDiskDataset casts them (auto_cast_to_optimal_dtype)."""
    num_edges = int(edge_index.shape[1])
    return {"graphbolt_indices": np.ascontiguousarray(edge_index[0], dtype=graphbolt_dtype(num_nodes)),
            "graphbolt_indptr": np.ascontiguousarray(csc_indptr, dtype=graphbolt_dtype(num_edges))}


def record_checksums(folder: Path) -> None:
    """The checksums of a dataset folder's arrays (before meta.json, which marks it finished)."""
    checksums.record(folder, sorted(p.name for p in Path(folder).glob("*.npy")))


def verify(path: Path, meta: dict | None = None, what: str = "dataset", fix: str | None = None) -> None:
    """Check a folder's arrays against their checksums (a folder without any fails)."""
    name = (meta or {}).get("name") or "NAME"
    fix = fix or f"delete the folder and prepare it again (`gnnbench datasets prepare {name}`, or run the suite)"
    try:
        checksums.verify(path, what, fix)
    except checksums.ChecksumError as exc:
        raise DatasetError(str(exc)) from None


@contextmanager
def atomic_dir(target: Path, marker: str = "meta.json", say=None):
    """Yields a temporary folder beside `target` that becomes `target` when the block ends without
    error (None where a finished `target`, holding `marker`, is there), built under `target`'s lock
    (bench/locks.py: another process building it, here or on another host, is waited for)."""
    target = Path(target)
    if (target / marker).is_file():
        yield None
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    with locks.held(target, f"building {target}", say=say or (lambda line: print(line, file=sys.stderr, flush=True))):
        if (target / marker).is_file():
            yield None  # built by the process just waited for
            return
        _remove_leftovers(target)
        # named first and made inside the try: an interrupt landing just after it is made (a
        # SIGTERM turned into KeyboardInterrupt) still removes it (mkdtemp's return was a gap)
        tmp = target.parent / f"{owned_prefix(target.name)}{uuid.uuid4().hex[:8]}"
        try:
            tmp.mkdir(mode=0o700)  # as mkdtemp makes it
            yield tmp
            _move_into_place(tmp, target, marker)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise


def _remove_leftovers(target: Path) -> None:
    """With `target`'s lock held, every temporary folder of it is a dead build's: removed."""
    for left in target.parent.glob(f".{glob.escape(target.name)}.pid*"):
        match = OWNED.match(left.name)
        if match and match["name"] == target.name and left.is_dir():
            shutil.rmtree(left, ignore_errors=True)


def _move_into_place(tmp: Path, target: Path, marker: str) -> None:
    """Rename the finished `tmp` to `target` (what is left of a half-deleted one set aside first)."""
    for attempt in range(2):
        try:
            os.rename(tmp, target)
            return
        except OSError:
            if (target / marker).is_file():
                shutil.rmtree(tmp)  # another process finished the same folder first
                return
            if attempt:
                raise
        discard(target)


def discard(target: Path) -> None:
    """Remove what is left of a folder: renamed aside first (atomic), so its name is free at once."""
    aside = Path(tempfile.mkdtemp(prefix=owned_prefix(target.name) + "stale.", dir=target.parent))
    try:
        os.rename(target, aside / target.name)
    except FileNotFoundError:
        pass  # another process set it aside first
    finally:
        shutil.rmtree(aside, ignore_errors=True)


# a build's temporary folder, .NAME.pid<PID>.<random>: left by a killed build, swept once its owner is gone
OWNED = re.compile(r"\.(?P<name>.+)\.pid(?P<pid>\d+)\.")


def owned_prefix(name: str) -> str:
    return f".{name}.pid{os.getpid()}."


# a build elsewhere whose lock's heartbeat is this old is taken for dead by a sweep (far above any clock skew)
SWEEP_QUIET_S = 3600.0


def _remove_if_over(path: Path, name: str, pid: int, say) -> str | None:
    """Remove a build's temporary folder if its build is over: why, or None. Its target's lock
    decides (bench/locks.py), else (no lock record) its pid on this host."""
    target = path.parent / name
    record = locks.read_owner(target)
    if record is None and locks.pid_alive(pid):
        return None
    with locks.held_if_free(target, f"sweeping {path}", say=say) as free:
        if free:
            why = (locks.provably_dead(record) if record else None) or f"process {pid} is gone"
        elif record is not None and time.time() - float(record.get("heartbeat", 0)) > SWEEP_QUIET_S:
            why = f"its lock's owner, {locks.describe(record)}, has not beaten its heartbeat for over {SWEEP_QUIET_S:.0f} s"
        else:
            return None
        shutil.rmtree(path, ignore_errors=True)
    return None if path.exists() else why


def sweep_stale(cache: Path, say=print, depth: int = 4) -> list[Path]:
    """Remove the temporary folders of builds that are over anywhere under the cache, each said."""
    removed, root = [], Path(cache)
    for folder, subdirs, _ in os.walk(root):  # nothing where the cache is not there
        if len(Path(folder).relative_to(root).parts) >= depth:
            subdirs[:] = []
            continue
        for sub, match in [(s, m) for s in subdirs if (m := OWNED.match(s))]:
            subdirs.remove(sub)  # never descend into a build's own folder
            path = Path(folder) / sub
            why = _remove_if_over(path, match["name"], int(match["pid"]), say)
            if why is not None:  # else a live build (this process's too) keeps its folder
                removed.append(path)
                say(f"removed {path}: the temporary folder of a build that did not finish ({why})")
    return removed


def _check_arrays(name: str, a: dict[str, np.ndarray]) -> None:
    n = a["labels"].shape[0]
    problems = []
    if a["edge_index"].ndim != 2 or a["edge_index"].shape[0] != 2:
        problems.append(f"edge_index has shape {a['edge_index'].shape}, expected [2, E]")
    elif a["edge_index"].size and (a["edge_index"].min() < 0 or a["edge_index"].max() >= n):
        problems.append("edge_index refers to nodes outside 0..N-1")
    if a["features"].shape[0] != n:
        problems.append(f"features have {a['features'].shape[0]} rows for {n} nodes")
    if a["csc_indptr"].shape != (n + 1,):
        problems.append(f"csc_indptr has shape {a['csc_indptr'].shape}, expected ({n + 1},)")
    if problems:
        raise DatasetError(f"dataset {name!r}: " + "; ".join(problems))


def read_meta(meta_file: Path) -> dict:
    """A hub folder's meta.json, or DatasetError naming it and the fix."""
    try:
        meta = json.loads(Path(meta_file).read_text(encoding="utf-8"))
        problem = None if isinstance(meta, dict) else f"a JSON {type(meta).__name__}, not an object"
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        problem = f"{type(exc).__name__}: {exc}"
    if problem:
        raise DatasetError(f"{meta_file} is corrupt ({problem}); remove its folder {Path(meta_file).parent} "
                           "and prepare the dataset again (gnnbench datasets prepare NAME, or run the suite)")
    return meta


def opened(path: Path, check: bool, wrong_format) -> tuple[dict, Callable[[str, bool], np.ndarray]]:
    """A materialised folder's meta.json and a reader of its arrays, `read(name, mapped)`; a missing or
    corrupt file, or a meta.json `wrong_format(meta)` objects to, is a DatasetError naming it.
    `check`: the arrays against their checksums (False: only the sizes are wanted)."""
    if not (path / "meta.json").is_file():
        raise DatasetError(f"{path} is not a materialised dataset (no meta.json); run the suite again to prepare it")
    meta = read_meta(path / "meta.json")
    if wrong_format(meta):
        raise DatasetError(f"{path} {wrong_format(meta)}; delete the folder to rebuild it")
    if check:
        verify(path, meta)

    def read(name: str, mapped: bool) -> np.ndarray:
        try:
            return np.load(path / f"{name}.npy", mmap_mode="r" if mapped else None)
        except (OSError, ValueError) as exc:
            raise DatasetError(f"{path / (name + '.npy')} is missing or corrupt ({exc}); "
                               "delete the folder to rebuild it") from exc

    return meta, read


def load(path: Path, mmap: bool = True, features_mmap: bool | None = None, check: bool = True) -> HubDataset:
    """`mmap`: map every array read-only; `features_mmap` overrides it for the features; `check`: as opened's."""
    path = Path(path)
    meta, read = opened(path, check, lambda meta: meta.get("format") != FORMAT_VERSION and
                        f"has hub format {meta.get('format')}, this gnnbench reads {FORMAT_VERSION}")
    return HubDataset(path=path, meta=meta, **{name: read(name, features_mmap if name == "features" and features_mmap
                                                          is not None else mmap) for name in ARRAYS})


def find_raw(data_root: Path | None, source: str, folder: str, required: list[str]) -> Path | None:
    """The first of DATA_ROOT/FOLDER and DATA_ROOT/SOURCE/FOLDER holding every required file."""
    candidates = (Path(data_root) / folder, Path(data_root) / source / folder) if data_root else ()
    return next((c for c in candidates if all((c / f).is_file() for f in required)), None)


def download(label: str, cache: Path, data_root: Path | None, source: str, folder: str, required: list[str],
             fetch: Callable[[Path], object], hint: str = ""):
    """`fetch(root)` into the cache's `downloads/SOURCE` where the data root has no copy of the raw
    files (refused while GNNBENCH_OFFLINE is set); a failure says where they were looked for."""
    places = ([str(Path(data_root) / folder), str(Path(data_root) / source / folder)] if data_root
              else ["(no data root given: --data-root or GNNBENCH_DATA_ROOT)"])
    where = f". Expected {', '.join(required)} in one of: {'; '.join(places)}"
    if os.environ.get("GNNBENCH_OFFLINE", "") not in ("", "0"):  # never download, say which raw files are missing
        raise DatasetError(f"dataset {label!r}: raw files not found and downloads are off "
                           f"(GNNBENCH_OFFLINE){hint}{where}")
    root = Path(cache) / "downloads" / source
    root.mkdir(parents=True, exist_ok=True)
    try:
        return fetch(root)
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - ogb exits when a download is declined
        raise DatasetError(f"dataset {label!r}: raw files not found and downloading them failed "
                           f"({type(exc).__name__}: {exc}){where}") from exc


@contextmanager
def reading_raw(label: str, raw: Path):
    """Raw files a framework cannot parse are one error naming the folder and the fix, never a traceback."""
    try:
        yield
    except (DatasetError, KeyboardInterrupt, MemoryError):
        raise
    except Exception as exc:  # noqa: BLE001 - whatever the framework's parser raises on a bad file
        raise DatasetError(f"dataset {label!r}: the raw files in {raw} cannot be read "
                           f"({type(exc).__name__}: {str(exc)[:200] or 'no message'}); they are corrupt or "
                           "truncated: replace them with a fresh copy, or remove them so they are "
                           "downloaded again") from exc


def check_stats(label: str, meta_stats: dict, expected: dict | None) -> None:
    """A converted dataset must have the published sizes (a truncated download fails here)."""
    if not expected:
        return
    exact = ("num_nodes", "feature_dim", "num_classes", "num_train", "num_val", "num_test")  # edges vary with symmetrising
    wrong = {k: (meta_stats[k], expected[k]) for k in exact if k in expected and meta_stats[k] != expected[k]}
    if wrong:
        detail = ", ".join(f"{k} {got} (expected {want})" for k, (got, want) in wrong.items())
        raise DatasetError(f"dataset {label!r} does not have its published sizes: {detail}; "
                           "the raw files may be truncated or of another version")


def csc_from_coo(src: np.ndarray, dst: np.ndarray, num_nodes: int,
                 num_dst: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Edges sorted by (destination, source), duplicates dropped: (edge_index, csc_indptr [num_dst + 1])."""
    num_src, num_dst = max(num_nodes, 1), num_nodes if num_dst is None else num_dst
    key = np.unique(dst.astype(np.int64) * num_src + src.astype(np.int64))
    dst_sorted, src_sorted = np.divmod(key, num_src)
    indptr = np.zeros(num_dst + 1, dtype=np.int64)
    np.cumsum(np.bincount(dst_sorted, minlength=num_dst), out=indptr[1:])
    return np.stack([src_sorted, dst_sorted]).astype(np.int64), indptr


def split_indices(num_nodes: int, train_frac: float, val_frac: float, rng: np.random.Generator,
                  test_frac: float | None = None, among: np.ndarray | None = None):
    """Random train/val/test ids among `among` (default all nodes); test the rest unless `test_frac`."""
    perm = (rng.permutation(num_nodes) if among is None else rng.permutation(among)).astype(np.int64)
    count = perm.size
    n_train, n_val = int(train_frac * count), int(val_frac * count)
    end = count if test_frac is None else n_train + n_val + int(test_frac * count)
    return (np.sort(perm[:n_train]), np.sort(perm[n_train:n_train + n_val]),
            np.sort(perm[n_train + n_val:end]))


def load_dataset(source: str, path, features_in_memory: bool = True, mmap: bool | None = None, check: bool = True):
    """A materialised dataset of `source`, checked unless `check` is False. The graph, labels and splits
    are mapped read-only (unless `mmap` is False); the features too where `mmap` is True or
    `features_in_memory` False (a disk-backed store). A typed graph or a collection: its source's `load`."""
    from bench import datasets  # the registry: it imports the sources, which import this module

    module = datasets.source_module(source)
    if hasattr(module, "load"):
        return module.load(path, mmap=bool(mmap) or not features_in_memory, check=check)
    return load(path, mmap=mmap is not False, features_mmap=mmap is True or not features_in_memory, check=check)
