"""The one run path: `gnnbench run` and `pytest suites/` drive the same session and write the
same result file; a run killed half-way is finished with --resume."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from bench.run import session as session_mod
from bench.run.plan import select_cells
from bench.run.session import Journal, RunOptions, Session, SessionError, add_run_options
from tests.conftest import REPO, processes_with, require_stacks, run_suite

# GraphBolt alone on the smoke suite's graph: two measured cells and one that cannot run without a GPU.
SUITE = """
name: paths
datasets:
  rmat-s12: {source: synthetic, params: {scale: 12, edge_factor: 8, feature_dim: 64, num_classes: 8, seed: 0}}
backends: [dgl-graphbolt]
settings:
  num_workers: [0, 1]
  mode: [cpu-cpu, pinned-cuda]
  batch_size: 256
  fanout: [10, 5]
  epochs: 3
  warmup_epochs: 1
  timeout: 240
exclude:
  - {mode: pinned-cuda, num_workers: 1}
"""
CELLS = ["dgl-graphbolt/rmat-s12/mode=cpu-cpu/workers=0/ws=1", "dgl-graphbolt/rmat-s12/mode=pinned-cuda/workers=0/ws=1",
         "dgl-graphbolt/rmat-s12/mode=cpu-cpu/workers=1/ws=1"]


def gnnbench_run(*args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bench.cli", "run", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=900, **kwargs)


def shape(value):
    """The keys and value types of a document, lists by their first element."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shape(v) for v in value[:1]]
    return "number" if isinstance(value, (int, float)) and not isinstance(value, bool) else type(value).__name__


@pytest.fixture(scope="module")
def suite_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("suite") / "paths.yaml"
    path.write_text(SUITE)
    return path


def test_gnnbench_run_and_pytest_write_the_same_cells_and_fields(suite_file, tmp_path, cache_dir):
    require_stacks("dgl")
    cli = gnnbench_run(str(suite_file), "--results", str(tmp_path / "cli"), "--cache-dir", str(cache_dir),
                       "--no-install")
    assert cli.returncode == 0, cli.stdout[-3000:] + cli.stderr[-3000:]
    [cli_file] = (tmp_path / "cli").glob("paths-*.json")
    proc = run_suite(suite_file, tmp_path / "pytest.json", cache_dir)
    assert proc.returncode == 0, proc.stdout[-3000:]
    by_cli, by_pytest = json.loads(cli_file.read_text()), json.loads((tmp_path / "pytest.json").read_text())
    assert shape(by_cli) == shape(by_pytest)
    for doc in (by_cli, by_pytest):
        assert doc["gnnbench"]["cells"] == CELLS
        assert [b["name"] for b in doc["benchmarks"]] == [f"test_cell[{c}]" for c in (CELLS[0], CELLS[2])]
        assert [(u["id"], u["status"]) for u in doc["unmeasured"]] == [(CELLS[1], "skipped")]
        for bench in doc["benchmarks"]:
            # the rounds are the measured epochs, with pytest-benchmark's statistics of them
            assert bench["stats"]["rounds"] == 3 and len(bench["stats"]["data"]) == 3
            assert bench["stats"]["median"] == sorted(bench["stats"]["data"])[1]
            assert bench["extra_info"]["cell_id"] == bench["param"]
    for key in ("benchmarks", "unmeasured"):
        assert [sorted(e) for e in by_cli[key]] == [sorted(e) for e in by_pytest[key]]
    # pytest-benchmark reads both, and compares one with the other
    compare = subprocess.run([str(Path(sys.executable).parent / "pytest-benchmark"), "compare", str(cli_file),
                              str(tmp_path / "pytest.json")], capture_output=True, text=True)
    assert compare.returncode == 0, compare.stderr
    assert compare.stdout.count(f"test_cell[{CELLS[0]}]") == 2


def worker_processes(hub: str) -> list[psutil.Process]:
    return processes_with("GNNBENCH_CACHE", hub)


def test_a_run_killed_half_way_is_finished_by_resume(suite_file, tmp_path, cache_dir):
    """SIGTERM while the third cell runs: the first two stay (journal and result file), no worker
    is left, and --resume runs only the third and writes one complete result file."""
    require_stacks("dgl")
    hub = tmp_path / "hub-of-this-test"
    args = [str(suite_file), "--results", str(tmp_path), "--cache-dir", str(hub), "--no-install"]
    proc = subprocess.Popen([sys.executable, "-m", "bench.cli", "run", *args], cwd=REPO, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300
    journal = None
    while time.monotonic() < deadline:  # wait until two cells are in the journal and the third has begun
        journal = next(tmp_path.glob("paths-*.cells.jsonl"), None)
        # the run's selection line, then a line per finished cell
        if journal and len(journal.read_text().splitlines()) == 3 and worker_processes(str(hub)):
            break
        time.sleep(0.2)
    else:
        proc.kill()
        pytest.fail(f"the run did not reach its third cell: {proc.stdout.read()[-2000:]}")
    time.sleep(2)  # inside the third cell's epochs
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, out[-2000:] + err[-2000:]
    assert "--resume" in err and str(journal) in err
    assert worker_processes(str(hub)) == []
    assert journal.stat().st_mode & 0o777 == 0o644 & ~current_umask()  # data, not a program
    interrupted = json.loads(journal.with_name(journal.name.replace(".cells.jsonl", ".json")).read_text())
    assert [b["param"] for b in interrupted["benchmarks"]] == [CELLS[0]]
    assert json.loads(journal.read_text().splitlines()[0])["selected"] == CELLS
    kept = json.loads(journal.read_text().splitlines()[1])["entry"]

    resumed = gnnbench_run(str(suite_file), "--resume", str(journal), "--cache-dir", str(hub), "--no-install")
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert resumed.stdout.count("kept from") == 2 and resumed.stdout.count("epoch 4/4") == 1
    result = json.loads(journal.with_name(journal.name.replace(".cells.jsonl", ".json")).read_text())
    assert [b["param"] for b in result["benchmarks"]] == [CELLS[0], CELLS[2]]
    assert result["benchmarks"][0] == kept  # the finished cell was not measured again
    assert [u["id"] for u in result["unmeasured"]] == [CELLS[1]]
    assert result["gnnbench"]["cells"] == CELLS and result["gnnbench"]["resumed_from"] == [str(journal)]
    assert len(journal.read_text().splitlines()) == 4


# --- host only -----------------------------------------------------------------------------------

def line(cell_id: str, suite: str = "paths", digest: str | None = None) -> str:
    return json.dumps({"suite": suite, "id": cell_id, "status": "skipped", "reason": "r",
                       "entry": {"id": cell_id, "status": "skipped"}, "cell_digest": digest})


def test_journal_keeps_finished_cells_and_drops_a_torn_last_line(suite_file, tmp_path):
    cells = Session(RunOptions(suite=str(suite_file), results=tmp_path)).cells
    journal = tmp_path / "x.cells.jsonl"
    digest = {c.id: c.digest for c in cells}
    journal.write_text(line(CELLS[0], digest=digest[CELLS[0]]) + "\n" + line(CELLS[1], digest=digest[CELLS[1]])
                       + "\n" + line(CELLS[2])[:40])
    finished = Journal(journal, "paths").read(cells)
    assert list(finished) == CELLS[:2] and finished[CELLS[1]].status == "skipped"


@pytest.mark.parametrize("text, message", [
    (line(CELLS[0], suite="other"), "a cell of suite 'other', not 'paths'"),
    (line("dgl-graphbolt/gone/mode=cpu-cpu/workers=0/ws=1"), "is not a cell of suite 'paths'"),
    (json.dumps({"id": CELLS[0], "status": "ok", "reason": "", "extra_info": {}}), "older version cannot be resumed"),
    ("{not json\n" + line(CELLS[0]), ":1: not a journal line"),
])
def test_a_journal_that_does_not_fit_is_named(suite_file, tmp_path, text, message):
    journal = tmp_path / "run.cells.jsonl"
    journal.write_text(text + "\n")
    with pytest.raises(SessionError, match=message.replace("(", r"\(").replace(")", r"\)")) as info:
        Session(RunOptions(suite=str(suite_file), resume=journal))
    assert str(journal) in str(info.value)


def test_resume_finishes_the_cells_the_run_selected_not_the_whole_suite(suite_file, tmp_path):
    """A run of `-k workers=0` interrupted after its first cell: --resume runs the second cell it
    selected, not the third it left out (found on the GPU machine, where a resume ran 11 cells the
    run had not asked for); a resume whose options no longer make the run's cells is refused."""
    run = Session(RunOptions(suite=str(suite_file), results=tmp_path), select="workers=0")
    assert [c.id for c in run.selected] == CELLS[:2]
    run.journal.append(session_mod.Finished(CELLS[0], "skipped", "r", {"id": CELLS[0], "status": "skipped"}),
                       run.selected[0])
    run.journal.close()  # as the interrupted run's end would
    journal = run.journal.path
    assert session_mod.journal_selection(journal) == (CELLS[:2], "workers=0")
    said = []
    resumed = Session(RunOptions(suite=str(suite_file), resume=journal, results=tmp_path / "elsewhere"),
                      say=lambda *a, **k: said.append(" ".join(map(str, a))))
    assert [c.id for c in resumed.selected] == CELLS[:2] and list(resumed.finished) == [CELLS[0]]
    assert any("is not used with --resume" in line and str(journal.parent) in line for line in said)
    resumed.journal.close()
    narrowed = Session(RunOptions(suite=str(suite_file), resume=journal), select="mode=pinned-cuda")
    assert [c.id for c in narrowed.selected] == [CELLS[1]]
    narrowed.journal.close()
    with pytest.raises(SessionError, match="resume with the run's own --stack and --mode options"):
        Session(RunOptions(suite=str(suite_file), resume=journal, mode=["cpu-cuda"]))


def test_resume_needs_a_journal(suite_file, tmp_path):
    with pytest.raises(SessionError, match="no such journal"):
        Session(RunOptions(suite=str(suite_file), resume=tmp_path / "nothing.cells.jsonl"))
    (tmp_path / "result.json").write_text("{}")
    with pytest.raises(SessionError, match="expected the .cells.jsonl journal"):
        Session(RunOptions(suite=str(suite_file), resume=tmp_path / "result.json"))


def test_k_selects_cells_as_pytest_does(suite_file, tmp_path):
    run = Session(RunOptions(suite=str(suite_file), results=tmp_path))

    def select(expression):  # the plan's -k, on the session's cells
        run.selected = select_cells(run.cells, expression)
    select("PINNED or rmat and not cpu")  # case-insensitive substrings, pytest's precedence
    assert [c.id for c in run.selected] == [CELLS[1]]
    select("cpu-cpu and ws")
    assert [c.id for c in run.selected] == [CELLS[0], CELLS[2]]
    with pytest.raises(SessionError, match="selects none of the suite's 3 cells"):
        select("test_cell and not ws")
    select("workers=1")  # KEY=VALUE: a setting, exactly
    assert [c.id for c in run.selected] == [CELLS[2]]


def test_the_run_options_are_declared_once_for_both_front_doors():
    parser = argparse.ArgumentParser()
    add_run_options(parser.add_argument)
    flags = {"--" + f.name.replace("_", "-") for f in session_mod.fields(RunOptions) if f.metadata}
    assert {a.option_strings[0] for a in parser._actions if a.option_strings} - {"-h"} == flags
    assert set(vars(parser.parse_args([]))) <= {f.name for f in session_mod.fields(RunOptions)}
    from bench.run import pytest_plugin

    declared = []

    class Group:
        def addoption(self, flag, **kwargs):
            declared.append(flag)

    class Parser:
        def getgroup(self, name):
            return Group()

    pytest_plugin.pytest_addoption(Parser())
    assert set(declared) == flags | {"--suite"}


def test_a_write_that_fails_leaves_the_previous_file_whole_and_rescues_the_new(suite_file, tiny_disk, tmp_path,
                                                                                   monkeypatch):
    monkeypatch.setenv("GNNBENCH_CACHE", str(tmp_path / "cache"))
    run = Session(RunOptions(suite=str(suite_file), results=tiny_disk))
    first = run.write().read_text()
    fill(tiny_disk / "filler")
    run.started_at = run.started_at.replace(year=2000)  # a document that differs from the first
    rescued = run.write()
    assert rescued == tmp_path / "cache" / "rescued" / run.result_path.name
    assert "2000-" in rescued.read_text() and run.write_problem.startswith(f"could not write {run.result_path} (")
    assert run.result_path.read_text() == first
    assert sorted(p.name for p in tiny_disk.iterdir()) == sorted([run.result_path.name, run.journal.path.name, "filler"])


def fill(path: Path) -> None:
    """Write zeros until the disk is full (unbuffered: nothing waits to fail at close)."""
    fd = os.open(path, os.O_CREAT | os.O_WRONLY)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError:
        pass
    finally:
        os.close(fd)


def test_the_rank_that_failed_first_is_the_headline_and_the_exit_code_says_a_cell_failed(tmp_path, cache_dir):
    """Rank 1 aborts; rank 0 then fails only because its peer is gone. The reason's first line
    names rank 1 and its signal, and `gnnbench run` exits 1 (a cell failed) with the table written."""
    require_stacks("dgl")
    suite = tmp_path / "dies.yaml"
    suite.write_text(SUITE.replace("num_workers: [0, 1]", "num_workers: 0").replace("mode: [cpu-cpu, pinned-cuda]",
                                                                                    "world_size: 2")
                     .replace("exclude:\n  - {mode: pinned-cuda, num_workers: 1}\n", ""))  # it would match no cell
    proc = gnnbench_run(str(suite), "--results", str(tmp_path), "--cache-dir", str(cache_dir), "--no-install",
                        env={**os.environ, "GNNBENCH_FAULT": "crash:ws=2@1"})
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "1 of 1 cells failed or timed out" in proc.stderr
    [result] = tmp_path.glob("paths-*.json")
    [failed] = json.loads(result.read_text())["unmeasured"]
    assert failed["reason"].splitlines()[0] == "rank 1 failed first: killed by SIGABRT"
    assert "rank 1 failed first: killed by SIGABRT" in result.with_suffix(".md").read_text()


TORCHRUN_SUMMARY = """[rank0]: RuntimeError: [gloo/transport/tcp/pair.cc:525] Read error: Connection reset by peer
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
bench.run.worker FAILED
------------------------------------------------------------
Failures:
[1]:
  time      : 2026-11-23_07:49:19
  host      : localhost
  rank      : 1 (local_rank: 1)
  exitcode  : CODE (pid: 12068)
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-11-23_07:49:19
  host      : localhost
  rank      : 0 (local_rank: 0)
  exitcode  : 1 (pid: 12067)
  error_file: <N/A>
============================================================
"""


@pytest.mark.parametrize("code, headline", [
    ("-6", "rank 1 failed first: killed by SIGABRT"),  # a signal is the cause, its peer's error the effect
    ("-9", "rank 1 failed first: killed by SIGKILL (out of memory?)"),
    ("3", "rank 0 failed first: exited with code 1: RuntimeError: [gloo/transport/tcp/pair.cc:525] "
          "Read error: Connection reset by peer"),  # else the first failure torchrun observed
])
def test_failure_headline_names_the_rank_that_failed_first(code, headline):
    from bench.run.runner import failure_headline

    assert failure_headline(TORCHRUN_SUMMARY.replace("CODE", code), 1) == headline


def test_failure_headline_of_one_worker_is_its_last_error_not_a_warning():
    from bench.run.runner import failure_headline

    stderr = ("/x/site-packages/dgl/graphbolt/base.py:9: UserWarning: something deprecated\n"
              "Traceback (most recent call last):\n  File \"w.py\", line 1\nValueError: bad fanout\n")
    assert failure_headline(stderr, 1) == "worker exited with code 1: ValueError: bad fanout"


@pytest.fixture
def tiny_disk(tmp_path):
    """A 64 KiB tmpfs: a disk that fills up (needs root, which CI has)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(disk)], capture_output=True)
    if mounted.returncode != 0:
        if os.environ.get("CI"):
            pytest.fail(f"cannot mount a tmpfs: {mounted.stderr.decode()}")
        pytest.skip("mounting a small tmpfs needs root")
    yield disk
    subprocess.run(["umount", "--lazy", str(disk)], check=False)  # lazily: a process may still hold a file


def test_a_full_disk_loses_no_measurement(suite_file, tiny_disk, cache_dir, tmp_path, monkeypatch):
    """The results folder is a 64 KiB disk, filled before the run ends: the journal gets what
    fits, the result file goes to a rescue folder, the run says where and exits 3."""
    require_stacks("dgl")
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    monkeypatch.setenv("GNNBENCH_CACHE", str(tmp_path / "cache"))  # the first rescue folder
    filler = tiny_disk / "filler"
    proc = subprocess.Popen([sys.executable, "-m", "bench.cli", "run", str(suite_file), "-k", "not 1/ws",
                             "--results", str(tiny_disk), "--cache-dir", str(cache_dir), "--no-install"],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while not list(tiny_disk.glob("*.cells.jsonl")) and time.monotonic() < deadline:
        time.sleep(0.1)
    fill(filler)  # while the first cell runs
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 3, out[-2000:] + err[-2000:]
    [journal] = tiny_disk.glob("*.cells.jsonl")
    rescued = tmp_path / "cache" / "rescued" / journal.name.replace(".cells.jsonl", ".json")
    assert f"the result file is at {rescued} instead" in err
    result = json.loads(rescued.read_text())
    assert [b["param"] for b in result["benchmarks"]] == [CELLS[0]]
    assert [u["id"] for u in result["unmeasured"]] == [CELLS[1]]
    assert not list(tiny_disk.glob("*.json"))  # no truncated file under the result's name
    assert "journal: cannot write" in out


def test_two_runs_started_at_once_never_share_a_result_file(suite_file, tmp_path):
    first = Session(RunOptions(suite=str(suite_file), results=tmp_path))
    second = Session(RunOptions(suite=str(suite_file), results=tmp_path))
    assert first.result_path != second.result_path and first.journal.path != second.journal.path
    with pytest.raises(SessionError, match="another gnnbench run is writing this journal"):
        Session(RunOptions(suite=str(suite_file), output=first.result_path))
    readonly = tmp_path / "readonly"
    readonly.mkdir()
    readonly.chmod(0o500)
    if os.access(readonly, os.W_OK):  # root writes anywhere: a file in the way instead
        readonly = tmp_path / "a-file"
        readonly.write_text("")
    with pytest.raises(SessionError, match="cannot write results there"):
        Session(RunOptions(suite=str(suite_file), results=readonly / "runs"))


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
