"""DDP's all-reduce is timed by a Python comm hook (bench/backends/base.py CommTimer), per gradient
bucket: work no framework's own loop does, so only a cell with `profile: true` registers it
(issue 49); a `profile: false` DDP cell records its all-reduce as not measured (None), never as 0.
Two real gloo ranks in a stack's torch."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bench import stacks
from tests.conftest import require_stacks

pytestmark = pytest.mark.stacks

REPO = Path(__file__).resolve().parents[1]

TWO_RANKS = r"""
import os, sys
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from bench.backends.base import distribute
from tests.small_pipeline import built


def allreduced(profile: bool):  # what the worker records of a step's all-reduce (worker.py run_epoch)
    pipe = built(profile=profile)
    pipe.model(torch.randn(8, 64)).sum().backward()
    return pipe.allreduce_seconds()


def rank(r, init):
    os.environ.update(RANK=str(r), WORLD_SIZE="2")
    dist.init_process_group("gloo", init_method=init, rank=r, world_size=2)
    found = {}
    for timed in (True, False):
        torch.manual_seed(r)
        ddp, timer = distribute(torch.nn.Linear(64, 64), torch.device("cpu"), timed=timed)
        ddp(torch.randn(8, 64)).sum().backward()
        found[timed] = (ddp._get_ddp_logging_data().get("comm_hook", ""), None if timer is None else timer.seconds)
    assert found[True][0].endswith("hook") and found[True][1] > 0, found  # registered, and it timed the all-reduce
    assert found[False] == ("", None), found  # DDP's own all-reduce, nothing timed
    assert allreduced(True) > 0 and allreduced(False) is None  # untimed: recorded as not measured, never 0
    dist.destroy_process_group()


if __name__ == "__main__":
    assert allreduced(True) == allreduced(False) == 0.0  # one rank: nothing to all-reduce, measured or not
    mp.spawn(rank, args=(f"file://{sys.argv[1]}",), nprocs=2)
    print("ok")
"""


def test_the_comm_hook_is_registered_only_when_profiling(tmp_path):
    require_stacks("dgl")
    script = tmp_path / "two_ranks.py"
    script.write_text(TWO_RANKS)
    proc = subprocess.run([str(stacks.get("dgl").python), str(script), str(tmp_path / "rendezvous")], cwd=REPO,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-3000:]
