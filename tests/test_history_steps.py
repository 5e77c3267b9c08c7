"""Steps in a series of runs (bench.publish.steps, `gnnbench history`): a planted step in a
synthetic series with realistic noise is found at its run, pure noise reports none, series are
told apart by configuration and machine, and the site draws a chart per series."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

from bench import cli
from bench.publish import history, results, site, steps
from tests import synthetic_results as sr

CELL = sr.cell_id("pyg-neighbor", workers=0)
OTHER = sr.cell_id("dgl-graphbolt", workers=2)
BASE_S = {CELL: 0.05, OTHER: 0.09}
ROUND_SPREAD = 0.07   # each round off by a lognormal factor of 7 %
RUN_SHIFT = 0.03      # each run's level off by 3 % (run-to-run noise, larger than a median's error)


def write_series(folder, n_runs: int, *, seed: int, step_at: int | None = None, factor: float = 1.2,
                 cells=(CELL,), node: str = "box", versions_from=None, suite: str = "toy",
                 round_spread: float = ROUND_SPREAD, run_shift: float = RUN_SHIFT) -> list[results.RunResult]:
    """n_runs result files of `cells`, a day apart, each cell's rounds `round_spread` around a level
    that moves `run_shift` from run to run; from run `step_at` (0-based) on, CELL is `factor` slower.
    `versions_from(i)`: the versions run i records (its environment)."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for i in range(n_runs):
        benches = []
        for cid in cells:
            level = BASE_S[cid] * math.exp(run_shift * rng.standard_normal())
            if cid == CELL and step_at is not None and i >= step_at:
                level *= factor
            extra = {"versions": versions_from(i)} if versions_from else {}
            benches.append(sr.bench(cid, sr.noisy_rounds(rng, level, round_spread), **extra))
        day = f"2026-{1 + i // 28:02d}-{1 + i % 28:02d}T03:00:00+00:00"
        out.append(sr.write(folder, f"{suite}-{i:03d}.json",
                            sr.run(benches, suite=suite, when=day, node=node, commit=f"c{i:03d}")))
    return out


def only(analysed, cell_id=CELL):
    [s] = [s for s in analysed if s.key.cell_id == cell_id]
    return s


# --- the planted step, and pure noise ------------------------------------------------------------

def test_a_planted_20_percent_step_is_found_at_its_run(tmp_path):
    runs = write_series(tmp_path, 20, seed=0, step_at=12, cells=(CELL, OTHER))
    series = only(steps.analyse(runs))
    [step] = series.steps
    assert step.position == 12 and step.after.path.endswith("toy-012.json")
    assert step.slower and step.found.low < 1.2 < step.found.high and 1.1 < step.ratio < 1.3
    assert 1 - step.found.p_value > 0.999
    assert (step.runs_before, step.runs_after) == (12, 8)
    assert only(steps.analyse(runs), OTHER).steps == []   # the cell beside it did not move


def test_a_planted_step_is_found_at_its_run_in_most_noisy_series(tmp_path):
    """Over 12 series (fixed seeds): every one has a step within a run of the planted one, and
    most exactly at it (noise may make the run before a step look like its first run: in a
    simulation of 300 such series, about 97 % were found exactly at it)."""
    exact = 0
    for seed in range(12):
        series = only(steps.analyse(write_series(tmp_path / str(seed), 20, seed=seed, step_at=12)))
        positions = [s.position for s in series.steps]
        assert any(abs(p - 12) <= 1 for p in positions), (seed, steps.text([series]))
        exact += 12 in positions and len(positions) == 1
    assert exact >= 10


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("n_runs", [20, 32])
def test_pure_noise_reports_no_step(tmp_path, seed, n_runs):
    runs = write_series(tmp_path, n_runs, seed=100 + seed, cells=(CELL, OTHER))
    for series in steps.analyse(runs):
        assert series.steps == [], steps.text([series])
        assert series.between < 2 * RUN_SHIFT  # the noise it judged against is not inflated to hide steps


def test_a_noisier_machine_needs_a_bigger_step(tmp_path):
    """The same 20 % step is a step where runs move by 3 %, and noise where they move by 15 %:
    the run-to-run spread, not the rounds' alone, decides."""
    quiet = write_series(tmp_path / "quiet", 12, seed=7, step_at=6)
    noisy = write_series(tmp_path / "noisy", 12, seed=7, step_at=6, run_shift=0.15)
    assert [s.position for s in only(steps.analyse(quiet)).steps] == [6]
    assert only(steps.analyse(noisy)).steps == []


def test_detect_on_numbers_weighs_each_run_by_its_spread():
    """A run whose rounds spread widely counts for less: the same jump is a step when the runs
    are precise and none when the jumping runs' own medians are that uncertain."""
    y = [0.0] * 8 + [0.15] * 4
    assert [s.index for s in steps.detect(y, [0.01] * 12).steps] == [8]
    assert steps.detect(y, [0.01] * 8 + [0.2] * 4).steps == []


def test_one_off_run_is_an_outlier_not_two_steps(tmp_path):
    runs = write_series(tmp_path, 16, seed=3)
    data = json.loads(runs[7].path.read_text())
    data["benchmarks"][0]["stats"] = sr.stats_of([x * 1.5 for x in data["benchmarks"][0]["stats"]["data"]])
    sr.write(tmp_path, runs[7].path.name, data)
    series = only(steps.analyse([results.read(r.path) for r in runs]))
    assert series.steps == []
    assert [p.path for p in series.outliers] == [str(runs[7].path)]


def test_newest_run_past_a_big_step_is_reported_alone(tmp_path):
    runs = write_series(tmp_path, 15, seed=11, step_at=14, factor=1.5)
    [step] = only(steps.analyse(runs)).steps
    assert step.position == 14 and step.runs_after == 1
    assert "one run past it" in steps.step_words(step, only(steps.analyse(runs)))


def test_too_few_runs_are_not_scanned(tmp_path):
    series = only(steps.analyse(write_series(tmp_path, 3, seed=0, step_at=1, factor=2.0)))
    assert series.steps == [] and series.note == "too few runs to look for steps (4 needed)"


# --- series: configuration and machine -------------------------------------------------------------

def test_series_are_split_by_machine_and_configuration(tmp_path):
    write_series(tmp_path / "a", 5, seed=1, node="box")
    write_series(tmp_path / "b", 5, seed=2, node="other-box")
    runs = [results.read(p) for p in sorted(tmp_path.rglob("*.json"))]
    wider = json.loads(runs[-1].path.read_text())   # the same cell id with another batch size: another series
    wider["benchmarks"][0]["extra_info"]["settings"]["batch_size"] = 512
    wider["benchmarks"][0]["extra_info"]["settings"]["timeout"] = 99.0
    wider["datetime"] = "2026-03-01T00:00:00+00:00"
    runs.append(sr.write(tmp_path, "wider.json", wider))
    (tmp_path / "copy").mkdir()
    copy = sr.write(tmp_path / "copy", runs[0].path.name, json.loads(runs[0].path.read_text()))
    grouped = history.series([*runs, copy])   # a copy of a run counts once
    assert sorted((k.machine, len(v)) for k, v in grouped.items()) == [
        ("box (Test CPU x2)", 5), ("other-box (Test CPU x2)", 1), ("other-box (Test CPU x2)", 5)]
    assert all(k.cell_id == CELL for k in grouped)


def test_what_changed_names_the_versions_on_both_sides(tmp_path):
    def versions(i):
        return {"torch": "2.13.0", "torch_geometric": "2.6.1" if i < 10 else "2.8.1"}
    runs = write_series(tmp_path, 18, seed=4, step_at=10, versions_from=versions)
    [step] = only(steps.analyse(runs)).steps
    assert step.changed == "torch_geometric 2.6.1 -> 2.8.1; commit c009 -> c010"
    quiet = steps.what_changed(only(steps.analyse(runs)).points[2], only(steps.analyse(runs)).points[3])
    assert quiet.startswith("nothing recorded") and quiet.endswith("commit c002 -> c003")


# --- gnnbench history -----------------------------------------------------------------------------

def test_cli_history_prints_each_series_with_its_steps(tmp_path, capsys):
    write_series(tmp_path / "runs", 20, seed=0, step_at=12, cells=(CELL, OTHER))
    (tmp_path / "runs" / "notes.json").write_text("{\"not\": \"a result\"}")
    assert cli.main(["history", str(tmp_path / "runs")]) == 0
    out = capsys.readouterr().out
    assert "toy on box (Test CPU x2)" in out
    assert re.search(rf"{re.escape(CELL)}: 20 runs, .*: 1 step \(run-to-run noise", out)
    assert re.search(r"step at run 13 of 20 \(2026-01-13 03:00 UTC, commit c012, toy-012.json\): 1\.[12]\dx slower", out)
    assert f"{OTHER}: 20 runs, 2026-01-01 03:00 UTC .. 2026-01-20 03:00 UTC: no step" in out
    assert "left out 1 JSON file that are not gnnbench result files" in out


def test_cli_fail_on_step_only_for_a_recent_slower_step(tmp_path, capsys):
    old_step = write_series(tmp_path / "old", 20, seed=0, step_at=8)
    assert cli.main(["history", str(tmp_path / "old"), "--fail-on-step"]) == 0   # a step long past is history
    new_step = write_series(tmp_path / "new", 20, seed=0, step_at=18)
    assert cli.main(["history", str(tmp_path / "new"), "--fail-on-step"]) == 1
    assert re.search(r"FAIL .*1\.\d\dx slower since 2026-01-19", capsys.readouterr().out)
    faster = write_series(tmp_path / "faster", 20, seed=0, step_at=18, factor=1 / 1.3)
    assert cli.main(["history", str(tmp_path / "faster"), "--fail-on-step"]) == 0  # an improvement passes
    assert cli.main(["history", *[str(r.path) for r in old_step], "--fail-on-step", "--recent", "12"]) == 1
    assert new_step and faster


def test_cli_history_bad_input_exit_2(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert cli.main(["history", str(tmp_path / "empty")]) == 2
    assert "no gnnbench result file there" in capsys.readouterr().err
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    assert cli.main(["history", str(broken)]) == 2
    assert "broken.json: not a JSON result file" in capsys.readouterr().err
    write_series(tmp_path / "runs", 4, seed=0)
    assert cli.main(["history", str(tmp_path / "runs"), "--suite", "nope"]) == 2
    assert "--suite nope: no run of that suite" in capsys.readouterr().err


# --- the site --------------------------------------------------------------------------------------

def test_site_history_page_charts_each_series_with_its_steps(tmp_path):
    runs = write_series(tmp_path / "runs", 20, seed=0, step_at=12, cells=(CELL, OTHER))
    pages = site.build(runs, tmp_path / "site")
    assert tmp_path / "site" / "history.html" in pages
    page = (tmp_path / "site" / "history.html").read_text()
    assert page.count("<svg") == 2
    assert "1 step" in page and "no step" in page
    assert re.search(r"step at run 13 of 20", page)
    assert "What changed: nothing recorded" in page and "commit c011 -&gt; c012" in page
    index = (tmp_path / "site" / "index.html").read_text()
    assert 'href="history.html"' in index


def test_a_setting_recorded_at_its_default_keeps_the_series(tmp_path):
    """Files written before a setting existed lack it; one that records it at its default measured
    the same configuration, one that records another value did not."""
    runs = write_series(tmp_path, 6, seed=5)
    for i, value in ((4, "auto"), (5, 1)):
        data = json.loads(runs[i].path.read_text())
        data["benchmarks"][0]["extra_info"]["settings"]["threads"] = value
        sr.write(tmp_path, runs[i].path.name, data)
    grouped = history.series([results.read(r.path) for r in runs])
    assert sorted(len(points) for points in grouped.values()) == [1, 5]


def test_runs_of_identical_rounds_weigh_finitely(tmp_path):
    """A run whose rounds are all equal (or a single round) has no spread to weigh by: it counts as
    known to 0.01 %, not infinitely; the floor still holds a change too small to matter."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        flat = [0.0] * 10
        assert steps.detect(flat, flat).steps == []
        assert [s.index for s in steps.detect([0.0] * 5 + [0.2] * 5, flat).steps] == [5]
        assert steps.detect([0.0] * 5 + [0.02] * 5, flat).steps == []   # 2 %: under the 5 % floor
        runs = [sr.write(tmp_path, f"flat-{i}.json", sr.run([sr.bench(CELL, [0.05 * (1.3 if i >= 4 else 1.0)] * 5)],
                                                                when=f"2026-01-0{i + 1}T00:00:00+00:00"))
                for i in range(8)]
        [step] = only(steps.analyse(runs)).steps
        assert step.position == 4 and step.ratio == pytest.approx(1.3)


def test_cli_history_refuses_a_path_named_twice_and_counts_a_file_once(tmp_path, capsys):
    runs = write_series(tmp_path / "runs", 4, seed=0)
    same = tmp_path / "runs" / ".." / "runs" / runs[0].path.name
    assert cli.main(["history", str(runs[0].path), str(same)]) == 2
    assert "given twice" in capsys.readouterr().err
    assert cli.main(["history", str(tmp_path / "runs"), str(runs[0].path)]) == 0   # in the folder and named: once
    assert f"{CELL}: 4 runs" in capsys.readouterr().out


def test_cli_history_html_writes_only_into_a_site_folder(tmp_path, capsys):
    write_series(tmp_path / "runs", 4, seed=0)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "history.html").write_text("my own page")
    assert cli.main(["history", str(tmp_path / "runs"), "--html", str(mine)]) == 2
    assert (mine / "history.html").read_text() == "my own page" and "not a site gnnbench wrote" in capsys.readouterr().err
    assert cli.main(["history", str(tmp_path / "runs"), "--html", str(tmp_path / "site")]) == 0
    assert (tmp_path / "site" / "history.html").exists()
