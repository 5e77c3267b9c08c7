"""OGB's link datasets (bench/datasets/ogb.py) through ogb's own LinkPropPredDataset, offline,
on small fixtures in OGB's layout (tests/ogb_fixture.py: torch-saved split dicts, so written in the
pyg stack), each scored by its own protocol: ogbl-collab Hits@50 against shared negatives,
ogbl-citation2 MRR against 1,000 negatives per edge, as OGB's own Evaluator counts them; and the
link task end to end on them and on a user's folder with its own split."""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest

from bench import datasets, stacks
from bench.datasets import hub, link_split
from bench.run.prepare import ensure_dataset
from tests.conftest import REPO, require_stacks, run_suite_text

pytestmark = pytest.mark.stacks

COLLAB = datasets.parse_name("ogb-link:ogbl-collab")
CITATION2 = datasets.parse_name("ogb-link:ogbl-citation2")


def in_pyg(script: str, *args: str) -> dict:
    """Run a script in the pyg stack (ogb and torch live there); its last stdout line as JSON."""
    proc = subprocess.run([str(stacks.get("pyg").python), "-c", script, *args], cwd=REPO, capture_output=True,
                          text=True, timeout=600, env={"PYTHONPATH": str(REPO), "OUTDATED_IGNORE": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def ogb_root(tmp_path_factory):
    require_stacks("pyg")
    root = tmp_path_factory.mktemp("ogbl-root")
    counts = in_pyg("import json, sys; from pathlib import Path; from tests.ogb_fixture import write_collab_like, "
                    "write_citation2_like; root = Path(sys.argv[1]); print(json.dumps({'collab': "
                    "write_collab_like(root), 'citation2': write_citation2_like(root)}))", str(root))
    return root, counts


@pytest.fixture(scope="module")
def prepared(ogb_root, tmp_path_factory):
    root, counts = ogb_root
    cache = tmp_path_factory.mktemp("ogbl-cache")
    env = {"GNNBENCH_OFFLINE": "1"}
    with pytest.MonkeyPatch.context() as mp:
        for k, v in env.items():
            mp.setenv(k, v)
        return {name: ensure_dataset(spec, cache, root) for name, spec in (("collab", COLLAB),
                                                                           ("citation2", CITATION2))}, counts


def test_the_fixtures_are_read_by_ogbs_loader_with_their_own_split_and_protocol(prepared, ogb_root):
    folders, counts = prepared
    assert datasets.tasks(COLLAB) == ("link",) and datasets.tasks(CITATION2) == ("link",)  # no node labels
    for name, protocol, negatives in (("collab", "hits@50", "shared"), ("citation2", "mrr", "per-positive")):
        card = hub.load(folders[name]).card()
        assert card["num_nodes"] == counts[name]["num_nodes"] and card["num_classes"] == 0
        assert link_split.ensure(folders[name]).name == link_split.GIVEN_FOLDER  # never a made split
        split = link_split.load(folders[name])
        assert (split.protocol, split.meta["negatives"], split.meta["given"]) == (protocol, negatives, True)
        assert len(split.val_pos) == counts[name]["valid"] and len(split.test_pos) == counts[name]["test"]
        n = split.num_nodes
        graph = set((split.edge_index[0] * n + split.edge_index[1]).tolist())
        for s, d in np.concatenate([split.val_pos, split.test_pos]):  # no held-out pair in the graph, either way
            assert s * n + d not in graph and d * n + s not in graph
    collab, citation2 = link_split.load(folders["collab"]), link_split.load(folders["citation2"])
    assert collab.val_neg.shape == (counts["collab"]["negatives"], 2)  # shared pairs
    assert citation2.val_neg.shape == (counts["citation2"]["valid"], 1000)  # 1,000 per edge
    # the fixture repeats one valid pair as an earlier year's training edge (as collab does): taken out
    assert collab.meta["held_out_removed"] == {"graph_edges": 2, "train_pos": 1}
    assert not list(ogb_root[0].rglob("processed"))  # the data root was only read


EVALUATE = """
import json, sys
import numpy as np, torch
from ogb.linkproppred import Evaluator
from bench.backends import link
from bench.datasets import link_split

out = {}
for name, folder in (("ogbl-collab", sys.argv[1]), ("ogbl-citation2", sys.argv[2])):
    split = link_split.load(folder)
    n = split.num_nodes
    positives = set()
    for s, d in np.asarray(split.val_pos):  # citation2's are directed: (source, its citation)
        positives |= {int(s) * n + int(d)} | ({int(d) * n + int(s)} if split.shared_negatives else set())
    perfect = lambda s, d: torch.tensor([float(k in positives) for k in (s * n + d).tolist()])
    pos, neg = link.split_scores(split, "val", perfect)
    result = {"perfect": link.protocol_metrics(split, pos, neg)}
    evaluator, draws, ours = Evaluator(name), [], []
    for seed in range(20):
        g = torch.Generator().manual_seed(seed)
        pos, neg = link.split_scores(split, "val", lambda s, d: torch.rand(len(s), generator=g))
        mine = link.protocol_metrics(split, pos, neg)
        if split.shared_negatives:
            evaluator.K = 50
            theirs = evaluator.eval({"y_pred_pos": pos, "y_pred_neg": neg})["hits@50"]
            draws.append((mine["hits@50"], theirs))
        else:
            theirs = float(evaluator.eval({"y_pred_pos": pos, "y_pred_neg": neg})["mrr_list"].mean())
            draws.append((mine["mrr"], theirs))
    result["random"] = draws
    result["figure"] = link.protocol_figure(split, result["perfect"])
    out[name] = result
print(json.dumps(out))
"""


def test_each_protocol_gives_a_perfect_scorer_1_and_a_random_one_chance_as_ogbs_evaluator(prepared, ogb_root):
    folders, counts = prepared
    got = in_pyg(EVALUATE, str(folders["collab"]), str(folders["citation2"]))
    collab, citation2 = got["ogbl-collab"], got["ogbl-citation2"]
    assert collab["perfect"]["hits@50"] == 1.0 and collab["perfect"]["mrr"] is None  # Hits@50, no MRR
    assert collab["figure"] == 1.0 and citation2["figure"] == 1.0
    assert citation2["perfect"]["mrr"] == 1.0 and citation2["perfect"]["hits@10"] == 1.0
    for name, result in got.items():
        assert all(abs(mine - theirs) < 1e-6 for mine, theirs in result["random"]), name  # OGB's own figures
    # chance: a positive above the 50th best of M shared negatives about 50 / (M + 1) of the time;
    # a random rank among 1,000 negatives has MRR about H(1001) / 1001 = 0.0075
    hits = np.mean([m for m, _ in collab["random"]])
    assert abs(hits - 50 / (counts["collab"]["negatives"] + 1)) < 0.05
    mrr = np.mean([m for m, _ in citation2["random"]])
    assert mrr < 0.03


def test_absent_ogb_link_data_is_refused_in_one_line(tmp_path, monkeypatch):
    require_stacks("pyg")
    monkeypatch.setenv("GNNBENCH_OFFLINE", "1")
    (tmp_path / "root").mkdir()
    with pytest.raises(hub.DatasetError) as err:
        ensure_dataset(COLLAB, tmp_path / "cache", tmp_path / "root")
    message = str(err.value)
    assert "\n" not in message and "raw files not found and downloads are off" in message
    assert f"{tmp_path / 'root' / 'ogbl_collab'}; {tmp_path / 'root' / 'ogb' / 'ogbl_collab'}" in message
    assert "split/time/valid.pt" in message and "LinkPropPredDataset('ogbl-collab'" in message


LINK_SUITE = """
name: ogbl-fixture
datasets:
  collab: ogb-link:ogbl-collab
  citation2: ogb-link:ogbl-citation2
  mine: {{source: npy, params: {{path: {npy}}}}}
backends: [pyg-link, dgl-graphbolt-link]
settings: {{batch_size: 128, fanout: [5, 5], epochs: 1, warmup_epochs: 0, timeout: 300}}
exclude:
  - {{backend: dgl-graphbolt-link, dataset: [citation2, mine]}}
"""


def test_link_cells_run_on_ogb_fixtures_and_a_users_own_split(ogb_root, tmp_path, cache_dir):
    require_stacks("pyg", "dgl")
    from bench.datasets import npy_folder, synthetic
    from tests.own_graphs import write_npy

    ref = hub.load(synthetic.materialise(datasets.parse_name("synthetic:scale=8,feature_dim=16,num_classes=4"),
                                         tmp_path / "ref"))
    folder = write_npy(ref, tmp_path / "mine")
    made, _ = link_split.split_edges(ref.edge_index, ref.num_nodes, seed=1)
    for ours, file in {**npy_folder.LINK_POS, **npy_folder.LINK_NEG["shared"]}.items():
        np.save(folder / file, made[ours] if ours.endswith("pos") else made[ours][:60, :2])  # 60 shared pairs
    proc, out = run_suite_text(LINK_SUITE.format(npy=folder), tmp_path, cache_dir, "--data-root", str(ogb_root[0]),
                               name="ogbl", env={"GNNBENCH_OFFLINE": "1"})
    assert proc.returncode == 0, proc.stdout[-3000:]
    data = json.loads(out.read_text())
    assert data["unmeasured"] == []
    cells = {b["extra_info"]["cell_id"].split("/mode")[0]: b["extra_info"] for b in data["benchmarks"]}
    assert set(cells) == {"pyg-link/collab", "dgl-graphbolt-link/collab", "pyg-link/citation2", "pyg-link/mine"}
    for cell_id, info in cells.items():
        protocol = info["link_split"]["protocol"]
        assert protocol == {"collab": "hits@50", "citation2": "mrr", "mine": "hits@50"}[cell_id.split("/")[1]]
        assert info["link_split"]["given"] is True
        assert any(f"scored by its protocol: {protocol.replace('mrr', 'MRR').replace('hits', 'Hits')}" in note
                   for note in info["link_notes"])
        if protocol == "hits@50":  # Hits@K against the shared negatives, no MRR
            assert info.get("val_mrr") is None and 0 <= info["val_hits"]["50"] <= 1
        else:
            assert 0 < info["val_mrr"] <= 1 and info["link_split"]["eval_negatives"] == 1000
