"""One side of a parity test (tests/test_parity.py), run in a framework's stack:

    python -m tests.parity_side pyg|dgl BATCHES OUT CASE...

CASE: node (GraphSAGE), link-dot, link-mlp (the GraphSAGE encoder and a decoder), rgcn, rgat (typed),
on one fixed sampled batch (BATCHES/CASE/batch.npz, written by the host); sampled (three-layer
GraphSAGE), rgcn-sampled and rgat-sampled (three layers, typed) on a graph and seed set
(BATCHES/CASE/graph.npz) that this side's own sampler samples: PyG's NeighborLoader, GraphBolt's
ItemSampler and sample_neighbor, as the backends build them. Each
case's model is built with gnnbench's own code (the same factories the backends use) and run twice,
writing OUT/CASE/SIDE.npz (eval mode: dropout off) and OUT/CASE/SIDE-train.npz (train mode, every
stochastic layer's probability set to 0 on both sides, so the outputs must agree exactly): every
parameter's fresh initialisation (`fresh/NAME`), the weights it ran with (`weight/NAME`), the output
at the seeds, the loss and every parameter's gradient (`grad/NAME`), all under PyG's names; and
each stochastic layer's probability as built (`dropouts`: layer module, kind, p), so a dropout that
one side has and the other lacks is named although train mode ran it at 0. PyG's side starts from
the one initialisation (bench/backends/base.py same_start); DGL's side loads PyG's weights through
bench/backends/weight_names.py. The sampled case also writes each layer's edges and the seeds in
global node ids (`batch/...`): the two samplers' batches, mapped onto one another.

PyG's side runs every layer on the whole sampled subgraph (PyG's edges); DGL's builds GraphBolt's
own minibatch (from the batch's GraphBolt form, or GraphBolt's sampler: each layer sampled again
for all its destination nodes) and computes over bench/backends/layer_edges.py's blocks, as the
GraphBolt backends do with `same_layer_edges: true`.

GNNBENCH_PLANT_PARITY plants one difference (the tests that prove a difference is caught):
    root       DGL: layer 0 drops its root (self) term: its weight's product, not the bias
    aggr       PyG: layer 0 aggregates by sum, not mean (R-GAT: by mean, not the attention's sum)
    init       DGL: its framework's own initialisation, not the one gnnbench's, and not PyG's weights
    blocks     DGL: GraphBolt's minibatch.blocks (same_layer_edges false)
    feat_drop  DGL: layer 0's SAGEConv with feat_drop 0.5
    attn_drop  DGL: layer 0's GATConv (R-GAT, one relation) with attn_drop 0.5
    train_only DGL: layer 0 drops its input features (p 0.5) in training, a functional dropout no
               setting names (seen by the train-mode run alone)
    first_hop  DGL: layer_edges.first_hop iterated from the input layer outwards (three layers)
"""

from __future__ import annotations

import os
import sys
import types
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

PLANT_ENV = "GNNBENCH_PLANT_PARITY"
HIDDEN, HEADS = 8, 2
UNTYPED, UNTYPED_NODES = "node:to:node", "node"  # the sampled batches' keys of an untyped graph


def batch_meta(b) -> types.SimpleNamespace:
    """What the typed model reads of a dataset (bench/backends/typed.py)."""
    types_ = [str(t) for t in b["node_types"]]
    dims = {t: int(d) for t, d in zip(types_, b["feature_dims"])}
    return types.SimpleNamespace(
        meta={"node_types": {t: {"feature_dim": dims[t]} for t in types_}}, target=types_[0],
        counts={t: int(c) for t, c in zip(types_, b["counts"])}, num_classes=int(b["num_classes"]),
        relations=[tuple(str(p) for p in r.split(":")) for r in b["relations"]])


def build(side: str, case: str, b):
    """The case's model from the backends' own factories."""
    from bench.backends import base
    from bench.backends.link import link_model
    from bench.backends.typed import typed_model
    from bench.settings import CellSettings

    if case in ("rgcn", "rgat"):
        data = batch_meta(b)
        layer = (__import__("bench.backends.pyg_hetero" if side == "pyg" else "bench.backends.dgl_graphbolt_hetero",
                            fromlist=["hetero_layer"]).hetero_layer)
        settings = CellSettings(model=case, hidden=HIDDEN, heads=HEADS, fanout=[0] * int(b["layers"]))
        return typed_model(layer(case, data.relations), data, settings)
    if side == "pyg":
        from bench.backends.pyg_node import PygNodePipeline as Pipeline
    else:
        from bench.backends.dgl_graphbolt import Pipeline
    width, layers = b["x"].shape[1], int(b["layers"])
    if case in ("node", "sampled"):
        return base.graphsage(Pipeline.conv_factory(), width, HIDDEN, int(b["num_classes"]), layers)
    return link_model(base.graphsage(Pipeline.conv_factory(), width, HIDDEN, HIDDEN, layers), HIDDEN,
                      case.removeprefix("link-"))


# --- the batch in each framework's form --------------------------------------------------------

def pyg_run(case: str, b, model):
    """(output at the seeds, loss): every layer on the whole subgraph, as PyG's backends run it."""
    if case in ("rgcn", "rgat"):
        data = batch_meta(b)
        x = {t: torch.from_numpy(b[f"x/{t}"]) for t in data.counts if f"x/{t}" in b}
        ids = {t: torch.from_numpy(b[f"ids/{t}"]) for t in data.counts if f"x/{t}" not in b}
        edges = {r: torch.from_numpy(b[f"edges/{':'.join(r)}"]) for r in data.relations}
        out = model(x, ids, [edges] * int(b["layers"]))[:int(b["seeds"])]
        return out, F.cross_entropy(out, torch.from_numpy(b["labels"]))
    graphs = [torch.from_numpy(b["edges"])] * int(b["layers"])
    x = torch.from_numpy(b["x"])
    if case == "node":
        out = model(x, graphs)[:int(b["seeds"])]
        return out, F.cross_entropy(out, torch.from_numpy(b["labels"]))
    return link_loss(model(x, graphs, torch.from_numpy(b["pair_src"]), torch.from_numpy(b["pair_dst"])), b)


def sampled_pyg(g, model):
    """(output at the seeds, loss, the batch in global ids) from PyG's NeighborLoader over the graph."""
    from torch_geometric.data import Data
    from torch_geometric.loader import NeighborLoader

    layers = len(g["fanout"])
    data = Data(x=torch.from_numpy(g["x"]), edge_index=torch.from_numpy(g["edge_index"]).contiguous(),  # pyg-lib sorts it
                y=torch.from_numpy(g["labels"]), num_nodes=len(g["x"]))
    seeds = torch.from_numpy(g["seeds"])
    batch = next(iter(NeighborLoader(data, num_neighbors=g["fanout"].tolist(), input_nodes=seeds,
                                     batch_size=seeds.numel(), shuffle=False)))
    out = model(batch.x, [batch.edge_index] * layers)[:batch.batch_size]
    edges = batch.n_id[batch.edge_index].numpy()  # every layer computes over the whole subgraph
    found = {"batch/seeds": batch.n_id[:batch.batch_size].numpy(),
             **{f"batch/edges/{i}/{UNTYPED}": edges for i in range(layers)}}
    return out, F.cross_entropy(out, batch.y[:batch.batch_size]), found


def typed_sampled_pyg(g, model):
    """sampled_pyg on a typed graph (HeteroData, seeds of the target type)."""
    from torch_geometric.data import HeteroData
    from torch_geometric.loader import NeighborLoader

    data, meta = HeteroData(), batch_meta(g)
    for t, n in meta.counts.items():
        data[t].num_nodes = n
    data[meta.target].x, data[meta.target].y = torch.from_numpy(g[f"x/{meta.target}"]), torch.from_numpy(g["labels"])
    for r in meta.relations:
        data[r].edge_index = torch.from_numpy(g[f"edges/{':'.join(r)}"]).contiguous()
    seeds = torch.from_numpy(g["seeds"])
    batch = next(iter(NeighborLoader(data, num_neighbors=g["fanout"].tolist(), input_nodes=(meta.target, seeds),
                                     batch_size=seeds.numel(), shuffle=False)))
    size = batch[meta.target].batch_size
    ids = {t: batch[t].n_id for t in meta.counts if t != meta.target}
    out = model({meta.target: batch[meta.target].x}, ids, [batch.edge_index_dict] * len(g["fanout"]))[:size]
    found = {"batch/seeds": batch[meta.target].n_id[:size].numpy()}
    for r in batch.edge_types:
        edges = np.stack([batch[r[0]].n_id[batch[r].edge_index[0]].numpy(), batch[r[2]].n_id[batch[r].edge_index[1]].numpy()])
        found.update({f"batch/edges/{i}/{':'.join(r)}": edges for i in range(len(g["fanout"]))})
    return out, F.cross_entropy(out, batch[meta.target].y[:size]), found


def sampled_dgl(g, model, typed: bool = False):
    """(output at the seeds, loss, the batch in global ids) from GraphBolt's sampler, as the backends'
    datapipe samples (fanouts input layer first, per edge type where typed; layer_edges.attach) and
    their forward computes. A typed graph as typed_hub keeps it: one CSC over the nodes numbered type
    after type, each node's in-edges by edge type; ids per type in the minibatch."""
    import dgl.graphbolt as gb

    from bench.backends import layer_edges

    meta = batch_meta(g) if typed else None
    names = [":".join(r) for r in meta.relations] if typed else [UNTYPED]
    counts = list(meta.counts.values()) if typed else [len(g["x"])]
    offset = dict(zip(meta.counts, np.cumsum([0] + counts))) if typed else {None: 0}
    src, dst, etype = (np.concatenate(v) for v in zip(*[
        (g[f"edges/{n}"][0] + offset[n.split(":")[0]], g[f"edges/{n}"][1] + offset[n.split(":")[2]], np.full(g[f"edges/{n}"].shape[1], e))
        for e, n in enumerate(names)])) if typed else (*g["edge_index"], np.zeros(g["edge_index"].shape[1], np.int64))
    order = np.lexsort((src, etype, dst))
    indptr = torch.from_numpy(np.concatenate([[0], np.cumsum(np.bincount(dst, minlength=sum(counts)))]))
    if typed:
        graph = gb.fused_csc_sampling_graph(
            indptr, torch.from_numpy(src[order]), torch.from_numpy(np.cumsum([0] + counts)),
            torch.from_numpy(etype[order].astype(np.uint8)), {t: i for i, t in enumerate(meta.counts)},
            {n: i for i, n in enumerate(names)})
        fanouts = [torch.full((len(names),), int(f), dtype=torch.int64) for f in g["fanout"][::-1]]
        items = gb.ItemSetDict({meta.target: gb.ItemSet((torch.from_numpy(g["seeds"]), torch.from_numpy(g["labels"][g["seeds"]])),
                                                        names=("seed_nodes", "labels"))})
        store = {("node", meta.target, "feat"): gb.TorchBasedFeature(torch.from_numpy(g[f"x/{meta.target}"]))}
        keys = {meta.target: ["feat"]}
    else:
        graph = gb.fused_csc_sampling_graph(indptr, torch.from_numpy(src[order]))
        fanouts = g["fanout"][::-1].tolist()
        items = gb.ItemSet((torch.from_numpy(g["seeds"]), torch.from_numpy(g["labels"][g["seeds"]])),
                           names=("seed_nodes", "labels"))
        store, keys = {("node", None, "feat"): gb.TorchBasedFeature(torch.from_numpy(g["x"]))}, ["feat"]
    pipe = gb.ItemSampler(items, batch_size=len(g["seeds"])).sample_neighbor(graph, fanouts)
    pipe = pipe.transform(layer_edges.attach).fetch_feature(gb.BasicFeatureStore(store), keys)
    minibatch = next(iter(gb.DataLoader(pipe)))
    blocks = layer_edges.blocks(minibatch, True)
    if typed:  # as dgl_graphbolt_hetero's forward
        ids = {t: minibatch.input_nodes[t] for t in meta.counts if t != meta.target}
        out = model({meta.target: minibatch.node_features[(meta.target, "feat")]}, ids, blocks)
        labels, seeds = minibatch.labels[meta.target], minibatch.seed_nodes[meta.target]
    else:
        out = model(minibatch.node_features["feat"], blocks)
        labels, seeds = minibatch.labels, minibatch.seed_nodes
    found = {"batch/seeds": seeds.numpy()}
    for i, (block, sg) in enumerate(zip(blocks, minibatch.sampled_subgraphs)):
        rows, cols = sg.original_row_node_ids, sg.original_column_node_ids
        for n in names:
            s, _, d = n.split(":") if typed else (None, None, None)
            u, v = block.edges(etype=tuple(n.split(":"))) if typed else block.edges()
            found[f"batch/edges/{i}/{n}"] = np.stack([(rows[s] if typed else rows)[u.long()].numpy(),
                                                      (cols[d] if typed else cols)[v.long()].numpy()])
        for t, c in (cols.items() if typed else [(UNTYPED_NODES, cols)]):
            found[f"batch/dst/{i}/{t}"] = c.numpy()
    return out, F.cross_entropy(out, labels), found


def link_loss(scores, b):
    return scores, F.binary_cross_entropy_with_logits(scores, torch.from_numpy(b["pair_labels"]))


def graphbolt_minibatch(b, typed: bool):
    """GraphBolt's MiniBatch of the batch's GraphBolt form: per layer (input layer first) its sampled
    CSC and its source and destination counts (per type where typed), node ids numbered by hop."""
    import dgl.graphbolt as gb

    subgraphs = []
    for i in range(int(b["layers"])):
        if typed:
            csc = {r: gb.CSCFormatBase(indptr=torch.from_numpy(b[f"gb{i}/indptr/{r}"]),
                                       indices=torch.from_numpy(b[f"gb{i}/indices/{r}"])) for r in b["relations"]}
            rows = {str(t): torch.arange(int(n)) for t, n in zip(b["node_types"], b[f"gb{i}/src"])}
            cols = {str(t): torch.arange(int(n)) for t, n in zip(b["node_types"], b[f"gb{i}/dst"])}
        else:
            csc = gb.CSCFormatBase(indptr=torch.from_numpy(b[f"gb{i}/indptr"]), indices=torch.from_numpy(b[f"gb{i}/indices"]))
            rows, cols = torch.arange(int(b[f"gb{i}/src"])), torch.arange(int(b[f"gb{i}/dst"]))
        subgraphs.append(gb.SampledSubgraphImpl(sampled_csc=csc, original_row_node_ids=rows,
                                                original_column_node_ids=cols))
    return gb.MiniBatch(sampled_subgraphs=subgraphs)


def dgl_run(case: str, b, model, same_layer_edges: bool):
    """(output at the seeds, loss) on DGL blocks, as the GraphBolt backends make them."""
    from bench.backends import layer_edges

    typed = case in ("rgcn", "rgat")
    minibatch = graphbolt_minibatch(b, typed)
    if same_layer_edges:
        layer_edges.attach(minibatch)  # the datapipe's step
    blocks = layer_edges.blocks(minibatch, same_layer_edges)
    if typed:
        data = batch_meta(b)
        x = {t: torch.from_numpy(b[f"x/{t}"]) for t in data.counts if f"x/{t}" in b}
        ids = {t: torch.from_numpy(b[f"ids/{t}"]) for t in data.counts if f"x/{t}" not in b}
        out = model(x, ids, blocks)
        return out, F.cross_entropy(out, torch.from_numpy(b["labels"]))
    x = torch.from_numpy(b["x"])
    if case == "node":
        out = model(x, blocks)
        return out, F.cross_entropy(out, torch.from_numpy(b["labels"]))
    return link_loss(model(x, blocks, torch.from_numpy(b["pair_src"]), torch.from_numpy(b["pair_dst"])), b)


# --- the planted differences -------------------------------------------------------------------

class _NoRootWeight(torch.nn.Module):
    """A Linear whose weight's product is dropped: the bias alone."""

    def __init__(self, linear):
        super().__init__()
        self.linear = linear

    def forward(self, x):
        return self.linear(torch.zeros_like(x))


def plant_root(case: str, model) -> None:
    if case in ("rgcn",):
        model.layers[0].loop = _NoRootWeight(model.layers[0].loop)
    else:
        convs = model.encoder.convs if case.startswith("link") else model.convs
        convs[0].conv.fc_self = _NoRootWeight(convs[0].conv.fc_self)


def plant_aggr(case: str, model) -> None:
    from torch_geometric.nn.aggr import MeanAggregation, SumAggregation

    if case in ("rgcn", "rgat"):
        for conv in model.layers[0].relations.conv.convs.values() if case == "rgcn" else model.layers[0].conv.convs.values():
            conv.aggr_module = SumAggregation() if case == "rgcn" else MeanAggregation()
    else:
        convs = model.encoder.convs if case.startswith("link") else model.convs
        convs[0].aggr_module = SumAggregation()


def plant_dropout(case: str, model, kind: str) -> None:
    """feat_drop on DGL's layer-0 SAGEConv, or attn_drop on one relation's GATConv of R-GAT's layer 0."""
    if kind == "attn_drop":
        conv = next(iter(model.layers[0].conv.mods.values())).conv
        conv.attn_drop = torch.nn.Dropout(0.5)
    else:
        (model.encoder.convs if case.startswith("link") else model.convs)[0].conv.feat_drop = torch.nn.Dropout(0.5)


def plant_train_only(case: str, model) -> None:
    """Layer 0's input features dropped (p 0.5) in training by a functional dropout: no module to name."""
    layer = model.layers[0] if case in ("rgcn", "rgat") else (
        model.encoder.convs if case.startswith("link") else model.convs)[0]
    forward = layer.forward

    def dropped(x, graph):
        x = {t: F.dropout(v, 0.5, layer.training) for t, v in x.items()} if isinstance(x, dict) else F.dropout(x, 0.5, layer.training)
        return forward(x, graph)

    layer.forward = dropped


def first_hop_forwards(layers, starts):
    """layer_edges.first_hop's loop run from the input layer outwards: each layer rewritten on its
    successor before that successor is (right with two layers, wrong from three)."""
    layers = list(layers)
    for i in range(len(layers) - 1):
        (indptr, indices), (inner_indptr, inner_indices) = layers[i], layers[i + 1]
        layers[i] = (torch.cat([inner_indptr, indptr[inner_indptr.numel():] - starts[i] + inner_indptr[-1]]),
                     torch.cat([inner_indices, indices[starts[i]:]]))
    return layers


# --- stochastic layers -------------------------------------------------------------------------

KINDS = {"feat_drop": "features", "attn_drop": "attention", "dropout": "attention"}  # PyG's GATConv: attention


def dropouts(model) -> list[str]:
    """Each stochastic setting of the model as built, "MODULE|KIND|P": every torch Dropout module,
    PyG's convs' `dropout` (GATConv's on the attention), and the shared models' dropout between
    layers (a functional one: bench/settings.py DROPOUT as the model's module reads it)."""
    from bench.backends import base, typed

    found = [f"model|between layers|{(typed if hasattr(model, 'embeddings') else base).DROPOUT}"]
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.modules.dropout._DropoutNd):
            found.append(f"{name}|{KINDS.get(name.rsplit('.', 1)[-1], name.rsplit('.', 1)[-1])}|{module.p}")
        elif isinstance(getattr(module, "dropout", None), float):
            found.append(f"{name}.dropout|attention|{module.dropout}")
    return found


def zero_dropouts(model) -> None:
    """Every stochastic setting `dropouts` names set to 0 (train mode then draws nothing)."""
    from bench.backends import base, typed

    base.DROPOUT = typed.DROPOUT = 0.0
    for module in model.modules():
        if isinstance(module, torch.nn.modules.dropout._DropoutNd):
            module.p = 0.0
        elif isinstance(getattr(module, "dropout", None), float):
            module.dropout = 0.0


def own_initialisation(model) -> None:
    """Each framework module's own reset_parameters (what gnnbench's one initialisation replaces),
    innermost first, as building the modules ran them."""
    for module in reversed(list(model.modules())):
        if module is not model and hasattr(module, "reset_parameters"):
            module.reset_parameters()


# --- one side ----------------------------------------------------------------------------------

def fresh_bounds(named: dict) -> dict:
    """Per parameter (not embeddings) the largest |value| of its fresh initialisation and the bound
    the one initialisation keeps it within: 1/sqrt(fan_in) for a matrix, 0 for a bias."""
    out = {}
    for name, p in named.items():
        if "embeddings." in name:
            continue
        fan_in = p[0].numel() if p.dim() >= 2 else 0
        out[name] = np.array([float(p.detach().abs().max()), fan_in ** -0.5 if fan_in else 0.0])
    return out


def run_case(side: str, case: str, batches: Path, folder: Path, plant: str, train: bool) -> None:
    from bench.backends import base, typed, weight_names
    from bench.settings import DROPOUT

    base.DROPOUT = typed.DROPOUT = DROPOUT  # as the settings have it (a train run before set it to 0)
    torch.manual_seed(0)
    suffix = "-train" if train else ""
    sampled = case.endswith("sampled")
    b = dict(np.load(batches / case / ("graph.npz" if sampled else "batch.npz")))
    kind = case.removesuffix("-sampled")  # the model's case (node's on a sampler's batch: "sampled")
    model = build(side, kind, b)
    if side == "dgl" and plant == "init":
        own_initialisation(model)
    params = dict(model.named_parameters())  # before a plant renames any
    if side == "pyg":
        pyg_names = list(params)
        fresh = fresh_bounds(params)
    else:
        weights = np.load(batches / case / f"pyg{suffix}.npz")
        pyg_names = [str(n) for n in weights["names"]]
        fresh = fresh_bounds(weight_names.to_pyg(params, pyg_names))
        if plant != "init":
            state = {n: torch.from_numpy(weights[f"weight/{n}"]) for n in pyg_names}
            model.load_state_dict(weight_names.to_dgl(state, params), strict=True)
    if side == "dgl" and plant == "root":
        plant_root(kind, model)
    if side == "pyg" and plant == "aggr":
        plant_aggr(kind, model)
    if side == "dgl" and plant in ("feat_drop", "attn_drop"):
        plant_dropout(kind, model, plant)
    if side == "dgl" and plant == "train_only":
        plant_train_only(kind, model)
    stochastic = dropouts(model)
    if train:  # every stochastic layer at p 0 on both sides: what differs in training shows exactly
        zero_dropouts(model)
        model.train()
    else:
        model.eval()  # dropout off; autograd on
    found = {}
    if sampled and side == "pyg":
        out, loss, found = (sampled_pyg if kind == "sampled" else typed_sampled_pyg)(b, model)
    elif sampled:
        out, loss, found = sampled_dgl(b, model, kind != "sampled")
    else:
        out, loss = pyg_run(case, b, model) if side == "pyg" else dgl_run(case, b, model, plant != "blocks")
    loss.backward()
    grads = {n: (p.grad if p.grad is not None else torch.zeros_like(p)) for n, p in params.items()}
    if side == "dgl":
        params, grads = weight_names.to_pyg(params, pyg_names), weight_names.to_pyg(grads, pyg_names)
    (out_dir := folder / case).mkdir(parents=True, exist_ok=True)
    np.savez(out_dir / f"{side}{suffix}.npz", names=np.array(pyg_names), out=out.detach().numpy(),
             loss=loss.detach().numpy(), dropouts=np.array(stochastic), **found,
             **{f"fresh/{n}": v for n, v in fresh.items()},
             **{f"weight/{n}": params[n].detach().numpy() for n in pyg_names},
             **{f"grad/{n}": grads[n].detach().numpy() for n in pyg_names})


def main(argv: list[str]) -> None:
    """SIDE BATCHES OUT CASE...: each case's batch (and, on DGL's side, PyG's weights) read from
    BATCHES/CASE, its side written to OUT/CASE/SIDE.npz."""
    side, batches, out, *cases = argv
    plant = os.environ.get(PLANT_ENV, "")
    if side == "dgl" and plant == "first_hop":
        from bench.backends import layer_edges

        layer_edges.first_hop = first_hop_forwards
    for case in cases:
        for train in (False, True):
            run_case(side, case, Path(batches), Path(out), plant, train)


if __name__ == "__main__":
    main(sys.argv[1:])
