"""The result format has one owner (bench/result_format.py): the required fields come from its
model, and the writer (bench/run/record.py) writes the fields it declares as taken from the
worker's record from those declarations alone."""

from __future__ import annotations

import pytest

from bench.publish import columns, results
from bench.result_format import REQUIRED_EXTRA, WRITTEN_FROM_RECORD, Copied, EpochMean, ExtraInfo
from bench.run.record import from_record
from tests.conftest import committed_results

RECORD = {"versions": {"torch": "2.4.0"}, "val_acc": 0.5, "test_acc": 0.25, "startup_s": 3.0, "sampler": "pyg-lib",
          "partition": None,
          "epochs": [{"seconds": 1.0, "seeds": 10, "comm_s": 0.5}, {"seconds": 1.0, "seeds": 20}]}


def test_the_required_fields_are_the_models():
    # which cell it is; every metric is optional (a new one is one declaration, older files lack it)
    assert REQUIRED_EXTRA == ("backend", "stack", "dataset", "settings", "cell_id")
    assert all(isinstance(s, (Copied, EpochMean)) for s in WRITTEN_FROM_RECORD.values())
    assert set(WRITTEN_FROM_RECORD) <= set(ExtraInfo.model_fields)


def test_the_writer_takes_the_declared_fields_from_the_workers_record():
    written = from_record(RECORD)
    assert written["seeds_per_epoch"] == 15 and written["comm_s"] == 0.25  # an epoch without comm_s counts 0
    assert written["sampler"] == "pyg-lib" and written["versions"] == {"torch": "2.4.0"}
    assert written["test_acc_full"] is None  # not recorded: written as none
    # empty: left out, as older files lack them
    assert "partition" not in written and "to_target" not in written and "model" not in written
    if_set = {name for name, source in WRITTEN_FROM_RECORD.items() if isinstance(source, Copied) and source.if_set}
    assert {"partition", "to_target", "val_mrr", "link_notes", "model", "startup_phases"} <= if_set
    assert set(written) == set(WRITTEN_FROM_RECORD) - if_set
    # a metric the worker did not record is written as none, as a reader takes it from older files
    assert from_record({k: v for k, v in RECORD.items() if k != "startup_s"})["startup_s"] is None


def test_a_new_metric_is_a_field_and_a_column():
    """cpu_s_per_epoch, added as ADDING.md says: the mean of the epochs' `cpu_s`, a dash in older files."""
    timed = [{"seconds": 1.0, "seeds": 10, "cpu_s": 0.5}, {"seconds": 1.0, "seeds": 10, "cpu_s": 1.5}]
    assert from_record({**RECORD, "epochs": timed})["cpu_s_per_epoch"] == 1.0
    assert from_record(RECORD)["cpu_s_per_epoch"] is None  # an epoch without it: none
    column = next(c for c in columns.CELL_COLUMNS if c.header == "CPU s / epoch")
    oldest = min(committed_results(), key=lambda p: p.stem.rsplit("-", 1)[-1])  # by the run's time stamp
    old = results.read(oldest).measured[0]
    assert old.metrics.get("cpu_s_per_epoch") is None and column.html_text(old) == "–"


def test_every_field_the_writer_produces_is_declared_once_and_read_back():
    """The writer's keys (a measured cell written through record.extra_info, and every committed
    file's) are ExtraInfo's fields, so each is checked on read; the reader's Metrics is derived
    from the same declarations, never a second list."""
    from bench.run.record import DATASET_FIELDS, extra_info
    from bench.run.runner import Outcome
    from bench.run.suite import Cell
    from bench.settings import CellSettings

    cell = Cell("pyg-neighbor/g/mode=cpu-cpu/workers=0/ws=1", "pyg-neighbor", "pyg", "g",
                {"name": "g", "source": "synthetic", "params": {}}, CellSettings())
    card = {k: 1 for k in DATASET_FIELDS} | {"source": "synthetic", "num_train": 1, "num_val": 1, "num_test": 1}
    epoch = {"seconds": 1.0, "seeds": 10, "edges": 100, "stall_s": 0.1, "batches": 2, "cpu_s": 1.0,
             "stages": {"sample": 0.5}, "loader_worker_s": None,
             "work": {"batches": 2, "hop_nodes": [20, 60], "hop_edges": [0, 50], "input_nodes": 80, "feature_bytes": 640,
                      "copy_bytes": 0}}
    rec = {**RECORD, "epochs": [epoch, epoch], "warmup": [epoch], "dataset": card}
    written = extra_info(Outcome(cell, "ok", record=rec, other_load=0.1), baseline=cell.id)
    assert set(written) <= set(ExtraInfo.model_fields), set(written) - set(ExtraInfo.model_fields)
    assert {"other_load", "is_baseline"} <= set(written)
    for path in committed_results():
        for bench in __import__("json").loads(path.read_text())["benchmarks"]:
            undeclared = set(bench["extra_info"]) - set(ExtraInfo.model_fields) - set(results.STORED_SCORES)
            assert not undeclared, (path, undeclared)
    assert results.METRIC_FIELDS == set(ExtraInfo.model_fields) - results.CELL_FIELDS
