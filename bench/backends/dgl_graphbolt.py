"""DGL GraphBolt: ItemSampler -> sample_neighbor -> fetch_feature -> DataLoader, GraphSAGE from
`dgl.nn.SAGEConv`, in the modes DGL's node-classification example builds (bench/modes.py), ending
with its copy_to(device) (on the CPU it moves nothing, but runs the stages before it in a prefetch
thread). `gpu_cache`: the example's GPUCachedFeature. With `profile: true` each timed GPU stage
synchronises the device, giving up GraphBolt's overlapped feature fetch. Stores: memory,
graphbolt-disk (GraphBolt's own OnDiskFeatureData) and any store of feature rows.
"""

from __future__ import annotations

import os
import time
import warnings

os.environ.setdefault("DGLBACKEND", "pytorch")

import dgl  # noqa: E402
import numpy as np  # noqa: E402
import dgl.graphbolt as gb  # noqa: E402
import torch  # noqa: E402
from dgl.nn import SAGEConv  # noqa: E402
from torchdata.datapipes.iter import IterDataPipe  # noqa: E402

from bench import modes  # noqa: E402
from bench.backends import base, layer_edges, shared_host, stages  # noqa: E402
from bench.backends.base import Unavailable, rank_and_world  # noqa: E402
from bench.stores import features_in_memory, open_store  # noqa: E402

FEATURE_KEY = ("node", None, "feat")  # an untyped graph's features in a GraphBolt feature store
NATIVE_STORE = "graphbolt-disk"  # GraphBolt's own on-disk features (no module in bench/stores)


class FeaturesFirst(torch.nn.Module):
    """A DGL conv, called (graph, features), as the shared models call a layer: (features, graph)."""

    def __init__(self, conv):
        super().__init__()
        self.conv = conv

    def forward(self, x, block):
        return self.conv(block, x)


class StoredFeature(gb.Feature):
    """Node features read from a disk-backed store's row reader (read-only)."""

    def __init__(self, rows):
        super().__init__()
        self.rows = rows  # e.g. bench.stores.lmdb_features.LmdbFeatures

    def read(self, ids: torch.Tensor = None) -> torch.Tensor:
        wanted = torch.arange(self.rows.rows) if ids is None else ids
        return torch.from_numpy(self.rows.gather(wanted.cpu().numpy())).to(wanted.device)

    def size(self) -> torch.Size:
        return torch.Size([self.rows.dim])

    def update(self, value: torch.Tensor, ids: torch.Tensor = None):
        raise NotImplementedError("a stored feature table is read-only (built by bench.stores)")


def feature_store(data, settings, mode: modes.Mode, device, typed: bool = False) -> gb.FeatureStore:
    """The node features where the mode keeps them, ("node", type, "feat") for each featured type of
    a typed graph (type None untyped): GraphBolt's own on-disk features, a store's rows, or in memory
    (the untyped pinned from one copy per node: host_tensor)."""
    featured = {t: x for t, x in data.features.items() if x is not None} if typed else {None: data.features}
    if settings.store == NATIVE_STORE:
        return gb.TorchBasedFeatureStore([gb.OnDiskFeatureData(
            domain="node", type=t, name="feat", format="numpy", in_memory=False,
            path=str(data.feature_file(t) if typed else data.path / "features.npy")) for t in featured])
    if not features_in_memory(settings.store):
        readers = open_store(settings.store, "typed-node" if typed else "node", data)
        return gb.BasicFeatureStore({("node", t, "feat"): StoredFeature(readers[t] if typed else readers)
                                     for t in featured})
    features = {}  # each Feature placed before the store is made: DGL 2.1's has no item access
    for t, x in featured.items():
        feature = moved(gb.TorchBasedFeature(host_tensor(x, mode.pinned, "" if typed else "features")), mode, device)
        if mode.pinned and settings.gpu_cache:  # the hottest rows kept on the GPU, the rest read through UVA
            feature = gb.GPUCachedFeature(feature, max(1, int(settings.gpu_cache * x.shape[0])))
        features[("node", t, "feat")] = feature
    return gb.BasicFeatureStore(features)


def host_tensor(array, pin: bool, name: str = "") -> torch.Tensor:
    """The tensor a mode places from: to be pinned, a writable copy (one per node that every rank
    maps, where `name`d: shared_host.py); else the hub's map as it is."""
    if pin and shared_host.folder() is not None and name:
        return torch.from_numpy(shared_host.node_copy(array, name))
    if pin:  # this process's own writable memory: the hub's read-only maps cannot be pinned
        if isinstance(array, np.memmap) or not array.flags.writeable or not array.flags.c_contiguous:
            array = np.array(array, order="C", copy=True)
        return torch.from_numpy(array)
    with warnings.catch_warnings():  # read-only map, only read: torch's warning is about writes
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        return torch.from_numpy(array)


def moved(item, mode: modes.Mode, device):
    """A sampling graph or a Feature where the mode keeps it: as it is, pinned in place, or on the GPU."""
    if mode.storage == modes.CPU:
        return item
    return item.pin_memory_() if mode.pinned else item.to(device)


def placed(data, settings, device, mode: modes.Mode, csc=None):
    """The sampling graph and the feature store where the mode keeps them, as DGL 2.1's examples
    place them; the graph from the hub's GraphBolt arrays (int32 where the sizes allow, as
    OnDiskDataset builds them), or `csc` (indptr, indices: the link split's training graph)."""
    indptr, indices = csc or (data.graphbolt_indptr, data.graphbolt_indices)
    graph = gb.fused_csc_sampling_graph(host_tensor(indptr, mode.pinned, "indptr"),
                                        host_tensor(indices, mode.pinned, "indices"))
    return moved(graph, mode, device), feature_store(data, settings, mode, device)


def gpu_build_problem() -> str | None:
    """Why this DGL cannot use the GPU (PyPI's dgl 2.1.0 is a CPU build), or None."""
    try:
        torch.ops.graphbolt.set_max_uva_threads  # noqa: B018 - only the CUDA build registers it
    except (AttributeError, RuntimeError):
        return (f"DGL {dgl.__version__} here is a CPU build (torch.ops.graphbolt.set_max_uva_threads is "
                "missing): GraphBolt's GPU modes need DGL's CUDA wheel (from DGL's own wheel index, "
                "e.g. dgl 2.1.0+cu121)")
    return None


def unavailable(mode_name: str, world_size: int = 1) -> str | None:
    """base.unavailable_reason, and for a GPU mode a DGL build that has the GPU ops."""
    reason = base.unavailable_reason(mode_name, world_size)
    return reason or (gpu_build_problem() if modes.mode(mode_name).needs_gpu else None)


class Pipeline(base.TrainingPipeline):
    sampler = f"graphbolt sample_neighbor (dgl {dgl.__version__})"
    unavailable = staticmethod(unavailable)
    seed_name = "seed_nodes"  # what DGL 2.1 names a minibatch's seeds (2.2 on: `seeds`)

    def __init__(self, data, settings):
        super().__init__(data, settings)
        gb.seed(settings.seed)  # GraphBolt's samplers draw from a generator of their own
        self.same_layer_edges = same_layer_edges(settings)
        self.mode = modes.mode(settings.mode)
        if self.mode.storage != modes.CPU and not features_in_memory(settings.store):
            raise Unavailable(f"mode {self.mode.name} moves the features into pinned or GPU memory, which defeats "
                              f"store {settings.store!r} (features left on disk): use cpu-cpu or cpu-cuda")
        self.graph, self.features = self.place(data)
        self.index_dtype = {k: str(t.dtype).removeprefix("torch.")
                            for k, t in (("indices", self.graph.indices), ("indptr", self.graph.csc_indptr))}
        self.itemsets = self.item_sets(data)
        self.train_loader = self._loader("train", shuffle=True, num_workers=settings.num_workers)
        self.build_model(data)

    def place(self, data):
        """The sampling graph and the feature store where the mode keeps them."""
        return placed(data, self.settings, self.device, self.mode)

    def item_sets(self, data) -> dict:
        """Each split's seeds (in the graph's index dtype, as OnDiskDataset writes them) and labels,
        by numpy: a large torch gather gives the main thread an OpenMP pool that slows GraphBolt's
        sampling thread (issue 41)."""
        ids = self.index_dtype["indices"]
        return {split: gb.ItemSet((torch.from_numpy(idx.astype(ids)), torch.from_numpy(data.labels[idx])),
                                  names=("seed_nodes", "labels"))
                for split, idx in (("train", data.train_idx), ("val", data.val_idx), ("test", data.test_idx))}

    feature_keys = ["feat"]  # what fetch_feature reads (a typed graph: per node type)

    def fanouts(self) -> list:
        """sample_neighbor's fanouts: GraphBolt takes them input layer first (the suite: seed hop first)."""
        return list(reversed(self.settings.fanout))

    @staticmethod
    def full_layer(conv, x_src, x_dst, src, dst):
        """One SAGEConv over whole neighbourhoods: a DGL block of the chunk's in-edges."""
        block = dgl.create_block((src, dst), num_src_nodes=x_src.shape[0], num_dst_nodes=x_dst.shape[0])
        return conv.conv(block.to(x_src.device), (x_src, x_dst))

    @staticmethod
    def conv_factory():
        """The shared GraphSAGE's layer: DGL's mean SAGEConv, called (features, graph)."""
        return lambda a, b: FeaturesFirst(SAGEConv(a, b, "mean"))

    def make_model(self, data):
        return self.sage(self.conv_factory(), data.features.shape[1], data.num_classes)

    def _loader(self, split: str, shuffle: bool, num_workers: int = 0) -> gb.DataLoader:
        """The datapipe as DGL 2.1's example builds it for the mode (the training one timed)."""
        mode = self.mode
        timing = self.profile and split == "train"
        sync = stages.cuda_sync(self.device) if mode.seeds_to_device_first else None
        if split == "train" and rank_and_world()[1] > 1:
            # each rank takes its share of the seeds; equal shares, so DDP's ranks stay in step
            pipe = gb.DistributedItemSampler(self.itemsets[split], batch_size=self.settings.batch_size,
                                             shuffle=shuffle, drop_uneven_inputs=True)
        else:
            pipe = gb.ItemSampler(self.itemsets[split], batch_size=self.settings.batch_size, shuffle=shuffle)
        if split == "train":
            self.train_items = pipe
        if mode.seeds_to_device_first:
            pipe = pipe.copy_to(self.device, extra_attrs=[self.seed_name])
        if timing:
            pipe = pipe.transform(stages.start)
        pipe = self._sample(pipe)
        if self.same_layer_edges:  # a few ints noted; the layers' edges as PyG's made in forward's blocks
            pipe = layer_edges.noting(pipe, mode.trains_on_gpu)
        if timing:
            pipe = pipe.transform(stages.finish("sample", sync))
        pipe = fetcher = pipe.fetch_feature(self.features, node_feature_keys=self.feature_keys)
        if timing:
            fetcher.transformer = stages.timed(fetcher.transformer, "fetch", sync)
        # timed only where it copies (to a GPU): on the CPU the time is waiting on the prefetch thread
        timing_copy = timing and mode.copies_batches and self.device.type == "cuda"
        if mode.copies_batches:
            pipe = copier = pipe.copy_to(self.device)
            if timing_copy:
                pipe = pipe.transform(stages.finish("copy", stages.cuda_sync(self.device)))
        # the fetch on a side stream where training is on the GPU (DGL's default); not in cpu-cpu
        loader = gb.DataLoader(pipe, num_workers=num_workers, overlap_feature_fetch=mode.overlap_feature_fetch)
        if timing_copy:
            # note when copy_to takes each minibatch from the prefetcher gb.DataLoader put before it
            copier.datapipe = _CopyStarts(copier.datapipe)
        return loader

    def _sample(self, pipe):
        """The sampling steps of the datapipe (one stage): here the neighbourhoods of the seeds."""
        return pipe.sample_neighbor(self.graph, self.fanouts())

    @staticmethod
    def count(minibatch) -> tuple[int, int]:
        """(seeds, sampled edges), summed over the types and relations of a typed minibatch."""
        edges = sum(int(csc.indices.numel()) for sg in minibatch.sampled_subgraphs for csc in _each(sg.sampled_csc))
        return _size(minibatch.seed_nodes), edges

    def work(self, minibatch) -> stages.BatchWork:
        return block_work(minibatch, int(minibatch.seed_nodes.numel()), self.settings.model != "none",
                          self.same_layer_edges)

    def to_device(self, minibatch):
        return minibatch  # the datapipe already put it where the mode wants it

    def reseed(self, seed: int) -> None:
        """Also GraphBolt's samplers and the train ItemSampler's shuffle (its `_rng` replaced)."""
        super().reseed(seed)
        gb.seed(seed)
        if hasattr(self.train_items, "_rng"):
            self.train_items._rng = np.random.default_rng(seed)

    def forward(self, model, minibatch):
        return model(minibatch.node_features["feat"], layer_edges.blocks(minibatch, self.same_layer_edges)), \
            minibatch.labels


def same_layer_edges(settings) -> bool:
    """The `same_layer_edges` setting (bench/backends/layer_edges.py; unset: true, with a model)."""
    return settings.model != "none" and settings.same_layer_edges is not False


def block_work(minibatch, seeds: int, modelled: bool, same: bool = False, **extra) -> stages.BatchWork:
    """The work of a minibatch sampled around `seeds` nodes (a typed one's summed over its types;
    `extra`: BatchWork's other fields). Hop k's block has hop k-1's nodes as destinations, numbered
    first among its sources, so it reaches rows - columns new nodes."""
    layers = minibatch.sampled_subgraphs
    blocks = layers[::-1]
    hop_nodes = [seeds] + [_size(b.original_row_node_ids) - _size(b.original_column_node_ids) for b in blocks]
    hop_edges = [sum(int(csc.indices.numel()) for csc in _each(b.sampled_csc)) for b in blocks]
    layer_nodes = [_size(b.original_column_node_ids) for b in layers] if modelled else []
    computed = layer_edges.layer_edge_counts(minibatch, same) if modelled else []
    return stages.BatchWork(hop_nodes, hop_edges, _size(minibatch.input_nodes),
                            stages.tensor_bytes(minibatch.node_features.values()), layer_nodes, computed, **extra)


def _size(value) -> int:
    """The ids in a minibatch field, over every type of a typed one."""
    return sum(int(t.numel()) for t in _each(value) if t is not None)


class _CopyStarts(IterDataPipe):
    """Notes when copy_to takes each minibatch to the GPU (and the bytes it moves): timed where it runs."""

    def __init__(self, datapipe):
        self.datapipe = datapipe

    def __iter__(self):
        for minibatch in self.datapipe:
            setattr(minibatch, stages.BYTES, _host_bytes(minibatch))
            setattr(minibatch, stages.STARTED, time.perf_counter())
            yield minibatch


def _host_bytes(minibatch) -> int:
    """The bytes of a minibatch's host tensors (what copy_to moves)."""
    tensors = [*_each(minibatch.labels), *minibatch.node_features.values(), *(getattr(minibatch, name, None) for name in (
        "compacted_node_pairs", "compacted_negative_srcs", "compacted_negative_dsts"))]
    tensors = [t for item in tensors for t in (item if isinstance(item, tuple) else (item,))]
    for block in minibatch.sampled_subgraphs:
        for csc in _each(block.sampled_csc):  # a typed graph's blocks: per relation, per node type
            tensors += [csc.indptr, csc.indices]
        tensors += [*_each(block.original_row_node_ids), *_each(block.original_column_node_ids)]
    return stages.tensor_bytes(t for t in tensors if t is not None and not t.is_cuda)


def _each(value) -> list:
    """A minibatch field's values: one (an untyped graph) or one per type (a dict)."""
    return list(value.values()) if isinstance(value, dict) else [value]
