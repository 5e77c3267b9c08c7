"""One model on both sides, proven (issues 49, 63): for every task and model (node GraphSAGE, typed
R-GCN and R-GAT, the link encoder with each decoder), one small fixed sampled batch in each
framework's form, and for GraphSAGE, R-GCN and R-GAT with three layers each framework's own
sampler's batch from one seed set (sampled, rgcn-sampled, rgat-sampled); the same weights in both
models (PyG's, loaded into DGL's through bench/backends/weight_names.py), and the output at the seeds, the loss and every parameter's
gradient compared in fp32 within ATOL + RTOL * |PyG's|, in eval mode and in train mode (every
stochastic layer's probability set to 0 on both sides), with every stochastic layer's probability
as built compared too (by layer and kind: a dropout on one side only is named, although train mode
ran it at 0). Each side runs in its own stack (tests/parity_side.py); this test writes the batches
and compares. Each side's fresh parameters are also held to the one initialisation
(bench/backends/base.py same_start).

The fixed batch is as PyG's NeighborLoader gives it (nodes numbered by the hop that first reached
them, each node's in-edges those sampled around it, fanout [3, 2]), and, for DGL, as GraphBolt
samples it (each layer sampled again for all its destination nodes: the seeds' input-layer edges
are fresh draws, unlike PyG's), so DGL's side computes over bench/backends/layer_edges.py's blocks
(`same_layer_edges: true`), as the GraphBolt backends do. The sampled cases' graphs are made so that
both samplers must take the same edges where PyG's layers compute (every node's in-degree at most
the fanout of the hop that first reaches it, per relation where typed) while GraphBolt's resampled layers draw at random (the
seeds' and hop 1's in-degrees above the later fanouts): the two batches, mapped onto one another by
global node ids, must hold the same edges per layer once layer_edges has rewritten GraphBolt's.

A planted difference (tests/parity_side.py PLANT_ENV) must fail, naming the layer and tensor:
    root        a dropped root term (DGL's layer 0)             node, link-dot, rgcn
    aggr        another aggregation (PyG's layer 0)             node, link-mlp, rgcn, rgat
    init        another initialisation (DGL's own)              node, link-dot, rgat
    blocks      GraphBolt's minibatch.blocks (same_layer_edges false)   node, link-dot, rgcn
    feat_drop   DGL's layer-0 SAGEConv with feat_drop 0.5       node, link-dot, sampled
    attn_drop   DGL's layer-0 GATConv with attn_drop 0.5        rgat, rgat-sampled
    train_only  a functional dropout in DGL's layer 0, training only   node, rgcn, sampled, rgcn-sampled
    first_hop   layer_edges.first_hop iterated outwards (wrong from three layers)   the sampled three
The R-GCN's self-loop weight and bias are one torch code on both sides (bench/backends/typed.py
rgcn_layer), only its per-relation mean is each framework's (docs/guarantees.md).
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
CASES = ("node", "link-dot", "link-mlp", "rgcn", "rgat", "sampled", "rgcn-sampled", "rgat-sampled")
MODES = ("eval", "train")
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


def sampled_graph(rng) -> dict:
    """A graph whose nodes lie in levels by their distance from the seeds (4 seeds, then 10, 14, 12
    nodes, 8 out of reach), global ids shuffled, and fanout [4, 2, 1] (seed hop first): the seeds'
    in-degree 4, hop 1's 2, hop 2's at most 1, so each node's in-edges at the hop that first reaches
    it are all of them (the same in both samplers), while GraphBolt's later layers resample the
    seeds (2, then 1 of 4) and hop 1 (1 of 2) at random: the rewrite (layer_edges) must undo that."""
    sizes = [4, 10, 14, 12, 8]
    ids = rng.permutation(sum(sizes))
    level = np.split(ids, np.cumsum(sizes)[:-1])
    edges = []

    def in_edges(dst, pool, degree, must):
        """`dst`'s in-edges, `degree` each from `pool` (not itself), every node of `must` reached."""
        left, share = list(rng.permutation(must)), -(-len(must) // len(dst))
        for v in dst:
            own = [left.pop() for _ in range(min(share, len(left)))]
            rest = [u for u in pool if u != v and u not in own]
            own += rng.choice(rest, size=degree - len(own), replace=False).tolist()
            edges.extend((u, v) for u in own)
        assert not left

    in_edges(level[0], np.concatenate(level[:2]), 4, level[1])
    in_edges(level[1], np.concatenate(level[:3]), 2, level[2])
    in_edges(level[2][:12], level[3], 1, level[3])  # hop 2: one in-edge each, or none
    in_edges(level[2][12:13], np.concatenate(level[1:3]), 1, [])
    in_edges(level[3], np.concatenate(level[3:]), 3, [])  # beyond the third hop: never sampled
    in_edges(level[4], level[4], 2, [])
    edge_index = np.array(edges, dtype=np.int64).T
    return {"layers": 3, "num_classes": 3, "fanout": np.array([4, 2, 1]), "seeds": level[0].astype(np.int64),
            "x": rng.standard_normal((len(ids), 5)).astype(np.float32), "labels": rng.integers(0, 3, len(ids)),
            "edge_index": edge_index[:, np.lexsort(edge_index[::-1])]}


def typed_sampled_graph(rng) -> dict:
    """sampled_graph's levels on a typed graph: papers (the target, features) and authors
    (featureless), relations cites, writes, rev_writes, per relation the in-degrees 4, 2, at most 1 at
    the levels 0, 1, 2 (PyG and GraphBolt sample per relation), ids per type shuffled."""
    relations = [("paper", "cites", "paper"), ("author", "writes", "paper"), ("paper", "rev_writes", "author")]
    sizes = {"paper": [4, 8, 10, 8, 4], "author": [0, 6, 10, 8, 3]}
    level = {t: np.split(rng.permutation(sum(v)), np.cumsum(v)[:-1]) for t, v in sizes.items()}
    covering = {"paper": relations[0], "author": relations[1]}  # reaches the next level of its source type
    edges = {r: [] for r in relations}
    for r in relations:
        src, _, dst = r
        for k, nodes in enumerate(level[dst]):
            near = k < 3  # levels 0-2: sampled; 3 and out of reach: never
            pool = np.concatenate(level[src][:k + 2] if near else level[src][3:])
            left = list(rng.permutation(level[src][k + 1])) if near and covering[src] == r else []
            share, degree = -(-len(left) // max(len(nodes), 1)), [4, 2, 1, 2, 2][k]
            for v in nodes:
                own = [left.pop() for _ in range(min(share, len(left)))]
                rest = [u for u in pool if (u != v or src != dst) and u not in own]
                own += rng.choice(rest, size=degree - len(own), replace=False).tolist()
                edges[r].extend((u, v) for u in own)
            assert not left
    counts = {t: sum(v) for t, v in sizes.items()}
    return {"layers": 3, "num_classes": 3, "fanout": np.array([4, 2, 1]), "seeds": level["paper"][0].astype(np.int64),
            "node_types": np.array(list(counts)), "feature_dims": np.array([5, 0]), "counts": np.array(list(counts.values())),
            "relations": np.array([":".join(r) for r in relations]), "labels": rng.integers(0, 3, counts["paper"]),
            "x/paper": rng.standard_normal((counts["paper"], 5)).astype(np.float32),
            **{f"edges/{':'.join(r)}": np.array(e, dtype=np.int64).T for r, e in edges.items()}}


def write_batches(folder: Path) -> None:
    rng = np.random.default_rng(49)
    plain, typed, sampled, typed_sampled = plain_batch(rng), typed_batch(rng), sampled_graph(rng), typed_sampled_graph(rng)
    for case in CASES:
        (folder / case).mkdir(parents=True, exist_ok=True)
        if case.endswith("sampled"):
            np.savez(folder / case / "graph.npz", **(sampled if case == "sampled" else typed_sampled))
        else:
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

    problems += stochastic_differences(pyg, dgl) + batch_differences(pyg, dgl)

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


def stochastic_differences(pyg: dict, dgl: dict) -> list[str]:
    """Each layer's stochastic settings as built, by kind (features, attention, between layers):
    their nonzero probabilities must agree, whatever each framework names the module."""
    def settings(found: dict) -> dict:
        out = {}
        for entry in found["dropouts"]:
            module, kind, p = str(entry).split("|")
            if float(p) > 0:
                out.setdefault((where(module + "."), kind), []).append((float(p), module))
        return out

    ours, theirs = settings(pyg), settings(dgl)
    problems = []
    for key in sorted(set(ours) | set(theirs)):
        a, b = sorted(ours.get(key, [])), sorted(theirs.get(key, []))
        if [p for p, _ in a] != [p for p, _ in b]:
            shown = [", ".join(f"{m} p={p}" for p, m in x) or "none" for x in (a, b)]
            problems.append(f"dropout: {key[0]} {key[1]}: {shown[0]} in PyG, {shown[1]} in DGL")
    return problems


def batch_differences(pyg: dict, dgl: dict) -> list[str]:
    """The sampled cases: the seeds, and each layer's edges per relation in global ids (PyG's whose
    destination is among that layer's of GraphBolt's) the same in both samplers' batches."""
    if "batch/seeds" not in pyg:
        return []
    problems = [] if np.array_equal(pyg["batch/seeds"], dgl["batch/seeds"]) else ["batch: the seeds differ"]
    for key in sorted(k for k in dgl if k.startswith("batch/edges/")):
        i, relation = key.split("/")[2:]
        theirs = sorted(map(tuple, dgl[key].T.tolist()))
        wanted = set(dgl[f"batch/dst/{i}/{relation.split(':')[2]}"].tolist())
        ours = sorted(e for e in map(tuple, pyg.get(key, np.zeros((2, 0), int)).T.tolist()) if e[1] in wanted)
        if ours != theirs:
            problems.append(f"batch: layer {i} edges {relation} (global ids): {len(set(ours) - set(theirs))} only in "
                            f"PyG's, {len(set(theirs) - set(ours))} only in DGL's, of {len(ours)} and {len(theirs)}")
    return problems


def load(folder: Path, case: str, side: str, mode: str = "eval") -> dict:
    return dict(np.load(folder / case / f"{side}{'-train' if mode == 'train' else ''}.npz"))


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    """Both sides of every case, nothing planted: PyG's first (its weights are DGL's)."""
    require_stacks("pyg", "dgl")
    folder = tmp_path_factory.mktemp("parity")
    write_batches(folder)
    run_side("pyg", folder, folder, CASES)
    run_side("dgl", folder, folder, CASES)
    return folder


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", CASES)
def test_the_same_weights_give_the_same_output_loss_and_gradients(base, case, mode):
    pyg, dgl = load(base, case, "pyg", mode), load(base, case, "dgl", mode)
    problems = differences(pyg, dgl)
    assert not problems, "\n".join(problems)
    assert np.abs(pyg["out"]).max() > 0 and float(pyg["loss"]) > 0
    nonzero = [n for n in pyg["names"] if np.abs(pyg[f"grad/{n}"]).max() > 0]
    assert len(nonzero) >= len(pyg["names"]) // 2, "too few parameters take part: the batch checks little"


def test_the_sampled_batches_hold_what_the_check_needs(base):
    """Three layers (the rewrite's direction shows from three: the first_hop plant), and the
    stochastic layers the settings check compares seen on both sides (DGL's SAGEConv's feat_drop,
    PyG's and DGL's GAT attention dropout), each at 0 as the backends build them."""
    for case in ("sampled", "rgcn-sampled", "rgat-sampled"):
        assert {k.split("/")[2] for k in load(base, case, "dgl") if k.startswith("batch/dst/")} == {"0", "1", "2"}
    dgl = load(base, "sampled", "dgl")
    assert any(str(d).startswith("convs.2.conv.feat_drop|features") for d in dgl["dropouts"])  # DGL's SAGEConv's, at 0
    for case in ("rgat", "rgat-sampled"):
        assert any("|attention|" in str(d) for d in load(base, case, "pyg")["dropouts"])
        assert any("attn_drop|attention" in str(d) for d in load(base, case, "dgl")["dropouts"])


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
    ("node", "feat_drop", ["dropout: layer 0 features: none in PyG, convs.0.conv.feat_drop p=0.5 in DGL"]),
    ("link-dot", "feat_drop", ["dropout: layer 0 features: none in PyG, encoder.convs.0.conv.feat_drop p=0.5"]),
    ("sampled", "feat_drop", ["dropout: layer 0 features: none in PyG, convs.0.conv.feat_drop p=0.5 in DGL"]),
    ("rgat", "attn_drop", ["dropout: layer 0 attention: none in PyG, layers.0.conv.mods."]),
    ("node", "train_only", ["train: output at the seeds", "train: gradient: layer 0 convs.0.lin_l.weight"]),
    ("rgcn", "train_only", ["train: output at the seeds", "train: gradient: layer 0 layers.0.loop.weight"]),
    ("sampled", "train_only", ["train: output at the seeds", "train: gradient: layer 0 convs.0.lin_l.weight"]),
    ("sampled", "first_hop", ["batch: layer 0 edges node:to:node (global ids)", "output at the seeds",
                              "gradient: layer 0 convs.0.lin_l.weight"]),
    ("rgcn-sampled", "first_hop", ["batch: layer 0 edges paper:cites:paper (global ids)", "output at the seeds",
                                   "gradient: layer 0 layers.0.relations.conv.convs.<paper___cites___paper>.lin_l.weight"]),
    ("rgat-sampled", "first_hop", ["batch: layer 0 edges author:writes:paper (global ids)", "output at the seeds"]),
    ("rgat-sampled", "attn_drop", ["dropout: layer 0 attention: none in PyG, layers.0.conv.mods."]),
    ("rgcn-sampled", "train_only", ["train: output at the seeds", "train: gradient: layer 0 layers.0.loop.weight"]),
]
EVAL_CLEAN = {"train_only"}  # plants that only training sees: eval must still agree


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
    problems = {}
    for mode in MODES:
        pyg = load(planted[plant] if plant == "aggr" else base, case, "pyg", mode)
        dgl = load(base if plant == "aggr" else planted[plant], case, "dgl", mode)
        problems[mode] = differences(pyg, dgl)
    found = problems["eval"] + [f"train: {p}" for p in problems["train"]]
    for expected in named:
        assert any(p.startswith(expected) for p in found), (expected, found)
    if plant in EVAL_CLEAN:
        assert problems["eval"] == [], problems["eval"]
