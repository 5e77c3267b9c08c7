"""One model on both sides, proven (issue 49): for every task and model (node GraphSAGE, typed R-GCN
and R-GAT, the link encoder with each decoder), one small fixed sampled batch in each framework's
form, the same weights in both models (PyG's, loaded into DGL's through
bench/backends/weight_names.py), and the output at the seeds, the loss and every parameter's
gradient compared in fp32 within ATOL + RTOL * |PyG's|. Each side runs in its own stack
(tests/parity_side.py); this test writes the batch and compares. Each side's fresh parameters are
also held to the one initialisation (bench/backends/base.py same_start).

The batch is as PyG's NeighborLoader gives it (nodes numbered by the hop that first reached them,
each node's in-edges those sampled around it, fanout [3, 2]), and, for DGL, as GraphBolt samples
it (each layer sampled again for all its destination nodes: the seeds' input-layer edges are fresh
draws, unlike PyG's), so DGL's side computes over bench/backends/layer_edges.py's blocks
(`same_layer_edges: true`), as the GraphBolt backends do.

A planted difference (tests/parity_side.py PLANT_ENV) must fail, naming the layer and tensor:
    root    a dropped root term (DGL's layer 0)             node, link-dot, rgcn
    aggr    another aggregation (PyG's layer 0)             node, link-mlp, rgcn, rgat
    init    another initialisation (DGL's own)              node, link-dot, rgat
    blocks  GraphBolt's minibatch.blocks (same_layer_edges false)   node, link-dot, rgcn
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from bench import stacks
from tests.conftest import require_stacks

pytestmark = pytest.mark.stacks

REPO = Path(__file__).resolve().parents[1]
CASES = ("node", "link-dot", "link-mlp", "rgcn", "rgat")
ATOL, RTOL = 1e-5, 1e-4  # fp32: the two frameworks sum in other orders
PLANT_ENV = "GNNBENCH_PLANT_PARITY"


# --- the fixed batch ---------------------------------------------------------------------------

def csc(in_edges: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """(indptr, indices) of destination nodes 0, 1, ... with these sources each."""
    indptr = np.cumsum([0] + [len(s) for s in in_edges]).astype(np.int64)
    return indptr, np.array([u for s in in_edges for u in s], dtype=np.int64)


def draw(rng, degrees: list[int], sources: int) -> list[list[int]]:
    return [sorted(rng.choice(sources, size=d, replace=False).tolist()) for d in degrees]


def edge_index(in_edges: list[list[int]]) -> np.ndarray:
    return np.array([[u for s in in_edges for u in s], [v for v, s in enumerate(in_edges) for _ in s]], dtype=np.int64)


def plain_batch(rng) -> dict:
    """4 seeds, 6 nodes first reached at hop 1, 8 at hop 2; fanout [3, 2]. PyG's edges: each node's
    in-edges from the hop that first reached it (one node of hop 1 has none); GraphBolt's input
    layer holds the seeds' second sampling (2 fresh neighbours each) before hop 1's edges."""
    seeds, hop1, nodes = 4, 6, 18
    first = draw(rng, [3, 3, 2, 1], seeds + hop1)  # the seeds' first hop
    second = draw(rng, [2, 2, 1, 0, 2, 2], nodes)  # hop 1's nodes' own
    again = draw(rng, [2, 2, 2, 2], nodes)  # GraphBolt's seeds sampled again in the input layer
    (p1, i1), (p0, i0) = csc(first), csc(again + second)
    return {"layers": 2, "seeds": seeds, "num_classes": 3, "x": rng.standard_normal((nodes, 5)).astype(np.float32),
            "labels": rng.integers(0, 3, seeds), "edges": edge_index(first + second),
            "gb0/indptr": p0, "gb0/indices": i0, "gb0/src": nodes, "gb0/dst": seeds + hop1,
            "gb1/indptr": p1, "gb1/indices": i1, "gb1/src": seeds + hop1, "gb1/dst": seeds,
            "pair_src": np.array([0, 2, 0, 0, 2, 2]), "pair_dst": np.array([1, 3, 2, 3, 0, 1]),
            "pair_labels": np.array([1, 1, 0, 0, 0, 0], dtype=np.float32)}


def typed_batch(rng) -> dict:
    """Papers (the target, features) and authors (featureless: embeddings of 10 rows): 3 seed papers,
    papers 3-5 and authors 0-2 reached at hop 1, papers 6-8 and authors 3-5 at hop 2. Relations
    cites (paper -> paper), writes (author -> paper), rev_writes (paper -> author)."""
    relations = ["paper:cites:paper", "author:writes:paper", "paper:rev_writes:author"]
    first = {"paper:cites:paper": draw(rng, [2, 0, 3], 6), "author:writes:paper": draw(rng, [1, 2, 2], 3)}
    second = {"paper:cites:paper": draw(rng, [2, 1, 2], 9), "author:writes:paper": draw(rng, [2, 1, 1], 6),
              "paper:rev_writes:author": draw(rng, [2, 1, 2], 9)}
    again = {"paper:cites:paper": draw(rng, [2, 2, 2], 9), "author:writes:paper": draw(rng, [1, 2, 1], 6)}
    out = {"layers": 2, "seeds": 3, "num_classes": 3, "node_types": np.array(["paper", "author"]),
           "feature_dims": np.array([5, 0]), "counts": np.array([20, 10]), "relations": np.array(relations),
           "x/paper": rng.standard_normal((9, 5)).astype(np.float32),
           "ids/author": rng.choice(10, 6, replace=False).astype(np.int64), "labels": rng.integers(0, 3, 3),
           "gb0/src": np.array([9, 6]), "gb0/dst": np.array([6, 3]), "gb1/src": np.array([6, 3]),
           "gb1/dst": np.array([3, 0])}
    for r in relations:
        seeds_first = first.get(r, [])  # rev_writes reaches no seed (seeds are papers)
        out[f"edges/{r}"] = edge_index(seeds_first + second[r])
        out[f"gb1/indptr/{r}"], out[f"gb1/indices/{r}"] = csc(seeds_first)
        out[f"gb0/indptr/{r}"], out[f"gb0/indices/{r}"] = csc(again.get(r, []) + second[r])
    return out


def write_batches(folder: Path) -> None:
    rng = np.random.default_rng(49)
    plain, typed = plain_batch(rng), typed_batch(rng)
    for case in CASES:
        (folder / case).mkdir(parents=True, exist_ok=True)
        np.savez(folder / case / "batch.npz", **(typed if case in ("rgcn", "rgat") else plain))


def run_side(side: str, batches: Path, out: Path, cases, plant: str = "") -> None:
    env = {**os.environ, "DGLBACKEND": "pytorch", PLANT_ENV: plant}
    proc = subprocess.run([str(stacks.get(side).python), "-m", "tests.parity_side", side, str(batches), str(out),
                           *cases], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]


# --- the comparison ----------------------------------------------------------------------------

def where(name: str) -> str:
    """The layer a parameter belongs to, as a reader looks for it."""
    found = re.search(r"(?:convs|layers)\.(\d+)\.", name)
    if found:
        return f"layer {found.group(1)}"
    return "decoder" if name.startswith("mlp.") else "embeddings" if "embeddings." in name else "model"


def delta(a, b) -> float:
    return float(np.abs(np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)).max(initial=0.0))


def differences(pyg: dict, dgl: dict) -> list[str]:
    """Every way the two sides differ, each naming its layer and tensor; [] where they agree."""
    names = [str(n) for n in pyg["names"]]
    problems = []
    for side, found in (("PyG", pyg), ("DGL", dgl)):
        for name in names:
            if f"fresh/{name}" not in found:
                continue
            largest, bound = found[f"fresh/{name}"]
            if largest > bound * (1 + 1e-6):
                problems.append(f"initialisation ({side}): {where(name)} {name} starts up to {largest:.3g}, beyond the "
                                f"one initialisation's {'zero bias' if bound == 0 else f'bound {bound:.3g}'}")

    def compare(what: str, a, b) -> None:
        if np.shape(a) != np.shape(b):
            problems.append(f"{what}: shape {np.shape(a)} in PyG, {np.shape(b)} in DGL")
        elif not np.allclose(b, a, atol=ATOL, rtol=RTOL):
            problems.append(f"{what}: differs by up to {delta(a, b):.3g}")

    for name in names:
        compare(f"weights: {where(name)} {name}", pyg[f"weight/{name}"], dgl[f"weight/{name}"])
    compare("output at the seeds", pyg["out"], dgl["out"])
    compare("loss", pyg["loss"], dgl["loss"])
    for name in names:
        compare(f"gradient: {where(name)} {name}", pyg[f"grad/{name}"], dgl[f"grad/{name}"])
    return problems


def load(folder: Path, case: str, side: str) -> dict:
    return dict(np.load(folder / case / f"{side}.npz"))


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    """Both sides of every case, nothing planted: PyG's first (its weights are DGL's)."""
    require_stacks("pyg", "dgl")
    folder = tmp_path_factory.mktemp("parity")
    write_batches(folder)
    run_side("pyg", folder, folder, CASES)
    run_side("dgl", folder, folder, CASES)
    return folder


@pytest.mark.parametrize("case", CASES)
def test_the_same_weights_give_the_same_output_loss_and_gradients(base, case):
    pyg, dgl = load(base, case, "pyg"), load(base, case, "dgl")
    assert differences(pyg, dgl) == []
    assert np.abs(pyg["out"]).max() > 0 and float(pyg["loss"]) > 0
    nonzero = [n for n in pyg["names"] if np.abs(pyg[f"grad/{n}"]).max() > 0]
    assert len(nonzero) >= len(pyg["names"]) // 2, "too few parameters take part: the batch checks little"


# (case, plant, what the failure must name): which planted difference each case catches
PLANTED = [
    ("node", "root", ["gradient: layer 0 convs.0.lin_r.weight", "output at the seeds"]),
    ("link-dot", "root", ["gradient: layer 0 encoder.convs.0.lin_r.weight", "loss"]),
    ("rgcn", "root", ["gradient: layer 0 layers.0.loop.weight", "output at the seeds"]),
    ("node", "aggr", ["gradient: layer 0 convs.0.lin_l.weight", "output at the seeds"]),
    ("link-mlp", "aggr", ["gradient: layer 0 encoder.convs.0.lin_l.weight", "gradient: decoder mlp.0.weight"]),
    ("rgcn", "aggr", ["gradient: layer 0 layers.0.relations.conv.convs.<paper___cites___paper>.lin_l.weight"]),
    ("rgat", "aggr", ["gradient: layer 0 layers.0.conv.convs.<paper___cites___paper>.lin_src.weight"]),
    ("node", "init", ["initialisation (DGL): layer 0 convs.0.lin_l.weight", "weights: layer 0 convs.0.lin_l.weight"]),
    ("link-dot", "init", ["initialisation (DGL): layer 1 encoder.convs.1.lin_r.weight"]),
    ("rgat", "init", ["initialisation (DGL): layer 0 layers.0.conv.convs.<paper___cites___paper>.att_src"]),
    ("node", "blocks", ["output at the seeds", "gradient: layer 0 convs.0.lin_l.weight"]),
    ("link-dot", "blocks", ["loss", "gradient: layer 0 encoder.convs.0.lin_l.weight"]),
    ("rgcn", "blocks", ["output at the seeds",
                        "gradient: layer 0 layers.0.relations.conv.convs.<paper___cites___paper>.lin_l.weight"]),
]


@pytest.fixture(scope="module")
def planted(base, tmp_path_factory) -> dict[str, Path]:
    """Each plant run once over the cases that catch it: on DGL's side against PyG's clean run, or
    (aggr) PyG's planted side against DGL's clean run."""
    out = {}
    for plant in dict.fromkeys(p for _, p, _ in PLANTED):
        cases = [c for c, p, _ in PLANTED if p == plant]
        folder = out[plant] = tmp_path_factory.mktemp(f"plant-{plant}")
        run_side("pyg" if plant == "aggr" else "dgl", base, folder, cases, plant)
    return out


@pytest.mark.parametrize("case, plant, named", PLANTED, ids=[f"{c}-{p}" for c, p, _ in PLANTED])
def test_a_planted_difference_fails_naming_the_layer_and_tensor(base, planted, case, plant, named):
    pyg = load(planted[plant] if plant == "aggr" else base, case, "pyg")
    dgl = load(base if plant == "aggr" else planted[plant], case, "dgl")
    problems = differences(pyg, dgl)
    for expected in named:
        assert any(p.startswith(expected) for p in problems), (expected, problems)
