"""The plan (bench/run/plan.py) is pure: the same suite and options give the same cells, selection,
baseline and pairing, with every file access refused while it is made (the import contract
"the plan prepares, launches and writes nothing" holds its imports)."""

from __future__ import annotations

import builtins
import io
import os

import pytest

from bench.run import plan, suite as suite_mod
from bench.run.session import RunOptions
from tests.conftest import REPO


def test_the_plan_is_made_without_touching_a_file(monkeypatch):
    suite, _ = suite_mod.load(REPO / "suites" / "smoke.yaml")  # loading the suite is the session's part
    options = RunOptions(paired=["num_workers"], paired_launches=4)
    said: list[str] = []
    expected = plan.make(suite, options, "pyg-neighbor", said.append)  # once with files, so every import is done

    def refused(*args, **kwargs):
        raise AssertionError(f"the plan touched a file: {args[:1]}")
    for module, name in ((builtins, "open"), (io, "open"), (os, "open"), (os, "scandir"), (os, "listdir"),
                         (os, "mkdir"), (os, "replace"), (os, "unlink")):
        monkeypatch.setattr(module, name, refused)
    made = plan.make(suite, options, "pyg-neighbor", said.append)
    monkeypatch.undo()
    assert made == expected
    assert made.selected and all(c.backend == "pyg-neighbor" for c in made.selected)
    assert made.baseline == suite.baseline and made.pairing.launches == 4 and "num_workers" in made.pairing.by


def test_a_plan_that_cannot_be_is_refused_before_anything_runs():
    suite, _ = suite_mod.load(REPO / "suites" / "smoke.yaml")
    with pytest.raises(plan.SessionError, match="selects none"):
        plan.make(suite, RunOptions(), "no-such-backend", print)
    with pytest.raises(plan.SessionError, match="need cells to pair"):
        plan.make(suite.model_copy(update={"paired": None}), RunOptions(paired_within=0.02), None, print)
