"""The typed settings (bench/settings.py): one set of defaults on both sides of the interpreter
line, what a cell sends is what the worker rebuilds, an unknown key refused, and no setting read
by a string key outside the settings module."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench.run import suite as suite_mod
from bench.settings import DEFAULTS, NAMES, WHEN_SET, CellSettings, Recorded, SettingsError

BENCH = Path(__file__).resolve().parents[1] / "bench"


def test_the_suite_model_and_the_cell_settings_have_the_same_keys_order_and_defaults():
    host = suite_mod.Settings()
    assert list(suite_mod.Settings.model_fields) == [n for n in NAMES if n != "num_workers_rule"]
    assert {n: getattr(host, n) for n in suite_mod.Settings.model_fields} == {
        n: getattr(DEFAULTS, n) for n in suite_mod.Settings.model_fields}


def test_a_cell_sends_what_the_worker_rebuilds(write_suite):
    suite, _ = suite_mod.load(write_suite("""
name: mixed
datasets:
  g: {source: synthetic, params: {scale: 8}}
backends: [pyg-neighbor, pyg-link]
settings:
  target_acc: 0.5
  neg_ratio: [1, 3]
"""))
    cells = suite_mod.expand(suite)
    for cell in cells:
        sent = cell.settings.as_dict()
        assert CellSettings.from_dict(sent) == cell.settings
        assert sent["max_epochs"] == 4 and "heads" not in sent  # resolved; R-GAT's alone
    node = next(c for c in cells if c.backend == "pyg-neighbor")
    assert node.settings.neg_ratio is None and "neg_ratio" not in node.settings.as_dict()


def test_an_unknown_setting_is_refused_when_rebuilt():
    with pytest.raises(SettingsError, match="unknown setting 'fanuot'"):
        CellSettings.from_dict({**DEFAULTS.as_dict(), "fanuot": [5]})


def test_recorded_settings_read_by_attribute_with_none_where_an_older_file_has_none():
    old = Recorded({"mode": "cpu-cpu", "world_size": 2})
    assert (old.mode, old.world_size, old.profile, old.neg_ratio) == ("cpu-cpu", 2, None, None)
    assert dict(old) == {"mode": "cpu-cpu", "world_size": 2}  # tables iterate over what was recorded
    with pytest.raises(AttributeError, match="no setting 'modes'"):
        old.modes  # noqa: B018


def test_when_set_settings_are_settings():
    assert set(WHEN_SET) <= set(NAMES)


# a setting read by a literal key: settings["mode"], cell.settings.get("mode"), s["fanout"]
STRING_KEYED = re.compile(r"""\b(settings|s)(\[|\.get\()\s*["'](?P<key>\w+)["']""")


def test_no_setting_is_read_by_a_string_key_outside_the_settings_module():
    found = [f"{path.relative_to(BENCH.parent)}:{n}: {line.strip()}"
             for path in sorted(BENCH.rglob("*.py")) if path.name != "settings.py"
             for n, line in enumerate(path.read_text().splitlines(), 1)
             if (m := STRING_KEYED.search(line)) and m["key"] in NAMES]
    assert not found, "read these by attribute (bench/settings.py):\n" + "\n".join(found)


def refusal(write_suite, backend: str, rest: str) -> str:
    """The SuiteError a one-dataset suite of `backend` with `rest` (its settings and more) is refused with."""
    with pytest.raises(suite_mod.SuiteError) as info:
        suite_mod.load(write_suite(f"""
name: t
datasets:
  g: {{source: synthetic, params: {{scale: 8}}}}
backends: [{backend}]
{rest}"""))
    return str(info.value)


def test_a_setting_that_applies_to_no_cell_of_the_suite_is_named(write_suite):
    """Issue 63: same_layer_edges with no GraphBolt cell, a link setting with no link cell, would change nothing."""
    lines = refusal(write_suite, "pyg-neighbor", """settings: {same_layer_edges: false}
include:
  - {neg_ratio: 3}
""").splitlines()
    assert len(lines) == 2 and "settings.same_layer_edges: no cell of this suite has it (it applies to backends " \
        "dgl-graphbolt, dgl-graphbolt-hetero, dgl-graphbolt-link, with a model (not none))" in lines[1]
    assert "include.0.neg_ratio: no cell of this suite has it (it applies only in link cells)" in lines[0]


def test_one_bad_value_in_a_sweep_is_one_message(write_suite):
    message = refusal(write_suite, "dgl-graphbolt", "settings: {same_layer_edges: [true, 'false']}\n")
    assert message.count("\n") == 0 and "settings.same_layer_edges.1: Input should be a valid boolean (a quoted " \
        "value is a string: write true or false without quotes) (got 'false')" in message


def test_a_settings_declaration_says_where_it_applies_and_how_it_shows_in_a_cell_id(write_suite):
    """same_layer_edges (GraphBolt only, with a model: one declaration) and profile (`profile=off`)."""
    suite, _ = suite_mod.load(write_suite("""
name: t
datasets:
  g: {source: synthetic, params: {scale: 8}}
backends: [pyg-neighbor, dgl-graphbolt]
settings: {same_layer_edges: false, model: [sage, none], profile: false}
"""))
    ids = {c.id: c.settings.same_layer_edges for c in suite_mod.expand(suite)}
    assert ids == {"pyg-neighbor/g/mode=cpu-cpu/workers=0/ws=1/model=sage/profile=off": None,
                   "pyg-neighbor/g/mode=cpu-cpu/workers=0/ws=1/model=none/profile=off": None,
                   "dgl-graphbolt/g/mode=cpu-cpu/workers=0/ws=1/model=sage/same_layer_edges=false/profile=off": False,
                   "dgl-graphbolt/g/mode=cpu-cpu/workers=0/ws=1/model=none/profile=off": None}
