"""Issue 63: what the last round added, held to the rest's standard: fidelity's outputs checked before
anything is measured and never written over without --force, an interrupted --clocks keeping its cells,
one check of GNNBENCH_PYG_WHEELS for `bundle` and `stacks install`, pairs read from result files
validated, pairings that pair nothing refused, refused conversions leaving nothing behind."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from bench import cli, paths, stacks
from bench.harness_costs import fidelity
from tests.conftest import tiny_pair_suite
from tests.test_pyg_wheels import wheel, write_stack

TINY = tiny_pair_suite("tiny-r63", "  - {model: none, num_workers: 0}\n")


@pytest.fixture
def tiny(tmp_path) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(TINY)
    return path


def never(*args, **kwargs):
    pytest.fail("measured before its output paths were checked")


# --- 1. fidelity's outputs --------------------------------------------------------------------

@pytest.mark.parametrize("clocks", [[], ["--clocks"]])
@pytest.mark.parametrize("there", ["json", "md"])
def test_fidelity_refuses_to_write_over_a_result_file_before_measuring(tiny, tmp_path, monkeypatch, capsys, clocks,
                                                                     there):
    monkeypatch.setattr(fidelity, "compare", never)
    monkeypatch.setattr(fidelity, "measure_clocks", never)
    out = tmp_path / "mine.json"
    kept = out.with_suffix(".md") if there == "md" else out
    kept.write_text("someone's own numbers")
    assert cli.main(["fidelity", str(tiny), *clocks, "--out", str(out)]) == cli.EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert f"--out {out}: {kept} is already there; give another file, or --force to replace it" in err
    assert kept.read_text() == "someone's own numbers"


@pytest.mark.parametrize("clocks", [[], ["--clocks"]])
def test_fidelity_checks_its_output_folder_and_suffix_before_measuring(tiny, tmp_path, monkeypatch, capsys, clocks):
    monkeypatch.setattr(fidelity, "compare", never)
    monkeypatch.setattr(fidelity, "measure_clocks", never)
    out = tmp_path / "no-such-folder" / "fid.json"
    assert cli.main(["fidelity", str(tiny), *clocks, "--out", str(out)]) == cli.EXIT_BAD_INPUT
    assert f"the folder {out.parent} does not exist" in capsys.readouterr().err
    assert cli.main(["fidelity", str(tiny), *clocks, "--out", str(tmp_path / "fid.md")]) == cli.EXIT_BAD_INPUT
    assert "give a .json file" in capsys.readouterr().err


def test_fidelity_force_replaces_both_files(tiny, tmp_path, monkeypatch):
    def one_pair(cells, *args, found, **kwargs):
        done = fidelity.Comparison(cells[0].id, [], [], [])
        done.add("harness", [1.0], [1.0])
        done.add("plain", [1.0], [1.0])
        found.append(done)

    monkeypatch.setattr(fidelity, "compare", one_pair)
    out = tmp_path / "fid.json"
    out.write_text("old")
    out.with_suffix(".md").write_text("old")
    assert cli.main(["fidelity", str(tiny), "--out", str(out), "--force"]) == 0
    assert json.loads(out.read_text())["cells"][0]["ratio"] == 1.0
    assert "| cell |" in out.with_suffix(".md").read_text()


@pytest.mark.parametrize("flag", ["--rounds", "--max-rounds"])
@pytest.mark.parametrize("clocks", [[], ["--clocks"]])
def test_fidelity_rounds_are_bounded(tiny, monkeypatch, capsys, flag, clocks):
    if clocks and flag == "--max-rounds":
        return  # --clocks refuses --max-rounds by itself (tests/test_overhead.py)
    monkeypatch.setattr(fidelity, "compare", never)
    monkeypatch.setattr(fidelity, "measure_clocks", never)
    assert cli.main(["fidelity", str(tiny), *clocks, flag, "1000000000"]) == cli.EXIT_BAD_INPUT
    assert f"{flag} 1000000000: give at least 1 and at most 1000" in capsys.readouterr().err


def test_an_interrupted_clocks_run_keeps_the_cells_it_finished(tiny, tmp_path, monkeypatch, capsys):
    """Ctrl-C in the second cell of `fidelity --clocks`: the first cell's pairs are written, the rest
    named as not run, exit 130 (the cells' epochs are planted: what is tested is what the command keeps)."""
    from bench.run import suite as suite_mod

    chosen = suite_mod.expand(suite_mod.load(tiny)[0])
    assert len(chosen) >= 2

    def interrupted_after_one(cells, cache, data_root, epochs, found):
        found.append(fidelity.Overhead(cells[0].id, [1.01, 1.0, 1.02], [1.0, 1.0, 1.0]))
        raise KeyboardInterrupt

    monkeypatch.setattr(fidelity, "measure_clocks", interrupted_after_one)
    out = tmp_path / "clocks.json"
    assert cli.main(["fidelity", str(tiny), "--clocks", "--out", str(out)]) == cli.EXIT_INTERRUPTED
    doc = json.loads(out.read_text())
    assert [c["cell_id"] for c in doc["cells"]] == [chosen[0].id]
    assert doc["not_run"] == {"reason": "interrupted", "cells": [c.id for c in chosen[1:]]}
    assert out.with_suffix(".md").read_text().count("Interrupted: not run:") == 1
    assert f"1 of {len(chosen)} cells; interrupted before" in capsys.readouterr().err


# --- 1. one check of GNNBENCH_PYG_WHEELS ------------------------------------------------------

PY = stacks.THIS_PYTHON
CP = "cp3" + PY.split(".")[1]


@pytest.mark.parametrize("name, torch, fits", [
    ("pyg_lib-0.9.0-py3-none-any.whl", "2.13.0", True),
    (f"pyg_lib-0.9.0+pt213cpu-{CP}-{CP}-linux_x86_64.whl", "2.13.0", True),
    (f"pyg_lib-0.9.0+pt213cpu-{CP}-{CP}-manylinux_2_28_x86_64.whl", "2.13.0", True),
    (f"pyg_lib-0.9.0+pt213cpu-cp39-abi3-linux_x86_64.whl", "2.13.0", True),
    (f"pyg_lib-0.9.0+pt25cpu-{CP}-{CP}-linux_x86_64.whl", "2.13.0", False),  # another torch
    (f"pyg_lib-0.9.0+pt213cu130-{CP}-{CP}-linux_x86_64.whl", "2.13.0", False),  # another build of it
    ("pyg_lib-0.9.0+pt213cpu-cp38-cp38-linux_x86_64.whl", "2.13.0", False),  # another Python
    (f"pyg_lib-0.9.0+pt213cpu-{CP}-{CP}-linux_aarch64.whl", "2.13.0", False),  # another machine
    ("pyg_lib-garbage.whl", "2.13.0", False),
    ("torch_scatter-2.1.2-py3-none-any.whl", "2.13.0", False),
])
def test_a_wheels_name_says_whether_it_could_install(name, torch, fits):
    assert stacks.wheel_fits(name, torch, "cpu", PY, "x86_64") is fits


@pytest.mark.parametrize("what, why", [
    ("file", "is a file, not a folder of wheels"), ("missing", "does not exist"),
    ("junk", "holds no pyg-lib wheel (pyg_lib-*.whl)"), ("other-torch", "none of its pyg-lib wheels"),
])
def test_bundle_and_stacks_install_refuse_a_wheel_folder_that_cannot_serve(tmp_path, monkeypatch, capsys, what, why):
    """The one check: bundle refuses it before writing anything (exit 2), and `stacks install` of a
    stack that fell back neither deletes nor rebuilds it on its word."""
    wheels = tmp_path / "wheels"
    if what == "file":
        wheels.write_text("not a folder")
    elif what == "junk":
        wheels.mkdir()
        for junk in ("junk.whl", "pyg_lib.whl.txt", "torch_scatter-2.1.2-py3-none-any.whl"):
            (wheels / junk).write_text("")
    elif what == "other-torch":
        wheels.mkdir()
        (wheels / f"pyg_lib-0.9.0+pt25cpu-{CP}-{CP}-linux_x86_64.whl").write_text("")  # the pins' torch is not 2.5
    monkeypatch.setenv(paths.PYG_WHEELS_ENV, str(wheels))
    out = tmp_path / "bundle"
    code = cli.main(["bundle", str(out), "--python", PY, "--platform", "x86_64", "--torch", "2.13.0", "--cuda", "cpu"])
    err = capsys.readouterr().err
    assert code == cli.EXIT_BAD_INPUT and f"{paths.PYG_WHEELS_ENV}={wheels}: {wheels}" in err and why in err, err
    assert not out.exists()  # nothing written, nothing downloaded
    monkeypatch.setenv("GNNBENCH_STACKS_DIR", str(tmp_path / "stacks"))
    stack = stacks.get("pyg")
    url = "http://127.0.0.1:9/whl/torch-2.13.0+cpu.html"
    write_stack(stack.path, {"source": stacks.FALLBACK, "index": url, "torch_build": "2.13.0+cpu",
                             "reason": f"{url} cannot be reached: refused", "fallback": stack.fallback_lines()})
    assert stacks.index_answers_now(stack) is None  # no rebuild on a guess: the stack is kept
    stack.python.parent.mkdir(parents=True)
    stack.python.write_text("")
    said: list[str] = []
    stacks.install("pyg", log=said.append)
    assert stack.installed and any("up to date" in line for line in said), said
    with pytest.raises(stacks.StackError, match=re.escape(why)):  # --force: refused before the stack is removed
        stacks.install("pyg", log=said.append, force=True)
    assert stack.installed


def test_a_folder_with_a_wheel_for_the_stacks_torch_answers_now(tmp_path, monkeypatch):
    wheels = tmp_path / "wheels"
    wheel(wheels)
    (wheels / "junk.whl").write_text("")  # beside a real one, junk does no harm
    monkeypatch.setenv(paths.PYG_WHEELS_ENV, str(wheels))
    assert stacks.wheels_problem(str(wheels), "2.13.0", "cpu") is None
    stacks.check_wheels("2.13.0", "cpu")
