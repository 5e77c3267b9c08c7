"""`gnnbench recover JOURNAL` and `gnnbench report JOURNAL`: a run's journal becomes its result
file without running anything; a journal that does not fit is one error naming FILE:LINE."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import REPO, require_stacks

SUITE = """
name: rescue
datasets:
  s9: {source: synthetic, params: {scale: 9, edge_factor: 8, feature_dim: 16, num_classes: 4, seed: 0}}
backends: [dgl-graphbolt]
settings:
  num_workers: 0
  mode: cpu-cpu
  batch_size: [64, 128]
  fanout: [5, 5]
  epochs: 2
  warmup_epochs: 1
  timeout: 240
"""


def gnnbench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bench.cli", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=300)


def line(cell_id: str, suite: str = "rescue") -> str:
    return json.dumps({"suite": suite, "id": cell_id, "status": "skipped", "reason": "no GPU",
                       "entry": {"id": cell_id, "status": "skipped", "reason": "no GPU",
                                 "backend": "dgl-graphbolt", "dataset": "s9", "settings": {}}})


@pytest.fixture
def suite_file(tmp_path):
    path = tmp_path / "rescue.yaml"
    path.write_text(SUITE)
    return path


def test_a_real_journal_is_recovered_as_the_run_wrote_it(suite_file, tmp_path):
    """A run ended by SIGTERM after its first cell: `recover` writes the result file the run
    wrote (same entries), with the cell it never reached as not run; `report` reads the journal."""
    require_stacks("dgl")
    results_dir = tmp_path / "results"
    proc = subprocess.Popen([sys.executable, "-m", "bench.cli", "run", str(suite_file), "--results", str(results_dir),
                             "--cache-dir", str(tmp_path / "hub"), "--no-install"], cwd=REPO, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        journal = next(results_dir.glob("rescue-*.cells.jsonl"), None)
        if journal and journal.read_text().count("\n") >= 1:
            break
        time.sleep(0.2)
    else:
        proc.kill()
        pytest.fail(f"no cell finished: {proc.communicate()[0][-2000:]}")
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=120)
    written = journal.with_name(journal.name.replace(".cells.jsonl", ".json"))
    by_the_run = json.loads(written.read_text())
    assert len(by_the_run["benchmarks"]) == 1

    refused = gnnbench("recover", str(journal))  # the run's own file is never overwritten
    assert refused.returncode == 2 and "already there" in refused.stderr and "--out" in refused.stderr

    out = tmp_path / "recovered.json"
    done = gnnbench("recover", str(journal), "--suite", str(suite_file), "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert "1 finished cells" in done.stdout and "1 not run" in done.stdout and str(out) in done.stdout
    recovered = json.loads(out.read_text())
    assert recovered["benchmarks"] == by_the_run["benchmarks"]  # each entry exactly as journalled
    assert recovered["unmeasured"] == by_the_run["unmeasured"] == []
    meta = recovered["gnnbench"]
    assert meta["recovered_from"] == str(journal) and meta["suite"] == "rescue"
    assert meta["cells"] == by_the_run["gnnbench"]["cells"] and len(meta["cells"]) == 2

    written.unlink()  # as if the run had been killed before it could write it
    alone = gnnbench("recover", str(journal))
    assert alone.returncode == 0, alone.stderr
    assert json.loads(written.read_text())["benchmarks"] == by_the_run["benchmarks"]

    report = gnnbench("report", str(journal))
    assert report.returncode == 0, report.stderr
    cell = by_the_run["benchmarks"][0]["param"]
    assert cell in report.stdout and "rescue" in report.stdout
    with_suite = gnnbench("report", str(out))
    assert "not run" in with_suite.stdout


@pytest.mark.parametrize("text, where, message", [
    (line("a") + "\n" + line("b", suite="other") + "\n", ":2", "a cell of suite 'other', not 'rescue'"),
    ("hello world\n" + line("a") + "\n", ":1", "not a journal line (invalid JSON)"),
    (json.dumps({"benchmarks": []}) + "\n", ":1", "not a journal line of this gnnbench"),
    ("", "", "no finished cell in this journal"),
])
def test_a_journal_that_does_not_fit_is_one_error(tmp_path, text, where, message):
    journal = tmp_path / "rescue-x.cells.jsonl"
    journal.write_text(text)
    for command in (["recover", str(journal)], ["report", str(journal)]):
        proc = gnnbench(*command)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        assert f"{journal}{where}: {message}" in proc.stderr or (not where and message in proc.stderr), proc.stderr
    assert not (tmp_path / "rescue-x.json").exists()


def test_a_torn_last_line_is_dropped_and_a_cell_of_another_suite_is_named(tmp_path, suite_file):
    journal = tmp_path / "rescue-x.cells.jsonl"
    journal.write_text(line("a") + "\n" + line("b")[:30])
    proc = gnnbench("recover", str(journal))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((tmp_path / "rescue-x.json").read_text())
    assert [u["id"] for u in doc["unmeasured"]] == ["a"] and doc["gnnbench"]["cells"] == ["a"]
    # with the suite, a cell it does not have is named
    proc = gnnbench("recover", str(journal), "--suite", str(suite_file), "--out", str(tmp_path / "o.json"))
    assert proc.returncode == 2 and f"{journal}:1: cell 'a' is not a cell of suite 'rescue'" in proc.stderr


def test_not_a_journal_is_one_error(tmp_path):
    binary = tmp_path / "x.cells.jsonl"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    proc = gnnbench("recover", str(binary))
    assert proc.returncode == 2 and f"{binary}: not a journal (not UTF-8 text)" in proc.stderr
    other = tmp_path / "notes.txt"
    other.write_text(line("a"))
    proc = gnnbench("recover", str(other))
    assert proc.returncode == 2 and "not named like a run's journal" in proc.stderr and "--out" in proc.stderr
    proc = gnnbench("recover", str(tmp_path / "missing.cells.jsonl"), "--out", str(tmp_path / "o.json"))
    assert proc.returncode == 2 and "cannot read the journal" in proc.stderr
