"""Each cell's own scratch folder and TMPDIR (bench/run/cell_scratch.py): what the cell's processes
leave in the temporary folder (multiprocessing's pymp-* folders, as DataLoader workers make them)
goes with the cell; what a SIGKILLed gnnbench left is swept at the next start, a live run's kept."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from bench.run import cell_scratch
from tests.conftest import REPO, require_stacks

# Makes a pymp-* folder as a DataLoader worker's file-descriptor sharing does (multiprocessing's
# own temp folder, for its sockets), then exits without multiprocessing's clean-up, as a worker
# killed with its cell does.
PYMP = """
import multiprocessing.util, os, tempfile
print(multiprocessing.util.get_temp_dir(), tempfile.gettempdir(), flush=True)
os._exit(0)
"""


@pytest.fixture
def short_tmp(monkeypatch):
    """A temporary folder of the test's own, as short as the host's: multiprocessing's sockets live
    in it, and a Unix socket's path has at most 107 bytes (pytest's tmp_path is too deep)."""
    folder = Path(tempfile.mkdtemp(prefix="gs-", dir="/tmp"))
    monkeypatch.setenv("TMPDIR", str(folder))
    monkeypatch.setattr(tempfile, "tempdir", str(folder))  # gettempdir() caches its first answer
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_a_cells_temporary_files_go_with_it(short_tmp):
    with cell_scratch.cell_scratch() as scratch:
        assert scratch.parent == short_tmp / f"gnnbench-{os.getuid()}"
        out = subprocess.run([sys.executable, "-c", PYMP], env={**os.environ, **cell_scratch.environment(scratch)},
                             capture_output=True, text=True, timeout=60, check=True).stdout.split()
        pymp, tempdir = Path(out[0]), Path(out[1])
        assert tempdir == scratch and pymp.parent == scratch and pymp.name.startswith("pymp-")
        assert pymp.is_dir()  # left by its process
    assert not scratch.exists() and list(scratch.parent.iterdir()) == []


HOLD = """
import time
from bench.run import cell_scratch
with cell_scratch.cell_scratch() as scratch:
    print(scratch, flush=True)
    time.sleep(600)
"""


def test_a_killed_runs_scratch_is_swept_at_the_next_start_and_a_live_one_kept(short_tmp):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-c", HOLD], env=env, stdout=subprocess.PIPE, text=True)
    left = Path(proc.stdout.readline().strip())
    (left / "pymp-abc").mkdir()
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert left.is_dir()
    said = []
    with cell_scratch.cell_scratch() as live:  # this process's: alive
        assert cell_scratch.sweep(say=said.append) == [left]
        assert live.is_dir() and not left.exists()
    assert said == [f"removed {left}: the scratch folder of a cell whose gnnbench did not finish "
                    f"(process {proc.pid} is gone)"]


SUITE = """
name: scratch
datasets:
  tiny: {source: synthetic, params: {scale: 9, edge_factor: 8, feature_dim: 16, num_classes: 4}}
backends: [dgl-graphbolt]
settings: {num_workers: 2, store: memory, mode: cpu-cpu, batch_size: 64, fanout: [5, 5], epochs: 1,
           warmup_epochs: 0, timeout: 240}
"""


def test_a_run_with_loader_workers_leaves_nothing_in_the_temporary_folder(tmp_path, short_tmp):
    """A real cell with two DataLoader workers, its run given a temporary folder of its own: after
    the run, only gnnbench's own (empty) folder of cell scratch folders is there."""
    require_stacks("dgl")
    tmp = short_tmp
    suite = tmp_path / "scratch.yaml"
    suite.write_text(SUITE)
    done = subprocess.run([sys.executable, "-m", "bench.cli", "run", str(suite), "--results", str(tmp_path / "r"),
                           "--cache-dir", str(tmp_path / "cache"), "--no-install"], cwd=REPO, capture_output=True,
                          text=True, timeout=600, env={**os.environ, "TMPDIR": str(tmp)})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    left = sorted(str(p.relative_to(tmp)) for p in tmp.rglob("*"))
    assert left == [f"gnnbench-{os.getuid()}"], left
