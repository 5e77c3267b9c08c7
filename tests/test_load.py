"""The load of other work while a cell runs (bench.machine.load), on a real CPU burner."""

from __future__ import annotations

import subprocess
import sys
import time

import psutil

from bench.machine.load import LoadMeter

BURN = "import time\nend = time.time() + 300\nwhile time.time() < end: pass\n"


def cpu_seconds(pid: int) -> float:
    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


def test_other_work_is_seen_and_the_cells_own_work_is_not():
    burner = subprocess.Popen([sys.executable, "-c", BURN])
    try:
        time.sleep(0.3)
        before = cpu_seconds(burner.pid)
        started = time.monotonic()
        meter = LoadMeter()
        # metered until the burner has had a second of CPU (on a busy machine that takes longer
        # than on a quiet one: a fixed window gave it 0.43 s once, under a CPU burner per core)
        while cpu_seconds(burner.pid) - before < 1.0 and time.monotonic() - started < 120:
            time.sleep(0.2)
        burned = cpu_seconds(burner.pid) - before  # during the meter
        as_other = meter.other_share(tree_cpu_s=0.0)
        as_ours = meter.other_share(tree_cpu_s=burned)
        elapsed = time.monotonic() - started
    finally:
        burner.kill()
        burner.wait()
    share = burned / (elapsed * psutil.cpu_count())  # what the burner took of the whole machine
    assert burned > 0.5, "the burner got no CPU to speak of"
    # a process that is not the cell's is other work; counted as the cell's own, it is not
    assert as_other >= 0.8 * share, (as_other, share)
    assert as_other - as_ours >= 0.8 * share, (as_ours, as_other, share)


def test_too_short_to_tell():
    assert LoadMeter().other_share(0.0) is None
