"""Typed graphs in the hub (bench/datasets/typed_hub.py) and the IGBH-shaped generator
(bench/datasets/typed_synthetic.py), on the host: layout, reverses, GraphBolt's fused arrays,
checksums, sizes, signal, and the suite rules of the typed models."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bench.settings import Recorded
from bench import datasets
from bench.commands import dataset_info
from bench.datasets import baseline, hub, params, typed_hub, typed_synthetic
from bench.run import suite as suite_mod


@pytest.fixture(scope="module")
def typed(tmp_path_factory):
    cache = tmp_path_factory.mktemp("hub")
    spec = datasets.parse_name("typed-synthetic:scale=1,feature_dim=16,num_classes=4")
    path = datasets.materialiser("typed-synthetic")(spec, cache, None)
    return spec, cache, hub.load_dataset("typed-synthetic", path)


def test_igbh_tiny_is_scale_100():
    counts = typed_synthetic.counts(100)
    assert counts == {"paper": 100_000, "author": 357_041, "institute": 8_738, "fos": 84_220}
    assert sum(counts.values()) == 549_999
    stats = typed_synthetic.expected_stats({"scale": 100})
    assert 4.5e6 < stats["num_edges"] < 5e6  # IGBH-tiny's 2.4 M edges and their reverses


def test_layout_relations_and_their_reverses(typed):
    _, _, data = typed
    meta = data.meta
    assert meta["shape"] == "typed" and meta["target"] == "paper" and datasets.tasks(
        {"source": "typed-synthetic", "params": {}}) == ("typed-node",)
    assert set(data.relations) == {("paper", "cites", "paper"), ("paper", "written_by", "author"),
                                   ("author", "affiliated_to", "institute"), ("paper", "topic", "fos"),
                                   ("paper", "rev_cites", "paper"), ("author", "rev_written_by", "paper"),
                                   ("institute", "rev_affiliated_to", "author"), ("fos", "rev_topic", "paper")}
    for relation in data.relations:
        src_type, name, dst_type = relation
        edge_index, indptr = data.edge_index[relation], data.csc_indptr[relation]
        assert edge_index.dtype == np.int64 and edge_index.shape[0] == 2
        assert edge_index[0].max() < data.counts[src_type] and edge_index[1].max() < data.counts[dst_type]
        key = edge_index[1] * data.counts[src_type] + edge_index[0]
        assert np.all(np.diff(key) > 0)  # sorted by (destination, source), no duplicates
        assert indptr.shape == (data.counts[dst_type] + 1,) and indptr[-1] == edge_index.shape[1]
        assert np.array_equal(np.repeat(np.arange(data.counts[dst_type]), np.diff(indptr)), edge_index[1])
        reverse_of = meta["relations"][typed_hub.relation_key(relation)]["reverse_of"]
        if name.startswith("rev_"):
            forward = typed_hub.relation_of(reverse_of)
            assert forward == (dst_type, name.removeprefix("rev_"), src_type)
            flipped = data.edge_index[forward][::-1]
            assert sorted(map(tuple, flipped.T)) == sorted(map(tuple, edge_index.T))
        else:
            assert reverse_of is None
    assert data.labels.shape == (data.counts["paper"],) and data.labels.max() < 4
    for split in ("train_idx", "val_idx", "test_idx"):
        assert getattr(data, split).max() < data.counts["paper"]
    assert {t: x.shape for t, x in data.features.items()} == {t: (n, 16) for t, n in data.counts.items()}


def test_graphbolts_fused_arrays_hold_every_relation_once(typed):
    """Global ids grouped by node type in name order; each edge under its global destination with
    its edge type id, a destination's edges grouped by type: every relation's edges come back."""
    _, _, data = typed
    gb, ids = data.graphbolt, data.meta["graphbolt"]
    assert list(ids["node_type_to_id"]) == sorted(data.counts)
    assert list(ids["edge_type_to_id"]) == sorted(ids["edge_type_to_id"])  # `src:name:dst` order
    assert gb["indices"].dtype == np.int32 and gb["indptr"].dtype == np.int32
    assert gb["node_type_offset"].dtype == np.int32 and gb["type_per_edge"].dtype == np.uint8
    offset = gb["node_type_offset"].astype(np.int64)
    assert np.array_equal(np.diff(offset), [data.counts[t] for t in ids["node_type_to_id"]])
    destinations = np.repeat(np.arange(offset[-1]), np.diff(gb["indptr"]))
    for start, end in zip(gb["indptr"][:-1], gb["indptr"][1:]):
        assert np.all(np.diff(gb["type_per_edge"][start:end].astype(int)) >= 0)
    for key, type_id in ids["edge_type_to_id"].items():
        src_type, _, dst_type = typed_hub.relation_of(key)
        mine = gb["type_per_edge"] == type_id
        src = gb["indices"][mine] - offset[ids["node_type_to_id"][src_type]]
        dst = destinations[mine] - offset[ids["node_type_to_id"][dst_type]]
        assert np.array_equal(np.stack([src, dst]), data.edge_index[typed_hub.relation_of(key)])


def test_deterministic_by_seed_and_checked_by_checksums(typed, tmp_path):
    spec, _, data = typed
    again = hub.load_dataset("typed-synthetic", datasets.materialiser("typed-synthetic")(spec, tmp_path, None))
    for name in ("labels", "train_idx"):
        assert np.array_equal(getattr(again, name), getattr(data, name))
    for relation in data.relations:
        assert np.array_equal(again.edge_index[relation], data.edge_index[relation])
    other = typed_synthetic.generate({"scale": 1, "seed": 1})
    assert not np.array_equal(other["labels"], data.labels)
    victim = again.path / "edge_index-paper__cites__paper.npy"
    victim.write_bytes(victim.read_bytes()[:-8] + b"\x01" * 8)
    with pytest.raises(hub.DatasetError, match="edge_index-paper__cites__paper.npy is missing or corrupt"):
        hub.load_dataset("typed-synthetic", again.path)


def test_labels_need_the_neighbourhood():
    """Papers' own features say little; their authors', fields' and cited papers' say much more."""
    g = typed_synthetic.generate({"scale": 2})
    x, y, splits = g["features"]["paper"], g["labels"], g["splits"]
    alone = baseline.features_only_accuracy(x, y, splits["train_idx"], splits["test_idx"])

    def mean_over(relation, rows):
        src, dst = g["relations"][relation]  # paper -> other: aggregate the other side into the paper
        out, seen = np.zeros((x.shape[0], rows.shape[1])), np.zeros(x.shape[0])
        np.add.at(out, src, rows[dst])
        np.add.at(seen, src, 1)
        return out / np.maximum(seen, 1)[:, None]

    around = np.hstack([x, mean_over(("paper", "written_by", "author"), g["features"]["author"]),
                        mean_over(("paper", "topic", "fos"), g["features"]["fos"])])
    with_neighbours = baseline.features_only_accuracy(around, y, splits["train_idx"], splits["test_idx"])
    assert alone < 0.3 and with_neighbours > alone + 0.4, (alone, with_neighbours)


def test_papers_only_features(tmp_path):
    spec = datasets.parse_name("typed-synthetic:scale=1,features=target,feature_dim=8")
    data = hub.load_dataset("typed-synthetic", datasets.materialiser("typed-synthetic")(spec, tmp_path, None))
    assert data.features["paper"].shape == (1000, 8)
    assert all(data.features[t] is None for t in ("author", "institute", "fos"))
    assert data.meta["node_types"]["author"]["feature_dim"] == 0
    assert not (data.path / "features-author.npy").exists()


def test_datasets_info_shows_types_and_relations(typed):
    spec, cache, _ = typed
    text = "\n".join(dataset_info.info_lines(spec, cache))
    assert "target type paper" in text and "author" in text and "features 16 wide" in text
    assert "paper:rev_cites:paper" in text and "(reverse of paper:cites:paper)" in text
    assert "pyg-hetero" in text and "dgl-graphbolt-hetero" in text and "pyg-neighbor" not in text


def test_bad_typed_parameters_are_one_line(typed):
    with pytest.raises(ValueError, match="features"):
        params.check_spec(datasets.parse_name("typed-synthetic:features=some"))
    with pytest.raises(ValueError, match="unknown typed-synthetic parameter"):
        datasets.parse_name("typed-synthetic:edge_factor=3")


SUITE = """
name: t
datasets:
  igbh: {{source: typed-synthetic, params: {{scale: 1}}}}
backends: [pyg-hetero, dgl-graphbolt-hetero]
settings:
{settings}
"""


def test_typed_backends_train_the_typed_models_only(write_suite):
    cells = suite_mod.expand(suite_mod.load(write_suite(SUITE.format(settings="  model: [rgcn, rgat, none]")))[0])
    assert len(cells) == 6
    assert all((c.settings.heads is not None) == (c.settings.model == "rgat") for c in cells)
    with pytest.raises(suite_mod.SuiteError, match="zero cells"):  # GraphSAGE is the untyped backends'
        suite_mod.load(write_suite(SUITE.format(settings="  model: sage")))
    with pytest.raises(suite_mod.SuiteError, match="not a multiple of heads"):
        suite_mod.load(write_suite(SUITE.format(settings="  model: rgat\n  hidden: 30\n  heads: 4")))


def test_a_typed_dataset_pairs_only_with_typed_backends(write_suite):
    text = SUITE.replace("backends: [pyg-hetero, dgl-graphbolt-hetero]", "backends: [pyg-neighbor]")
    with pytest.raises(suite_mod.SuiteError, match="trains the 'node' task and no dataset of this suite serves it"):
        suite_mod.load(write_suite(text.format(settings="  model: sage")))


def test_memory_estimate_counts_every_types_features():
    from bench.run import memory_plan

    card = {"num_nodes": 10, "num_edges": 0, "feature_dim": 4, "num_train": 0, "num_val": 0, "num_test": 0,
            "node_types": {"a": {"count": 4, "feature_dim": 4}, "b": {"count": 6, "feature_dim": 0}}}
    assert memory_plan.hub_parts(card)["feature_bytes"] == 4 * 4 * 4
    assert json.dumps(card)  # plain data, as the card is


def test_equal_work_compares_each_relation_and_hop():
    """Two typed cells whose totals agree but one relation's edges at hop 2 do not: the check names
    that relation and hop (bench/publish/stages.py), with the framework's reason."""
    from types import SimpleNamespace

    from bench.publish import stages

    def cell(cell_id, backend, cites_hop2, topic_hop2):
        per_seed = {"over": "full", "hop_nodes": [1, 10, 30], "hop_edges": [12, 40],
                    "typed": {"hop_nodes": {"paper": [1, 5, 10], "fos": [0, 5, 20]},
                              "hop_edges": {"paper:cites:paper": [5, cites_hop2], "fos:rev_topic:paper": [7, topic_hop2]}}}
        work = {"per_seed": per_seed, "hop_nodes": [128, 1280, 3840], "input_nodes": 5248}
        return SimpleNamespace(id=cell_id, backend=backend, measured=True, dataset="igbh",
                               settings=Recorded({"fanout": [5, 5], "batch_size": 128, "world_size": 1}),
                               metrics=SimpleNamespace(work=work))

    pyg = cell("pyg-hetero/igbh", "pyg-hetero", 20, 20)
    dgl = cell("dgl-graphbolt-hetero/igbh", "dgl-graphbolt-hetero", 26, 14)  # the same 40 edges in all
    flags = stages.equal_work([pyg, dgl])
    assert "hop 2: 26.0 paper:cites:paper edges per seed against 20.0 in pyg-hetero/igbh (+30 %)" in flags[dgl.id]
    assert "GraphBolt samples each hop for all the nodes reached before it" in flags[dgl.id]
    assert "hop 2: 20.0 fos:rev_topic:paper edges per seed against 14.0" in flags[pyg.id]
    assert "hop 2: 40" not in flags[dgl.id]  # the totals agree


def test_the_streamed_generator_writes_what_the_whole_arrays_would(typed, tmp_path):
    """materialise draws into the hub a relation and a block of features at a time (its peak
    memory under 2x the hub's size); typed_hub.write over generate()'s whole arrays (ogbn-mag's
    path) gives the same files, byte for byte."""
    spec, _, data = typed
    g = typed_synthetic.generate(spec["params"])
    whole = typed_hub.write(spec, tmp_path, g["counts"], g["features"], g["target"], g["labels"], g["splits"],
                            g["relations"])
    def digests(folder):
        recorded = json.loads((folder / "checksums.json").read_text())
        return {name: entry["sha256"] for name, entry in recorded.get("files", recorded).items()}

    assert digests(whole) == digests(data.path)
    assert len(digests(whole)) == 2 * 8 + 4 + 4 + 4  # per relation 2, features 4, labels and splits, graphbolt
