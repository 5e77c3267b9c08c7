"""The Markdown report and the result-file reader, on crafted result files."""

import json

import pytest

from bench.publish import report, results
from bench.result_format import REQUIRED_EXTRA

BASE_ID = "pyg-neighbor/g/mode=cpu-cpu/workers=0/ws=1"
FAST_ID = "dgl-graphbolt/g/mode=cpu-cpu/workers=0/ws=1"


def bench_entry(cell_id, median, iqr, stall):
    info = {k: 0 for k in REQUIRED_EXTRA}
    info.update(cell_id=cell_id, backend=cell_id.split("/")[0], settings={"world_size": int(cell_id.rsplit("ws=", 1)[1])}, dataset={"name": "g", "source": "synthetic", "num_nodes": 4096, "num_edges": 53308,
                                          "feature_dim": 64, "num_classes": 8, "num_train": 2457, "num_val": 819,
                                          "num_test": 820},
                seeds_per_s=1234.0, edges_per_s=56789.0, loader_stall=stall,
                peak_pss_bytes=300 * 2**20, peak_rss_bytes=400 * 2**20, val_acc=0.5, test_acc=0.25,
                startup_s=3.0)
    return {"name": f"test_cell[{cell_id}]", "stats": {"median": median, "iqr": iqr, "rounds": 5},
            "extra_info": info}


def result_file(tmp_path, unmeasured_reason="boom"):
    data = {"datetime": "2026-11-22T00:00:00", "machine_info": {}, "commit_info": {},
            "benchmarks": [bench_entry(BASE_ID, 2.0, 0.1, 0.25), bench_entry(FAST_ID, 0.5, 0.05, 0.6)],
            "gnnbench": {"schema_version": 1, "suite": "s", "baseline": BASE_ID,
                         "cells": [BASE_ID, FAST_ID, "dgl-graphbolt/g/mode=cuda-cuda/workers=0/ws=1", "x/never"]},
            "unmeasured": [{"id": "dgl-graphbolt/g/mode=cuda-cuda/workers=0/ws=1", "status": "failed",
                            "reason": unmeasured_reason}]}
    path = tmp_path / "r.json"
    path.write_text(json.dumps(data))
    return path


def test_rows_follow_the_numbers(tmp_path):
    rows = results.read(result_file(tmp_path)).cells
    assert [r.status for r in rows] == ["ok", "ok", "failed", "not run"]
    assert rows[0].speedup == 1.0 and rows[1].speedup == 4.0
    md = report.render_markdown([results.read(result_file(tmp_path))])
    # the brief columns by default (issue 50: at most 10 with cell and status); the rest with --columns
    assert "| cell | status | epoch s, median (IQR) | speedup | seeds/s | loader stall | peak PSS MiB | val acc / MRR |" in md
    assert "| 2.000 (0.100) | 1.00× | 1,234 | 25.0 % | 300 | 0.500 |" in md
    assert "| 0.500 (0.050) | 4.00× |" in md and "60.0 %" in md
    every = report.render_markdown([results.read(result_file(tmp_path))], chosen=["all"])
    assert "| 2.000 (0.100) | 5 | 1.00× | 1,234 | 56,789 | 25.0 % | 300 | 400 | 0.500 | 0.250 | 3.0 |" in every
    named = report.render_markdown([results.read(result_file(tmp_path))], chosen=["start-up-s", "peak-rss-mib"])
    assert "| cell | status | start-up s | peak RSS MiB |" in named and "| 3.0 | 400 |" in named
    assert "**failed** | boom" in md
    assert md.count("| `g` | synthetic | 4,096 | 53,308 | 64 | 8 | 2,457 / 819 / 820 |") == 1  # dataset card


def test_error_text_is_inert_in_the_table(tmp_path):
    md = report.render_markdown([results.read(result_file(tmp_path, "<script>alert(1)</script> a|b\nnext"))])
    assert "<script>" not in md
    assert "&lt;script&gt;alert(1)&lt;/script&gt; a\\|b next" in md


@pytest.mark.parametrize("content, message", [
    ("not json", "not a JSON result file"),
    ('{"benchmarks": []}', "not written by gnnbench"),
    ('{"x": 1}', "no 'benchmarks' list"),
    ('{"benchmarks": [], "gnnbench": {"schema_version": 99}}', "newer than this gnnbench reads"),
    ('{"benchmarks": [{"name": "t", "extra_info": {"backend": "b"}}], "gnnbench": {"schema_version": 1}}',
     "extra_info lacks stack"),
])
def test_bad_result_files_are_named(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(results.ResultsError, match=message) as info:
        results.read(path)
    assert str(path) in str(info.value)


def test_scaling_rows_compare_each_world_size_with_one_rank(tmp_path):
    two = "pyg-neighbor/g/mode=cpu-cpu/workers=0/ws=2"
    data = json.loads(result_file(tmp_path).read_text())
    data["benchmarks"].append(bench_entry(two, 1.25, 0.1, 0.5))
    data["gnnbench"]["cells"].append(two)
    path = tmp_path / "scaling.json"
    path.write_text(json.dumps(data))  # no stored speedups (new files store none): computed on read
    rows = report.scaling_rows(results.read(path))
    assert [(r.world_size, r.speedup_vs_ws1, r.scaling_efficiency) for r in rows] == [
        (1, 1.0, 1.0), (2, 1.6, 0.8)]
    assert "### Scaling across world sizes" in report.render_markdown([results.read(path)])


def test_the_sampler_column_appears_where_cells_record_it(tmp_path):
    """Which implementation sampled is shown beside the numbers (Markdown and HTML) where the
    result file records it, and an older file without it renders without the column."""
    from bench.publish import site

    plain = tmp_path / "plain"
    plain.mkdir()
    before = report.render_markdown([results.read(result_file(plain))], chosen=["all"])
    assert "sampler" not in before.split("| cell | status |")[1].splitlines()[0]
    path = result_file(tmp_path)
    data = json.loads(path.read_text())
    data["benchmarks"][0]["extra_info"]["sampler"] = "torch-sparse 0.6.18 (fallback: no pyg-lib)"
    data["benchmarks"][1]["extra_info"]["sampler"] = "graphbolt sample_neighbor (dgl 2.1.0)"
    path.write_text(json.dumps(data))
    assert "sampler" not in report.render_markdown([results.read(path)])  # behind --columns
    text = report.render_markdown([results.read(path)], chosen=["all"])
    header = text.split("| cell | status |")[1].splitlines()[0]
    assert header.startswith(" sampler | epoch s, median (IQR) |")
    assert f"| `{BASE_ID}` (baseline) | ok | torch-sparse 0.6.18 (fallback: no pyg-lib) | 2.000 (0.100) |" in text
    assert f"| `{FAST_ID}` | ok | graphbolt sample_neighbor (dgl 2.1.0) | 0.500 (0.050) |" in text
    site.build([results.read(path)], tmp_path / "site")
    page = next((tmp_path / "site").glob("suite-*.html")).read_text()
    assert "sampler" in page and "torch-sparse 0.6.18 (fallback: no pyg-lib)" in page


def test_the_machine_line_names_the_image_a_run_came_from(tmp_path):
    path = result_file(tmp_path)
    data = json.loads(path.read_text())
    data["machine_info"] = {"gnnbench": {"container_image": "localhost/gnnbench:cpu",
                                         "container_revision": "0123456789abcdef0123"}}
    path.write_text(json.dumps(data))
    machine_line = next(line for line in report.render_markdown([results.read(path)]).splitlines()
                        if line.startswith("Machine:"))
    assert machine_line.endswith(", image localhost/gnnbench:cpu at 0123456789ab.")
    plain = next(line for line in report.render_markdown([results.read(result_file(tmp_path))]).splitlines()
                 if line.startswith("Machine:"))
    assert "image" not in plain


# --- where the time goes (stage timings, work counts, ceilings, the diagnosis) ----------------

def staged_run(tmp_path, with_stages=True):
    """A configuration at 1 and 4 ranks and with 2 workers (both slower), and GraphBolt sampling
    30 % more nodes per batch; per the stage contract where `with_stages`."""
    from tests import synthetic_results as sr

    def staged(epoch_s, shares, **work):
        return sr.stage_info(epoch_s, shares, **work) if with_stages else {}
    cells = [
        sr.bench(sr.cell_id(), [1.0] * 5, **staged(1.0, {"sample": 0.2, "fetch": 0.5, "forward_backward": 0.3})),
        sr.bench(sr.cell_id(ws=4), [1.5] * 5, comm_s=0.6, batches_per_epoch=3,
                 **staged(1.5, {"fetch": 0.2, "forward_backward": 0.3, "allreduce": 0.4, "other": 0.1}, batches=12)),
        sr.bench(sr.cell_id(workers=2), [1.2] * 5,
                 **staged(1.2, {"wait": 0.6, "forward_backward": 0.4}, loader_worker_s={"sample": 0.5, "fetch": 0.7})),
        sr.bench(sr.cell_id("dgl-graphbolt"), [0.8] * 5,
                 **staged(0.8, {"sample": 0.3, "fetch": 0.3, "forward_backward": 0.4}, input_nodes=2600.0)),
    ]
    doc = sr.run(cells, ceilings=sr.CEILINGS | {"gather_bytes_per_s": {"64": 2.56e6}} if with_stages else None)
    for b in doc["benchmarks"]:
        b["extra_info"]["dataset"]["features_only_acc"] = 0.41
    return sr.write(tmp_path, "staged.json", doc)


def test_the_stage_columns_and_the_time_split(tmp_path):
    from tests import synthetic_results as sr

    brief = report.render_markdown([staged_run(tmp_path)])
    assert "| binding stage |" in brief and "| nodes / batch |" not in brief and "fetch worker-s |" not in brief
    text = report.render_markdown([staged_run(tmp_path)], chosen=["all"])
    header = next(line for line in text.splitlines() if line.startswith("| cell | status |"))
    assert "| binding stage |" in header and "| nodes / batch |" in header
    row = next(line for line in text.splitlines() if line.startswith(f"| `{sr.cell_id()}` (reference) | ok |"))
    # 2,000 rows of 64 bytes x 10 batches in 0.5 s = 2.56 MB/s: the gather ceiling this machine records
    assert "fetch 50 % (100 % of the machine's gather bandwidth)" in row
    assert "2,000 (unequal work)" in row
    split = text.split("### Where the time goes", 1)[1]
    workers_row = next(line for line in split.splitlines() if line.startswith(f"| `{sr.cell_id(workers=2)}` |"))
    assert "| 60 % |" in workers_row and "| 0.500 / 0.700 |" in workers_row  # wait, and worker-seconds
    assert "2.56 MB/s (100 %)" in split
    assert (f"- `{sr.cell_id()}`: hop 1: 9.38 nodes per seed against 12.2 in {sr.cell_id('dgl-graphbolt')} (−23 %); "
            in split)  # 600 and 780 first reached at hop 1 by batches of 64 seeds
    why = text.split("### Why more ranks or workers are slower", 1)[1]
    assert f"- {sr.cell_id(ws=4)} is 1.50× slower per epoch with 4 ranks than with 1 rank" in why
    assert "all-reduce is 40 % of the epoch" in why and "each rank runs 3 batches" in why
    assert f"- {sr.cell_id(workers=2)} is 1.20× slower per epoch with 2 workers than with 0 workers" in why
    assert "| features-only test acc |" in text and "| 0.410 |" in text


def test_files_without_stages_render_without_their_columns(tmp_path):
    text = report.render_markdown([staged_run(tmp_path, with_stages=False)])
    assert "binding stage" not in text and "Where the time goes" not in text and "nodes / batch" not in text
    # the diagnosis reads what older files have: all-reduce, batches, the machine's cores
    assert "all-reduce is 40 % of the epoch" in text.split("### Why more ranks or workers are slower", 1)[1]


def test_the_largest_private_part_of_a_rank_is_named(tmp_path):
    """The memory breakdown's largest private part (any rank) is a column where recorded."""
    path = result_file(tmp_path)
    data = json.loads(path.read_text())
    mib = 2**20
    data["benchmarks"][0]["extra_info"]["memory_breakdown"] = [
        {"pss_bytes": 700 * mib, "parts": {"interpreter_framework": {"shared": 50 * mib, "private": 200 * mib},
                                           "graph_structure": {"shared": 300 * mib, "private": 0}}},
        {"pss_bytes": 800 * mib, "parts": {"interpreter_framework": {"shared": 50 * mib, "private": 210 * mib},
                                           "features": {"shared": 0, "private": 512 * mib}}}]
    path.write_text(json.dumps(data))
    text = report.render_markdown([results.read(path)], chosen=["all"])
    header = text.split("| cell | status |")[1].splitlines()[0]
    assert "largest private MiB" in header
    assert "| features 512 |" in text


def test_backends_an_option_left_out_are_named_in_the_table(tmp_path):
    path = result_file(tmp_path)
    data = json.loads(path.read_text())
    note = "--stack node: dgl-graphbolt runs in none of these stacks (it needs dgl): its cells are not run"
    data["gnnbench"]["backends_not_run"] = [note]
    path.write_text(json.dumps(data))
    assert f"Not run: {note}" in report.render_markdown([results.read(path)])
    data["gnnbench"]["backends_not_run"] = "dgl-graphbolt"  # not a list of lines: refused, named
    path.write_text(json.dumps(data))
    with pytest.raises(results.ResultsError, match="backends_not_run"):
        results.read(path)


def test_columns_option_names_the_columns_there_are(tmp_path, capsys):
    from bench import cli

    path = result_file(tmp_path)
    assert cli.main(["report", str(path), "--columns", "test-acc,val-acc/mrr"]) == 0
    assert "| cell | status | test acc | val acc / MRR |" in capsys.readouterr().out
    with pytest.raises(SystemExit) as info:
        cli.main(["report", str(path), "--columns", "epoch,nope"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "--columns: epoch, nope: not a column; allowed: all, or any of" in err and "epoch-s-median-iqr" in err


def test_a_file_of_an_older_writer_without_the_metrics_reads(tmp_path):
    """Every metric is optional: a file that records only which cell it is reads, its numbers "–"."""
    data = json.loads(result_file(tmp_path).read_text())
    for bench in data["benchmarks"]:
        bench["extra_info"] = {k: bench["extra_info"][k] for k in REQUIRED_EXTRA}
    path = tmp_path / "old.json"
    path.write_text(json.dumps(data))
    md = report.render_markdown([results.read(path)], chosen=["all"])
    assert "| `pyg-neighbor/g/mode=cpu-cpu/workers=0/ws=1` (baseline) | ok | 2.000 (0.100) | 5 | 1.00× | – |" in md


def test_an_untimed_all_reduce_reads_not_measured_and_a_timed_one_its_seconds(tmp_path):
    """DDP's all-reduce is timed only with `profile: true` (issue 49): a `profile: false` cell records
    none (comm_s None), and the scaling table says `not measured` rather than a 0 that reads as free."""
    from tests import synthetic_results as sr

    def at(ws: int, profile: bool, comm_s: float | None) -> dict:
        cid = sr.cell_id(ws=ws) + ("" if profile else "/profile=off")
        return sr.bench(cid, [1.0 / ws] * 5, comm_s=comm_s, settings={**sr.settings_of(cid), "profile": profile})
    run = sr.write(tmp_path, "ddp.json", sr.run([at(1, True, 0.0), at(2, True, 0.6), at(1, False, 0.0), at(2, False, None)]))
    table = report.render_markdown([run]).split("### Scaling across world sizes", 1)[1]
    rows = {line.split("|")[1].strip(" `") + "@" + line.split("|")[2].strip(): line
            for line in table.splitlines() if line.startswith("| `")}
    config = results.id_without_world_size(sr.cell_id(), 1)
    assert "| 0.600 |" in rows[f"{config}@2"]  # timed: its figure
    assert "| not measured |" in rows[f"{config}/profile=off@2"] and "0.000" not in rows[f"{config}/profile=off@2"]
    assert "| 0.000 |" in rows[f"{config}/profile=off@1"]  # one rank: nothing to all-reduce, untimed or not


def test_each_host_shows_its_newest_reading_of_each_pair(tmp_path):
    """A suite measured on two hosts: each pair's ratio on each host side by side, from that host's
    newest run measuring the pair, so a later run of some cells alone (-k) leaves the other pairs
    theirs; intervals that lie apart are said to disagree."""
    from tests import synthetic_results as sr

    pyg, pyg2, gb = sr.cell_id(workers=0), sr.cell_id(workers=2), sr.cell_id(backend="dgl-graphbolt")

    def pair(axis, first, second, ratio, low, high):
        return {"axis": axis, "first": first, "second": second, "paired": True, "within": 0.03, "rounds": 12,
                "launches": 6, "ratio": ratio, "ci95": [low, high], "settled": None, "reason": None}

    def run(name, when, cpu, cells, pairs):
        data = sr.run([sr.bench(c, [1.0] * 5, pairs=pairs) for c in cells], when=when, cpu=cpu)
        data["gnnbench"]["pairs"] = pairs
        return sr.write(tmp_path, name, data)

    runs = [run("x.json", "2026-01-01T00:00:00+00:00", "Xeon", [pyg, pyg2, gb],
                [pair("backend", pyg, gb, 1.69, 1.57, 1.82), pair("num_workers", pyg, pyg2, 1.40, 1.30, 1.50)]),
            run("e.json", "2026-01-02T00:00:00+00:00", "EPYC", [pyg, pyg2, gb],
                [pair("backend", pyg, gb, 1.34, 1.23, 1.46), pair("num_workers", pyg, pyg2, 1.45, 1.35, 1.55)]),
            run("e-k.json", "2026-01-03T00:00:00+00:00", "EPYC", [pyg, pyg2],  # a later run of two cells alone
                [pair("num_workers", pyg, pyg2, 1.48, 1.44, 1.52)])]
    shown = report.pairs_by_host(runs)
    assert [h.split(" (")[1].split(")")[0].split(" ")[0] for h in shown["hosts"]] == ["Xeon", "EPYC"]
    by_axis = {row["axis"]: row for row in shown["rows"]}
    assert by_axis["backend"]["ratios"][1].startswith("1.340") and "disagree" in by_axis["backend"]["agree"]
    assert by_axis["num_workers"]["ratios"][1].startswith("1.480") and "agree: " in by_axis["num_workers"]["agree"]
    assert report.pairs_by_host(runs[1:]) is None  # one host: nothing to set side by side


def test_a_run_records_the_commit_it_began_at_and_says_when_the_checkout_changed_while_it_ran(tmp_path):
    """A run's record named the commit made while it ran (the description was taken at its end, and each
    launch's processes import the code there as they start): now the start's, marked where it changed."""
    from bench.run import record

    now = record.commit_info()  # this checkout, by real git
    assert now.get("id") and record.commit_info(at_start=now) == now
    began = {**now, "id": "0" * 40, "dirty": False}
    moved = record.commit_info(at_start=began)
    assert moved["id"] == "0" * 40 and moved["dirty"] is True and now["id"] in moved["changed_during_run"]
    path = result_file(tmp_path)
    data = json.loads(path.read_text())
    data["commit_info"] = moved
    path.write_text(json.dumps(data))
    md = report.render_markdown([results.read(path)])
    assert "Commit: `000000000000` as the run began; the checkout changed while it ran (at the end" in md
    assert "(uncommitted changes)" not in md
