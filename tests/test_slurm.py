"""The sbatch script of `gnnbench slurm`, submitted to a real two-node SLURM cluster built here
(tests/local_slurm.py: Debian's slurmctld, two slurmd, munge; `make slurm` installs them): one
cell measured over both nodes, with SLURM's job id and node list in the result files."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pytest

from bench import cli
from tests.conftest import require_stacks
from tests.local_slurm import LocalSlurm, missing

JOB_S = 1200  # the job's own time: two gnnbench runs of a tiny suite, on a machine other work may load
SUITE = """
name: slurm-scaling
datasets:
  g: {source: synthetic, params: {scale: 10, feature_dim: 16, num_classes: 4}}
backends: [pyg-neighbor]
settings: {world_size: [1, 2], batch_size: 64, fanout: [5, 5], epochs: 3, timeout: 600}
"""
CELL = "pyg-neighbor/g/mode=cpu-cpu/workers=0/ws={}"


def require_slurm() -> None:
    """The cluster needs SLURM's daemons and root (slurmd starts jobs as their user). Under CI,
    which installs them (make slurm) and runs as root, a missing part is a failure."""
    problem = None
    if missing():
        problem = f"SLURM not installed ({', '.join(missing())} missing): make slurm installs Debian's slurm-wlm and munge"
    elif os.geteuid() != 0:
        problem = "the local SLURM cluster runs its daemons as root (SlurmUser=root); this test is not root"
    if problem:
        if os.environ.get("CI"):
            pytest.fail(problem)
        pytest.skip(problem)


@pytest.fixture
def cluster():
    require_slurm()
    # a short folder: munge's socket path must stay under the 108 bytes of a unix socket's name
    folder = Path(tempfile.mkdtemp(prefix="gnnbench-slurm-", dir="/tmp"))
    try:
        with LocalSlurm(folder) as running:
            yield running
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def wait_for(cluster: LocalSlurm, job: str) -> str:
    """The job's final state (it is kept MinJobAge seconds after it ends)."""
    deadline = time.monotonic() + JOB_S
    state = ""
    while time.monotonic() < deadline:
        shown = cluster.run(["scontrol", "show", "job", job], check=False).stdout
        match = re.search(r"\bJobState=(\S+)", shown)
        state = match.group(1) if match else state
        if state in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL",
                     "DEADLINE", "PREEMPTED"):
            return state
        time.sleep(2)
    cluster.run(["scancel", job], check=False)
    return f"still {state} after {JOB_S} s (cancelled)"


def result_of(folder: Path) -> dict:
    [path] = [p for p in folder.glob("*.json")]
    return json.loads(path.read_text())


def test_the_generated_sbatch_script_measures_one_cell_over_two_slurm_nodes(cluster, tmp_path, cache_dir, capsys,
                                                                          monkeypatch):
    require_stacks("pyg")
    suite = tmp_path / "slurm-scaling.yaml"
    suite.write_text(SUITE)
    results = tmp_path / "results"
    monkeypatch.setenv("SLURM_CONF", str(cluster.conf))  # for sbatch, and exported into the job
    monkeypatch.setenv("GNNBENCH", f"{sys.executable} -m bench.cli")  # each node's gnnbench: this checkout's
    code = cli.main(["slurm", str(suite), "--nodes", "2", "--gpus-per-node", "0", "--time", "30",
                     "--results", str(results), f"--run-args=--cache-dir {cache_dir} --no-install", "--submit"])
    out = capsys.readouterr()
    assert code == 0, out.err
    script = (results / "slurm-slurm-scaling.sbatch").read_text()
    assert "#SBATCH --nodes=2" in script and "#SBATCH --requeue" in script and "--signal=B:USR1@" in script
    job = re.search(r"submitted: job (\d+)", out.out).group(1)
    state = wait_for(cluster, job)
    log = results / f"slurm-{job}.out"
    said = log.read_text(errors="replace")[-4000:] if log.exists() else "(no job output)"
    assert state == "COMPLETED", f"job {job}: {state}\n{said}\n{cluster.logs()}"

    nodes = [result_of(results / f"slurm-{job}" / f"node{k}") for k in (0, 1)]
    for k, doc in enumerate(nodes):
        seen = doc["machine_info"]["gnnbench"]["cluster"]
        assert seen["scheduler"] == "slurm" and seen["job_id"] == job
        assert seen["nodelist"] == "n[1-2]" and seen["nodes"] == ["n1", "n2"]
        assert seen["node_rank"] == k and seen["environment"]["SLURM_NODEID"] == str(k)
        assert seen["nnodes"] == 2
        # the world-size-1 cell does not split over 2 nodes: skipped with the reason, on both
        assert [(u["id"], u["status"]) for u in doc["unmeasured"] if u["status"] == "skipped"] == [
            (CELL.format(1), "skipped")]
    # the node holding global rank 0 records the cell (c10d's rendezvous hands out the ranks in the
    # order the nodes join, so either node may), the other lists it as a follower
    recorder = [doc for doc in nodes if doc["benchmarks"]]
    follower = [doc for doc in nodes if not doc["benchmarks"]]
    assert len(recorder) == 1 and len(follower) == 1, [doc["unmeasured"] for doc in nodes]
    table = next((results / f"slurm-{job}" / "node1").glob("*.md")).read_text()  # the node's own table says it
    assert f"slurm job {job} on n1, n2 (node 1 of 2)" in table
    [measured] = recorder[0]["benchmarks"]
    info = measured["extra_info"]
    assert info["cell_id"] == CELL.format(2) and [r["rank"] for r in info["ranks"]] == [0, 1]
    assert info["settings"]["world_size"] == 2 and len(measured["stats"]["data"]) == 3
    assert [u["status"] for u in follower[0]["unmeasured"] if u["id"] == CELL.format(2)] == ["follower"]


def test_a_requeued_job_resumes_each_node_from_its_journal(cluster, tmp_path, cache_dir, capsys, monkeypatch):
    """Preemption as SLURM does it: the job is requeued while its 2-rank cell runs (held there by
    the worker's `hang` test hook, in the first run only: SLURM_RESTART_COUNT is unset then), runs
    again under the same job id, and each node resumes from its journal: the cell finished before
    is kept, the other measured."""
    require_stacks("pyg")
    suite = tmp_path / "slurm-scaling.yaml"
    suite.write_text(SUITE)
    results = tmp_path / "results"
    wrapper = tmp_path / "gnnbench-first-run-hangs"
    wrapper.write_text(f'#!/bin/sh\n[ -n "$SLURM_RESTART_COUNT" ] || export GNNBENCH_FAULT=hang:ws=2\n'
                       f'exec {sys.executable} -m bench.cli "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("SLURM_CONF", str(cluster.conf))
    monkeypatch.setenv("GNNBENCH", str(wrapper))
    code = cli.main(["slurm", str(suite), "--nodes", "2", "--gpus-per-node", "0", "--results", str(results),
                     f"--run-args=--cache-dir {cache_dir} --no-install", "--submit"])
    out = capsys.readouterr()
    assert code == 0, out.err
    job = re.search(r"submitted: job (\d+)", out.out).group(1)
    journals = results / f"slurm-{job}"
    deadline = time.monotonic() + JOB_S
    while sum(CELL.format(1) in j.read_text() for j in journals.glob("node*/*.cells.jsonl")) < 2:
        assert time.monotonic() < deadline, f"no journal lines after {JOB_S} s\n{cluster.logs()}"
        time.sleep(1)
    cluster.run(["scontrol", "requeue", job])
    # a requeued job waits two minutes (Reason=BeginTime) before it may start again; here it may
    # start at once: its StartTime is set to now once it is pending
    while True:
        shown = cluster.run(["scontrol", "show", "job", job]).stdout
        if "Restarts=1" in shown and "JobState=PENDING" in shown:
            if cluster.run(["scontrol", "update", f"JobId={job}", "StartTime=now"], check=False).returncode == 0:
                break
        elif "Restarts=1" in shown and "JobState=COMPLETING" not in shown:
            break  # already running (or ended) again
        assert time.monotonic() < deadline, f"job {job} not pending again after {JOB_S} s: {shown}"
        time.sleep(1)
    state = wait_for(cluster, job)
    log = results / f"slurm-{job}.out"
    said = log.read_text(errors="replace")[-4000:] if log.exists() else "(no job output)"
    assert state == "COMPLETED", f"job {job}: {state}\n{said}\n{cluster.logs()}"
    assert "Restarts=1" in cluster.run(["scontrol", "show", "job", job]).stdout
    nodes = [result_of(journals / f"node{k}") for k in (0, 1)]
    for doc in nodes:
        [journal] = (Path(p) for p in doc["gnnbench"]["resumed_from"])
        assert journal.parent.parent == journals
        assert [u["status"] for u in doc["unmeasured"] if u["id"] == CELL.format(1)] == ["skipped"]
    assert [len(doc["benchmarks"]) for doc in nodes].count(1) == 1, said
    whole = log.read_text(errors="replace")  # both runs: the first one's end, the second one's start
    assert "DUE TO JOB REQUEUE" in whole and "kept from" in whole, said
