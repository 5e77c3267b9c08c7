"""Suite files: strict validation with errors that name the file, the key path and what is allowed."""

import pytest

from bench.run import suite

VALID = """
name: t
datasets:
  g: {source: synthetic, params: {scale: 6}}
backends: [pyg-neighbor, dgl-graphbolt]
settings: {num_workers: [0, 2], epochs: 3}
"""


def error_of(write_suite, text):
    path = write_suite(text)
    with pytest.raises(suite.SuiteError) as info:
        suite.load(path)
    return str(info.value), path


def test_valid_suite_loads(write_suite):
    s, path = suite.load(write_suite(VALID))
    assert s.name == "t" and path.name == "suite.yaml"


def test_unknown_settings_key_names_file_path_and_allowed_keys(write_suite):
    msg, path = error_of(write_suite, VALID.replace("epochs: 3", "epochz: 3"))
    assert str(path) in msg
    assert "settings.epochz: unknown key" in msg
    assert "num_workers" in msg and "batch_size" in msg and "fanout" in msg


def test_unknown_top_level_key(write_suite):
    msg, _ = error_of(write_suite, VALID + "colour: blue\n")
    assert "colour: unknown key" in msg and "datasets" in msg and "backends" in msg


def test_unknown_dataset_param_lists_the_params_of_that_source(write_suite):
    msg, _ = error_of(write_suite, VALID.replace("scale: 6", "scael: 6"))
    assert "datasets.g.params.scael: unknown key" in msg and "edge_factor" in msg


def test_bad_mode_names_allowed_modes(write_suite):
    msg, _ = error_of(write_suite, VALID.replace("epochs: 3", "epochs: 3, mode: gpu-gpu"))
    assert "settings.mode" in msg and "cpu-cpu" in msg and "pinned-cuda" in msg and "'gpu-gpu'" in msg


def test_negative_workers_rejected(write_suite):
    msg, _ = error_of(write_suite, VALID.replace("[0, 2]", "[0, -2]"))
    assert "settings.num_workers" in msg and "greater than or equal to 0" in msg


def test_unknown_backend(write_suite):
    msg, _ = error_of(write_suite, VALID.replace("dgl-graphbolt", "dgl-magic"))
    assert "backends" in msg and "dgl-magic" in msg and "pyg-neighbor" in msg


def test_unknown_source(write_suite):
    msg, _ = error_of(write_suite, VALID.replace("source: synthetic", "source: sql"))
    assert "datasets.g" in msg and "synthetic" in msg and "planetoid" in msg and "ogb" in msg


def test_params_of_another_source_list_that_sources_keys(write_suite):
    msg, _ = error_of(write_suite, VALID.replace("source: synthetic", "source: ogb"))
    assert "datasets.g.params.scale: unknown key; allowed keys here: name" in msg
    assert "datasets.g.params.name: required key is missing" in msg


def test_shorthand_names(write_suite):
    s, _ = suite.load(write_suite(VALID.replace("{source: synthetic, params: {scale: 6}}", "planetoid:Cora")))
    assert s.datasets["g"].source == "planetoid" and s.datasets["g"].params.name == "Cora"
    msg, _ = error_of(write_suite, VALID.replace("{source: synthetic, params: {scale: 6}}", "ogb:ogbn-nope"))
    assert "datasets.g.params.name" in msg and "ogbn-arxiv" in msg


def test_exclude_rule_with_unknown_dataset_and_key(write_suite):
    msg, _ = error_of(write_suite, VALID + "exclude:\n  - {dataset: nope, colour: red}\n")
    assert "exclude.0.dataset: unknown dataset 'nope'; allowed: g" in msg
    assert "exclude.0.colour: unknown key" in msg


def test_baseline_must_be_a_cell(write_suite):
    msg, _ = error_of(write_suite, VALID + "baseline: pyg-neighbor/g/mode=cpu-cpu/workers=9/ws=1\n")
    assert "baseline" in msg and "not a cell id" in msg


def test_not_yaml_and_not_a_mapping(write_suite):
    msg, _ = error_of(write_suite, "name: [unclosed\n")
    assert "not valid YAML" in msg
    msg, _ = error_of(write_suite, "- just\n- a list\n")
    assert "a suite is a mapping" in msg


def test_missing_suite_names_known_suites():
    with pytest.raises(suite.SuiteError) as info:
        suite.load("no-such-suite")
    assert "no-such-suite" in str(info.value) and "smoke" in str(info.value)


def test_every_shipped_suite_is_valid():
    from bench.paths import suites_dir

    for path in suites_dir().glob("*.yaml"):
        s, _ = suite.load(path)
        assert suite.expand(s), path


def test_ten_suites_and_the_merged_ones_select_by_task_and_seed():
    """Issue 50: at most ten suite files that ask users' questions (and calibration.yaml, which checks the
    verdicts' method: gnnbench calibrate); the fidelity suite's tasks are selected with -k task=NAME,
    and several seeds are an option (`--seed`), not a suite of their own."""
    from bench.paths import suites_dir
    from bench.run.plan import select_cells

    assert len([p for p in suites_dir().glob("*.yaml") if p.name != "calibration.yaml"]) <= 10
    cells = suite.expand(suite.load("fidelity")[0])
    by_task = {t: select_cells(cells, f"task={t}") for t in ("node", "link", "typed-node")}
    assert sum(map(len, by_task.values())) == len(cells)
    assert {c.backend for c in by_task["link"]} == {"pyg-link", "dgl-graphbolt-link"}
    assert {c.backend for c in by_task["typed-node"]} == {"pyg-hetero", "dgl-graphbolt-hetero"}
    # the clocks' pairs: each node cell of one thread and no workers with the clocks on and off
    clocks = select_cells(cells, "task=node and threads=1 and workers=0 and model=sage")
    assert sorted(c.settings.profile for c in clocks) == [False] * 4 + [True] * 4

    link = suite.load("link")[0]
    seeded = suite.expand(suite.with_seeds(link, [0, 3]))
    assert len(seeded) == 2 * len(suite.expand(link)) and {c.settings.seed for c in seeded} == {0, 3}
    assert all("/seed=" in c.id for c in seeded)
    with pytest.raises(suite.SuiteError, match=r"--seed -1: seed"):
        suite.with_seeds(link, [-1])
