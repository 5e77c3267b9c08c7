"""Both backends for real, through the front door users take: `pytest suites/ --benchmark-only`.

These need the installed stacks (.ci/run installs them)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from bench.publish import results
from tests.conftest import REPO, processes_with, require_stacks, run_suite

TINY = REPO / "tests" / "suites" / "tiny.yaml"


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory, cache_dir):
    require_stacks("pyg", "dgl")
    out = tmp_path_factory.mktemp("run") / "tiny.json"
    proc = run_suite(TINY, out, cache_dir)
    assert proc.returncode == 0, proc.stdout[-3000:]
    return out, proc


def test_both_backends_measured_with_the_full_contract(tiny_run):
    out, _ = tiny_run
    results.read(out)  # raises if a contract field is missing
    benchmarks = json.loads(out.read_text())["benchmarks"]  # the contract as written
    by_id = {b["extra_info"]["cell_id"]: b for b in benchmarks}
    assert set(by_id) == {"pyg-neighbor/rmat-s9/mode=cpu-cpu/workers=0/ws=1",
                          "dgl-graphbolt/rmat-s9/mode=cpu-cpu/workers=0/ws=1",
                          "dgl-graphbolt/rmat-s9/mode=cpu-cpu/workers=1/ws=1"}
    for bench in benchmarks:
        info, stats = bench["extra_info"], bench["stats"]
        assert stats["rounds"] == 3 and len(stats["data"]) == 3  # measured epochs, warm-up excluded
        assert len(info["warmup_epoch_s"]) == 1
        card = info["dataset"]
        assert {k: card[k] for k in ("name", "num_nodes", "feature_dim", "num_classes", "source")} == {
            "name": "rmat-s9", "num_nodes": 512, "feature_dim": 16, "num_classes": 4, "source": "synthetic"}
        # the splits hold the nodes with an edge (60/20/20 of them), none of RMAT's isolated ones
        assert 0 < card["num_test"] <= card["num_val"] + 2 < card["num_train"] < 0.6 * 512 + 1
        assert 0 < card["features_only_acc"] < 1  # the baseline the accuracies are read against
        assert info["seeds_per_s"] > 0 and info["edges_per_s"] > info["seeds_per_s"]
        assert 0 <= info["loader_stall"] <= 1
        assert info["peak_pss_bytes"] > 50 * 2**20 and info["peak_rss_bytes"] >= info["peak_pss_bytes"] * 0.5
        assert 0.25 < info["val_acc"] <= 1 and 0.25 < info["test_acc"] <= 1  # above chance (4 classes)
        assert 0 < info["startup_s"] < 300
        assert 0 <= info["other_load"] <= 1  # the load of other work meanwhile, recorded
        assert 0 < info["runner_cpu_share"] < 0.5  # the runner's own sampler: a small share of one core, recorded
        assert info["settings"]["world_size"] == 1 and info["settings"]["fanout"] == [5, 5]
    assert by_id["dgl-graphbolt/rmat-s9/mode=cpu-cpu/workers=0/ws=1"]["extra_info"]["versions"]["dgl"] == "2.1.0"
    # which implementation sampled: PyG's own rule picks torch-sparse where pyg-lib is absent
    pyg = by_id["pyg-neighbor/rmat-s9/mode=cpu-cpu/workers=0/ws=1"]["extra_info"]
    assert pyg["sampler"] == (f"pyg-lib {pyg['versions']['pyg_lib']}" if "pyg_lib" in pyg["versions"] else
                              f"torch-sparse {pyg['versions']['torch_sparse']} (fallback: no pyg-lib)")
    assert by_id["dgl-graphbolt/rmat-s9/mode=cpu-cpu/workers=1/ws=1"]["extra_info"]["sampler"] == \
        "graphbolt sample_neighbor (dgl 2.1.0)"
    assert by_id["pyg-neighbor/rmat-s9/mode=cpu-cpu/workers=0/ws=1"]["extra_info"]["versions"]["torch_geometric"] == "2.8.1"


def test_cuda_modes_without_a_gpu_are_recorded_as_skipped(tiny_run):
    out, _ = tiny_run
    unmeasured = json.loads(out.read_text())["unmeasured"]
    assert [u["id"] for u in unmeasured] == ["dgl-graphbolt/rmat-s9/mode=pinned-cuda/workers=0/ws=1"]
    assert unmeasured[0]["status"] == "skipped" and "needs a CUDA GPU" in unmeasured[0]["reason"]


def test_machine_info_carries_stack_versions(tiny_run):
    out, _ = tiny_run
    machine = json.loads(out.read_text())["machine_info"]["gnnbench"]
    assert machine["stacks"]["dgl"]["dgl"] == "2.1.0" and machine["stacks"]["pyg"]["torch"].startswith("2.13.0")
    assert machine["cpu_count_logical"] >= 1


def test_pytest_benchmark_compare_reads_the_file(tiny_run):
    out, _ = tiny_run
    cli = Path(sys.executable).parent / "pytest-benchmark"  # pytest-benchmark's own console script
    proc = subprocess.run([str(cli), "compare", str(out)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "test_cell[pyg-neighbor/rmat-s9/mode=cpu-cpu/workers=0/ws=1]" in proc.stdout


def test_report_renders_the_run(tiny_run, tmp_path):
    out, _ = tiny_run
    md = tmp_path / "table.md"
    proc = subprocess.run([sys.executable, "-m", "bench.cli", "report", str(out), "--markdown", str(md), "--columns", "all"],
                          capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    text = md.read_text()
    assert "`dgl-graphbolt/rmat-s9/mode=cpu-cpu/workers=1/ws=1`" in text
    assert "**skipped**" in text and "(baseline)" in text and "1.00×" in text
    assert "| sampler |" in text and "graphbolt sample_neighbor (dgl 2.1.0)" in text


def test_crash_and_hang_are_recorded_and_leave_no_processes(tmp_path, cache_dir):
    require_stacks("pyg", "dgl")
    suite = tmp_path / "faults.yaml"
    suite.write_text(TINY.read_text().replace("timeout: 240", "timeout: 45")
                     .replace("mode: [cpu-cpu, pinned-cuda]", "mode: cpu-cpu")
                     .replace("  - {mode: pinned-cuda, num_workers: 1}\n", ""))  # it would match no cell: an error
    token = uuid.uuid4().hex
    fault = f"crash:pyg-neighbor,hang:workers=1,{token}:never-matches"
    out = tmp_path / "faults.json"
    started = time.monotonic()
    proc = run_suite(suite, out, cache_dir, env={"GNNBENCH_FAULT": fault})
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert time.monotonic() - started < 400
    data = json.loads(out.read_text())
    status = {u["id"]: u for u in data["unmeasured"]}
    crash = status["pyg-neighbor/rmat-s9/mode=cpu-cpu/workers=0/ws=1"]
    hang = status["dgl-graphbolt/rmat-s9/mode=cpu-cpu/workers=1/ws=1"]
    assert crash["status"] == "failed" and "SIGABRT" in crash["reason"]
    assert hang["status"] == "timeout" and "no result after 45 s" in hang["reason"]
    # the suite went on: the third cell was measured
    assert [b["extra_info"]["cell_id"] for b in data["benchmarks"]] == ["dgl-graphbolt/rmat-s9/mode=cpu-cpu/workers=0/ws=1"]
    leftovers = processes_with("GNNBENCH_FAULT", token)
    assert leftovers == [], [p.cmdline() for p in leftovers]
    journal = [json.loads(line) for line in out.with_suffix(".cells.jsonl").read_text().splitlines()]
    assert journal[0]["selected"] == data["gnnbench"]["cells"]  # the run's selection, then its cells
    assert [j["status"] for j in journal[1:]] == ["failed", "ok", "timeout"]
