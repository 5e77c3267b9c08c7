"""Partitioned PyG (torch_geometric.distributed): the partition cache, the failure current PyG
meets, and training across partitions where pyg-lib is present (skipped with its reason where not)."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from bench import stacks
from bench.datasets import hub, synthetic
from tests.conftest import REPO, require_stacks, run_suite_text

SUITE = """
name: dist
datasets:
  g: {source: synthetic, params: {scale: 10, feature_dim: 16, num_classes: 4}}
backends: [pyg-dist]
settings: {world_size: 2, batch_size: 64, fanout: [5, 5], epochs: 10, timeout: 300}
include:
  - {backend: pyg-neighbor, world_size: 1}
  - {backend: pyg-dist, stack: pyg}
"""

PARTITION = """
import json, sys
from pathlib import Path
from bench.datasets import hub
from bench.backends.pyg_dist import ensure_partitions
root, record = ensure_partitions(hub.load(Path(sys.argv[1]), mmap=False), 2, Path(sys.argv[2]))
print(json.dumps({"root": str(root), **record}))
"""


def partition(stack, dataset_dir, cache) -> dict:
    proc = subprocess.run([str(stack.python), "-c", PARTITION, str(dataset_dir), str(cache)], capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_partitions_are_made_once_and_reused(tmp_path):
    require_stacks("pyg-dist")
    dataset_dir = synthetic.materialise({"name": "g", "source": "synthetic", "params": {"scale": 10}}, tmp_path)
    stack = stacks.get("pyg-dist")
    first = partition(stack, dataset_dir, tmp_path)
    second = partition(stack, dataset_dir, tmp_path)
    assert first["reused"] is False and second["reused"] is True
    assert first["seconds"] == second["seconds"] and first["edge_cut"] == second["edge_cut"]
    assert 0 < first["edge_cut"] < 0.5  # METIS cuts far fewer edges than a random halving would
    assert 1.0 <= first["balance"] < 1.1 and sum(first["part_sizes"]) == hub.load(dataset_dir).num_nodes
    root = tmp_path / "partitions"
    assert sorted(p.name for p in root.iterdir() if p.is_dir()) == [os.path.basename(first["root"])]  # no .partial
    assert {"META.json", "node_map.pt", "part_0", "part_1"} <= {p.name for p in (root / first["root"]).iterdir()}


@pytest.fixture(scope="module")
def dist_run(tmp_path_factory, cache_dir):
    require_stacks("pyg", "pyg-dist")
    folder = tmp_path_factory.mktemp("dist")
    proc, out = run_suite_text(SUITE, folder, cache_dir, name="dist")
    assert proc.returncode == 0
    return json.loads(out.read_text())


def test_current_pyg_meets_the_samplers_typeerror_and_it_is_recorded(dist_run):
    failed = {u["id"]: u for u in dist_run["unmeasured"]}["pyg-dist/g/mode=cpu-cpu/workers=0/ws=2/stack=pyg"]
    assert failed["status"] == "failed"
    assert "TypeError: 'stack_level' is an invalid keyword argument for warn()" in failed["reason"]


def test_partitioned_training_matches_neighbor_loader_or_is_skipped_without_pyg_lib(dist_run):
    with_pyg_lib = "pyg_lib" in stacks.probe_versions(stacks.get("pyg-dist"))  # what imports now
    measured = {b["extra_info"]["cell_id"]: b["extra_info"] for b in dist_run["benchmarks"]}
    dist_id = "pyg-dist/g/mode=cpu-cpu/workers=0/ws=2"
    if not with_pyg_lib:
        skipped = {u["id"]: u for u in dist_run["unmeasured"]}[dist_id]
        assert skipped["status"] == "skipped" and "pyg-lib" in skipped["reason"]
        pytest.skip("pyg-lib is absent from the pyg-dist stack: its cell was recorded as skipped (checked)")
    dist, single = measured[dist_id], measured["pyg-neighbor/g/mode=cpu-cpu/workers=0/ws=1"]
    assert abs(dist["val_acc"] - single["val_acc"]) <= 0.05 and abs(dist["test_acc"] - single["test_acc"]) <= 0.05
    assert dist["partition"]["num_parts"] == 2 and 0 < dist["partition"]["edge_cut"] < 0.5
