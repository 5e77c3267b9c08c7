"""Your own graph (bench/datasets/user_graph.py and its four sources): each format converts into
the hub arrays of the same graph from the synthetic source (a round trip); the hub folder follows
the files; self-loops and duplicates are counted and kept or removed; the streaming edge sort
agrees with the in-memory one however it spills; `datasets check` and `info` say what they found;
and a real cell runs on a user's graph in every format with both backends and the LMDB store.
The bad files (one per check) are in tests/test_bad_inputs.py's catalogue."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from bench import cli, datasets
from bench.datasets import hub, hub_stream, user_graph
from bench import stacks
from tests import own_graphs
from tests.conftest import REPO, require_stacks


@pytest.fixture(scope="module")
def ref(tmp_path_factory):
    return own_graphs.reference(tmp_path_factory.mktemp("synthetic"))


def convert(name: str, cache: Path) -> hub.HubDataset:
    spec = datasets.parse_name(name)
    return hub.load(datasets.materialiser(spec["source"])(spec, cache), mmap=False)


def assert_same_arrays(got: hub.HubDataset, ref: hub.HubDataset, close_features: bool = False) -> None:
    for name in hub.ARRAYS:
        a, b = getattr(got, name), getattr(ref, name)
        assert a.dtype == b.dtype and a.shape == b.shape, name
        if name == "features" and close_features:
            np.testing.assert_allclose(a, b, rtol=1e-6)
        else:
            np.testing.assert_array_equal(a, b, err_msg=name)


# --- round trips -----------------------------------------------------------------------------

ROUND_TRIPS = {
    "npy-2xE-ids": lambda ref, d: f"npy:{own_graphs.write_npy(ref, d, '2xE', 'idx')}",
    "npy-Ex2-masks": lambda ref, d: f"npy:{own_graphs.write_npy(ref, d, 'Ex2', 'mask')}",
    "graphbolt-seeds": lambda ref, d: f"graphbolt:{own_graphs.write_graphbolt(ref, d, 'seeds')}",
    "graphbolt-seed_nodes-csv": lambda ref, d: f"graphbolt:{own_graphs.write_graphbolt(ref, d, 'seed_nodes', 'csv')}",
    "edge-list-parquet-int-ids": lambda ref, d: f"edge-list:{own_graphs.write_edge_list(ref, d, 'parquet', 'int')}",
    "edge-list-parquet-list-column": lambda ref, d: f"edge-list:{own_graphs.write_edge_list(ref, d, 'parquet', 'str', 'list')}",
    "edge-list-parquet-ids-0..N-1": lambda ref, d: f"edge-list:{own_graphs.write_edge_list(ref, d, 'parquet', '0..N-1')}",
    "edge-list-parquet-sparse-ids": lambda ref, d: f"edge-list:{own_graphs.write_edge_list(ref, d, 'parquet', 'sparse')}",
    "edge-list-csv-string-ids": lambda ref, d: f"edge-list:{own_graphs.write_edge_list(ref, d, 'csv', 'str')}",
    "edge-list-csv-list-column": lambda ref, d: f"edge-list:{own_graphs.write_edge_list(ref, d, 'csv', 'int', 'list')}",
}


@pytest.mark.parametrize("case", ROUND_TRIPS)
def test_round_trip_equals_the_synthetic_source(tmp_path, ref, case):
    name = ROUND_TRIPS[case](ref, tmp_path / "graph")
    got = convert(name, tmp_path / "hub")
    assert_same_arrays(got, ref, close_features=case.endswith("csv-list-column"))  # text floats
    meta = got.meta
    assert meta["source_path"] == str(tmp_path / "graph") and got.card()["source_path"] == str(tmp_path / "graph")
    assert meta["num_edges"] == ref.edge_index.shape[1] and meta["num_classes"] == 4
    # the card's baselines, computed in blocks here, in memory by the synthetic source
    assert meta["edge_homophily"] == ref.meta["edge_homophily"]
    if not case.endswith("csv-list-column"):
        assert meta["features_only_acc"] == ref.meta["features_only_acc"]
    # a directed half was given (except GraphBolt's numpy edges: both directions): made undirected, and said
    both = case == "graphbolt-seeds"
    assert meta["edges"]["directed_input"] is not both
    assert meta["edges"]["reverse_added"] == (0 if both else ref.edge_index.shape[1] // 2)
    assert meta["edges"]["self_loops"] == 0 and meta["edges"]["duplicates"] == 0
    if case.endswith("0..N-1"):
        assert not (got.path / "node_ids.npy").exists() and "kept as they are" in meta["node_ids"]
    elif case.startswith("edge-list"):
        ids = np.load(got.path / "node_ids.npy")  # the mapping: hub node i had the i-th smallest id
        assert ids.shape == (ref.num_nodes,) and (np.all(ids[1:] > ids[:-1]) if ids.dtype.kind == "i" else True)
        assert any("weight ignored" in n for n in meta["notes"])


def test_graphbolt_labels_from_the_sets_alone(tmp_path, ref):
    """Without a `label` node feature, a node in no set has no label (-1); the rest equal."""
    got = convert(f"graphbolt:{own_graphs.write_graphbolt(ref, tmp_path / 'g', label_feature=False)}", tmp_path / "hub")
    in_sets = np.concatenate([ref.train_idx, ref.val_idx, ref.test_idx])
    np.testing.assert_array_equal(got.labels[in_sets], ref.labels[in_sets])
    assert (np.delete(got.labels, in_sets) == -1).all()
    assert got.meta["labelled_nodes"] == in_sets.size


@pytest.mark.stacks
@pytest.mark.parametrize("how", ["data", "in-memory-dataset"])
def test_pyg_file_round_trip_in_the_pyg_stack(tmp_path, ref, how):
    require_stacks("pyg")
    npy = tmp_path / "npy"
    npy.mkdir()
    for name in hub.ARRAYS:
        np.save(npy / f"{name}.npy", getattr(ref, name))
    path = own_graphs.write_pyg_file(stacks.get("pyg").python, npy, tmp_path / "graph.pt", how)
    spec = datasets.parse_name(f"pyg-file:{path}")
    from bench.run.prepare import ensure_dataset

    got = hub.load(ensure_dataset(spec, tmp_path / "hub", None), mmap=False)
    assert_same_arrays(got, ref)
    assert got.meta["edges"]["directed_input"] is False and got.meta["source_path"] == str(path)
    assert any("edge_weight ignored" in n for n in got.meta["notes"])


@pytest.mark.stacks
def test_pyg_file_unsafe_load_is_refused_unless_allowed(tmp_path, ref, capsys):
    require_stacks("pyg")
    npy = tmp_path / "npy"
    npy.mkdir()
    for name in hub.ARRAYS:
        np.save(npy / f"{name}.npy", getattr(ref, name))
    path = own_graphs.write_pyg_file(stacks.get("pyg").python, npy, tmp_path / "graph.pt", "pickled-object")
    code = cli.main(["datasets", "check", f"pyg-file:{path}", "--cache-dir", str(tmp_path / "hub")])
    err = capsys.readouterr().err
    assert code == 2 and str(path) in err and "unsafe_load" in err and "datetime.date" in err, err
    assert not list((tmp_path / "hub" / "datasets").glob("*"))
    # allowed: the file is read (a dict holding a Data is not a graph gnnbench takes: named)
    code = cli.main(["datasets", "check", f"pyg-file:path={path},unsafe_load=true", "--cache-dir", str(tmp_path / "hub")])
    err = capsys.readouterr().err
    assert code == 2 and "holds a dict" in err, err


# --- the hub folder follows the files ----------------------------------------------------------

def test_an_edited_file_is_converted_again(tmp_path, ref):
    folder = own_graphs.write_npy(ref, tmp_path / "g")
    spec = datasets.parse_name(f"npy:{folder}")
    first = datasets.materialiser("npy")(spec, tmp_path / "hub")
    assert hub.dataset_dir(spec, tmp_path / "hub") == first and first.name.startswith("npy-g-")
    labels = np.load(folder / "labels.npy")
    labels[0] = (labels[0] + 1) % 4
    time.sleep(0.01)
    np.save(folder / "labels.npy", labels)
    assert hub.dataset_dir(spec, tmp_path / "hub") != first and not hub.is_materialised(spec, tmp_path / "hub")
    old_label = np.load(first / "labels.npy")[0]
    second = datasets.materialiser("npy")(spec, tmp_path / "hub")
    assert np.load(second / "labels.npy")[0] == labels[0] != old_label
    assert not first.exists()  # the stale conversion is gone, not left to fill the disk


def test_a_relative_path_is_made_absolute(tmp_path, ref, monkeypatch):
    own_graphs.write_npy(ref, tmp_path / "g")
    monkeypatch.chdir(tmp_path)
    assert datasets.parse_name("npy:g")["params"]["path"] == str(tmp_path / "g")
    assert datasets.parse_name("npy:path=g,self_loops=keep")["params"] == {
        "path": str(tmp_path / "g"), "self_loops": "keep", "duplicates": "remove", "num_classes": None}


# --- self-loops and duplicates -------------------------------------------------------------------

def small_graph(folder: Path, edges: list[tuple[int, int]], n: int = 6) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    np.save(folder / "edge_index.npy", np.array(edges, dtype=np.int64))  # E x 2
    np.save(folder / "features.npy", np.eye(n, 3, dtype=np.float32))
    np.save(folder / "labels.npy", np.arange(n) % 2)
    for s, ids in zip(own_graphs.SPLITS, ([0, 1], [2, 3], [4, 5])):
        np.save(folder / f"{s}_idx.npy", np.array(ids))
    return folder


@pytest.mark.parametrize("loops, dups, expected", [
    ("remove", "remove", {(0, 1), (1, 0), (1, 2), (2, 1)}),
    ("keep", "remove", {(0, 1), (1, 0), (1, 2), (2, 1), (3, 3)}),
    ("remove", "keep", [(0, 1), (0, 1), (1, 0), (1, 0), (1, 2), (2, 1)]),
])
def test_self_loops_and_duplicates_counted_then_removed_or_kept(tmp_path, loops, dups, expected):
    folder = small_graph(tmp_path / "g", [(0, 1), (0, 1), (3, 3), (1, 2), (2, 1)])
    got = convert(f"npy:path={folder},self_loops={loops},duplicates={dups}", tmp_path / "hub")
    pairs = list(zip(got.edge_index[0].tolist(), got.edge_index[1].tolist()))
    assert (set(pairs) if isinstance(expected, set) else sorted(pairs)) == (
        expected if isinstance(expected, set) else sorted(expected))
    assert len(pairs) == len(expected)
    e = got.meta["edges"]
    assert (e["edges_in"], e["self_loops"], e["duplicates"]) == (5, 1, 1)
    assert e["self_loops_kept"] is (loops == "keep") and e["duplicates_kept"] is (dups == "keep")
    assert e["directed_input"] and e["reverse_added"] == (1 if dups == "remove" else 2)  # (1, 0) once or twice
    assert np.array_equal(np.diff(got.csc_indptr), np.bincount(got.edge_index[1], minlength=6))


@pytest.mark.parametrize("loops, dups", [("remove", "remove"), ("keep", "keep"), ("keep", "remove"), ("remove", "keep")])
def test_streaming_edge_sort_agrees_with_the_in_memory_one(tmp_path, loops, dups):
    """Tiny runs and merge blocks, so the spill and k-way merge paths (and the groups held back
    between merge steps) are taken; each result against a plain Counter of the edges."""
    from collections import Counter

    rng = np.random.default_rng(7)
    for trial in range(12):
        n, e = int(rng.integers(1, 40)), int(rng.integers(0, 300))
        src, dst = rng.integers(0, n, e), rng.integers(0, n, e)
        folder = tmp_path / f"t{trial}"
        folder.mkdir()
        sorter = hub_stream.EdgeSorter(n, folder, loops, dups, run_keys=int(rng.integers(1, 40)),
                                       merge_keys=int(rng.integers(1, 30)))
        for start in range(0, e, 29):
            sorter.add(src[start:start + 29], dst[start:start + 29])
        counts = sorter.write(folder)
        ei, indptr = np.load(folder / "edge_index.npy"), np.load(folder / "csc_indptr.npy")
        keep = np.ones(e, dtype=bool) if loops == "keep" else src != dst
        given = Counter(zip(src[keep].tolist(), dst[keep].tolist()))
        pairs = set(given) | {(b, a) for a, b in given}
        mult = {p: (max(given.get(p, 0), given.get(p[::-1], 0)) if dups == "keep" else 1) for p in pairs}
        expected = sorted(((b, a) for (a, b), m in mult.items() for _ in range(m)))
        assert list(zip(ei[1].tolist(), ei[0].tolist())) == expected
        assert indptr[-1] == len(expected) and np.array_equal(np.diff(indptr), np.bincount(ei[1], minlength=n))
        assert counts.num_edges == len(expected) and counts.duplicates == int(keep.sum()) - len(given)
        assert not list(folder.glob("*.bin"))  # the runs and the spool are gone


# --- the command line ------------------------------------------------------------------------------

def test_check_then_info_say_what_was_found(tmp_path, ref, capsys):
    folder = small_graph(tmp_path / "g", [(0, 1), (0, 1), (3, 3), (1, 2), (2, 1)])
    np.save(folder / "edge_weight.npy", np.ones(5))
    argv = ["datasets", "check", f"npy:{folder}", "--cache-dir", str(tmp_path / "hub")]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "ok: checked and converted" in out and f"source: npy at {folder}" in out
    assert "self-loops 1 (removed), duplicate edges 1 (removed)" in out
    assert "directed as given: made undirected, 1 reverse edges added" in out
    assert "features.npy (features, float32 (6, 3))" in out and "int64" in out
    assert "splits: train 2 (train_idx), val 2 (val_idx), test 2 (test_idx)" in out
    assert "edge_weight.npy ignored" in out
    assert cli.main(argv) == 0 and "already checked and converted" in capsys.readouterr().out
    assert cli.main(["datasets", "info", f"npy:{folder}", "--cache-dir", str(tmp_path / "hub")]) == 0
    out = capsys.readouterr().out
    assert "measured (in the hub at" in out and "self-loops 1 (removed)" in out


def test_info_before_conversion_reads_the_headers(tmp_path, ref, capsys):
    folder = own_graphs.write_npy(ref, tmp_path / "g")
    assert cli.main(["datasets", "info", f"npy:{folder}", "--cache-dir", str(tmp_path / "hub")]) == 0
    out = capsys.readouterr().out
    assert "read from the files' headers" in out and "gnnbench datasets check npy:PATH" in out
    assert f"nodes {ref.num_nodes:,}" in out
    assert not (tmp_path / "hub" / "datasets").exists()  # info converts nothing


def test_list_names_the_sources_of_your_own_graph(tmp_path, capsys):
    assert cli.main(["datasets", "list", "--cache-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    for source in ("npy:PATH", "pyg-file:PATH", "graphbolt:PATH", "edge-list:PATH"):
        assert source in out


# --- a real cell on each format ----------------------------------------------------------------------

@pytest.mark.stacks
def test_a_real_cell_on_each_format_with_both_backends_and_lmdb(tmp_path, ref):
    require_stacks("pyg", "dgl")
    npy = own_graphs.write_npy(ref, tmp_path / "npy")
    plain = tmp_path / "plain"
    plain.mkdir()
    for name in hub.ARRAYS:
        np.save(plain / f"{name}.npy", getattr(ref, name))
    pt = own_graphs.write_pyg_file(stacks.get("pyg").python, plain, tmp_path / "graph.pt")
    gb = own_graphs.write_graphbolt(ref, tmp_path / "gb")
    el = own_graphs.write_edge_list(ref, tmp_path / "el", "parquet", "str")
    suite = tmp_path / "own.yaml"
    suite.write_text(f"""
name: own
datasets:
  own-npy: {{source: npy, params: {{path: {npy}}}}}
  own-pyg: "pyg-file:{pt}"
  own-graphbolt: {{source: graphbolt, params: {{path: {gb}}}}}
  own-edges: {{source: edge-list, params: {{path: {el}}}}}
backends: [pyg-neighbor, dgl-graphbolt]
settings: {{store: lmdb, batch_size: 64, fanout: [4, 2], epochs: 1, warmup_epochs: 0, hidden: 8, timeout: 300}}
""")
    results = tmp_path / "results"
    proc = subprocess.run([sys.executable, "-m", "bench.cli", "run", str(suite), "--results", str(results),
                           "--cache-dir", str(tmp_path / "hub"), "--no-install"],
                          cwd=REPO, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-3000:]
    (result,) = results.glob("own-*.json")
    cells = json.loads(result.read_text())["benchmarks"]
    assert len(cells) == 8
    sources = {"own-npy": str(npy), "own-pyg": str(pt), "own-graphbolt": str(gb), "own-edges": str(el)}
    for bench in cells:
        info = bench["extra_info"]
        card = info["dataset"]
        assert info["settings"]["store"] == "lmdb"
        assert card["source_path"] == sources[card["name"]]  # the path, not its contents
        assert card["num_nodes"] == ref.num_nodes and card["num_edges"] == ref.edge_index.shape[1]
    page = result.with_suffix(".md").read_text()
    for name, path in sources.items():
        assert f"`{name}`" in page and path in page
    assert proc.stdout.count("checking dataset own-") == 4  # each checked once, before any cell


def test_a_run_checks_before_any_cell(tmp_path, ref, capsys):
    """A bad file stops `gnnbench run` before any cell: exit 2, one line naming it, nothing written."""
    folder = own_graphs.write_npy(ref, tmp_path / "g")
    labels = ref.labels.copy()
    labels[3] = -5
    np.save(folder / "labels.npy", labels)
    suite = tmp_path / "s.yaml"
    suite.write_text(f"name: s\ndatasets:\n  mine: npy:{folder}\nbackends: [pyg-neighbor]\n")
    code = cli.main(["run", str(suite), "--results", str(tmp_path / "r"), "--cache-dir", str(tmp_path / "hub"),
                     "--no-install"])
    err = capsys.readouterr().err
    assert code == 2 and "dataset 'mine' (npy)" in err and str(folder / "labels.npy") in err, err
    assert not (tmp_path / "r").exists() or not list((tmp_path / "r").iterdir())


def test_the_conversion_benchmark_runs_and_checks_its_round_trip(tmp_path):
    """The benchmark's own plumbing at a tiny size (its figures are for the README, not asserted
    here): every format converts to the synthetic graph's arrays, and the table says so."""
    from bench.datasets import convert_benchmark

    out = tmp_path / "convert.json"
    code = convert_benchmark.main(["--scale", "8", "--edge-factor", "4", "--feature-dim", "8",
                                   "--formats", "npy,graphbolt,edge-list,edge-list-csv", "--in-memory",
                                   "--work", str(tmp_path / "work"), "--out", str(out)])
    result = json.loads(out.read_text())
    assert [c["format"] for c in result["conversions"]] == ["npy", "graphbolt", "edge-list", "edge-list-csv", "in-memory"]
    for c in result["conversions"]:
        assert c["same_as_reference"], c
        assert c["peak_rss_bytes"] > 0 and c["vm_hwm_bytes"] > 0 and c["hub_bytes"] > 0
    assert "| npy |" in out.with_suffix(".md").read_text()
    assert code in (0, 1)  # at this size the interpreter alone is many times the hub: no verdict here


def test_the_conversion_benchmark_names_what_its_formats_need(tmp_path, capsys):
    """pyg-file without the pyg stack's interpreter, a typed format for a plain graph, --in-memory
    for a typed one: exit 2 naming what is wrong, before anything is generated."""
    from bench.datasets import convert_benchmark

    common = ["--work", str(tmp_path / "work"), "--out", str(tmp_path / "c.json")]
    for argv, said in [(["--formats", "pyg-file"], "--pyg-python"), (["--formats", "igbh"], "unknown format(s) for a plain graph: igbh"),
                       (["--typed", "--in-memory"], "--in-memory is the plain graph's")]:
        with pytest.raises(SystemExit) as stopped:
            convert_benchmark.main(argv + common)
        assert stopped.value.code == 2 and said in capsys.readouterr().err, argv
    assert not (tmp_path / "work").exists()


def test_the_typed_conversion_benchmark_runs_and_checks_its_round_trip(tmp_path):
    """The typed benchmark's plumbing at a tiny size (`convert_benchmark --typed`; its figures at
    IGBH-tiny's structure are in results/convert/, not asserted here): the generator's hub comes
    back array for array through the typed .npy folder and IGB's layout, and each row has its fields."""
    from bench.datasets import convert_benchmark

    out = tmp_path / "typed.json"
    code = convert_benchmark.main(["--typed", "--scale", "1", "--feature-dim", "8", "--formats",
                                   "generator,typed-npy,igbh", "--work", str(tmp_path / "work"), "--out", str(out)])
    result = json.loads(out.read_text())
    assert [c["format"] for c in result["conversions"]] == ["generator", "typed-npy", "igbh"]
    generator = result["conversions"][0]
    assert "features-paper" in generator["arrays"] and "graphbolt_indices" in generator["arrays"]
    for c in result["conversions"]:
        assert c["same_as_reference"] and c["differs"] == [], c
        assert c["arrays"].keys() == generator["arrays"].keys()
        assert c["peak_rss_bytes"] > 0 and c["vm_hwm_bytes"] > 0 and c["hub_bytes"] > 0 and c["convert_s"] > 0
    assert result["graph"]["node_types"]["paper"]["count"] == 1000 and result["graph"]["num_edges"] > 0
    assert "| typed-npy |" in out.with_suffix(".md").read_text()
    assert code in (0, 1)  # at this size the interpreter alone is many times the hub: no verdict here
