"""Integrity of what is read: hub datasets and LMDB stores carry checksums from their build; a
changed file is named with its fix and never trained on; a half-deleted store is rebuilt."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from bench import checksums, stores
from bench.datasets import hub, synthetic
from bench.publish import results
from bench.stores import lmdb_features
from bench.stores.lmdb_features import LmdbFeatures, StoreError
from tests.conftest import REPO, require_stacks

PARAMS = {"scale": 9, "edge_factor": 8, "feature_dim": 16, "num_classes": 4, "seed": 0}
SUITE = f"""
name: integrity
datasets:
  s9: {{source: synthetic, params: {json.dumps(PARAMS)}}}
backends: [dgl-graphbolt]
settings: {{num_workers: 0, mode: cpu-cpu, store: lmdb, batch_size: 64, fanout: [5, 5], epochs: 1,
            warmup_epochs: 0, timeout: 240}}
"""


def flip(path, offset: int, keep_times: bool = False) -> None:
    """Invert one byte in place (the size stays); `keep_times`: restore the file's mtime, as bit
    rot would leave it."""
    st = path.stat()
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0xFF]))
    if keep_times:
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


@pytest.fixture
def built(tmp_path):
    """A hub dataset with its LMDB store, built as `gnnbench run` builds them before a cell."""
    cache = tmp_path / "hub"
    spec = {"name": "s9", "source": "synthetic", "params": synthetic.canonical_params(PARAMS)}
    dataset = synthetic.materialise(spec, cache)
    store = stores.prepare("lmdb", dataset, say=lambda *a, **k: None)
    return cache, dataset, store


def gnnbench(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bench.cli", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=600, env={**os.environ, **(env or {})})


# --- the checks themselves ----------------------------------------------------------------------

def test_a_changed_hub_array_is_named_with_its_fix(built):
    _, dataset, _ = built
    flip(dataset / "features.npy", 500)
    with pytest.raises(hub.DatasetError) as err:
        hub.load(dataset)
    message = str(err.value)
    assert f"{dataset}: features.npy is missing or corrupt (changed since it was built: SHA-256" in message
    assert "gnnbench datasets prepare s9" in message and "delete the folder" in message


def test_a_change_that_keeps_size_and_times_needs_the_full_check(built, monkeypatch):
    _, dataset, store = built
    flip(dataset / "labels.npy", 200, keep_times=True)
    flip(store / "data.mdb", (store / "data.mdb").stat().st_size // 2, keep_times=True)
    hub.load(dataset)  # quick: one stat per file, as documented
    monkeypatch.setenv(checksums.VERIFY_ENV, "full")
    with pytest.raises(hub.DatasetError, match="labels.npy is missing or corrupt"):
        hub.load(dataset)
    with pytest.raises(StoreError, match=f"LMDB store {store}: data.mdb is missing or corrupt"):
        LmdbFeatures(store)
    monkeypatch.setenv(checksums.VERIFY_ENV, "sometimes")
    with pytest.raises(checksums.ChecksumError, match="GNNBENCH_VERIFY='sometimes': expected one of quick, full"):
        checksums.mode()


def test_a_copy_with_new_times_is_rehashed_once_and_accepted(built, tmp_path):
    _, dataset, _ = built
    copy = tmp_path / "copy"
    shutil.copytree(dataset, copy, copy_function=shutil.copyfile)  # new mtimes, same bytes
    before = json.loads((copy / checksums.CHECKSUMS).read_text())["files"]
    hub.load(copy)
    after = json.loads((copy / checksums.CHECKSUMS).read_text())["files"]
    assert {k: v["sha256"] for k, v in after.items()} == {k: v["sha256"] for k, v in before.items()}
    assert all(after[k]["mtime_ns"] == (copy / k).stat().st_mtime_ns for k in after)


def test_a_dataset_without_its_checksums_is_rebuilt_never_adopted(built, capsys):
    """A flipped byte in features.npy with checksums.json gone: adopting the folder would record
    the corrupt file's checksums and train on it from then on. It is built again from its source."""
    cache, dataset, _ = built
    clean = np.load(dataset / "features.npy")
    flip(dataset / "features.npy", (dataset / "features.npy").stat().st_size - 10)
    (dataset / checksums.CHECKSUMS).unlink()
    with pytest.raises(hub.DatasetError, match="has no checksums.json"):
        hub.load(dataset)
    from bench.run.prepare import ensure_dataset

    spec = {"name": "s9", "source": "synthetic", "params": synthetic.canonical_params(PARAMS)}
    assert ensure_dataset(spec, cache, None) == dataset
    assert "has no checksums.json" in capsys.readouterr().out
    hub.load(dataset)  # verified
    assert np.array_equal(np.load(dataset / "features.npy"), clean)
    assert not [p for p in dataset.parent.iterdir() if p.name.startswith(".")]  # nothing left aside


def test_corrupted_store_values_are_named_not_read(built):
    _, dataset, store = built
    data = store / "data.mdb"
    flip(data, data.stat().st_size - 4096 - 100)  # a row's bytes, not LMDB's own pages
    for attempt in (lambda: LmdbFeatures(store, lmdb_features.fingerprint(dataset)),
                    lambda: lmdb_features.build(dataset)):  # the build checks the store it would reuse
        with pytest.raises(StoreError) as err:
            attempt()
        assert f"LMDB store {store}: data.mdb is missing or corrupt" in str(err.value)
        assert "delete the folder and run again to rebuild it" in str(err.value)


@pytest.mark.parametrize("remove", ["data.mdb", "checksums.json", "both"])
def test_a_half_deleted_store_is_rebuilt(built, remove):
    _, dataset, store = built
    for name in (["data.mdb", "checksums.json"] if remove == "both" else [remove]):
        (store / name).unlink()
    assert stores.prepare("lmdb", dataset, say=lambda *a, **k: None) == store
    rows = LmdbFeatures(store, lmdb_features.fingerprint(dataset))
    try:
        assert rows.gather(np.arange(rows.rows)).tobytes() == np.load(dataset / "features.npy").tobytes()
    finally:
        rows.close()
    assert [p.name for p in store.parent.iterdir()] == [store.name]  # nothing set aside is left


# --- real runs: the cell fails, naming the file; prepare says so -----------------------------------

def run_cell(tmp_path, cache) -> results.RunResult:
    suite = tmp_path / "integrity.yaml"
    suite.write_text(SUITE)
    out = tmp_path / "results"
    proc = gnnbench("run", str(suite), "--results", str(out), "--cache-dir", str(cache), "--no-install")
    assert "Traceback" not in proc.stderr, proc.stderr
    [result] = out.glob("integrity-*.json")
    read = results.read(result)
    shutil.rmtree(out)
    return read


def test_a_cell_on_a_corrupted_store_or_dataset_fails_naming_the_file(built, tmp_path):
    require_stacks("dgl")
    cache, dataset, store = built
    flip(store / "data.mdb", (store / "data.mdb").stat().st_size - 4096 - 100)
    [cell] = run_cell(tmp_path, cache).cells
    assert cell.status == "failed" and f"LMDB store {store}: data.mdb is missing or corrupt" in cell.reason

    shutil.rmtree(store)
    flip(dataset / "features.npy", 1000)
    [cell] = run_cell(tmp_path, cache).cells
    assert cell.status == "failed" and f"{dataset}: features.npy is missing or corrupt" in cell.reason
    assert not store.exists()  # nothing was built from, nor trained on, the changed file

    prepare = gnnbench("datasets", "prepare", "synthetic:" + ",".join(f"{k}={v}" for k, v in PARAMS.items()
                                                                      if k != "fanout"), "--cache-dir", str(cache))
    assert prepare.returncode == 2 and "features.npy is missing or corrupt" in prepare.stderr, prepare.stderr
    assert "Traceback" not in prepare.stderr


def test_a_cell_on_a_half_deleted_store_rebuilds_it_and_trains(built, tmp_path):
    require_stacks("dgl")
    cache, dataset, store = built
    (store / "data.mdb").unlink()
    [cell] = run_cell(tmp_path, cache).cells
    assert cell.status == "ok" and cell.metrics.batches_per_epoch > 0, cell.reason  # 1 epoch: no accuracy bar
    checksums.verify(store, "LMDB store", "-")
