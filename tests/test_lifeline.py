"""Nothing outlives gnnbench: killed with SIGKILL (which it cannot catch) while a cell runs, every
process of the cell (worker, DataLoader workers, torchrun's launcher, its ranks) ends too."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import REPO, processes_with, require_stacks

SUITE = """
name: lifeline
datasets:
  rmat-s9: {source: synthetic, params: {scale: 9, edge_factor: 8, feature_dim: 16, num_classes: 4}}
backends: [dgl-graphbolt]
settings: {num_workers: 1, world_size: WORLD, batch_size: 16, fanout: [5, 5], epochs: 3, warmup_epochs: 0, timeout: 600}
"""


@pytest.mark.parametrize("world", [1, 2])
def test_sigkill_of_gnnbench_ends_every_process_of_the_cell(tmp_path, world):
    require_stacks("dgl")
    suite = tmp_path / "lifeline.yaml"
    suite.write_text(SUITE.replace("WORLD", str(world)))
    hub = tmp_path / f"hub-{world}"
    proc = subprocess.Popen([sys.executable, "-m", "bench.cli", "run", str(suite), "--results", str(tmp_path),
                             "--cache-dir", str(hub), "--no-install"], cwd=REPO, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env={**__import__("os").environ, "GNNBENCH_FAULT": "hang"})
    # the cell hangs in its first measured epoch: the worker (or the launcher and its ranks) and
    # their DataLoader workers are all running
    deadline = time.monotonic() + 240
    while len(processes_with("GNNBENCH_CACHE", str(hub))) < 2 * world + (world > 1) and time.monotonic() < deadline:
        time.sleep(0.5)
    time.sleep(3)
    running = processes_with("GNNBENCH_CACHE", str(hub))
    assert len(running) >= 2 * world, [p.cmdline() for p in running]
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 20
    while processes_with("GNNBENCH_CACHE", str(hub)) and time.monotonic() < deadline:
        time.sleep(0.5)
    left = processes_with("GNNBENCH_CACHE", str(hub))
    assert left == [], [p.cmdline() for p in left]
