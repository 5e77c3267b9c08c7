"""Verdicts beyond the measured noise: on real back-to-back runs, on synthetic series with a
known regression, on status changes and machines; and `gnnbench compare`."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from bench import cli
from bench.publish import history, results
from tests import synthetic_results as sr

DATA = Path(__file__).parent / "data"
REAL_OLD, REAL_NEW = DATA / "smoke-20261122T125141Z.json", DATA / "smoke-20261122T125206Z.json"

CELLS = [sr.cell_id(b, workers=w) for b in ("pyg-neighbor", "dgl-graphbolt") for w in (0, 2)] + \
        [sr.cell_id(b, workers=0) + "/model=none" for b in ("pyg-neighbor", "dgl-graphbolt")]
BASE_S = dict(zip(CELLS, [0.05, 0.09, 0.035, 0.10, 0.022, 0.008]))


def series(tmp_path, n_runs: int, *, slower: dict[str, float] | None = None, seed: int = 0,
           round_spread: float = 0.05, run_drift: float = 0.03) -> list[results.RunResult]:
    """n_runs runs of the same six cells on one machine, a day apart: each run moves each cell's
    level by `run_drift` (run-to-run noise), each round by `round_spread`; the LAST run has the
    cells in `slower` slowed by their factor (every round)."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n_runs):
        factors = (slower or {}) if i == n_runs - 1 else {}
        benches = []
        for cid, base in BASE_S.items():
            level = base * np.exp(run_drift * rng.standard_normal()) * factors.get(cid, 1.0)
            benches.append(sr.bench(cid, sr.noisy_rounds(rng, level, round_spread)))
        out.append(sr.write(tmp_path, f"toy-{i}.json", sr.run(benches, when=f"2026-01-{i + 1:02d}T00:00:00+00:00")))
    return out


def by_cell(verdicts):
    return {v.cell_id: v for v in verdicts}


# --- real run-to-run noise ---------------------------------------------------------------------

@pytest.mark.parametrize("old, new", [(REAL_OLD, REAL_NEW), (REAL_NEW, REAL_OLD)])
def test_real_back_to_back_runs_flag_nothing(old, new):
    verdicts = history.compare(results.read(old), results.read(new))
    assert [v.verdict for v in verdicts] == ["unchanged"] * 6
    # the noisiest move of the pair (the GraphBolt loader alone, 1.40x) is judged, not hidden
    dgl_none = by_cell(verdicts)["dgl-graphbolt/rmat-s12/mode=cpu-cpu/workers=0/ws=1/model=none"]
    assert abs(np.log1p(dgl_none.change)) == pytest.approx(np.log(0.008568066 / 0.0061334125), rel=1e-3)
    assert np.log1p(dgl_none.threshold) > abs(np.log1p(dgl_none.change))
    assert "pooled over 5 other cells" in dgl_none.reason


def test_real_runs_with_one_cell_made_slower_flag_that_cell(tmp_path):
    data = json.loads(REAL_NEW.read_text())
    slowed = "pyg-neighbor/rmat-s12/mode=cpu-cpu/workers=0/ws=1/model=none"
    for bench in data["benchmarks"]:
        if bench["extra_info"]["cell_id"] == slowed:
            bench["stats"] = sr.stats_of([x * 2.5 for x in bench["stats"]["data"]])
    new = sr.write(tmp_path, "slowed.json", data)
    verdicts = by_cell(history.compare(results.read(REAL_OLD), new))
    assert verdicts[slowed].verdict == "regression"
    assert verdicts[slowed].change == pytest.approx(2.5 * 0.0221370445 / 0.022352986 - 1, rel=1e-3)
    assert [v.verdict for c, v in verdicts.items() if c != slowed] == ["unchanged"] * 5


# --- synthetic series ---------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(20))
def test_synthetic_noise_is_not_flagged(tmp_path, seed):
    runs = series(tmp_path, 5, seed=seed)
    assert {v.verdict for v in history.compare(runs[-2], runs[-1])} == {"unchanged"}
    assert {v.verdict for v in history.compare(runs[-2], runs[-1], history=runs[:-1])} == {"unchanged"}


def test_every_round_1_5x_slower_is_a_regression(tmp_path):
    slow = CELLS[1]
    runs = series(tmp_path, 5, slower={slow: 1.5})
    for verdicts in (history.compare(runs[-2], runs[-1]),                      # the pair alone
                     history.compare(runs[-2], runs[-1], history=runs[:-1])):  # with 4 earlier runs
        v = by_cell(verdicts)
        assert v[slow].verdict == "regression"
        assert 1.3 < 1 + v[slow].change < 1.7
        assert v[slow].threshold < 0.5
        assert {v[c].verdict for c in CELLS if c != slow} == {"unchanged"}
    assert "from its 4 earlier medians" in v[slow].reason


def test_every_round_1_5x_faster_is_an_improvement(tmp_path):
    fast = CELLS[0]
    runs = series(tmp_path, 4, slower={fast: 1 / 1.5})
    v = by_cell(history.compare(runs[-2], runs[-1], history=runs))
    assert v[fast].verdict == "improvement"
    assert v[fast].change == pytest.approx(v[fast].new_median_s / v[fast].old_median_s - 1)


def test_shift_shared_by_all_cells_needs_history(tmp_path):
    runs = series(tmp_path, 5, slower={c: 1.5 for c in CELLS})
    # from two runs alone, all cells moving together looks like the machine ...
    assert {v.verdict for v in history.compare(runs[-2], runs[-1])} == {"unchanged"}
    # ... but the table says the whole run moved, and by how much
    table = history.verdict_table(history.compare(runs[-2], runs[-1]))
    assert re.search(r"the whole run moved: median change \+(4[5-9]|5[0-5])\.\d %", table), table
    # ... against each cell's own earlier runs it is a regression
    assert {v.verdict for v in history.compare(runs[-2], runs[-1], history=runs)} == {"regression"}


def test_no_run_shift_line_when_the_run_held_still(tmp_path):
    runs = series(tmp_path, 3)
    assert "whole run moved" not in history.verdict_table(history.compare(runs[-2], runs[-1]))


def test_floor_holds_small_changes_even_without_noise(tmp_path):
    old = sr.write(tmp_path, "a.json", sr.run([sr.bench(c, [s] * 10) for c, s in BASE_S.items()]))
    new = sr.write(tmp_path, "b.json", sr.run([sr.bench(c, [s * (1.08 if c == CELLS[0] else 1.0)] * 10)
                                               for c, s in BASE_S.items()], when="2026-01-02T00:00:00+00:00"))
    assert by_cell(history.compare(old, new))[CELLS[0]].verdict == "unchanged"
    assert by_cell(history.compare(old, new))[CELLS[0]].threshold == pytest.approx(0.10)
    assert by_cell(history.compare(old, new, floor=0.05))[CELLS[0]].verdict == "regression"


# --- status, machines, suites -------------------------------------------------------------------

def test_status_changes(tmp_path):
    a, b, c, d = CELLS[:4]
    old = sr.write(tmp_path, "old.json", sr.run(
        [sr.bench(a, [0.1] * 5), sr.bench(c, [0.1] * 5)],
        unmeasured_cells=[sr.unmeasured(b, "timeout", "no result after 300 s (killed)")]))
    new = sr.write(tmp_path, "new.json", sr.run(
        [sr.bench(b, [0.1] * 5), sr.bench(d, [0.1] * 5)],
        unmeasured_cells=[sr.unmeasured(a, "failed", "worker exited with code 1\nTraceback ...")],
        when="2026-01-02T00:00:00+00:00"))
    v = by_cell(history.compare(old, new))
    assert v[a].verdict == "now failing" and "worker exited with code 1" in v[a].reason
    assert v[b].verdict == "fixed" and "timeout" in v[b].reason and v[b].new_median_s == pytest.approx(0.1)
    assert v[c].verdict == "gone" and v[c].old_median_s == pytest.approx(0.1)
    assert v[d].verdict == "new"
    skipped = sr.write(tmp_path, "skip.json", sr.run([], unmeasured_cells=[sr.unmeasured(c, "skipped", "pyg-lib missing")],
                                                     when="2026-01-03T00:00:00+00:00"))
    assert by_cell(history.compare(old, skipped))[c].verdict == "gone"


def test_different_machines_are_not_comparable_unless_forced(tmp_path):
    runs = series(tmp_path, 2, slower={CELLS[0]: 3.0})
    other = json.loads(runs[1].path.read_text())
    other["machine_info"]["node"] = "gpu-box"
    moved = sr.write(tmp_path, "other-machine.json", other)
    verdicts = history.compare(runs[0], moved)
    assert {v.verdict for v in verdicts} == {"not comparable"}
    assert "box" in verdicts[0].reason and "gpu-box" in verdicts[0].reason and verdicts[0].threshold is None
    assert by_cell(history.compare(runs[0], moved, force=True))[CELLS[0]].verdict == "regression"


def test_mixed_suites_raise_naming_the_file(tmp_path):
    toy = sr.write(tmp_path, "toy.json", sr.run([sr.bench(CELLS[0], [0.1] * 5)]))
    other = sr.write(tmp_path, "other-suite.json", sr.run([sr.bench(CELLS[0], [0.1] * 5)], suite="cora"))
    with pytest.raises(results.ResultsError, match="other-suite.json.*'cora'"):
        history.trend([toy, other])
    with pytest.raises(results.ResultsError, match="other-suite.json"):
        history.compare(toy, other)


def test_trend_is_per_cell_oldest_first(tmp_path):
    runs = series(tmp_path, 3)
    failing = json.loads(runs[2].path.read_text())
    failing["datetime"] = "2026-01-09T00:00:00+00:00"
    failing["benchmarks"] = failing["benchmarks"][1:]
    failing["unmeasured"] = [sr.unmeasured(CELLS[0], "timeout")]
    last = sr.write(tmp_path, "last.json", failing)
    points = history.trend([last, runs[2], runs[0], runs[1]])
    assert set(points) == set(CELLS)
    first_cell = points[CELLS[0]]
    assert [p.when[:10] for p in first_cell] == ["2026-01-01", "2026-01-02", "2026-01-03", "2026-01-09"]
    assert [p.status for p in first_cell] == ["ok", "ok", "ok", "timeout"]
    assert first_cell[0].median_s == pytest.approx(json.loads(runs[0].path.read_text())["benchmarks"][0]["stats"]["median"])
    assert first_cell[-1].median_s is None and first_cell[-1].path.endswith("last.json")
    assert first_cell[0].commit == "abc123" and first_cell[0].machine == "box (Test CPU x2)"


# --- gnnbench compare ---------------------------------------------------------------------------

def test_cli_compare_real_runs_exit_0(capsys):
    assert cli.main(["compare", str(REAL_OLD), str(REAL_NEW), "--fail-on", "regression"]) == 0
    out = capsys.readouterr().out
    assert "6 cells: 6 unchanged" in out
    assert "unchanged  0.008568 s  0.006133 s  -28.4 %" in out


def test_cli_compare_fails_on_regression(tmp_path, capsys):
    runs = series(tmp_path, 5, slower={CELLS[2]: 1.5})
    args = ["compare", str(runs[-2].path), str(runs[-1].path)]
    assert cli.main(args) == 0   # without --fail-on, a regression is reported, not failed
    assert cli.main(args + ["--fail-on", "regression"]) == 1
    history_args = [a for r in runs[:-2] for a in ("--history", str(r.path))]
    assert cli.main(args + history_args + ["--fail-on", "regression"]) == 1
    out = capsys.readouterr().out
    assert f"regression" in out and CELLS[2] in out and "1 regression, 5 unchanged" in out


def test_cli_compare_bad_file_exit_2(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"benchmarks": []}))
    assert cli.main(["compare", str(bad), str(REAL_NEW)]) == 2
    assert "no 'gnnbench.schema_version'" in capsys.readouterr().err
    assert cli.main(["compare", str(tmp_path / "missing.json"), str(REAL_NEW)]) == 2


def test_a_changed_graph_is_not_comparable(tmp_path):
    """Same dataset name, another graph (e.g. a new synthetic generator): the timing is not judged."""
    runs = series(tmp_path, 2, slower={CELLS[0]: 3.0})
    other = json.loads(runs[1].path.read_text())
    for bench in other["benchmarks"]:
        if bench["extra_info"]["cell_id"] == CELLS[0]:
            bench["extra_info"]["dataset"]["num_edges"] += 1000
    changed = sr.write(tmp_path, "other-graph.json", other)
    verdict = by_cell(history.compare(runs[0], changed))[CELLS[0]]
    assert verdict.verdict == "not comparable" and "the dataset changed between the runs (num_edges" in verdict.reason
    assert by_cell(history.compare(runs[0], runs[1]))[CELLS[0]].verdict == "regression"


# --- compare is history's judgement of two runs; the reader's checks ----------------------------

def test_history_of_two_runs_gives_compares_verdicts(tmp_path, capsys):
    (tmp_path / "two").mkdir()
    runs = series(tmp_path / "two", 2, slower={CELLS[2]: 1.5})
    assert cli.main(["compare", str(runs[0].path), str(runs[1].path)]) == 0
    compared = capsys.readouterr().out
    assert cli.main(["history", str(tmp_path / "two")]) == 0
    shown = capsys.readouterr().out
    assert "as `gnnbench compare` judges it" in shown and compared.strip() in shown
    old, new, verdicts = only_latest(history.latest(runs))
    assert (old.path, new.path) == (runs[0].path, runs[1].path)
    assert [(v.cell_id, v.verdict) for v in verdicts] == \
        [(v.cell_id, v.verdict) for v in history.compare(runs[0], runs[1])]


def only_latest(found):
    [one] = found
    return one


def test_history_refuses_a_date_that_is_not_a_date(tmp_path, capsys):
    (tmp_path / "runs").mkdir()
    runs = series(tmp_path / "runs", 3)
    doc = json.loads(runs[1].path.read_text())
    doc["datetime"] = "last Tuesday"
    runs[1].path.write_text(json.dumps(doc))
    assert cli.main(["history", str(tmp_path / "runs")]) == cli.EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert f"{runs[1].path}: datetime: Value error, not a date" in err and "'last Tuesday'" in err
    assert cli.main(["compare", str(runs[0].path), str(runs[1].path)]) == cli.EXIT_BAD_INPUT


def test_a_result_copied_under_two_names_counts_once_and_is_said(tmp_path, capsys):
    (tmp_path / "runs").mkdir()
    runs = series(tmp_path / "runs", 4)
    copy = tmp_path / "runs" / "renamed.json"
    copy.write_bytes(runs[3].path.read_bytes())
    assert cli.main(["history", str(tmp_path / "runs")]) == 0
    out = capsys.readouterr().out
    [said] = [line for line in out.splitlines() if line.startswith("counted once: ")]
    assert {copy.name, runs[3].path.name} <= set(re.findall(r"[\w-]+\.json", said))
    assert f"{CELLS[0]}: 4 runs" in out   # not 5: a copy is not a run (its noise would read 0 %)
    assert cli.main(["compare", str(runs[3].path), str(copy)]) == cli.EXIT_BAD_INPUT
    assert "holds the same result as" in capsys.readouterr().err
