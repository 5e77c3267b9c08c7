"""World sizes > 1 on CPU (gloo) for both backends, a rank that dies, and two nodes on loopback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import pytest

from bench.net import free_port
from bench.publish import results
from tests.conftest import REPO, processes_with, require_stacks, run_suite, run_suite_text

SUITE = """
name: ddp
datasets:
  g: {source: synthetic, params: {scale: 10, feature_dim: 16, num_classes: 4}}
backends: [pyg-neighbor, dgl-graphbolt]
settings: {world_size: [1, 2], batch_size: 64, fanout: [5, 5], epochs: 3, timeout: 180}
"""


@pytest.fixture(scope="module")
def ddp_run(tmp_path_factory, cache_dir):
    require_stacks("pyg", "dgl")
    folder = tmp_path_factory.mktemp("ddp")
    proc, out = run_suite_text(SUITE, folder, cache_dir, name="ddp")
    assert proc.returncode == 0
    return out


def test_world_size_two_runs_both_backends_with_per_rank_records(ddp_run):
    raw = json.loads(ddp_run.read_text())
    assert raw["unmeasured"] == []
    by_id = {b["extra_info"]["cell_id"]: b["extra_info"] for b in raw["benchmarks"]}
    scored = {c.id: c for c in results.read(ddp_run).cells}  # speedups are derived when a file is read
    for backend in ("pyg-neighbor", "dgl-graphbolt"):
        one, two = by_id[f"{backend}/g/mode=cpu-cpu/workers=0/ws=1"], by_id[f"{backend}/g/mode=cpu-cpu/workers=0/ws=2"]
        assert [r["rank"] for r in two["ranks"]] == [0, 1] and len(one["ranks"]) == 1
        for rank in two["ranks"]:
            assert rank["peak_pss_bytes"] > 50 * 2**20 and rank["peak_rss_bytes"] >= rank["peak_pss_bytes"]
            assert 0 <= rank["loader_stall"] <= 1 and rank["compute_s"] > 0
            assert rank["comm_s"] > 0  # DDP's all-reduce, timed by the communication hook
        # the total covers both ranks' process trees (and the launcher) at once; ranks peak at
        # different moments (rank 0 evaluates alone at the end), so the total is at least the
        # larger peak plus a good part of the other
        peaks = sorted(r["peak_pss_bytes"] for r in two["ranks"])
        assert two["total_pss_bytes"] >= peaks[1] + 0.5 * peaks[0]
        one_cell = scored[f"{backend}/g/mode=cpu-cpu/workers=0/ws=1"]
        two_cell = scored[f"{backend}/g/mode=cpu-cpu/workers=0/ws=2"]
        assert one_cell.scaling_efficiency == 1.0
        assert two_cell.speedup_vs_ws1 == pytest.approx(one_cell.median / two_cell.median)
        assert two_cell.scaling_efficiency == pytest.approx(two_cell.speedup_vs_ws1 / 2)
        assert 0.25 < two["val_acc"] <= 1  # trained across ranks, evaluated on rank 0


def test_a_rank_that_dies_mid_epoch_is_recorded_and_leaves_nothing(tmp_path, cache_dir):
    require_stacks("pyg")
    suite = tmp_path / "dies.yaml"
    suite.write_text(SUITE.replace("[pyg-neighbor, dgl-graphbolt]", "[pyg-neighbor]").replace("[1, 2]", "2"))
    token = uuid.uuid4().hex
    out = tmp_path / "dies.json"
    proc = run_suite(suite, out, cache_dir, env={"GNNBENCH_FAULT": f"crash:ws=2@1,{token}:never"})
    assert proc.returncode == 0
    [failed] = json.loads(out.read_text())["unmeasured"]
    assert failed["status"] == "failed" and failed["id"] == "pyg-neighbor/g/mode=cpu-cpu/workers=0/ws=2"
    assert "SIGABRT" in failed["reason"] or "Signal 6" in failed["reason"]
    leftovers = processes_with("GNNBENCH_FAULT", token)
    assert leftovers == [], [p.cmdline() for p in leftovers]


def test_two_nodes_on_loopback_meet_at_a_c10d_rendezvous(tmp_path, cache_dir):
    require_stacks("pyg")
    suite = tmp_path / "two-nodes.yaml"
    suite.write_text(SUITE.replace("[pyg-neighbor, dgl-graphbolt]", "[pyg-neighbor]").replace("[1, 2]", "2"))
    endpoint = f"127.0.0.1:{free_port()}"
    procs = []
    for node in (0, 1):
        cmd = [sys.executable, "-m", "pytest", str(REPO / "suites"), "--benchmark-only", "--suite", str(suite),
               "--benchmark-json", str(tmp_path / f"node{node}.json"), "--cache-dir", str(cache_dir),
               "--no-install", "-p", "no:cacheprovider", "--nnodes", "2", "--node-rank", str(node),
               "--rdzv-endpoint", endpoint]
        procs.append(subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                      env=dict(os.environ)))
    outputs = [p.communicate(timeout=600)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    results = [json.loads((tmp_path / f"node{node}.json").read_text()) for node in (0, 1)]
    measured = [r for r in results if r["benchmarks"]]
    followers = [r for r in results if not r["benchmarks"]]
    assert len(measured) == 1 and len(followers) == 1  # the node holding global rank 0 records the cell
    info = measured[0]["benchmarks"][0]["extra_info"]
    assert [r["rank"] for r in info["ranks"]] == [0, 1] and info["settings"]["world_size"] == 2
    assert followers[0]["unmeasured"][0]["status"] == "follower"


def test_a_cell_whose_ranks_do_not_split_over_the_nodes_is_skipped_not_a_traceback(tmp_path, capsys):
    """A world-size-1 cell (or 3 ranks) with --nnodes 2: skipped with the reason, the run goes on
    and ends 0 (it was an uncaught ValueError that ended the whole run)."""
    from bench import cli

    suite = tmp_path / "split.yaml"
    suite.write_text("name: split\ndatasets:\n  g: 'synthetic:scale=6'\nbackends: [pyg-neighbor]\n"
                     "settings: {world_size: [1, 3], epochs: 1, warmup_epochs: 0}\n")
    code = cli.main(["run", str(suite), "--results", str(tmp_path / "r"), "--cache-dir", str(tmp_path / "c"),
                     "--no-install", "--nnodes", "2", "--node-rank", "0", "--rdzv-endpoint", "127.0.0.1:29555"])
    out = capsys.readouterr()
    assert code == 0 and "Traceback" not in out.err, out.err
    [result] = (tmp_path / "r").glob("split-*.json")
    doc = json.loads(result.read_text())
    assert [(u["status"], u["reason"]) for u in doc["unmeasured"]] == [
        ("skipped", f"world size {w} does not split over 2 nodes (--nnodes 2: every node runs the same number of "
                    "ranks)") for w in (1, 3)]
