"""The runner's memory sampler on a real process tree: RSS every sample, PSS at new highs and
every PSS_EVERY_S, the tree listed every TREE_EVERY_S (a child started later is still seen).
The tree's steps are gated by pipes, not by sleeps, so a busy machine only makes it slower."""

from __future__ import annotations

import subprocess
import sys
import time

import psutil

from bench.run import runner

MIB = 2**20
# the child holds 300 MiB and says so; the root holds 100 MiB, says so, and starts the child on "go"
CHILD = ("import time\nb = bytearray(300 * 2**20)\nfor i in range(0, len(b), 4096): b[i] = 1\n"
         "print('held', flush=True)\ntime.sleep(300)\n")
ROOT = ("import subprocess, sys, time\nb = bytearray(100 * 2**20)\nfor i in range(0, len(b), 4096): b[i] = 1\n"
        "print('held', flush=True)\nsys.stdin.readline()\n"
        f"c = subprocess.Popen([sys.executable, '-c', {CHILD!r}])\ntime.sleep(300)\n")


def wait_for(condition, seconds: float = 120.0) -> bool:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.05)
    return condition()


def test_peaks_of_a_tree_whose_child_comes_late():
    root = subprocess.Popen([sys.executable, "-c", ROOT], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    sampler = runner.TreeMemorySampler(root.pid)
    try:
        sampler.start()
        assert root.stdout.readline().strip() == "held"
        assert wait_for(lambda: sampler.peak_rss >= 100 * MIB), sampler.peak_rss >> 20
        early = sampler.peak_rss
        root.stdin.write("go\n")
        root.stdin.flush()
        # the child is found by a later listing of the tree, and its pages reach the PSS peak
        assert wait_for(lambda: sampler.peak_rss >= 400 * MIB and sampler.peak_pss >= 380 * MIB), (
            sampler.peak_rss >> 20, sampler.peak_pss >> 20)
    finally:
        sampler.stop()
        for child in psutil.Process(root.pid).children(recursive=True):
            child.kill()
        root.kill()
        root.wait()
    assert 100 * MIB <= early < 250 * MIB, early >> 20  # before "go" the child did not exist
    assert sampler.peak_pss <= sampler.peak_rss, (sampler.peak_pss >> 20, sampler.peak_rss >> 20)
    assert sampler.rank_peaks[0][0] == sampler.peak_rss  # one worker: the whole tree is rank 0
    assert sampler.cpu_seconds > 0
