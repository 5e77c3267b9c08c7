"""The runner's memory sampler on a real process tree: RSS every sample, PSS at new highs and
every PSS_EVERY_S, the tree listed every TREE_EVERY_S (a child started later is still seen)."""

from __future__ import annotations

import subprocess
import sys
import time

import psutil

from bench.run import runner

HOLD = "import sys, time\nb = bytearray({mib} * 2**20)\nfor i in range(0, len(b), 4096): b[i] = 1\ntime.sleep(60)\n"


def test_peaks_of_a_tree_whose_child_comes_late():
    # the root holds 100 MiB at once and starts a child holding 300 MiB after 2 s
    late = HOLD.format(mib=300)
    root_code = ("import subprocess, sys, time\nb = bytearray(100 * 2**20)\n"
                 "for i in range(0, len(b), 4096): b[i] = 1\ntime.sleep(2)\n"
                 f"c = subprocess.Popen([sys.executable, '-c', {late!r}])\ntime.sleep(60)\n")
    root = subprocess.Popen([sys.executable, "-c", root_code])
    sampler = runner.TreeMemorySampler(root.pid)
    try:
        sampler.start()
        time.sleep(1.5)
        early = sampler.peak_rss
        time.sleep(2 + runner.TREE_EVERY_S + runner.PSS_EVERY_S + 1)
    finally:
        sampler.stop()
        for child in psutil.Process(root.pid).children(recursive=True):
            child.kill()
        root.kill()
        root.wait()
    mib = 2**20
    assert 100 * mib <= early < 250 * mib, early >> 20
    assert sampler.peak_rss >= 400 * mib, sampler.peak_rss >> 20  # the late child was found
    assert 380 * mib <= sampler.peak_pss <= sampler.peak_rss, (sampler.peak_pss >> 20, sampler.peak_rss >> 20)
    assert sampler.rank_peaks[0][0] == sampler.peak_rss  # one worker: the whole tree is rank 0
    assert sampler.cpu_seconds > 0
