"""The result model: one reader for measured, unmeasured and not-run cells; the scores derived
on read (equal to what older writers stored); and the column list, which both the Markdown and
the HTML tables follow."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.publish import columns, fmt, report, results, site
from tests import synthetic_results as sr
from tests.conftest import committed_results

REPO = Path(__file__).resolve().parents[1]
COMMITTED = committed_results() + \
    sorted((REPO / "tests" / "data").glob("*.json"))


def stored_scores(path) -> bool:
    """Written before the scores were computed on read only (the older result files)."""
    return any("speedup_vs_ws1" in b["extra_info"] for b in json.loads(path.read_text())["benchmarks"])


OLD_FILES = [p for p in COMMITTED if stored_scores(p)]


def test_reader_lists_every_cell_in_the_suite_order(tmp_path):
    ok, failed, skipped = sr.cell_id(workers=0), sr.cell_id(workers=2), sr.cell_id("pyg-dist")
    never = sr.cell_id("dgl-graphbolt", dataset="other")
    data = sr.run([sr.bench(ok, [0.2, 0.1, 0.3], test_acc=0.75)],
                  unmeasured_cells=[sr.unmeasured(failed, "failed", "RuntimeError: boom\ntrace"),
                                    sr.unmeasured(skipped, "skipped", "pyg-lib is not installed")])
    data["gnnbench"]["cells"] = [failed, ok, never, skipped]
    run = sr.write(tmp_path, "run.json", data)

    assert [(c.id, c.status) for c in run.cells] == [(failed, "failed"), (ok, "ok"), (never, "not run"),
                                                     (skipped, "skipped")]
    assert [c.id for c in run.measured] == [ok] and [c.id for c in run.unmeasured] == [failed, skipped]
    cell = run.cells[1]
    assert (cell.backend, cell.stack, cell.dataset, cell.settings.num_workers) == ("pyg-neighbor", "pyg", "toy", 0)
    assert cell.stats.median == pytest.approx(0.2) and cell.stats.rounds == 3 and cell.stats.data == (0.2, 0.1, 0.3)
    assert cell.metrics.test_acc == 0.75 and cell.metrics.seeds_per_s == 1000.0
    assert cell.card.num_test == 1000 and cell.versions == {"torch": "2.0"} and cell.file == run.path
    assert cell.is_baseline is False and cell.is_reference and cell.speedup == 1.0
    assert run.cells[0].reason == "RuntimeError: boom\ntrace" and run.cells[0].settings.num_workers == 2
    assert run.cells[0].stats is None and run.cells[0].speedup is None
    # a cell listed but never reached has only its id: backend and dataset come from it
    assert (run.cells[2].backend, run.cells[2].dataset, run.cells[2].reason) == \
        ("dgl-graphbolt", "other", "the run ended before this cell")
    assert run.suite == "toy" and run.finished == "2026-01-01T00:00:00+00:00"
    assert run.machine.key == ("box", "Test CPU", None, 2, "x86_64") and fmt.host_label(run.machine) == "box (Test CPU x2)"


def test_metrics_the_model_does_not_name_are_kept(tmp_path):
    run = sr.write(tmp_path, "run.json", sr.run([sr.bench(sr.cell_id(), [0.1] * 3, sample_s=0.125,
                                                          speedup_vs_ws1=9.0)]))
    metrics = run.cells[0].metrics
    assert metrics.get("sample_s") == 0.125 and metrics.get("loader_stall") == 0.2
    assert metrics.get("speedup_vs_ws1") is None   # a stored score is recomputed, never read


@pytest.mark.parametrize("path", OLD_FILES, ids=lambda p: p.name)
def test_derived_scores_equal_those_older_files_stored(path):
    raw = json.loads(path.read_text())
    cells = {c.id: c for c in results.read(path).cells}
    stored = 0
    for bench in raw["benchmarks"]:
        info = bench["extra_info"]
        cell = cells[info["cell_id"]]
        assert cell.speedup_vs_ws1 == info.get("speedup_vs_ws1")
        assert cell.scaling_efficiency == info.get("scaling_efficiency")
        assert cell.is_baseline == info["is_baseline"]
        stored += info.get("speedup_vs_ws1") is not None
    assert stored > 0


def test_scaling_files_have_real_scaling_to_check():
    """The comparison above covers world sizes above 1, not only the trivial 1.0 of one rank."""
    scaling = results.read(REPO / "results" / "scaling-cpu" / "scaling-20261122T123803Z.json")
    assert any(c.world_size > 1 and c.scaling_efficiency not in (None, 1.0) for c in scaling.measured)


def test_speedups_are_against_the_baseline_else_the_first_cell_of_each_dataset(tmp_path):
    base, other, first_b, second_b = (sr.cell_id(workers=0), sr.cell_id(workers=2),
                                      sr.cell_id(dataset="big", workers=0), sr.cell_id(dataset="big", ws=2))
    data = sr.run([sr.bench(other, [0.4] * 3), sr.bench(base, [0.2] * 3),
                   sr.bench(first_b, [1.0] * 3), sr.bench(second_b, [0.8] * 3)])
    data["gnnbench"]["baseline"] = base
    cells = {c.id: c for c in sr.write(tmp_path, "run.json", data).cells}
    assert cells[base].is_baseline and cells[other].reference_id == base and cells[other].speedup == 0.5
    assert cells[second_b].reference_id == first_b and cells[second_b].speedup == pytest.approx(1.25)
    # world size 2 of the "big" configuration against its 1 rank: 1.25x, efficiency 62.5 %
    assert cells[second_b].speedup_vs_ws1 == pytest.approx(1.25)
    assert cells[second_b].scaling_efficiency == pytest.approx(0.625)
    assert cells[other].speedup_vs_ws1 == 1.0   # its own series (workers=2), at 1 rank


def test_a_stats_block_without_a_median_is_named(tmp_path):
    data = sr.run([sr.bench(sr.cell_id(), [0.1] * 3)])
    del data["benchmarks"][0]["stats"]["median"]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(results.ResultsError, match="stats lack the median") as info:
        results.read(path)
    assert str(path) in str(info.value)


def test_a_column_added_to_the_list_shows_in_markdown_and_html(tmp_path, monkeypatch):
    """A metric the worker records (here one the model does not name) is one line in columns.py."""
    new = columns.Column("sample s", columns.metric("sample_s"), fmt.seconds, unit="per epoch")
    monkeypatch.setattr(columns, "CELL_COLUMNS", [*columns.CELL_COLUMNS, new])
    ok, failed = sr.cell_id(workers=0), sr.cell_id(workers=2)
    run = sr.write(tmp_path, "run.json", sr.run([sr.bench(ok, [0.1] * 3, sample_s=0.125)],
                                                unmeasured_cells=[sr.unmeasured(failed)]))

    assert "sample s" not in report.render_markdown([run])  # a new column widens no default table
    md = report.render_markdown([run], chosen=["all"])
    assert "| test acc | start-up s | sample s |" in md and "| 0.780 | 1.0 | 0.125 |" in md
    assert "| sample s |" in report.render_markdown([run], chosen=["sample-s"])
    header = next(line for line in md.splitlines() if line.startswith("| cell |"))
    failure = next(line for line in md.splitlines() if line.startswith(f"| `{failed}`"))
    assert header.count("|") == failure.count("|")   # the failure row spans the new column too

    site.build([run], tmp_path / "site")
    html = (tmp_path / "site" / "suite-toy.html").read_text()
    assert '<th class="n">sample s <span class="unit">per epoch</span></th>' in html
    assert '<td class="n">0.125</td>\n</tr>' in html
    shown = columns.html_columns(report.dataset_tables(run)[0])
    main = [c for c in shown if c.brief]  # the failure row spans the main table's columns
    assert f'colspan="{len(main)}"' in html and len(shown) == 10   # 9 of today's, scaling and GPU absent, + 1
