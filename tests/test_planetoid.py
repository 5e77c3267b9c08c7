"""Planetoid through PyG's own class, from an offline data root (GNNBENCH_DATA_ROOT)."""

from __future__ import annotations

import shutil
import subprocess
import sys

import numpy as np
import pytest

from bench.datasets import hub
from bench.run.prepare import ensure_dataset
from tests.conftest import offline_data_root, require_stacks


data_root = offline_data_root


def test_cora_statistics_and_split(cache_dir):
    require_stacks("pyg")
    spec = {"name": "cora", "source": "planetoid", "params": {"name": "Cora"}}
    data = hub.load(ensure_dataset(spec, cache_dir, data_root()))
    card = data.card()
    assert (card["num_nodes"], card["num_edges"], card["feature_dim"], card["num_classes"]) == (2708, 10556, 1433, 7)
    assert (card["num_train"], card["num_val"], card["num_test"]) == (140, 500, 1000)
    src, dst = data.edge_index
    assert np.all(np.diff(dst) >= 0)  # CSC order: sorted by destination
    assert np.array_equal(np.diff(data.csc_indptr), np.bincount(dst, minlength=2708))


@pytest.mark.parametrize("damage", ["truncated", "garbage"])
def test_corrupt_raw_files_are_one_clear_error_and_no_result(tmp_path, damage):
    """A truncated or overwritten Planetoid raw file (PyG's parser raises EOFError or
    UnpicklingError) is exit 2 with one line naming the raw folder and the fix; no traceback."""
    require_stacks("pyg")
    root = tmp_path / "root"
    shutil.copytree(data_root() / "Cora", root / "Cora")
    x = root / "Cora" / "raw" / "ind.cora.x"
    x.write_bytes(x.read_bytes()[:100] if damage == "truncated" else b"not a pickle at all\n" * 4)
    proc = subprocess.run([sys.executable, "-m", "bench.cli", "datasets", "prepare", "planetoid:Cora", "--cache-dir",
                           str(tmp_path / "cache"), "--data-root", str(root)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    # caught by the check against the official files' hashes, before PyG unpickles anything
    assert str(root / "Cora" / "raw" / "ind.cora.x") in proc.stderr and "not the official Planetoid file" in proc.stderr
    assert "replace them" in proc.stderr
    assert not list((tmp_path / "cache").glob("**/meta.json"))  # nothing half-made was adopted
