"""What a killed build leaves in the cache is removed by the next command, and only where its
owner is gone: a concurrent run's live build keeps its folder."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from bench.datasets import hub
from tests.conftest import REPO


def hidden(cache):
    """The temporary folders in the hub (not its `.locks`, bench/locks.py)."""
    return ([p for p in (cache / "datasets").iterdir() if p.name.startswith(".") and p.name != ".locks"]
            if (cache / "datasets").is_dir() else [])


def test_a_sigkilled_prepare_leaves_nothing_past_the_next_command(tmp_path):
    cache = tmp_path / "cache"
    proc = subprocess.Popen([sys.executable, "-m", "bench.cli", "datasets", "prepare", "synthetic:scale=19",
                             "--cache-dir", str(cache)], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while not hidden(cache) and proc.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    assert hidden(cache), "the prepare finished before its temporary folder was seen"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    [left] = hidden(cache)
    assert f".pid{proc.pid}." in left.name
    out = subprocess.run([sys.executable, "-m", "bench.cli", "datasets", "prepare", "synthetic:scale=6",
                          "--cache-dir", str(cache)], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert f"removed {left}" in out.stdout and f"process {proc.pid} is gone" in out.stdout
    assert hidden(cache) == []


def test_a_live_builds_folder_is_left_alone(tmp_path):
    live = tmp_path / "datasets" / (hub.owned_prefix("x") + "abc")  # this process: alive
    live.mkdir(parents=True)
    said = []
    assert hub.sweep_stale(tmp_path, say=said.append) == [] and live.is_dir() and said == []


def test_a_corrupt_meta_json_is_named_with_its_fix(tmp_path):
    cache = tmp_path / "cache"
    prep = [sys.executable, "-m", "bench.cli", "datasets", "prepare", "synthetic:scale=6", "--cache-dir", str(cache)]
    assert subprocess.run(prep, cwd=REPO, capture_output=True, timeout=300).returncode == 0
    [meta] = (cache / "datasets").glob("*/meta.json")
    meta.write_text('{"name": ')
    info = subprocess.run([sys.executable, "-m", "bench.cli", "datasets", "info", "synthetic:scale=6", "--cache-dir",
                           str(cache)], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert info.returncode == 2 and "Traceback" not in info.stderr
    assert f"{meta} is corrupt" in info.stderr and "prepare the dataset again" in info.stderr


def default_sigint() -> None:
    """In the child: SIGINT as a terminal delivers it. A test run started in the background of a
    non-interactive shell (a CI script, nohup) inherits SIGINT ignored, and Python then installs
    no KeyboardInterrupt handler: the Ctrl-C under test would never arrive."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_in_prepare_is_one_line_and_130(tmp_path):
    cache = tmp_path / "cache"
    proc = subprocess.Popen([sys.executable, "-m", "bench.cli", "datasets", "prepare", "synthetic:scale=19",
                             "--cache-dir", str(cache)], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=default_sigint)
    # interrupt once it is building (a fixed sleep could land while Python still imports, on a busy machine)
    deadline = time.time() + 300
    while not hidden(cache) and proc.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    assert hidden(cache), "the prepare finished before its temporary folder was seen"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, (out, err)
    assert "Traceback" not in err and "interrupted" in err


def test_stacks_add_says_what_it_waits_for_and_stops_at_its_timeout(tmp_path):
    hang = tmp_path / "python"
    # the probe hangs far longer than the command could take to start on a busy machine (a 30 s
    # bound beside a 60 s hang failed under a busy loop per core: 32.6 s), so finishing well before
    # the hang ends is the timeout at work, not luck
    hang.write_text("#!/bin/sh\nexec sleep 900\n")
    hang.chmod(0o755)
    started = time.time()
    proc = subprocess.run([sys.executable, "-m", "bench.cli", "stacks", "add", "slow", "--python", str(hang),
                           "--timeout", "2"], cwd=REPO, capture_output=True, text=True, timeout=1200,
                          env={**os.environ, "GNNBENCH_STACKS_DIR": str(tmp_path / "stacks")})
    assert proc.returncode == 2 and time.time() - started < 450
    assert "waiting at most 2 s" in proc.stdout and "took over 2 s" in proc.stderr


def terminate_while_building(cmd: list[str], cache) -> subprocess.CompletedProcess:
    """Run a command that writes the cache, and SIGTERM it once its temporary folder is there: held
    there by SIGSTOP, so the signal lands mid-build however fast the machine (SIGCONT delivers it)."""
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 300
    while not hidden(cache) and proc.poll() is None and time.time() < deadline:
        time.sleep(0.005)
    os.kill(proc.pid, signal.SIGSTOP)
    assert hidden(cache), "the command finished before its temporary folder was seen"
    os.kill(proc.pid, signal.SIGTERM)
    os.kill(proc.pid, signal.SIGCONT)
    out, err = proc.communicate(timeout=120)
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def test_sigterm_in_prepare_exits_130_and_leaves_nothing(tmp_path):
    cache = tmp_path / "cache"
    done = terminate_while_building([sys.executable, "-m", "bench.cli", "datasets", "prepare", "synthetic:scale=17",
                                     "--cache-dir", str(cache)], cache)
    assert done.returncode == 130 and "interrupted" in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert list((cache / "datasets").iterdir()) == []  # no half-built folder, no lock


def test_sigterm_in_check_exits_130_and_leaves_nothing(tmp_path):
    from bench import datasets
    from tests import own_graphs

    ref = hub.load(datasets.materialiser("synthetic")(datasets.parse_name("synthetic:scale=16,feature_dim=64"),
                                                      tmp_path / "ref"), mmap=False)
    graph = own_graphs.write_npy(ref, tmp_path / "graph")
    cache = tmp_path / "cache"
    done = terminate_while_building([sys.executable, "-m", "bench.cli", "datasets", "check", f"npy:{graph}",
                                     "--cache-dir", str(cache)], cache)
    assert done.returncode == 130 and "interrupted" in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert list((cache / "datasets").iterdir()) == []
