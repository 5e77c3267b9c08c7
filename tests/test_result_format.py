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
    assert REQUIRED_EXTRA == ("backend", "stack", "versions", "dataset", "settings", "seeds_per_s", "edges_per_s",
                              "loader_stall", "peak_rss_bytes", "peak_pss_bytes", "val_acc", "test_acc",
                              "startup_s", "cell_id")
    assert all(isinstance(s, (Copied, EpochMean)) for s in WRITTEN_FROM_RECORD.values())
    assert set(WRITTEN_FROM_RECORD) <= set(ExtraInfo.model_fields)


def test_the_writer_takes_the_declared_fields_from_the_workers_record():
    written = from_record(RECORD)
    assert written["seeds_per_epoch"] == 15 and written["comm_s"] == 0.25  # an epoch without comm_s counts 0
    assert written["sampler"] == "pyg-lib" and written["versions"] == {"torch": "2.4.0"}
    assert written["test_acc_full"] is None  # not recorded: written as none
    assert "partition" not in written and "to_target" not in written  # empty: left out, as older files lack them
    if_set = {name for name, source in WRITTEN_FROM_RECORD.items() if isinstance(source, Copied) and source.if_set}
    assert {"partition", "to_target", "val_mrr", "link_notes"} <= if_set  # a node cell's file lacks the link fields
    assert set(written) == set(WRITTEN_FROM_RECORD) - if_set
    with pytest.raises(KeyError):  # a required field the worker did not record is a writer's bug
        from_record({k: v for k, v in RECORD.items() if k != "startup_s"})


def test_a_new_metric_is_a_field_and_a_column():
    """cpu_s_per_epoch, added as ADDING.md says: the mean of the epochs' `cpu_s`, a dash in older files."""
    timed = [{"seconds": 1.0, "seeds": 10, "cpu_s": 0.5}, {"seconds": 1.0, "seeds": 10, "cpu_s": 1.5}]
    assert from_record({**RECORD, "epochs": timed})["cpu_s_per_epoch"] == 1.0
    assert from_record(RECORD)["cpu_s_per_epoch"] is None  # an epoch without it: none
    column = next(c for c in columns.CELL_COLUMNS if c.header == "CPU s / epoch")
    old = results.read(committed_results()[0]).measured[0]
    assert old.metrics.get("cpu_s_per_epoch") is None and column.html_text(old) == "–"
