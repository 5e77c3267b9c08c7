"""Strict suites and inputs that must never be taken quietly: duplicate keys, booleans and quoted
numbers as numbers, unchecked exclude values, deep nesting, -k that selects nothing, results
written over files gnnbench did not make, and a resume after the suite was edited."""

from __future__ import annotations

import json

import pytest

from bench import cli
from bench.run import suite
from bench.run.plan import select_cells
from bench.run.session import Journal, SessionError
from tests.test_suite_validation import VALID, error_of


def test_duplicate_key_names_both_lines(write_suite):
    msg, path = error_of(write_suite, VALID + "settings: {epochs: 5}\n")
    assert str(path) in msg and "key 'settings' is given twice" in msg
    assert "line 7" in msg and "first on line 6" in msg


def test_duplicate_key_deep_inside(write_suite):
    msg, _ = error_of(write_suite, VALID.replace("epochs: 3", "epochs: 3, epochs: 4"))
    assert "key 'epochs' is given twice" in msg


@pytest.mark.parametrize("setting,value,why", [
    ("epochs", "true", "true and false are not numbers"),
    ("hidden", '"4"', "write the number without quotes"),
    ("lr", "true", "true and false are not numbers"),
    ("batch_size", '"256"', "write the number without quotes"),
])
def test_booleans_and_strings_are_not_numbers(write_suite, setting, value, why):
    msg, _ = error_of(write_suite, VALID.replace("epochs: 3", f"epochs: 3, {setting}: {value}")
                      if setting != "epochs" else VALID.replace("epochs: 3", f"epochs: {value}"))
    assert f"settings.{setting}" in msg and why in msg
    assert "valid list" not in msg  # the sweep's list form adds nothing to a scalar's error


def test_dataset_params_are_strict_too(write_suite):
    msg, _ = error_of(write_suite, VALID.replace("scale: 6", "scale: 6, seed: true"))
    assert "datasets.g.params.seed" in msg and "not numbers" in msg
    msg, _ = error_of(write_suite, VALID.replace("scale: 6", 'scale: "6"'))
    assert "datasets.g.params.scale" in msg and "without quotes" in msg


def test_an_int_still_serves_as_a_float(write_suite):
    s, _ = suite.load(write_suite(VALID.replace("epochs: 3", "epochs: 3, lr: 1, timeout: 60")))
    assert s.settings.lr == 1.0 and s.settings.timeout == 60.0


@pytest.mark.parametrize("rule,where", [
    ("{num_workers: two}", "exclude.0.num_workers"),
    ("{mode: cpu-cdua}", "exclude.0.mode"),
    ("{fanout: 4}", "exclude.0.fanout"),
    ("{fanout: []}", "exclude.0.fanout"),  # was an IndexError
    ("{epochs: true}", "exclude.0.epochs"),
])
def test_exclude_values_are_checked_like_settings(write_suite, rule, where):
    msg, _ = error_of(write_suite, VALID + f"exclude: [{rule}]\n")
    assert where in msg


def test_include_values_are_checked_strictly(write_suite):
    msg, _ = error_of(write_suite, VALID + 'include: [{batch_size: "32"}]\n')
    assert "include.0.batch_size" in msg and "without quotes" in msg


@pytest.mark.parametrize("depth", [40, 5000])
def test_deep_nesting_is_refused_with_a_clear_error(write_suite, depth):
    msg, _ = error_of(write_suite, VALID + "description: " + "[" * depth + "]" * depth + "\n")
    assert "nested" in msg and "at most 32" in msg


def test_k_selects_by_setting():
    s, _ = suite.load("scaling")
    cells = suite.expand(s)
    chosen = select_cells(cells, "workers=0 and ws=2 and dataset=cora")
    assert chosen and all("/workers=0/ws=2" in c.id and c.dataset == "cora" for c in chosen)
    # full setting names select too, also settings that are not in the id
    assert {c.id for c in select_cells(cells, "num_workers=0 and world_size=2 and batch_size=32")} == \
        {c.id for c in select_cells(cells, "workers=0 and ws=2 and batch=32")} != set()
    # exact, not a substring: ws=1 is not ws=16
    assert all(c.settings.world_size == 1 for c in select_cells(cells, "ws=1"))


def test_k_that_selects_nothing_is_an_error_listing_the_cells():
    s, _ = suite.load("smoke")
    with pytest.raises(SessionError) as info:
        select_cells(suite.expand(s), "NOMATCH")
    assert "selects none" in str(info.value) and "pyg-neighbor/rmat-s12/mode=cpu-cpu/workers=0/ws=1" in str(info.value)


def test_run_with_k_nomatch_exits_2_and_writes_nothing(tmp_path, capsys):
    code = cli.main(["run", "smoke", "-k", "NOMATCH", "--results", str(tmp_path / "r"), "--no-install"])
    assert code == cli.EXIT_BAD_INPUT
    assert "selects none" in capsys.readouterr().err
    assert not (tmp_path / "r").exists() or not any((tmp_path / "r").iterdir())


def _result_file(tmp_path):
    """A real committed result file, copied."""
    from bench.paths import repo_root

    source = sorted((repo_root() / "results" / "smoke-cpu").glob("*.json"))[-1]
    target = tmp_path / source.name
    target.write_bytes(source.read_bytes())
    return target


def test_report_refuses_to_write_over_its_input(tmp_path, capsys):
    result = _result_file(tmp_path)
    before = result.read_bytes()
    assert cli.main(["report", str(result), "--markdown", str(result)]) == cli.EXIT_BAD_INPUT
    assert "one of the result files being read" in capsys.readouterr().err
    assert result.read_bytes() == before
    other = tmp_path / "other.json"
    other.write_text("{}")
    assert cli.main(["report", str(result), "--markdown", str(other)]) == cli.EXIT_BAD_INPUT
    assert other.read_text() == "{}"
    assert cli.main(["report", str(result), "--markdown", str(other), "--force"]) == 0
    assert other.read_text().startswith("#") or "|" in other.read_text()


def test_report_refuses_the_same_file_twice(tmp_path, capsys):
    result = _result_file(tmp_path)
    assert cli.main(["report", str(result), str(tmp_path / "." / result.name)]) == cli.EXIT_BAD_INPUT
    assert "given twice" in capsys.readouterr().err


def test_recover_refuses_to_overwrite_an_existing_file(tmp_path, capsys):
    result = _result_file(tmp_path)
    journal = result.with_name(result.name.removesuffix(".json") + ".cells.jsonl")
    from bench.paths import repo_root
    journal.write_bytes((repo_root() / "results" / "smoke-cpu" / journal.name).read_bytes())
    victim = tmp_path / "victim.json"
    victim.write_text('{"keep": true}')
    assert cli.main(["recover", str(journal), "--out", str(victim)]) == cli.EXIT_BAD_INPUT
    assert "already there" in capsys.readouterr().err and victim.read_text() == '{"keep": true}'
    assert cli.main(["recover", str(journal), "--out", str(victim), "--force"]) == 0
    assert json.loads(victim.read_text())["benchmarks"]


def test_journal_status_outside_the_known_set_is_named(tmp_path):
    from bench.run.session import read_journal

    path = tmp_path / "x.cells.jsonl"
    path.write_text(json.dumps({"suite": "s", "id": "a", "status": "exploded", "entry": {}}) + "\n"
                    + json.dumps({"suite": "s", "id": "b", "status": "ok", "entry": {}}) + "\n")
    with pytest.raises(SessionError) as info:
        read_journal(path)
    assert ":1: status 'exploded' is not one gnnbench writes" in str(info.value)


def test_resume_reruns_cells_whose_settings_changed(write_suite, tmp_path):
    """A journal written with batch 128 is resumed after the suite says 256: the edited cells are
    dropped from what is kept (they run again), so the result holds one configuration only."""
    from bench.run.session import Finished

    old_suite, _ = suite.load(write_suite(VALID))
    new_suite, _ = suite.load(write_suite(VALID.replace("epochs: 3", "epochs: 3, batch_size: 256"), "new.yaml"))
    old_cells, new_cells = suite.expand(old_suite), suite.expand(new_suite)
    assert [c.id for c in old_cells] == [c.id for c in new_cells]  # same ids, other settings
    journal = Journal(tmp_path / "t.cells.jsonl", "t")
    journal.claim(fresh=True)
    for cell in old_cells[:2]:
        journal.append(Finished(cell.id, "skipped", "test", {"name": cell.id}), cell)
    said = []
    assert journal.read(new_cells, say=said.append) == {}
    assert "2 finished cell(s) run again" in said[0]
    kept = journal.read(old_cells, say=said.append)
    assert set(kept) == {c.id for c in old_cells[:2]}


def test_control_characters_in_a_result_are_escaped_on_the_terminal(tmp_path, capsys):
    result = _result_file(tmp_path)
    doc = json.loads(result.read_text())
    doc["gnnbench"]["description"] = "evil \x1b[2J\x1b[31mred\x07 description"
    result.write_text(json.dumps(doc))
    assert cli.main(["report", str(result)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    assert "\\x1b[2J" in out or "description" not in out


def test_more_ranks_than_usable_cores_is_a_note(tmp_path, monkeypatch):
    from bench.run import executor, session as session_mod

    monkeypatch.setattr(executor, "usable_cores", lambda: 2)
    run = session_mod.Session(session_mod.RunOptions(suite="scaling", results=tmp_path / "r",
                                                     cache_dir=tmp_path / "c"))
    by_ws = {c.settings.world_size: c for c in run.cells if c.backend == "pyg-neighbor"}
    assert run.executor.cell_notes(by_ws[2]) == []
    [note] = run.executor.cell_notes(by_ws[4])
    assert "4 ranks on 2 usable core(s)" in note


def test_run_seed_option_reaches_the_session_and_a_bad_seed_exits_2(tmp_path, capsys):
    """`gnnbench run SUITE --seed N ...` runs every cell once per seed (what suites/link-seeds.yaml was)."""
    code = cli.main(["run", "link", "--seed", "1", "--seed", "2", "-k", "NOMATCH", "--results", str(tmp_path / "r"),
                     "--no-install"])
    assert code == cli.EXIT_BAD_INPUT
    err = capsys.readouterr().err
    per_seed = len(suite.expand(suite.load("link")[0]))
    assert f"selects none of the suite's {2 * per_seed} cells" in err and "/seed=1/" in err and "/seed=2/" in err
    assert cli.main(["run", "link", "--seed", "-1", "--results", str(tmp_path / "r"), "--no-install"]) == cli.EXIT_BAD_INPUT
    assert "--seed -1: seed" in capsys.readouterr().err
