"""Where a rank's memory goes (bench/machine/memory_breakdown.py): on a real cell of each backend
the parts sum to the rank's PSS as the kernel counts it (smaps_rollup, what the runner's sampler
reads) at the same moment, and they name their kinds. Nothing asserted depends on how busy the
machine is: the run's peak as a sampler sees it does (a sampler catches other moments than the
phase ends, more or fewer as the machine is busy), so it is not compared."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from bench.datasets import synthetic
from bench import stacks
from bench.machine import memory_breakdown
from bench.stores import page_cache
from tests.conftest import REPO, require_stacks

SETTINGS = {"seed": 0, "mode": "cpu-cpu", "store": "memory", "num_workers": 0, "batch_size": 256,
            "fanout": [10, 5], "model": "sage", "hidden": 64, "lr": 0.01, "epochs": 2, "warmup_epochs": 1,
            "world_size": 1}


def test_kinds_of_mappings():
    assert memory_breakdown.kind_of("") == "anon" and memory_breakdown.kind_of("[heap]") == "anon"
    assert memory_breakdown.kind_of("/c/datasets/x/edge_index.npy") == "structure"
    assert memory_breakdown.kind_of("/c/datasets/x/features.npy") == "features"
    assert memory_breakdown.kind_of("/c/stores/x/data.mdb") == "features"
    assert memory_breakdown.kind_of("/dev/shm/torch_12_34 (deleted)") == "shm"
    assert memory_breakdown.kind_of("/usr/lib/libtorch_cpu.so") == "library"


def test_parts_sum_to_this_process_pss():
    phases = memory_breakdown.PhaseMemory()
    for phase in memory_breakdown.PHASES:
        phases.take(phase)
    result = phases.breakdown(model_optimizer_bytes=0)
    parts = sum(p["shared"] + p["private"] for p in result["parts"].values())
    assert parts == result["pss_bytes"] > 0
    assert result["parts"]["interpreter_framework"]["private"] > 0
    measured = result["measured_pss_bytes"]  # the kernel's sum, read right after the last snapshot
    assert abs(parts - measured) <= max(8 * 2**20, 0.02 * measured), (parts, measured)


def warm(path) -> None:
    """Read the whole file into the page cache, and check it is there. How many pages of a memory-
    mapped file a rank's gathers map depends on the cache: the kernel maps a fault's neighbours
    (fault-around) only where they are already cached and up to date, so on a cold or half-written
    file the count varied with the machine's I/O (the flaky case). Warm, every fault maps its
    neighbours, and the count depends only on which rows the epochs read."""
    with open(path, "rb") as f:
        while f.read(1 << 20):
            pass
    cached, pages = page_cache.resident(path)
    assert cached == pages, f"{path}: {cached} of {pages} pages cached after reading it whole"


@pytest.mark.parametrize("backend,stack,store", [("pyg-neighbor", "pyg", "memory"), ("dgl-graphbolt", "dgl", "memory"),
                                                 ("dgl-graphbolt", "dgl", "graphbolt-disk")])  # GraphBolt's own store
def test_breakdown_sums_to_the_measured_pss(tmp_path, backend, stack, store):
    require_stacks(stack)
    spec = {"name": "tiny", "source": "synthetic", "params": synthetic.canonical_params({"scale": 13, "feature_dim": 256})}
    dataset = synthetic.materialise(spec, tmp_path)
    if store == "graphbolt-disk":
        warm(dataset / "features.npy")
    cell = {"id": f"{backend}/tiny", "backend": backend, "dataset": spec, "settings": {**SETTINGS, "store": store}}
    out = tmp_path / "record.json"
    subprocess.run([str(stacks.get(stack).python), "-m", "bench.run.worker", json.dumps(cell), str(dataset), str(out)],
                   cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=600, check=True)
    record = json.loads(out.read_text())
    [breakdown] = record["memory_breakdown"]
    parts = breakdown["parts"]
    total = sum(p["shared"] + p["private"] for p in parts.values())
    [peak] = [s for s in breakdown["snapshots"] if s["phase"] == breakdown["phase"]]
    assert total == breakdown["pss_bytes"] == peak["pss"]
    # the kernel's PSS of the rank read right after the snapshot: the same moment, on a busy machine too
    # (the gap is what reading smaps itself allocated in between)
    measured = breakdown["measured_pss_bytes"]
    assert abs(total - measured) <= max(8 * 2**20, 0.02 * measured), (total >> 20, measured >> 20, parts)
    assert parts["interpreter_framework"]["private"] + parts["interpreter_framework"]["shared"] > 100 * 2**20
    features = parts["features"]
    if store == "memory":  # read into the rank: private; 8192 x 256 float32 = 8 MiB
        assert features["private"] >= 7 * 2**20
    else:  # mapped from the hub's warm file (GraphBolt maps it "r+": some of its pages show as private dirty);
        # fails if the mapped pages of features.npy were not counted under features
        assert features["shared"] + features["private"] >= 4 * 2**20, (features, breakdown["phase"])
    assert breakdown["model_optimizer_bytes"] > 0
