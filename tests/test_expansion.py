"""Matrix expansion: sweeps, per-backend modes, include/exclude, readable unique ids."""

from bench.run import suite


def cells_of(write_suite, text):
    s, _ = suite.load(write_suite(text))
    return suite.expand(s)


BASE = """
name: t
datasets:
  a: {source: synthetic, params: {scale: 6}}
  b: {source: synthetic, params: {scale: 7}}
backends: [pyg-neighbor, dgl-graphbolt]
"""


def test_full_product_with_readable_ids(write_suite):
    cells = cells_of(write_suite, BASE + "settings: {num_workers: [0, 2]}\n")
    assert len(cells) == 2 * 2 * 2
    ids = [c.id for c in cells]
    assert len(set(ids)) == len(ids)
    assert "dgl-graphbolt/b/mode=cpu-cpu/workers=2/ws=1" in ids
    assert {c.stack for c in cells} == {"pyg", "dgl"}


def test_modes_a_backend_lacks_are_not_cells(write_suite):
    cells = cells_of(write_suite, BASE + "settings: {mode: [cpu-cpu, pinned-cuda, cuda-cuda]}\n")
    pyg = [c for c in cells if c.backend == "pyg-neighbor"]
    dgl = [c for c in cells if c.backend == "dgl-graphbolt"]
    assert {c.settings.mode for c in pyg} == {"cpu-cpu"}
    assert {c.settings.mode for c in dgl} == {"cpu-cpu", "pinned-cuda", "cuda-cuda"}


def test_exclude_matches_all_keys_of_a_rule(write_suite):
    cells = cells_of(write_suite, BASE + """settings: {num_workers: [0, 2]}
exclude:
  - {backend: dgl-graphbolt, dataset: b, num_workers: 2}
""")
    assert len(cells) == 7
    assert "dgl-graphbolt/b/mode=cpu-cpu/workers=2/ws=1" not in [c.id for c in cells]


def test_include_adds_a_sub_matrix(write_suite):
    cells = cells_of(write_suite, BASE + """settings: {num_workers: 0}
include:
  - {backend: pyg-neighbor, dataset: a, model: none, batch_size: [64, 128]}
""")
    extra = [c for c in cells if c.settings.model == "none"]
    assert len(cells) == 4 + 2 and len(extra) == 2
    assert {c.settings.batch_size for c in extra} == {64, 128}
    assert all("batch=" in c.id and "model=none" in c.id for c in extra)


def test_an_include_changing_a_setting_only_sweeps_show_gets_cells_of_its_own(write_suite):
    """The smoke suite's equal-fanout pair: an include that sets fanout (in ids only where swept) to another
    value than the suite's made the suite's own ids, and its cells were dropped as duplicates, unseen."""
    plain = cells_of(write_suite, BASE + "settings: {num_workers: 0, fanout: [10, 5]}\n")
    cells = cells_of(write_suite, BASE + """settings: {num_workers: 0, fanout: [10, 5]}
include:
  - {backend: dgl-graphbolt, dataset: a, fanout: [10, 10]}
""")
    assert [c.id for c in cells[:len(plain)]] == [c.id for c in plain]  # the suite's own ids as they were
    extra = cells[len(plain):]
    assert [c.id for c in extra] == ["dgl-graphbolt/a/mode=cpu-cpu/workers=0/ws=1/fanout=10-10"]
    assert extra[0].settings.fanout == [10, 10]
    # a rule that makes no cell of another configuration keeps its plain ids (other datasets, other values)
    apart = cells_of(write_suite, BASE + """settings: {num_workers: 0, fanout: [10, 5]}
include:
  - {backend: dgl-graphbolt, dataset: a, fanout: [10, 10], model: none}
""")
    assert apart[-1].id == "dgl-graphbolt/a/mode=cpu-cpu/workers=0/ws=1/model=none"


def test_fanout_list_is_one_value_and_list_of_lists_a_sweep(write_suite):
    one = cells_of(write_suite, BASE + "settings: {fanout: [15, 10, 5]}\n")
    assert len(one) == 4 and one[0].settings.fanout == [15, 10, 5]
    swept = cells_of(write_suite, BASE + "settings: {fanout: [[10, 5], [5, 5]]}\n")
    assert len(swept) == 8 and any("fanout=5-5" in c.id for c in swept)


def test_cells_are_hashable_and_serialisable(write_suite):
    import json

    cells = cells_of(write_suite, BASE)
    assert len(set(cells)) == len(cells)
    assert json.loads(cells[0].to_json())["dataset"]["source"] == "synthetic"


def test_same_layer_edges_is_a_graphbolt_setting_in_ids_only_when_false(write_suite):
    """GraphBolt's cells alone carry it (and only with a model); swept, PyG's cells stay one each."""
    cells = cells_of(write_suite, BASE + "settings: {same_layer_edges: [true, false]}\ninclude:\n  - {model: none}\n")
    cells = [c for c in cells if c.dataset == "a"]
    by_id = {c.id: c.settings.as_dict() for c in cells}
    assert by_id["dgl-graphbolt/a/mode=cpu-cpu/workers=0/ws=1"]["same_layer_edges"] is True
    assert by_id["dgl-graphbolt/a/mode=cpu-cpu/workers=0/ws=1/same_layer_edges=false"]["same_layer_edges"] is False
    assert "same_layer_edges" not in by_id["pyg-neighbor/a/mode=cpu-cpu/workers=0/ws=1"]
    assert "same_layer_edges" not in by_id["dgl-graphbolt/a/mode=cpu-cpu/workers=0/ws=1/model=none"]
    assert len(cells) == 5  # PyG once, GraphBolt twice, and each one loader-only cell
