"""Typed dataset sources on the typed hub: a user's own typed graph as a folder of .npy
(bench/datasets/typed_npy.py), checked like the homogeneous sources (one line per problem, exit 2)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bench import cli, datasets
from bench.datasets import hub, typed_synthetic
from bench.run.prepare import ensure_dataset
from tests.conftest import require_stacks, run_suite_text
from tests.ogb_fixture import write_mag_like


def write_typed_npy(folder, scale_params=None):
    """typed-synthetic's small graph written in the typed-npy layout (institute featureless)."""
    g = typed_synthetic.generate({"scale": 1, "feature_dim": 8, "num_classes": 4, **(scale_params or {})})
    folder.mkdir(parents=True)
    (folder / "graph.json").write_text(json.dumps({"target": g["target"],
                                                   "num_nodes": {"institute": g["counts"]["institute"]}}))
    for t in g["counts"]:
        (folder / "nodes" / t).mkdir(parents=True)
        if t != "institute":
            np.save(folder / "nodes" / t / "features.npy", g["features"][t])
    np.save(folder / "nodes" / "paper" / "labels.npy", g["labels"].astype(np.int32))
    for split, ids in g["splits"].items():
        np.save(folder / "nodes" / "paper" / f"{split}.npy", ids)
    (folder / "edges").mkdir()
    for (src, name, dst), (s, d) in g["relations"].items():
        np.save(folder / "edges" / f"{src}__{name}__{dst}.npy", np.stack([s, d]).astype(np.int32))
    return g


def test_a_good_folder_converts_and_loads(tmp_path):
    g = write_typed_npy(tmp_path / "g")
    spec = datasets.parse_name(f"typed-npy:{tmp_path / 'g'}")
    assert datasets.tasks(spec) == ("typed-node",)
    path = datasets.materialiser("typed-npy")(spec, tmp_path / "hub", None)
    data = hub.load_dataset("typed-npy", path)
    assert data.target == "paper" and data.counts == g["counts"]
    assert data.features["institute"] is None and data.meta["node_types"]["institute"]["feature_dim"] == 0
    assert np.array_equal(data.features["author"], g["features"]["author"])
    assert np.array_equal(data.labels, g["labels"]) and np.array_equal(data.train_idx, g["splits"]["train_idx"])
    for (src, name, dst), (s, d) in g["relations"].items():
        given = set(zip(s.tolist(), d.tolist()))
        assert set(map(tuple, data.edge_index[(src, name, dst)].T.tolist())) == given
        assert set(map(tuple, data.edge_index[(dst, f"rev_{name}", src)][::-1].T.tolist())) == given
    assert data.meta["source_path"] == str(tmp_path / "g")
    assert datasets.materialiser("typed-npy")(spec, tmp_path / "hub", None) == path  # converted once


def test_check_says_ok_then_info_shows_the_types(tmp_path, capsys):
    write_typed_npy(tmp_path / "g")
    argv = ["datasets", "check", f"typed-npy:{tmp_path / 'g'}", "--cache-dir", str(tmp_path / "hub")]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "ok: checked and converted" in out and "target type paper" in out
    assert "paper:written_by:author" in out and "(reverse of paper:written_by:author)" in out


def test_a_bad_folder_exits_2_with_one_line_per_problem(tmp_path, capsys):
    folder = tmp_path / "g"
    g = write_typed_npy(folder)
    np.save(folder / "nodes" / "author" / "features.npy", g["features"]["author"].astype(str))  # wrong dtype
    bad_edges = np.stack(g["relations"][("paper", "written_by", "author")])
    bad_edges[1, 3] = g["counts"]["author"] + 5  # out of range for author
    np.save(folder / "edges" / "paper__written_by__author.npy", bad_edges)
    np.save(folder / "edges" / "paper__cites__paper.npy", np.zeros((2, 4), dtype=np.float32))  # wrong dtype
    (folder / "nodes" / "paper" / "labels.npy").unlink()  # the target's labels missing
    np.save(folder / "edges" / "paper__reviewed_by__referee.npy", np.zeros((2, 3), dtype=np.int64))  # unknown type
    code = cli.main(["datasets", "check", f"typed-npy:{folder}", "--cache-dir", str(tmp_path / "hub")])
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.strip().splitlines()
    assert lines[0].startswith("gnnbench: error:") and "5 problem(s)" in lines[0], err
    problems = lines[1:]
    assert len(problems) == 5, err
    expect = {
        str(folder / "nodes" / "author" / "features.npy"): "features has dtype <U",
        str(folder / "nodes" / "paper" / "labels.npy"): "missing: the target type 'paper' needs labels",
        str(folder / "edges" / "paper__cites__paper.npy"): "edge_index has dtype float32",
        str(folder / "edges" / "paper__written_by__author.npy"): "edge_index[1, 3] = ",
        str(folder / "edges" / "paper__reviewed_by__referee.npy"): "node type(s) 'referee' that are not there",
    }
    for file, what in expect.items():
        (line,) = [p for p in problems if p.startswith(file + ":")]
        assert what in line, line
    assert "out of range; allowed: author ids 0.." in next(p for p in problems if "written_by" in p)
    assert not (tmp_path / "hub" / "datasets").exists() or not list((tmp_path / "hub" / "datasets").iterdir())


def test_a_relation_out_of_range_for_its_source_type(tmp_path, capsys):
    folder = tmp_path / "g"
    g = write_typed_npy(folder)
    edges = np.stack(g["relations"][("author", "affiliated_to", "institute")])
    edges[0, 0] = -1
    np.save(folder / "edges" / "author__affiliated_to__institute.npy", edges)
    (folder / "graph.json").write_text(json.dumps({"target": "paper"}))  # institute's count gone
    code = cli.main(["datasets", "check", f"typed-npy:{folder}", "--cache-dir", str(tmp_path / "hub")])
    err = capsys.readouterr().err
    assert code == 2 and "1 problem(s)" in err, err  # no count for institute; its relation then unchecked
    assert f"{folder / 'nodes' / 'institute'}: node type 'institute' has no features.npy and no count" in err
    (folder / "graph.json").write_text(json.dumps({"target": "paper", "num_nodes": {"institute": 87}}))
    code = cli.main(["datasets", "check", f"typed-npy:{folder}", "--cache-dir", str(tmp_path / "hub")])
    err = capsys.readouterr().err
    assert code == 2 and "edge_index[0, 0] = -1 is out of range; allowed: author ids" in err, err


def test_a_missing_target_or_graph_json_is_named(tmp_path, capsys):
    folder = tmp_path / "g"
    write_typed_npy(folder)
    (folder / "graph.json").write_text(json.dumps({"target": "venue"}))
    assert cli.main(["datasets", "check", f"typed-npy:{folder}", "--cache-dir", str(tmp_path / "hub")]) == 2
    err = capsys.readouterr().err
    assert f"{folder / 'graph.json'}: target 'venue' is not a node type" in err, err
    (folder / "graph.json").unlink()
    assert cli.main(["datasets", "check", f"typed-npy:{folder}", "--cache-dir", str(tmp_path / "hub")]) == 2
    assert f"{folder / 'graph.json'}: missing" in capsys.readouterr().err


def _separator_too_many(folder, g):
    for name in ("paper__cites__x__paper", "paper__ci:tes__paper"):  # the second was a traceback (exit 70)
        np.save(folder / "edges" / f"{name}.npy", np.zeros((2, 3), dtype=np.int64))


def _self_loops_only(folder, g):
    for path in (folder / "edges").glob("*.npy"):
        path.unlink()
    np.save(folder / "edges" / "paper__cites__paper.npy", np.stack([np.arange(5)] * 2))


# issue 52: what the plain reader refuses, the typed one refuses too, one line per file (exit 2)
@pytest.mark.parametrize("damage, lines", [
    (_separator_too_many, {"edges/paper__cites__x__paper.npy": "is not <src>__<name>__<dst>",
                           "edges/paper__ci:tes__paper.npy": "no ':'"}),
    (lambda f, g: (f / "graph.json").write_text(json.dumps({"target": "paper", "num_nodes": {"institute": 10**15}})),
     {"graph.json": "1,000,000,000,000,000 institute nodes; allowed: at most 2,147,483,647"}),
    (lambda f, g: np.save(f / "nodes/paper/test_idx.npy", g["splits"]["train_idx"][3:5]),
     {"nodes/paper/test_idx.npy": "is in the test split and in the train split (train_idx.npy)"}),
    (lambda f, g: [np.save(p, np.zeros((2, 0), dtype=np.int64)) for p in (f / "edges").glob("*.npy")],
     {f"edges/{r}.npy": "no edges; allowed: at least one edge in each relation"
      for r in ("author__affiliated_to__institute", "paper__cites__paper", "paper__topic__fos", "paper__written_by__author")}),
    (lambda f, g: np.save(f / "nodes/paper/labels.npy", np.full_like(g["labels"], 3)),
     {"nodes/paper/labels.npy": "holds 1 class only (3); allowed: labels of at least 2 classes"}),
    (_self_loops_only, {"edges": "all 5 edges are self-loops"}),
    (lambda f, g: np.save(f / "edges/paper__rev_cites__paper.npy", np.ones((2, 3), dtype=np.int64)),
     {"edges/paper__rev_cites__paper.npy": "is the reverse the hub adds to paper__cites__paper.npy"}),
    (lambda f, g: np.save(f / "nodes/paper/val_idx.npy", np.append(g["splits"]["val_idx"], g["splits"]["val_idx"][0])),
     {"nodes/paper/val_idx.npy": "twice"}),
], ids=["name-separators", "node-count-bomb", "splits-overlap", "relations-empty", "one-class", "self-loops-only",
        "given-reverse", "split-repeats"])
def test_a_typed_folder_is_refused_where_the_plain_reader_refuses(tmp_path, capsys, damage, lines):
    folder = tmp_path / "g"
    damage(folder, write_typed_npy(folder))
    code = cli.main(["datasets", "check", f"typed-npy:{folder}", "--cache-dir", str(tmp_path / "hub")])
    err = capsys.readouterr().err
    assert code == 2 and f"{len(lines)} problem(s)" in err and "Traceback" not in err, err
    for file, words in lines.items():
        (line,) = [p for p in err.splitlines() if p.startswith(f"{folder / file}: ")]
        assert words in line, line
    assert not (tmp_path / "hub" / "datasets").exists() or not list((tmp_path / "hub" / "datasets").iterdir())


def test_igbh_shares_the_typed_checks(tmp_path, capsys):
    folder = tmp_path / "tiny"
    g = write_igbh_like(folder)
    np.save(folder / "processed" / "paper" / "node_label_19.npy", np.zeros(g["counts"]["paper"], dtype=np.float32))
    np.save(folder / "processed" / "paper__topic__fos" / "edge_index.npy", np.zeros((0, 2), dtype=np.int64))
    (folder / "processed" / "paper__ci:tes__paper").mkdir()
    code = cli.main(["datasets", "check", f"igbh:{folder}", "--cache-dir", str(tmp_path / "hub")])
    err = capsys.readouterr().err
    assert code == 2 and "3 problem(s)" in err, err
    assert f"{folder / 'processed/paper/node_label_19.npy'}: labels holds 1 class only (0)" in err
    assert f"{folder / 'processed/paper__topic__fos/edge_index.npy'}: no edges" in err
    assert f"{folder / 'processed/paper__ci:tes__paper'}: 'paper__ci:tes__paper' is not" in err


@pytest.mark.parametrize("bad", ["path=/x,scale=2"])
def test_unknown_parameters_are_refused(bad):
    with pytest.raises(ValueError, match="unknown typed-npy parameter"):
        datasets.parse_name(f"typed-npy:{bad}")


# --- ogbn-mag through OGB's own loader ------------------------------------------------------------

@pytest.mark.stacks
def test_ogbn_mag_fixture_is_read_by_ogbs_own_loader(tmp_path, monkeypatch):
    require_stacks("pyg")
    monkeypatch.setenv("GNNBENCH_OFFLINE", "1")
    root = tmp_path / "root"
    given = write_mag_like(root)
    spec = datasets.parse_name("ogb-typed:ogbn-mag")
    assert datasets.tasks(spec) == ("typed-node",) and datasets.stack_of("ogb-typed") == "pyg"
    data = hub.load_dataset("ogb-typed", ensure_dataset(spec, tmp_path / "hub", root))
    assert data.target == "paper" and data.counts == given["counts"]
    assert data.features["author"] is None and data.features["institution"] is None
    assert np.allclose(data.features["paper"], given["features"], atol=1e-5)
    assert np.array_equal(data.labels, given["labels"])
    for split in ("train_idx", "val_idx", "test_idx"):
        assert np.array_equal(getattr(data, split), given["splits"][split])
    for (src, name, dst), (s, d) in given["relations"].items():
        pairs = set(zip(s.tolist(), d.tolist()))
        assert set(map(tuple, data.edge_index[(src, name, dst)].T.tolist())) == pairs
        assert data.meta["relations"][f"{dst}:rev_{name}:{src}"]["reverse_of"] == f"{src}:{name}:{dst}"
    assert not list(root.rglob("processed"))  # the data root was only read


@pytest.mark.stacks
def test_ogbn_mag_offline_without_raw_files_names_them(tmp_path, monkeypatch):
    require_stacks("pyg")
    monkeypatch.setenv("GNNBENCH_OFFLINE", "1")
    with pytest.raises(hub.DatasetError) as info:
        ensure_dataset(datasets.parse_name("ogb-typed:ogbn-mag"), tmp_path / "hub", tmp_path / "empty")
    message = str(info.value)
    assert "downloads are off" in message and "raw/node-label/paper/node-label.csv.gz" in message
    assert str(tmp_path / "empty" / "ogbn_mag") in message


def test_ogbn_mag_published_sizes_agree_with_its_types():
    from bench.datasets import ogb

    stats = ogb.TYPED.KNOWN_STATS["ogbn-mag"]
    assert sum(t["count"] for t in stats["node_types"].values()) == stats["num_nodes"]
    assert stats["node_types"]["paper"]["count"] == stats["num_train"] + stats["num_val"] + stats["num_test"]
    assert stats["node_types"]["paper"]["feature_dim"] == stats["feature_dim"]


# --- IGBH in IGB's own processed/ layout ----------------------------------------------------------

def write_igbh_like(folder):
    """typed-synthetic's small graph (IGBH's own type and relation names) in IGB's processed/ layout:
    node_feat.npy per type, node_label_19.npy (float32, as IGB's large sizes store them),
    <src>__<name>__<dst>/edge_index.npy as [E, 2]."""
    g = typed_synthetic.generate({"scale": 1, "feature_dim": 8, "num_classes": 19})
    processed = folder / "processed"
    for t, x in g["features"].items():
        (processed / t).mkdir(parents=True)
        np.save(processed / t / "node_feat.npy", x)
    np.save(processed / "paper" / "node_label_19.npy", g["labels"].astype(np.float32))
    for (src, name, dst), (s, d) in g["relations"].items():
        (processed / f"{src}__{name}__{dst}").mkdir()
        np.save(processed / f"{src}__{name}__{dst}" / "edge_index.npy", np.stack([s, d], axis=1))
    return g


def test_igbh_folder_converts_with_igbs_own_split(tmp_path):
    g = write_igbh_like(tmp_path / "tiny")
    spec = datasets.parse_name(f"igbh:{tmp_path / 'tiny'}")
    assert spec["params"]["classes"] == 19 and datasets.tasks(spec) == ("typed-node",)
    data = hub.load_dataset("igbh", datasets.materialiser("igbh")(spec, tmp_path / "hub", None))
    n = g["counts"]["paper"]
    assert data.counts == g["counts"] and np.array_equal(data.labels, g["labels"])
    assert np.array_equal(data.train_idx, np.arange(int(n * 0.6)))
    assert data.val_idx[0] == int(n * 0.6) and data.test_idx[-1] == n - 1
    assert data.train_idx.size + data.val_idx.size + data.test_idx.size == n
    for (src, name, dst), (s, d) in g["relations"].items():
        assert set(map(tuple, data.edge_index[(src, name, dst)].T.tolist())) == set(zip(s.tolist(), d.tolist()))
        assert (dst, f"rev_{name}", src) in data.edge_index
    assert np.array_equal(data.features["fos"], g["features"]["fos"])


def test_igbh_bad_folder_exits_2_naming_each_file(tmp_path, capsys):
    folder = tmp_path / "tiny"
    g = write_igbh_like(folder)
    (folder / "processed" / "paper" / "node_label_19.npy").unlink()
    cites = np.stack(g["relations"][("paper", "cites", "paper")], axis=1)
    np.save(folder / "processed" / "paper__cites__paper" / "edge_index.npy", cites.T)  # [2, E]: OGB's way, not IGB's
    code = cli.main(["datasets", "check", f"igbh:{folder}", "--cache-dir", str(tmp_path / "hub")])
    err = capsys.readouterr().err
    assert code == 2 and "2 problem(s)" in err, err
    assert f"{folder / 'processed' / 'paper' / 'node_label_19.npy'}: missing: the papers' 19 classes" in err
    assert f"{folder / 'processed' / 'paper__cites__paper' / 'edge_index.npy'}: edge_index has shape (2, " in err
    with pytest.raises(ValueError, match="allowed: 19 or 2983"):
        datasets.parse_name(f"igbh:path={folder},classes=20")


@pytest.mark.stacks
def test_ogbn_mag_fixture_and_own_typed_folder_train_on_both_backends(tmp_path):
    """ogbn-mag's type names (featureless author, institution, field_of_study) and a user's typed
    folder through both typed pipelines: one cell each, measured."""
    require_stacks("pyg", "dgl")
    root = tmp_path / "root"
    write_mag_like(root)
    write_typed_npy(tmp_path / "own")
    proc, out = run_suite_text(f"""
name: typed-sources
datasets:
  mag-fixture: ogb-typed:ogbn-mag
  own: typed-npy:{tmp_path / 'own'}
backends: [pyg-hetero, dgl-graphbolt-hetero]
settings: {{batch_size: 64, fanout: [5, 5], epochs: 2, warmup_epochs: 1, model: rgcn, hidden: 16, timeout: 240}}
""", tmp_path, tmp_path / "hub", "--data-root", str(root), env={"GNNBENCH_OFFLINE": "1"})
    assert proc.returncode == 0
    data = json.loads(out.read_text())
    assert data["unmeasured"] == []
    cells = sorted((b["extra_info"]["dataset"]["name"], b["extra_info"]["backend"]) for b in data["benchmarks"])
    assert cells == [("mag-fixture", "dgl-graphbolt-hetero"), ("mag-fixture", "pyg-hetero"),
                     ("own", "dgl-graphbolt-hetero"), ("own", "pyg-hetero")]
