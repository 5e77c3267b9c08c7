"""Issue 63: what the last round added, held to the rest's standard: fidelity's outputs checked before
anything is measured and never written over without --force, an interrupted --clocks keeping its cells,
one check of GNNBENCH_PYG_WHEELS for `bundle` and `stacks install`, pairs read from result files
validated, YAML bounded by size, pairings that pair nothing refused, refused conversions leaving
nothing behind, the plain loops tied to their parent, the link leak check in no measured epoch,
cuGraph-PyG's failed set-up left cleanly, committed commands without machine paths."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from hypothesis import event, given, strategies as st

from bench import cli, paired_ratio, paths, stacks
from bench.harness_costs import fidelity
from bench.publish import results
from tests import synthetic_results as sr
from tests.conftest import tiny_pair_suite
from tests.test_fuzz_inputs import FUZZ
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
    assert stacks.reachable(str(wheels), "2.13.0", "cpu") is None
    stacks.check_wheels("2.13.0", "cpu")


# --- 2. pairs read from result files ------------------------------------------------------------

A, B = sr.cell_id(workers=0), sr.cell_id(workers=2)


def pair(**changes) -> dict:
    """A pair as bench/run/paired.py PairResult.as_dict writes it: B over A, settled inside."""
    return {"axis": "num_workers", "first": A, "second": B, "paired": True, "within": 0.03, "rounds": 10,
            "ratio": 0.994, "ci95": [0.985, 1.004], "settled": "inside", "reason": None,
            "first_waiting_cpu": 0.01, "second_waiting_cpu": 0.02} | changes


def with_pairs(*pairs: dict, meta: bool = True) -> dict:
    data = sr.run([sr.bench(A, [1.0] * 5, pairs=list(pairs)), sr.bench(B, [1.0] * 5, pairs=list(pairs))])
    if meta:
        data["gnnbench"]["pairs"] = list(pairs)
    return data


def refusal(tmp_path, data: dict) -> str:
    with pytest.raises(results.ResultsError) as error:
        sr.write(tmp_path, "run.json", data)
    return str(error.value)


def test_a_pair_as_written_is_read(tmp_path):
    read = sr.write(tmp_path, "run.json", with_pairs(pair(launches=3, reading="same", later_key={"any": 1})))
    assert read.pairs[0]["ratio"] == 0.994 and read.pair(B, A)["ratio"] == pytest.approx(1 / 0.994)


@pytest.mark.parametrize("changes, why", [
    ({"ci95": [1.2, 0.8], "ratio": 0.994, "settled": None}, "ci95 1.200-0.800 is reversed; allowed: low, then high"),
    ({"ratio": 2.0, "ci95": [0.5, 0.6], "settled": "outside"}, "ratio 2.000 lies outside its 95 % interval 0.500-0.600"),
    ({"ratio": 2.0, "ci95": [1.9, 2.1], "settled": "inside"},
     "settled 'inside', but its interval 1.900-2.100 lies wholly outside the band ±3%"),
    ({"ratio": 1.02, "ci95": [1.0, 1.05], "settled": "outside"},
     "settled 'outside', but its interval 1.000-1.050 lies across an edge of the band ±3%"),
    ({"ci95": None, "settled": "inside"}, "settled 'inside' without an interval; allowed: none"),
    ({"ci95": [0.98, 0.99, 1.0]}, "ci95 holds 3 value(s); allowed: two, low and high, or none"),
    ({"ci95": [0.99]}, "ci95 holds 1 value(s); allowed: two"),
    ({"first": "pyg-neighbor/elsewhere"}, "first pyg-neighbor/elsewhere is no cell of this file"),
    ({"second": A + "/runner=off"}, "second " + A + "/runner=off is no cell of this file"),
    ({"within": 0}, "within: Input should be greater than 0"),
    ({"within": 1.5}, "within: Input should be less than 1"),
    ({"ratio": float("inf")}, "ratio: "),
    ({"ci95": [0.0, 1.0]}, "ci95[0]: Input should be greater than 0"),
    ({"settled": "same"}, "settled: 'same' is not allowed"),
    ({"launches": -1}, "launches: Input should be greater than or equal to 0"),
    ({"reading": "much slower"}, "reading: 'much slower' is not allowed"),
])
def test_a_pair_whose_figures_disagree_is_refused_naming_it(tmp_path, changes, why):
    for meta in (True, False):  # in the file's meta, and in its cells' entries alone
        message = refusal(tmp_path, with_pairs(pair(**changes), meta=meta))
        assert why in message and message.startswith(str(tmp_path / "run.json")), message
        assert ".pairs[0]" in message and len(message) < 4000


def test_the_runner_axis_names_a_cells_unwatched_twin(tmp_path):
    sr.write(tmp_path, "run.json", with_pairs(pair(axis="runner", first=f"{B}/runner=off", second=B)))


def test_a_file_of_too_many_pairs_is_refused_at_once_in_one_line(tmp_path):
    from bench.result_format import MAX_PAIRS

    message = refusal(tmp_path, with_pairs(*[pair()] * 20_000))
    assert len(message) < 2000 and len(message.splitlines()) == 3, message  # the meta's list, each entry's
    assert f"gnnbench.pairs: List should have at most {MAX_PAIRS} items after validation, not 20000" in message


@pytest.mark.parametrize("command", [["report"], ["report", "--html", "{site}"], ["history", "--html", "{site}"]])
def test_a_one_value_interval_is_bad_input_for_every_reader_not_a_crash(tmp_path, capsys, command):
    path = tmp_path / "run.json"
    path.write_text(json.dumps(with_pairs(pair(ci95=[0.99]))))
    site = tmp_path / "site"
    code = cli.main([command[0], str(path), *[a.format(site=site) for a in command[1:]]])
    err = capsys.readouterr().err
    assert code == cli.EXIT_BAD_INPUT and "ci95 holds 1 value(s)" in err and "IndexError" not in err, err
    assert not site.exists() or not any(site.rglob("*.html"))  # no half-made site


FLOATS = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.floats(0.5, 2.0), st.sampled_from([0.0, 1.0, -1.0]))
PAIRS = st.fixed_dictionaries(
    {"axis": st.sampled_from(["num_workers", "runner", "backend"]), "first": st.sampled_from([A, B, "x", f"{A}/runner=off"]),
     "second": st.sampled_from([A, B, "x"]), "paired": st.booleans()},
    optional={"within": st.one_of(FLOATS, st.sampled_from([0.01, 0.03])), "rounds": st.integers(-1, 20),
              "ratio": st.one_of(st.none(), FLOATS), "ci95": st.one_of(st.none(), st.lists(FLOATS, max_size=3)),
              "settled": st.sampled_from(["inside", "outside", None, "same"]), "reason": st.one_of(st.none(), st.text(max_size=5)),
              "launches": st.one_of(st.none(), st.integers(-2, 5), st.just(1.5)),
              "reading": st.sampled_from([None, "same", "slower", "leans faster", "much"]), "extra": st.integers()})


@FUZZ
@given(st.lists(PAIRS, max_size=3))
def test_generated_pairs_are_read_and_consistent_or_refused_clearly(tmp_path_factory, pairs):
    """Any pairs in a file: read, and then every pair holds every check (tested here again from scratch)
    and reads as a report row; or refused with the one clear error naming the file. Never a traceback."""
    folder = tmp_path_factory.mktemp("pairs")
    try:
        read = sr.write(folder, "run.json", with_pairs(*pairs))
    except results.ResultsError as exc:
        event("refused")
        assert str(exc).startswith(str(folder / "run.json") + ": ") and len(str(exc).splitlines()) <= 11
        return
    event("read")
    from bench.publish import report

    for p in read.pairs:
        ci, ratio, within = p.get("ci95"), p.get("ratio"), p.get("within", 0.03)
        assert 0 < within < 1 and (ratio is None or 0 < ratio < float("inf"))
        assert ci is None or (len(ci) == 2 and 0 < ci[0] <= ci[1] < float("inf"))
        assert not (ci and ratio) or ci[0] * (1 - 1e-9) <= ratio <= ci[1] * (1 + 1e-9)
        if p.get("settled") == "outside":
            assert paired_ratio.band_state(ci, within) == "outside"
        if p.get("settled") == "inside":
            assert ci[0] >= 1 - within - 1e-12 and ci[1] <= 1 + within + 1e-12
        assert p["first"] in (A, B) or (p["axis"] == "runner" and p["first"] == f"{A}/runner=off")
        assert p["second"] in (A, B)
        assert p.get("reading") in (None, "same", "slower", "leans faster")
    report.pair_rows(read)


# --- 2. YAML size-bounded before it is parsed, each refusal with its own reason -----------------

def test_a_large_suite_is_refused_for_its_size_before_it_is_parsed(tmp_path):
    from bench import strict_yaml
    from bench.run import suite as suite_mod

    path = tmp_path / "big.yaml"
    path.write_text("name: big\ndescription: " + "x" * (strict_yaml.MAX_BYTES + 1) + "\n")  # no alias anywhere
    with pytest.raises(suite_mod.SuiteError) as error:
        suite_mod.load(path)
    assert str(error.value) == f"{path}: {path.stat().st_size:,} bytes; allowed: at most {strict_yaml.MAX_BYTES:,}"
    huge = tmp_path / "huge.yaml"  # 100 GB on paper (sparse): refused after reading one limit's worth of it
    with open(huge, "wb") as file:
        file.truncate(100 * 2**30)
    with pytest.raises(suite_mod.SuiteError, match=r"huge.yaml: 107,374,182,400 bytes; allowed: at most"):
        suite_mod.load(huge)


def test_many_values_without_aliases_are_not_called_an_alias_bomb(tmp_path):
    from bench import strict_yaml

    with pytest.raises(strict_yaml.StrictYamlError) as error:
        strict_yaml.load_text("x: [" + "1," * strict_yaml.MAX_VALUES + "]\n", "many.yaml")
    assert str(error.value) == (f"many.yaml: holds {strict_yaml.MAX_VALUES + 3:,} values; allowed: at most "
                                f"{strict_yaml.MAX_VALUES:,} values, aliases expanded")
    bomb = "a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n" + "".join(
        f"{k}: &{k} [{', '.join(['*' + p] * 10)}]\n" for p, k in zip("abcde", "bcdef"))
    with pytest.raises(strict_yaml.StrictYamlError, match="an alias bomb"):
        strict_yaml.load_text(bomb, "bomb.yaml")


# --- 3. a pairing that pairs nothing --------------------------------------------------------------

@pytest.mark.parametrize("paired, select, extra, why", [
    (["mode"], None, "", "paired by mode: no two selected cells differ in mode alone: every selected cell has "
                         "mode 'cpu-cpu'"),
    (["backend"], "pyg-neighbor and model=none", "", "paired by backend: no two selected cells differ in backend "
                                                     "alone: only one cell is selected (pyg-neighbor/"),
    (None, None, "paired: {by: [timeout]}\n", "paired by timeout: no two selected cells differ in timeout alone: "
                                               "every selected cell has timeout 300"),
    (["lr"], None, "", "paired by lr: no two selected cells differ in lr alone: every selected cell has lr"),
    (["num_workers"], "model=none or batch=32", "  - {num_workers: 2, batch_size: 32}\n",
     "paired by num_workers: no two selected cells differ in num_workers alone: those with another num_workers "
     "(0, 2) differ in another setting too"),
])
def test_a_pairing_that_pairs_nothing_is_refused_before_anything_runs(tmp_path, paired, select, extra, why):
    from bench.run.session import RunOptions, Session, SessionError

    path = tmp_path / "tiny.yaml"
    text = TINY.replace("  - {model: none, num_workers: 0}\n", "  - {model: none, num_workers: 0}\n" + extra
                        if extra.startswith("  -") else "  - {model: none, num_workers: 0}\n")
    path.write_text(text + (extra if extra.startswith("paired") else ""))
    options = RunOptions(suite=str(path), paired=paired, results=tmp_path / "results")
    with pytest.raises(SessionError) as error:
        Session(options, say=lambda *a, **k: None, select=select)
    assert str(error.value).startswith(why), str(error.value)
    assert not (tmp_path / "results").exists()  # nothing made


def test_a_pairing_that_pairs_cells_is_taken(tmp_path):
    from bench.run.session import RunOptions, Session

    path = tmp_path / "tiny.yaml"
    path.write_text(TINY)
    session = Session(RunOptions(suite=str(path), paired=["backend"], results=tmp_path / "results"),
                      say=lambda *a, **k: None)
    assert session.pairing.by == ["backend"]


# --- 4. a refused conversion keeps nothing ----------------------------------------------------------

def test_a_refused_link_split_is_refused_again_on_the_second_try(tmp_path, capsys):
    """Training pairs that are all self-loops leave no training edge: `datasets check` refuses the
    folder (exit 2), and again on the second try: the first kept no converted graph to find."""
    import numpy as np

    folder, hub_dir = tmp_path / "g", tmp_path / "hub"
    folder.mkdir()
    ring = np.array([[i, (i + 1) % 10] for i in range(10)])
    arrays = {"edge_index": ring.T.copy(), "features": np.ones((10, 4), dtype=np.float32),
              "labels": np.array([0, 1] * 5), "train_idx": np.arange(6), "val_idx": np.array([6, 7]),
              "test_idx": np.array([8, 9]), "link_train": np.array([[1, 1], [2, 2]]), "link_val": ring[8:9],
              "link_test": ring[9:], "link_val_neg": np.array([[3, 4, 5]]), "link_test_neg": np.array([[5, 6, 7]])}
    for name, array in arrays.items():
        np.save(folder / f"{name}.npy", array)
    for _ in range(2):
        assert cli.main(["datasets", "check", f"npy:{folder}", "--cache-dir", str(hub_dir)]) == cli.EXIT_BAD_INPUT
        assert "link_train.npy: no training edge is left" in capsys.readouterr().err
        assert not [p for p in (hub_dir / "datasets").iterdir() if not p.name.startswith(".")]


# --- 5. the plain loops tied to their parent in every mode --------------------------------------------

LONG = """
name: long-plain
datasets:
  tiny: {source: synthetic, params: {scale: 9, edge_factor: 4, feature_dim: 8, num_classes: 3, seed: 1}}
backends: [dgl-graphbolt]
settings: {num_workers: 0, mode: cpu-cpu, batch_size: 64, fanout: [4, 2], epochs: 2000, warmup_epochs: 0,
           model: none, timeout: 600}
"""


def test_sigkill_of_fidelity_side_by_side_ends_its_plain_loops(tmp_path):
    """The side-by-side loops (minutes of epochs here) end with the gnnbench that started them, as
    a cell's processes do (tests/test_lifeline.py): Linux's parent-death signal, set in every mode."""
    import signal
    import subprocess
    import sys
    import time

    from tests.conftest import REPO, processes_with, require_stacks

    require_stacks("dgl")
    suite, hub = tmp_path / "long.yaml", tmp_path / "hub"
    suite.write_text(LONG)
    proc = subprocess.Popen([sys.executable, "-m", "bench.cli", "fidelity", str(suite), "--side-by-side", "--rounds",
                             "1", "--cache-dir", str(hub), "--out", str(tmp_path / "f.json")], cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def loops():
        return [p for p in processes_with("GNNBENCH_CACHE", str(hub)) if "bench.harness_costs.plain_loops" in
                " ".join(p.cmdline())]

    deadline = time.monotonic() + 240
    while not loops() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.5)
    time.sleep(3)  # into its epochs
    assert loops(), "the plain loops never started"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 20  # far less than the loops' own minutes
    while loops() and time.monotonic() < deadline:
        time.sleep(0.5)
    left = loops()
    for p in left:
        p.kill()
    assert left == [], [p.cmdline() for p in left]


# --- 8. the link leak check once per cell, never in a measured epoch ------------------------------------

LINK = """
name: tiny-link-epochs
datasets:
  tiny: {source: synthetic, params: {scale: 9, edge_factor: 8, feature_dim: 8, num_classes: 3, seed: 1}}
backends: [pyg-link, dgl-graphbolt-link]
settings: {num_workers: 0, mode: cpu-cpu, batch_size: 256, fanout: [4, 2], epochs: 2, warmup_epochs: WARMUP,
           exclusion: reverse, timeout: 300}
"""
# In the cell's stack: the leak checks a cell's worker, fidelity --clocks and --side-by-side make, counted
# by the real check (wrapped to count its calls), and how many of them an epoch made
COUNT_CHECKS = """
import json, sys
from pathlib import Path
from bench.backends import link
from bench.datasets import hub
from bench.backends import load_pipeline_class
from bench.harness_costs import plain_loops
from bench.settings import CellSettings
calls, inside = {"in_epoch": 0, "all": 0}, [False]
real_check, real_epoch = link.LinkPipeline.check_leak, plain_loops.run_epoch
def counted(self, *args):
    calls["all"] += 1
    calls["in_epoch"] += inside[0]
    return real_check(self, *args)
def epoch(*args, **kwargs):
    inside[0] = True
    try:
        return real_epoch(*args, **kwargs)
    finally:
        inside[0] = False
link.LinkPipeline.check_leak, plain_loops.run_epoch = counted, epoch
cell, folder = json.loads(sys.argv[1]), Path(sys.argv[2])
s = CellSettings.from_dict(cell["settings"])
data = hub.load_dataset("synthetic", folder, features_in_memory=True)
pipe = load_pipeline_class(cell["backend"])(data, s)
pipe.check_leaks_apart()  # as bench/run/worker.py run_epochs does, then its epochs
for n in range(s.warmup_epochs + s.epochs):
    pipe.epoch = n
    batches = epoch(pipe)["batches"]
found = {"worker": dict(calls, batches=batches, leaks=pipe.leaks)}
for name, run in (("clocks", lambda: plain_loops.clocks(cell, folder, 3)),
                  ("side_by_side", lambda: plain_loops.side_by_side(cell, data, s))):
    calls.update(in_epoch=0, all=0)
    run()
    found[name] = dict(calls)
print(json.dumps(found))
"""


def in_link_cells_stack(tmp_path, cache_dir, backend: str, warmup: int, script: str) -> dict:
    """`script` run in `backend`'s stack with the LINK suite's cell (warm-up `warmup`) and its split
    dataset folder as arguments; the JSON its last line prints."""
    from bench import stacks
    from bench.datasets import link_split
    from bench.run import suite as suite_mod
    from bench.run.prepare import ensure_dataset
    from bench.run.runner import worker_env
    from tests.conftest import require_stacks

    require_stacks("pyg" if backend == "pyg-link" else "dgl")
    path = tmp_path / "link.yaml"
    path.write_text(LINK.replace("WARMUP", str(warmup)))
    cell = next(c for c in suite_mod.expand(suite_mod.load(path)[0]) if c.backend == backend)
    folder = ensure_dataset(cell.dataset_spec, cache_dir, None)
    link_split.ensure(folder)
    proc = subprocess.run([str(stacks.get(cell.stack).python), "-c", script, cell.to_json(), str(folder)],
                          env=worker_env(cache_dir, backend), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("warmup", [0, 1])
@pytest.mark.parametrize("backend", ["pyg-link", "dgl-graphbolt-link"])
def test_the_leak_check_runs_once_per_pipeline_and_never_in_a_measured_epoch(tmp_path, cache_dir, backend, warmup):
    found = in_link_cells_stack(tmp_path, cache_dir, backend, warmup, COUNT_CHECKS)
    worker, batches = found["worker"], found["worker"]["batches"]
    assert worker["leaks"]["batches"] == batches > 0 and worker["leaks"]["leaked_edges"] == 0
    # each pipeline checks one epoch's batches: the worker's and side_by_side's one, --clocks' two; with
    # warm-up in the warm-up epoch, without it apart, before the epochs (so no measured epoch pays it)
    for name, pipelines in (("worker", 1), ("clocks", 2), ("side_by_side", 1)):
        assert found[name]["all"] == pipelines * batches, found
        assert found[name]["in_epoch"] == (found[name]["all"] if warmup else 0), found


HOP_EDGES = """
import json, sys
from pathlib import Path
from bench.datasets import hub
from bench.backends import load_pipeline_class
from bench.settings import CellSettings
cell, folder = json.loads(sys.argv[1]), Path(sys.argv[2])
data = hub.load_dataset("synthetic", folder, features_in_memory=True)
pipe = load_pipeline_class(cell["backend"])(data, CellSettings.from_dict(cell["settings"]))
found = []
for batch in pipe.train_loader:
    hops = batch._store.get("num_sampled_edges")
    found.append(None if hops is None else [sum(int(h) for h in hops), int(batch.edge_index.shape[1])])
print(json.dumps({"batches": found, "sampler": pipe.sampler}))
"""


def test_excluded_seed_edges_leave_the_hop_counts_true(tmp_path, cache_dir):
    """PyG's ExcludeSeedEdges takes edges out of the sampler's output: its per-hop edge counts (what
    the work counts read where pyg-lib reports them) are taken down with them, summing to the edges left."""
    found = in_link_cells_stack(tmp_path, cache_dir, "pyg-link", 0, HOP_EDGES)
    if any(b is None for b in found["batches"]):
        pytest.skip(f"this stack's sampler ({found['sampler']}) reports no per-hop counts: the work counts read "
                    "them off the batch")
    assert found["batches"] and all(total == edges for total, edges in found["batches"]), found


# --- 9. committed commands without the paths of the machines that ran them ----------------------------

def test_committed_commands_name_no_path_of_the_machine_that_ran_them():
    from tests.conftest import REPO

    pages = [REPO / "results" / "NOTES.md", *sorted((REPO / "results").glob("*/*.md"))]
    commands = [(page.name, span) for page in pages
                for span in re.findall(r"`((?:gnnbench|python -m bench)[^`]*)`", page.read_text())]
    assert len(commands) > 50
    found = [(name, span) for name, span in commands
             if re.search(r"--data-root \S|(?<![\w$])/(root|work|home)/", span)]
    assert found == [], found[:5]


# --- 7. cuGraph-PyG: a set-up that fails part way leaves what it entered (unverified on a GPU) ---------

def test_a_cugraph_pyg_set_up_that_fails_leaves_the_comms_and_the_group(tmp_path, monkeypatch):
    """Through the module's own seams as tests/test_cugraph_pyg.py's set-up order (cuGraph and
    WholeGraph recorded, as they cannot run here; torch.distributed real): the stores fail, and the
    failed __init__ still shuts the comms down and destroys its one-rank group (RMM is the process's
    allocator from before torch's first CUDA allocation: nothing to leave)."""
    from tests.test_cugraph_pyg import SETUP_ORDER
    from tests.test_gpu_suites import run_in

    planted = SETUP_ORDER.replace(
        'calls.append("stores") or ("features", "graph")', '(_ for _ in ()).throw(RuntimeError("planted: stores"))')
    planted = planted[:planted.index("    built = list(calls)")] + '''    except RuntimeError as exc:
        print(calls, repr(exc), dist.is_initialized(), sep="|")
'''
    planted = planted.replace("    pipe = cg.Pipeline(", "    try:\n        pipe = cg.Pipeline(")
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    calls, error, group_left = run_in("pyg", planted).split("|")
    assert calls == str(["process group", "cuGraph and WholeGraph set up", "comms shut down"])
    assert error == "RuntimeError('planted: stores')" and group_left == "False"


EXCLUDE_ONE = """
import torch
from torch_geometric.sampler import SamplerOutput
from bench.backends.pyg_link import ExcludeSeedEdges
# one positive seed edge 0 -> 1 (local ids), edges by hop: hop 1 (1, 0), (2, 0); hop 2 (3, 1), (0, 1)
out = SamplerOutput(node=torch.arange(4), row=torch.tensor([1, 2, 3, 0]), col=torch.tensor([0, 0, 1, 1]), edge=None,
                    num_sampled_edges=[2, 2], metadata=(torch.tensor([0]), torch.tensor([0]), torch.tensor([1])))
kept = ExcludeSeedEdges(lambda *args, **kwargs: out, 4, "triplet")()
print([list(map(int, kept.row)), list(map(int, kept.col)), [int(h) for h in kept.num_sampled_edges]])
"""


def test_exclude_seed_edges_takes_the_excluded_edges_out_of_their_hops():
    """PyG's SamplerOutput as a sampler returns it (a known one, so that the edges excluded are known):
    the seed edge and its reverse leave the edges and the per-hop counts of the hops they were in."""
    from tests.test_gpu_suites import run_in

    assert run_in("pyg", EXCLUDE_ONE) == str([[2, 3], [0, 1], [1, 1]])
