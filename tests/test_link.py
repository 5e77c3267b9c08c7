"""The link task on the host: its settings in suites, the leakage check's core, the work per seed
edge and the equal-work check (no framework needed; the stacks' end-to-end tests are in
tests/test_link_stacks.py)."""

from __future__ import annotations

import numpy as np

from bench.backends.link import seed_edges_found
from bench.run import record, suite as suite_mod
from bench.tasks import TASKS

LINK_KEYS = set(TASKS["link"].settings)


def expand(write_suite, text: str):
    suite, _ = suite_mod.load(write_suite(text))
    return suite_mod.expand(suite)


def test_link_settings_are_in_link_cells_only(write_suite):
    cells = expand(write_suite, """
name: mixed
datasets:
  g: {source: synthetic, params: {scale: 8}}
backends: [pyg-neighbor, pyg-link, dgl-graphbolt-link]
settings:
  neg_ratio: [1, 5]
  neg_mode: [triplet, binary]
""")
    node = [c for c in cells if c.backend == "pyg-neighbor"]
    assert len(node) == 1 and not LINK_KEYS & set(node[0].settings.as_dict())  # a node cell keeps its old settings and id
    assert node[0].id == "pyg-neighbor/g/mode=cpu-cpu/workers=0/ws=1"
    link = {c.id for c in cells if c.backend != "pyg-neighbor"}
    # GraphBolt has triplet negatives only: no binary cell of it
    assert link == {f"pyg-link/g/mode=cpu-cpu/workers=0/ws=1/neg_ratio={r}/neg_mode={m}"
                    for r in (1, 5) for m in ("triplet", "binary")} | {
        f"dgl-graphbolt-link/g/mode=cpu-cpu/workers=0/ws=1/neg_ratio={r}/neg_mode=triplet" for r in (1, 5)}
    for cell in cells:
        if cell.backend != "pyg-neighbor":
            assert {k: getattr(cell.settings, k) for k in ("exclusion", "decoder")} == {"exclusion": "reverse", "decoder": "dot"}


def test_a_link_backend_without_a_plain_dataset_is_named(write_suite, tmp_path):
    path = write_suite("""
name: nolink
datasets:
  mols: {source: molecules, params: {count: 50}}
backends: [pyg-graphs, pyg-link]
""")
    try:
        suite_mod.load(path)
    except suite_mod.SuiteError as exc:
        assert "'pyg-link' trains the 'link' task and no dataset of this suite serves it" in str(exc)
    else:
        raise AssertionError("a link backend with no plain dataset was accepted")


def test_the_link_suite_sweeps_what_the_issue_asks():
    suite, _ = suite_mod.load("link")
    cells = suite_mod.expand(suite)
    assert {c.backend for c in cells} == {"pyg-link", "dgl-graphbolt-link"}
    for key, values in {"neg_ratio": {1, 5}, "exclusion": {"none", "reverse"}, "num_workers": {0, 2},
                        "world_size": {1, 2}, "store": {"memory", "lmdb"}}.items():
        for backend in ("pyg-link", "dgl-graphbolt-link"):
            assert {getattr(c.settings, key) for c in cells if c.backend == backend} == values, (key, backend)
    assert {c.settings.neg_mode for c in cells if c.backend == "pyg-link"} == {"triplet", "binary"}


def test_the_leak_check_finds_a_seed_edge_and_its_reverse():
    seed_src, seed_dst = np.array([1, 4]), np.array([2, 7])
    clean = seed_edges_found([3, 5, 2], [1, 6, 3], seed_src, seed_dst, 10)
    assert not clean.any()
    # planted: the seed edge 1->2 itself, and 7->4 (the reverse of 4->7)
    planted = seed_edges_found([3, 1, 7, 5], [1, 2, 4, 6], seed_src, seed_dst, 10)
    assert planted.tolist() == [False, True, True, False]


def test_work_per_seed_edge_counts_positives_and_negatives():
    work = {"batches": 2, "counted": 2, "hop_nodes": [300, 200], "hop_edges": [1000], "layer_nodes": [],
            "layer_edges": [], "seed_edges": 200, "negatives": 1000,
            "full": {"counted": 2, "hop_nodes": [300, 200], "hop_edges": [1000], "layer_nodes": [], "layer_edges": [],
                     "seed_edges": 200, "negatives": 1000}}
    per_seed = record.per_seed([work])
    assert per_seed["negatives"] == 5.0 and per_seed["hop_edges"] == [5.0] and per_seed["hop_nodes"] == [1.5, 1.0]


def test_the_equal_work_check_compares_negatives_and_seed_ends_per_seed_edge():
    from bench.publish.stages import _figures

    figures = _figures({"negatives": 5.0, "hop_nodes": [1.5, 1.0], "hop_edges": [5.0], "layer_nodes": [],
                        "layer_edges": []})
    assert list(figures) == [("negatives", 0, "negatives"), ("hop", 0, "nodes"), ("hop", 1, "nodes"),
                             ("hop", 1, "edges")]
    assert figures[("negatives", 0, "negatives")] == 5.0
    # a node cell's hop 0 is its seeds: 1 per seed, not a figure
    assert ("hop", 0, "nodes") not in _figures({"hop_nodes": [1.0, 3.0], "hop_edges": [5.0]})
