"""Property-based fuzzing (hypothesis) of what users hand gnnbench: generated suites and result
files either load or give the one clear error (SuiteError, ResultsError), never a traceback;
generated journals are either resumed or refused with SessionError. Derandomized under CI=true,
so a CI run is repeatable; 200 examples a property."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings, strategies as st

from bench.publish import results
from bench.run import suite as suite_mod
from bench.run.session import Journal, SessionError
from tests.conftest import REPO

FUZZ = settings(max_examples=200, deadline=None, derandomize=bool(os.environ.get("CI")),
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

KEYS = ["name", "description", "baseline", "datasets", "backends", "settings", "include", "exclude", "requires",
        "source", "params", "scale", "seed", "num_workers", "mode", "world_size", "fanout", "epochs", "batch_size",
        "amp", "pin_memory", "gpu_cache", "store", "backend", "dataset", "lr", "stack", "colour"]
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-10, 10**6), st.floats(allow_nan=True, allow_infinity=True),
                    st.sampled_from(["cpu-cpu", "pinned-cuda", "per-gpu", "synthetic", "pyg-neighbor", "4", "off",
                                     "planetoid:Cora", "synthetic:scale=8", "own", "gpu", ""]),
                    st.text(max_size=12))
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(st.sampled_from(KEYS), inner, max_size=5)),
                      max_leaves=25)
BASE = {"name": "fuzz", "datasets": {"g": {"source": "synthetic", "params": {"scale": 6}}},
        "backends": ["pyg-neighbor", "dgl-graphbolt"], "settings": {"num_workers": [0, 2], "epochs": 2}}


def _suite_text(changes: dict) -> str:
    doc = copy.deepcopy(BASE)
    for path, value in changes.items():
        target = doc
        *parents, last = path
        for key in parents:
            if not isinstance(target.get(key), dict):
                target[key] = {}
            target = target[key]
        target[last] = value
    return yaml.safe_dump(doc, allow_unicode=True)


PATHS = st.lists(st.sampled_from(KEYS), min_size=1, max_size=3).map(tuple)


@FUZZ
@given(changes=st.dictionaries(PATHS, VALUES, max_size=4))
def test_generated_suites_load_or_give_one_clear_error(tmp_path_factory, changes):
    path = tmp_path_factory.mktemp("suite") / "fuzz.yaml"
    path.write_text(_suite_text(changes))
    try:
        suite, _ = suite_mod.load(path)
    except suite_mod.SuiteError as exc:
        assert str(path) in str(exc)
        return
    suite_mod.expand(suite)  # a suite that loads expands


@FUZZ
@given(text=st.text(alphabet=st.sampled_from(list("{}[]:,-&*!|>'\"#%@` \n\tab01") + ["\x00", "\x1b"]), max_size=80))
def test_generated_yaml_text_never_gives_a_traceback(tmp_path_factory, text):
    path = tmp_path_factory.mktemp("suite") / "raw.yaml"
    path.write_text(text)
    try:
        suite_mod.load(path)
    except suite_mod.SuiteError:
        pass


def _committed_result() -> dict:
    source = sorted((REPO / "results" / "smoke-cpu").glob("*.json"))[-1]
    return json.loads(source.read_text())


RESULT = _committed_result()


def _paths(doc, prefix=()):
    """Every key path in a result document (lists by index), to choose one to break."""
    out = [prefix] if prefix else []
    if isinstance(doc, dict):
        for key, value in doc.items():
            out += _paths(value, prefix + (key,))
    elif isinstance(doc, list):
        for i, value in enumerate(doc[:3]):
            out += _paths(value, prefix + (i,))
    return out


RESULT_PATHS = _paths(RESULT)


@FUZZ
@given(breaks=st.lists(st.tuples(st.sampled_from(RESULT_PATHS), VALUES), min_size=1, max_size=3),
       delete=st.booleans())
def test_generated_result_files_are_read_or_refused_clearly(tmp_path_factory, breaks, delete):
    doc = copy.deepcopy(RESULT)
    for path, value in breaks:
        target = doc
        try:
            for key in path[:-1]:
                target = target[key]
            if delete and isinstance(target, dict):
                target.pop(path[-1], None)
            else:
                target[path[-1]] = value
        except (KeyError, IndexError, TypeError):
            continue  # an earlier break changed the shape under this path
    file = tmp_path_factory.mktemp("result") / "fuzz.json"
    file.write_text(json.dumps(doc))
    try:
        results.read(file)
    except results.ResultsError as exc:
        assert str(file) in str(exc)


def _cells():
    suite, _ = suite_mod.load(REPO / "suites" / "smoke.yaml")
    return suite_mod.expand(suite)


CELLS = _cells()
GOOD_LINES = [json.dumps({"suite": "smoke", "id": c.id, "status": "skipped", "reason": "r",
                          "entry": {"id": c.id, "status": "skipped"}, "cell_digest": c.digest}) for c in CELLS]
LINES = st.one_of(st.sampled_from(GOOD_LINES), st.text(max_size=40),
                  st.builds(lambda d: json.dumps(d), st.dictionaries(st.sampled_from(["suite", "id", "status", "entry",
                                                                                      "cell_digest", "reason"]),
                                                                     SCALARS | st.just({}), max_size=6)))


@FUZZ
@given(lines=st.lists(LINES, max_size=8))
def test_generated_journals_resume_or_are_refused(tmp_path_factory, lines):
    path = tmp_path_factory.mktemp("journal") / "smoke-x.cells.jsonl"
    path.write_text("\n".join(lines) + ("\n" if lines else ""))
    journal = Journal(path, "smoke")
    try:
        kept = journal.read(CELLS, say=lambda *_: None)
    except SessionError as exc:
        assert str(path) in str(exc)
        return
    good = {json.loads(line)["id"] for line in lines if line in GOOD_LINES}
    assert set(kept) <= {c.id for c in CELLS}
    assert set(kept) <= good  # only well-formed lines of this suite, with this configuration, are kept


DATES = st.one_of(st.none(), st.datetimes().map(lambda d: d.isoformat()), st.dates().map(str), st.text(max_size=20),
                  st.integers(), st.sampled_from(["2026-13-45T00:00:00", "yesterday", "2026-11-27 18:30", ""]))


@settings(max_examples=100, deadline=None, derandomize=bool(os.environ.get("CI")),
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(files=st.lists(st.tuples(DATES, DATES, st.sampled_from(RESULT_PATHS), VALUES, st.booleans()),
                      min_size=1, max_size=3),
       copies=st.integers(0, 2))
def test_the_history_reader_gives_a_history_or_one_clear_error(tmp_path_factory, capsys, files, copies):
    """`gnnbench history` over generated result files (dates that are dates or not, a broken key,
    copies of one file under other names): exit 0 with every run counted once, or exit 2 with one
    line naming the file; never a traceback (exit 70)."""
    from bench import cli

    folder = tmp_path_factory.mktemp("history")
    written = []
    for i, (when, started, path, value, broken) in enumerate(files):
        doc = copy.deepcopy(RESULT)
        doc["datetime"], doc["gnnbench"]["started_at"] = when, started
        if broken:
            target = doc
            try:
                for key in path[:-1]:
                    target = target[key]
                target[path[-1]] = value
            except (KeyError, IndexError, TypeError):
                pass
        written.append(folder / f"run-{i}.json")
        written[-1].write_text(json.dumps(doc))
    for n in range(copies):  # one result under other names: counted once, and said
        (folder / f"copy-{n}.json").write_bytes(written[0].read_bytes())
    capsys.readouterr()
    code = cli.main(["history", str(folder)])
    out, err = capsys.readouterr()
    assert code in (0, 2), err
    if code == 2:
        assert err.startswith("gnnbench: error: ") and str(folder) in err and "Traceback" not in err
    elif copies:
        # each file that holds a result already read is said once: the copies, and generated files
        # that came out the same
        said = [line for line in out.splitlines() if line.startswith("counted once: ")]
        contents = [p.read_bytes() for p in folder.glob("*.json")]
        assert len(said) == len(contents) - len(set(contents)) >= copies, out
