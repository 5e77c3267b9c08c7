"""Real datasets through the frameworks' own loaders, offline: OGB on a fixture in OGB's raw
format, the offline error, the memory refusal, and `gnnbench datasets`."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from bench.datasets import hub
from bench.run.prepare import ensure_dataset
from tests.conftest import REPO, offline_data_root, require_stacks, run_suite
from tests.ogb_fixture import write_arxiv_like

ARXIV = {"name": "arxiv", "source": "ogb", "params": {"name": "ogbn-arxiv"}}


@pytest.fixture(scope="module")
def ogb_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("ogb-root")
    return root, write_arxiv_like(root)


def test_ogb_fixture_is_read_by_ogbs_own_loader(ogb_root, tmp_path, monkeypatch):
    require_stacks("pyg")
    monkeypatch.setenv("GNNBENCH_OFFLINE", "1")
    root, expected = ogb_root
    data = hub.load(ensure_dataset(ARXIV, tmp_path, root))
    card = data.card()
    assert {k: card[k] for k in expected} == expected  # edges: both directions, as the generator made them
    assert not list(root.rglob("processed"))  # the data root was only read


def test_ogb_end_to_end_both_backends(ogb_root, tmp_path):
    require_stacks("pyg", "dgl")
    root, _ = ogb_root
    suite = tmp_path / "ogb.yaml"
    suite.write_text("""
name: ogb-fixture
datasets:
  arxiv-fixture: ogb:ogbn-arxiv
backends: [pyg-neighbor, dgl-graphbolt]
settings: {batch_size: 64, fanout: [5, 5], epochs: 3, warmup_epochs: 1, timeout: 240}
""")
    out = tmp_path / "ogb.json"
    proc = run_suite(suite, out, tmp_path / "hub", "--data-root", str(root), env={"GNNBENCH_OFFLINE": "1"})
    assert proc.returncode == 0
    data = json.loads(out.read_text())
    assert data["unmeasured"] == []
    assert sorted(b["extra_info"]["backend"] for b in data["benchmarks"]) == ["dgl-graphbolt", "pyg-neighbor"]
    for bench in data["benchmarks"]:
        assert bench["extra_info"]["dataset"]["name"] == "arxiv-fixture"
        assert bench["extra_info"]["dataset"]["source"] == "ogb"
        assert bench["stats"]["rounds"] == 3


@pytest.mark.parametrize("spec, expected_file", [
    (ARXIV, "raw/edge.csv.gz"),
    ({"name": "pubmed", "source": "planetoid", "params": {"name": "PubMed"}}, "ind.pubmed.graph"),
    ({"name": "reddit", "source": "reddit", "params": {}}, "reddit_graph.npz"),
])
def test_offline_error_names_the_files_and_places(spec, expected_file, tmp_path, monkeypatch):
    require_stacks("pyg")
    monkeypatch.setenv("GNNBENCH_OFFLINE", "1")
    with pytest.raises(hub.DatasetError) as info:
        ensure_dataset(spec, tmp_path / "hub", tmp_path / "empty-root")
    message = str(info.value)
    assert "downloads are off" in message and expected_file in message and str(tmp_path / "empty-root") in message


def test_a_run_that_cannot_fit_is_refused_with_the_numbers(tmp_path):
    suite = tmp_path / "huge.yaml"
    suite.write_text("""
name: huge
datasets:
  papers: ogb:ogbn-papers100M
backends: [pyg-neighbor]
""")
    out = tmp_path / "huge.json"
    proc = run_suite(suite, out, tmp_path / "hub", env={"GNNBENCH_OFFLINE": "1"})
    assert proc.returncode == 0
    [refused] = json.loads(out.read_text())["unmeasured"]
    assert refused["status"] == "refused"
    assert "needs about" in refused["reason"] and "GiB" in refused["reason"] and "available" in refused["reason"]
    assert not (tmp_path / "hub" / "downloads").exists()  # refused before any download


def test_datasets_prepare_prints_the_statistics(tmp_path):
    require_stacks("pyg")
    root = str(offline_data_root())
    proc = subprocess.run([sys.executable, "-m", "bench.cli", "datasets", "prepare", "planetoid:Cora",
                           "--data-root", root, "--cache-dir", str(tmp_path)], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert "nodes 2,708, edges 10,556, feature width 1433, classes 7, split 140 / 500 / 1,000" in proc.stdout
    assert "pyg-neighbor" in proc.stdout and "per rank" in proc.stdout
    assert re.search(r"prepared in \d+\.\d s", proc.stdout), proc.stdout
    again = subprocess.run(proc.args, capture_output=True, text=True, cwd=REPO)
    assert again.returncode == 0 and "already in the hub" in again.stdout


def test_datasets_list_and_info_before_any_download(tmp_path):
    listing = subprocess.run([sys.executable, "-m", "bench.cli", "datasets", "list", "--cache-dir", str(tmp_path)],
                             capture_output=True, text=True, cwd=REPO)
    assert listing.returncode == 0
    assert "ogb:ogbn-products" in listing.stdout and "2,449,029" in listing.stdout
    info = subprocess.run([sys.executable, "-m", "bench.cli", "datasets", "info", "ogb:ogbn-papers100M",
                           "--cache-dir", str(tmp_path)], capture_output=True, text=True, cwd=REPO)
    assert info.returncode == 0 and "refused" in info.stdout and "published sizes" in info.stdout
    bad = subprocess.run([sys.executable, "-m", "bench.cli", "datasets", "info", "ogb:ogbn-nope"],
                         capture_output=True, text=True, cwd=REPO)
    assert bad.returncode == 2 and "unknown ogb dataset 'ogbn-nope'" in bad.stderr
