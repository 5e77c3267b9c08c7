"""PyG: pyg-neighbor (`Pipeline`: NeighborLoader, GraphSAGE from SAGEConv, modes cpu-cpu and
cpu-cuda) and what PyG's node-classification backends share: the training step and model on
sampled subgraphs (`PygNodePipeline`), and PyG's remote backend over a disk-backed store (its
documented extension point; PyG has no LMDB backend): a `FeatureStore` serving a store's feature
rows and a `GraphStore` holding the hub's CSC arrays, so NeighborLoader samples in memory.
"""

from __future__ import annotations

import numpy as np
import torch
from torch_geometric.data import Data, EdgeAttr, FeatureStore, GraphStore, TensorAttr
from torch_geometric.data.graph_store import EdgeLayout
from torch_geometric.loader import NeighborLoader
from torch_geometric.nn import SAGEConv

from bench.backends import base, stages
from bench.backends.stages import BatchWork, subgraph_work
from bench.stores import features_in_memory, open_store
from bench.tasks import TASKS


def neighbor_sampler_in_use() -> str:
    """Which sampler PyG's NeighborSampler calls (pyg-lib's where it imports, else torch-sparse's):
    they differ several-fold in speed, so every PyG cell records it."""
    import importlib.metadata

    import torch_geometric.typing as pyg_typing

    if pyg_typing.WITH_PYG_LIB:
        import pyg_lib

        return f"pyg-lib {pyg_lib.__version__}"  # the version that imported
    if pyg_typing.WITH_TORCH_SPARSE:
        return f"torch-sparse {importlib.metadata.version('torch_sparse')} (fallback: no pyg-lib)"
    return "none: PyG finds neither pyg-lib nor torch-sparse"


def scatter_without_cpu_only_torch_scatter(device) -> str | None:
    """On a CUDA device with a CPU-only torch-scatter, tell PyG it has none (its scatter then takes
    torch's scatter_reduce); what was done, or None."""
    import torch_geometric.typing as pyg_typing

    if (device is None or device.type != "cuda" or not pyg_typing.WITH_TORCH_SCATTER
            or torch.ops.torch_scatter.cuda_version() != -1):
        return None
    pyg_typing.WITH_TORCH_SCATTER = False
    return "torch-scatter has no CUDA kernels here: PyG's scatter takes torch's scatter_reduce"


class SampledFromHub:
    """Mixed in before a pipeline: NeighborLoader over the hub's graph (`_graph(data, store)`, a
    typed one seeded on its `target` type), the training seeds shared out over the ranks."""

    target = None  # a typed graph's node type the seeds are of
    transform = None  # NeighborLoader's transform of each batch

    def __init__(self, data, settings):
        super().__init__(data, settings)
        self.graph = self._graph(data, settings.store)
        self.splits = {"train": base.shard(data.train_idx, settings.seed), "val": data.val_idx, "test": data.test_idx}
        self.train_loader = self._loader("train", shuffle=True, num_workers=settings.num_workers)
        if self.profile:  # timed where they run (main process or worker), on the CPU in both modes: no sync
            sampler = self.train_loader.node_sampler
            sampler.sample_from_nodes = stages.timed(sampler.sample_from_nodes, "sample")
            self.train_loader.filter_fn = stages.timed(self.train_loader.filter_fn, "fetch")
        self.build_model(data)

    def _loader(self, split: str, shuffle: bool, num_workers: int = 0) -> NeighborLoader:
        # is_sorted: the hub's edges (each relation's) are in CSC order already, so PyG uses the
        # pages every rank shares instead of sorting a private copy per rank
        seeds = torch.from_numpy(np.asarray(self.splits[split]))
        return NeighborLoader(
            self.graph, num_neighbors=list(self.settings.fanout), is_sorted=True,
            input_nodes=seeds if self.target is None else (self.target, seeds), batch_size=self.settings.batch_size,
            shuffle=shuffle, num_workers=num_workers, persistent_workers=num_workers > 0,
            pin_memory=bool(self.settings.pin_memory), transform=self.transform)


class PygNodePipeline(base.TrainingPipeline):
    """The shared GraphSAGE from PyG's SAGEConv on NeighborLoader batches: every layer on the whole
    subgraph, or with `trim_to_layer` layer i on it less its last i hops (the same outputs, less work)."""

    @property
    def sampler(self) -> str:
        return neighbor_sampler_in_use()

    @property
    def trims(self) -> bool:
        return bool(self.settings.trim_to_layer)

    index_dtype = {"indices": "int64", "indptr": "int64"}  # PyG's edge_index and the hub's CSC

    @staticmethod
    def full_layer(conv, x_src, x_dst, src, dst):
        """One SAGEConv over whole neighbourhoods: bipartite, the chunk's in-edges."""
        edge_index = torch.stack([src, dst]).to(x_src.device)
        return conv((x_src, x_dst), edge_index, size=(x_src.shape[0], x_dst.shape[0]))

    @staticmethod
    def conv_factory():
        """The shared GraphSAGE's layer: PyG's mean-aggregation SAGEConv from a to b features."""
        return lambda a, b: SAGEConv(a, b, aggr="mean")

    def make_model(self, data):
        scatter_without_cpu_only_torch_scatter(self.device)
        return self.sage(self.conv_factory(), data.features.shape[1], data.num_classes,
                         trim=trim_layer if self.trims else None)

    def _layers(self, batch) -> list:
        """Each layer's graph: the whole subgraph."""
        return [batch.edge_index] * len(self.settings.fanout)

    @staticmethod
    def count(batch) -> tuple[int, int]:
        return int(batch.batch_size), int(batch.edge_index.size(1))

    def forward(self, model, batch):
        hops = hops_of(batch, len(self.settings.fanout)) if self.trims else None
        out = model(batch.x, self._layers(batch), hops=hops)
        return out[: batch.batch_size], batch.y[: batch.batch_size]

    def work(self, batch) -> BatchWork:
        rows = int(batch.x.shape[0])
        hop_nodes, hop_edges = sampled_per_hop(batch, len(self.settings.fanout), rows)
        return subgraph_work(hop_nodes, hop_edges, rows, stages.tensor_bytes([batch.x]), self.settings.model != "none",
                             self.trims)


def trim_layer(layer: int, x, edge_index, hops):
    """Layer `layer`'s input: PyG's trim_to_layer with the batch's (nodes, edges) per hop."""
    from torch_geometric.utils import trim_to_layer

    x, edge_index, _ = trim_to_layer(layer, hops[0], hops[1], x, edge_index)
    return x, edge_index


def hops_of(batch, num_hops: int) -> tuple[list[int], list[int]]:
    """The batch's nodes and edges per hop for trim_to_layer (pyg-lib's, or HopCounts')."""
    return sampled_per_hop(batch, num_hops, int(batch.x.shape[0]))


class HopCounts:
    """A NeighborLoader transform for trim_to_layer: the nodes and edges per hop read off the batch
    in the loader where the sampler did not report them (torch-sparse)."""

    def __init__(self, num_hops: int):
        self.num_hops = num_hops

    def __call__(self, data):
        data.num_sampled_nodes, data.num_sampled_edges = sampled_per_hop(data, self.num_hops, int(data.num_nodes))
        return data


def sampled_per_hop(batch, num_hops: int, num_nodes: int, seeds: int | None = None) -> tuple[list[int], list[int]]:
    """([seeds, nodes first reached at hop 1, ...], [edges of hop 1, ...]) of a NeighborLoader batch
    of `num_nodes` nodes (`seeds` numbered first, default its batch_size): pyg-lib reports them, else
    `read_off_hops`."""
    found = batch._store  # the Data's own attributes: a missing one is an exception for getattr
    nodes, edges = found.get("num_sampled_nodes"), found.get("num_sampled_edges")
    if nodes is not None and edges is not None:
        return [int(n) for n in nodes], [int(e) for e in edges]
    whole = (None, None, None)  # the graph as the one relation of node type None
    hop_nodes, hop_edges = read_off_hops({whole: batch.edge_index.numpy()},
                                         {None: int(batch.batch_size if seeds is None else seeds)},
                                         {None: num_nodes}, num_hops)
    return hop_nodes[None], hop_edges[whole]


def read_off_hops(index: dict, seeds: dict, totals: dict, num_hops: int) -> tuple[dict, dict]:
    """({node type: [seeds, nodes first reached at hop 1, ...]}, {relation: [edges of hop 1, ...]}) of
    torch-sparse's edges `index` ({(src type, name, dst type): [2, E] numpy}; `seeds` and `totals` nodes
    per type): it numbers nodes in the order first reached and gives edges hop by hop, so hop k's edges
    end where destinations pass hop k-1's range (on numpy views: torch's calls cost more)."""
    ends = dict(seeds)
    hop_nodes: dict = {t: [n] for t, n in ends.items()}
    hop_edges: dict = {r: [] for r in index}
    first = dict.fromkeys(index, 0)
    for hop in range(num_hops):
        last_hop = hop == num_hops - 1
        reached = dict(ends)
        for r, (src, dst) in index.items():
            last = len(dst) if last_hop else int(dst.searchsorted(ends[r[2]]))
            hop_edges[r].append(last - first[r])
            if last > first[r]:
                reached[r[0]] = max(reached[r[0]], int(src[first[r]:last].max()) + 1)
            first[r] = last
        for t in ends:
            hop_nodes[t].append((totals if last_hop else reached)[t] - ends[t])
        ends = reached
    return hop_nodes, hop_edges


class RowFeatureStore(FeatureStore):
    """Read-only: `x` rows of each group (None, or a node type) from a store, `y` from memory."""

    def __init__(self, readers, labels: np.ndarray, target: str | None = None):
        super().__init__()
        self.readers = readers if isinstance(readers, dict) else {None: readers}
        self.labels, self.target = torch.from_numpy(np.ascontiguousarray(labels)), target

    @staticmethod
    def _index(attr: TensorAttr, size: int) -> torch.Tensor:
        index = attr.index if attr.is_set("index") else None
        if index is None or isinstance(index, slice):
            return torch.arange(size)[index or slice(None)]
        return torch.as_tensor(index)

    def _get_tensor(self, attr: TensorAttr) -> torch.Tensor | None:
        if attr.attr_name == "x" and attr.group_name in self.readers:
            rows = self.readers[attr.group_name]
            return torch.from_numpy(rows.gather(self._index(attr, rows.rows).numpy()))
        if attr.attr_name == "y" and attr.group_name == self.target:
            return self.labels[self._index(attr, self.labels.numel())]
        return None

    def _get_tensor_size(self, attr: TensorAttr) -> tuple[int, ...] | None:
        if attr.attr_name == "x" and attr.group_name in self.readers:
            return self.readers[attr.group_name].shape
        if attr.attr_name == "y" and attr.group_name == self.target:
            return tuple(self.labels.shape)
        return None

    def get_all_tensor_attrs(self) -> list[TensorAttr]:
        return ([TensorAttr(group_name=t, attr_name="x") for t in self.readers]
                + [TensorAttr(group_name=self.target, attr_name="y")])

    def _put_tensor(self, tensor, attr: TensorAttr) -> bool:
        raise NotImplementedError("a stored feature table is read-only (built by bench.stores)")

    def _remove_tensor(self, attr: TensorAttr) -> bool:
        raise NotImplementedError("a stored feature table is read-only (built by bench.stores)")


class CscGraphStore(GraphStore):
    """The graph in CSC form (the hub's arrays): the untyped graph, or each relation by `put_csc`."""

    def __init__(self, sources: np.ndarray | None = None, indptr: np.ndarray | None = None,
                 num_nodes: int | None = None):
        super().__init__()
        self._edges: dict = {}
        if sources is not None:
            self.put_csc(None, sources, indptr, (num_nodes, num_nodes))

    def put_csc(self, edge_type, sources: np.ndarray, indptr: np.ndarray, size: tuple[int, int]) -> None:
        """One relation's (or the untyped graph's, edge_type None) sources and CSC pointers."""
        self.put_edge_index((torch.from_numpy(np.asarray(sources)), torch.from_numpy(np.asarray(indptr))),
                            edge_type=edge_type, layout="csc", size=size, is_sorted=True)

    def _put_edge_index(self, edge_index, edge_attr: EdgeAttr) -> bool:
        self._edges[(edge_attr.edge_type, EdgeLayout(edge_attr.layout))] = (edge_index, edge_attr)
        return True

    def _get_edge_index(self, edge_attr: EdgeAttr):
        found = self._edges.get((edge_attr.edge_type, EdgeLayout(edge_attr.layout)))
        return found[0] if found else None

    def _remove_edge_index(self, edge_attr: EdgeAttr) -> bool:
        return self._edges.pop((edge_attr.edge_type, EdgeLayout(edge_attr.layout)), None) is not None

    def get_all_edge_attrs(self) -> list[EdgeAttr]:
        return [attr for _, attr in self._edges.values()]


def pyg_graph(data, store: str, task: str = "node", edges=None):
    """What PyG samples `edges` (edge_index, csc_indptr; default the hub's graph) of `data` from: a
    `Data` in memory (labelled but for the link task), or a store's feature rows beside the CSC."""
    edges = data if edges is None else edges
    if not features_in_memory(store):
        return (RowFeatureStore(open_store(store, task, data), data.labels),
                CscGraphStore(edges.edge_index[0], edges.csc_indptr, data.num_nodes))
    labels = {} if TASKS[task].edge_split else {"y": torch.from_numpy(data.labels)}  # scored on edges: no labels
    return Data(x=torch.from_numpy(data.features), edge_index=torch.from_numpy(edges.edge_index), **labels,
                num_nodes=data.num_nodes)


class Pipeline(SampledFromHub, PygNodePipeline):
    """pyg-neighbor: an in-memory `Data`, or a disk-backed store of feature rows."""
    _graph = staticmethod(pyg_graph)

    @property
    def transform(self):
        return HopCounts(len(self.settings.fanout)) if self.trims else None
