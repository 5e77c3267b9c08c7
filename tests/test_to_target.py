"""Time to accuracy (bench/run/to_target.py, bench/publish/diagnosis.py): real tiny cells of both
backends trained to a validation target they reach, to one they cannot, and the loader alone
(n/a); GraphBolt under DDP too, whose loader shards the validation split among the ranks. The
table, the diagnosis and the advisor read the run's own file. Nothing here depends on timing: the
targets are chosen so that any trained model reaches one (0.1 on three classes) and none the
other (1.0 on 73 validation nodes, where the models stay under 0.6)."""

from __future__ import annotations

import json

import pytest

from bench.publish import advisor, columns, diagnosis, report, results
from bench.run import suite as suite_mod
from bench.settings import TARGET
from tests.conftest import REPO, require_stacks, run_suite_text

DATASET = "{source: synthetic, params: {scale: 9, edge_factor: 4, feature_dim: 8, num_classes: 3, seed: 1}}"
SUITE = f"""
name: to-target
datasets:
  reach: {DATASET}
  miss: {DATASET}
backends: [pyg-neighbor, dgl-graphbolt]
settings: {{num_workers: 0, mode: cpu-cpu, batch_size: 64, fanout: [4, 2], epochs: 2, warmup_epochs: 1,
           model: sage, hidden: 8, timeout: 300, target_acc: 1.0, eval_every: 2, max_epochs: 5}}
exclude:
  - {{dataset: reach, target_acc: 1.0}}
include:
  - {{dataset: reach, target_acc: 0.1}}
  - {{dataset: reach, target_acc: 0.1, model: none}}
  - {{backend: dgl-graphbolt, dataset: reach, target_acc: 0.1, world_size: 2}}
"""
ID = "{backend}/{dataset}/mode=cpu-cpu/workers=0/ws={ws}"


@pytest.fixture(scope="module")
def run(tmp_path_factory, cache_dir):
    require_stacks("pyg", "dgl")
    proc, out = run_suite_text(SUITE, tmp_path_factory.mktemp("to-target"), cache_dir, name="to-target")
    assert proc.returncode == 0, proc.stdout[-3000:]
    return out, results.read(out)


def entries(out) -> dict[str, dict]:
    return {b["extra_info"]["cell_id"]: b for b in json.loads(out.read_text())["benchmarks"]}


@pytest.mark.parametrize("backend, ws", [("pyg-neighbor", 1), ("dgl-graphbolt", 1), ("dgl-graphbolt", 2)])
def test_a_reachable_target_records_epochs_and_training_time(run, backend, ws):
    out, _ = run
    bench = entries(out)[ID.format(backend=backend, dataset="reach", ws=ws)]
    info, found = bench["extra_info"], bench["extra_info"]["to_target"]
    # the first evaluation is due after epoch 2 (eval_every: 2), and any trained model passes 0.1
    assert found["reached"] is True and found["epochs"] == 2 and found["target"] == 0.1
    assert [e["epoch"] for e in found["evaluations"]] == [2]
    # training time: the warm-up epoch and the first measured one, as the cell timed them
    assert found["seconds"] == pytest.approx(info["warmup_epoch_s"][0] + bench["stats"]["data"][0])
    assert found["clock"] == "training" and found["eval_s"] > 0
    # reached within the planned epochs: the run is the one it would have been, measured epochs too
    assert found["epochs_run"] == 3 and bench["stats"]["rounds"] == 2
    # the evaluation covers the whole validation split on every rank count: GraphBolt's loader
    # shards it among DDP's ranks, whose counts are summed
    val = info["dataset"]["num_val"]
    assert found["evaluations"][0]["val_acc"] * val == pytest.approx(round(found["evaluations"][0]["val_acc"] * val))


@pytest.mark.parametrize("backend", ["pyg-neighbor", "dgl-graphbolt"])
def test_an_unreachable_target_records_not_reached_with_the_best_value(run, backend):
    out, read = run
    bench = entries(out)[ID.format(backend=backend, dataset="miss", ws=1)]
    found = bench["extra_info"]["to_target"]
    assert found["reached"] is False and found["seconds"] is None and found["epochs"] is None
    # evaluated every 2 epochs and after the last allowed one; training went on to max_epochs
    assert [e["epoch"] for e in found["evaluations"]] == [2, 4, 5] and found["epochs_run"] == 5
    best = max(found["evaluations"], key=lambda e: e["val_acc"])
    assert (found["best_val_acc"], found["best_epoch"]) == (best["val_acc"], best["epoch"])
    # the measured epochs are still the planned ones; training time counts every epoch run
    assert bench["stats"]["rounds"] == 2
    assert found["train_s"] > sum(bench["stats"]["data"]) + sum(bench["extra_info"]["warmup_epoch_s"])
    cell = next(c for c in read.cells if c.id == bench["extra_info"]["cell_id"])
    assert diagnosis.target_text(cell) == f"not reached (best {best['val_acc']:.3f} in 5 epochs, target 1)"


def test_the_loader_alone_has_a_target_and_shows_na(run):
    out, read = run
    cid = ID.format(backend="pyg-neighbor", dataset="reach", ws=1) + "/model=none"
    assert "to_target" not in entries(out)[cid]["extra_info"]
    cell = next(c for c in read.cells if c.id == cid)
    assert cell.settings.target_acc == 0.1 and diagnosis.target_text(cell) == "n/a"


def test_the_table_shows_the_column(run, tmp_path):
    out, read = run
    text = report.render_markdown([read])
    header = next(line for line in text.splitlines() if line.startswith("| cell |"))
    assert "time to target" in header
    def columns(line):  # a Markdown row's cells (the last one ends in " |")
        return [c.strip() for c in line.strip().strip("|").split(" | ")]
    position = columns(header).index("time to target")
    for cell in read.measured:
        row = next(line for line in text.splitlines() if line.startswith(f"| `{cell.id}`"))
        assert columns(row)[position] == diagnosis.target_text(cell)
    reached = [c for c in read.measured if c.target_seconds is not None]
    assert len(reached) == 3 and all(diagnosis.target_text(c).endswith("(2 epochs to 0.1)") for c in reached)


def test_the_suite_page_shows_the_column_and_the_diagnosis(run, tmp_path):
    import html

    from bench.publish import site

    _, read = run
    pages = {p.name: p.read_text() for p in site.build([read], tmp_path / "site")}
    page = html.unescape(pages["suite-to-target.html"])
    assert "time to target" in page and "Epoch time against time to accuracy" in page
    for line in diagnosis.target_lines(read.cells):
        assert line in page
    for cell in read.measured:
        assert diagnosis.target_text(cell) in page


def test_a_run_without_a_target_has_no_such_column():
    from tests.conftest import committed_results

    committed = results.read(next(p for p in committed_results() if p.name.startswith("smoke-")))
    assert not any(c.settings.target_acc for c in committed.cells)
    assert "time to target" not in [c.header for c in columns.markdown_columns(list(committed.cells))]
    assert diagnosis.target_lines(committed.cells) == []


def test_the_diagnosis_names_each_faster_epoch_that_reaches_later_or_says_none(run):
    _, read = run
    lines, found = diagnosis.target_lines(read.cells), diagnosis.overtaken(read.cells)
    assert lines  # some cells trained to a target: always a line, a case or "None"
    for case in found:  # each case is one: a faster epoch, a later (or no) arrival, the same target
        a, b = case.faster, case.sooner
        assert a.median * (1 + diagnosis.CLEAR_MARGIN) <= b.median and b.target_seconds and a.dataset == b.dataset
        assert a.target_seconds is None or a.target_seconds >= b.target_seconds * (1 + diagnosis.CLEAR_MARGIN)
    if not found:
        assert lines[0].startswith("None:")
    assert "### Epoch time against time to accuracy" in report.render_markdown([read])


def test_a_faster_epoch_that_arrives_later_is_named(run, tmp_path):
    """The run's own file with its times to the target changed: each twice the cell's median epoch,
    but the fastest epoch's, which takes longer than every other."""
    out, read = run
    data = json.loads(out.read_text())
    reach = [b for b in data["benchmarks"] if b["extra_info"].get("to_target", {}).get("reached")]
    for b in reach:
        b["extra_info"]["to_target"]["seconds"] = 2 * b["stats"]["median"]
    fastest = min(reach, key=lambda b: b["stats"]["median"])
    fastest["extra_info"]["to_target"].update(seconds=1000.0, epochs=3)
    fastest["stats"]["median"] /= 2  # clearly the fastest epoch (diagnosis.CLEAR_MARGIN)
    changed = tmp_path / "changed.json"
    changed.write_text(json.dumps(data))
    cells = results.read(changed).cells
    found = diagnosis.overtaken(cells)
    assert [case.faster.id for case in found] == [fastest["extra_info"]["cell_id"]]
    soonest = min((c for c in cells if c.target_seconds and c.id != found[0].faster.id), key=lambda c: c.target_seconds)
    assert found[0].sooner.id == soonest.id
    line = diagnosis.target_lines(cells)[0]
    assert line.startswith(f"{fastest['extra_info']['cell_id']} has the faster epoch")
    assert "1000.000 s (3 epochs to 0.1)" in line and "it needs 3 epochs to 2" in line


def test_a_pair_one_noise_apart_is_not_named(run, tmp_path):
    """A faster epoch by 1 % that arrives 2 % later is the run's noise, not a reversal to name."""
    out, _ = run
    data = json.loads(out.read_text())
    reach = sorted((b for b in data["benchmarks"] if b["extra_info"].get("to_target", {}).get("reached")),
                   key=lambda b: b["stats"]["median"])
    for b in reach:
        b["extra_info"]["to_target"]["seconds"] = 2 * b["stats"]["median"]
    fastest, second = reach[0], reach[1]
    fastest["stats"]["median"] = 0.99 * second["stats"]["median"]
    fastest["extra_info"]["to_target"]["seconds"] = 1.02 * second["extra_info"]["to_target"]["seconds"]
    changed = tmp_path / "noise.json"
    changed.write_text(json.dumps(data))
    assert fastest["extra_info"]["cell_id"] not in [c.faster.id for c in diagnosis.overtaken(results.read(changed).cells)]


def test_the_advisor_ranks_by_time_to_target(run):
    _, read = run
    advice = {a.dataset: a for a in advisor.advise([read])}
    reached = [c for c in read.measured if c.dataset == "reach" and c.target_seconds is not None]
    soonest = min(reached, key=lambda c: c.target_seconds)
    assert advice["reach"].recommended == soonest.id
    assert "reaches validation accuracy 0.1 in" in advice["reach"].summary
    assert any(e.startswith("Ranked by time to validation accuracy 0.1") for e in advice["reach"].evidence)
    # no cell reached the target on `miss`: the epoch time decides, as without one
    fastest = min((c for c in read.measured if c.dataset == "miss"), key=lambda c: c.median)
    assert advice["miss"].recommended == fastest.id and "per epoch" in advice["miss"].summary
    assert any(e.startswith("No configuration reached its validation target") for e in advice["miss"].evidence)


# --- the suites -------------------------------------------------------------------------------

def test_target_keys_only_in_cells_with_a_target_and_ids_unchanged(write_suite):
    text = ("name: t\ndatasets:\n  g: \"synthetic:scale=8\"\nbackends: [pyg-neighbor]\nsettings:\n  epochs: 2\n")
    plain = suite_mod.expand(suite_mod.load(write_suite(text, "plain.yaml"))[0])
    targeted = suite_mod.expand(suite_mod.load(write_suite(text + "  target_acc: 0.5\n", "t.yaml"))[0])
    assert [c.id for c in plain] == [c.id for c in targeted]
    assert not set(TARGET) & set(plain[0].settings.as_dict())
    assert {k: getattr(targeted[0].settings, k) for k in TARGET} == {
        "target_acc": 0.5, "eval_every": 1, "max_epochs": 3}  # default: warm-up + measured epochs


def weaker_median_val_acc(suite_name: str, dataset: str) -> float:
    """The weaker framework's median final validation accuracy on a dataset in the suite's latest
    committed run that trained to no target (how the suites' targets were chosen: a run with targets
    stops each cell at its target, so its accuracies say how soon, not how high)."""
    from tests.conftest import committed_results

    runs = [results.read(p) for p in committed_results() if p.name.startswith(f"{suite_name}-")]
    runs = [r for r in runs if any(c.dataset == dataset and c.metrics.val_acc is not None
                                   and c.settings.get("target_acc") is None for c in r.measured)]
    latest = max(runs, key=lambda r: r.finished_at)
    by_framework: dict[str, list[float]] = {}
    for cell in latest.measured:
        if cell.dataset == dataset and cell.metrics.val_acc is not None:
            framework = "dgl" if cell.backend.startswith("dgl") else "pyg"
            by_framework.setdefault(framework, []).append(cell.metrics.val_acc)
    medians = [sorted(v)[len(v) // 2] if len(v) % 2 else sum(sorted(v)[len(v) // 2 - 1:len(v) // 2 + 1]) / 2
               for v in by_framework.values()]
    return min(medians)


@pytest.mark.parametrize("suite_name", ["scaling", "memory"])
def test_the_scaling_and_memory_suites_set_targets_from_their_committed_results(suite_name):
    suite, _ = suite_mod.load(REPO / "suites" / f"{suite_name}.yaml")
    # memory's products-s21 cells (once suites/products-scale.yaml) time one epoch and set no target
    cells = [c for c in suite_mod.expand(suite) if c.settings.model == "sage" and c.dataset != "products-s21"]
    assert cells and all(c.settings.target_acc for c in cells)
    for dataset in {c.dataset for c in cells}:
        targets = {c.settings.target_acc for c in cells if c.dataset == dataset}
        assert len(targets) == 1, (dataset, targets)  # one target per dataset
        assert targets.pop() >= 0.95 * weaker_median_val_acc(suite_name, dataset)
