"""PyG: `NeighborLoader`, GraphSAGE from `torch_geometric.nn.SAGEConv`, in modes cpu-cpu and
cpu-cuda, over an in-memory `Data` or a disk-backed store of feature rows (PyG's remote backend,
bench/backends/pyg_node.py).
"""

from __future__ import annotations

import torch
from torch_geometric.data import Data
from torch_geometric.loader import NeighborLoader

from bench.backends.base import shard
from bench.backends.pyg_node import CscGraphStore, HopCounts, PygNodePipeline, RowFeatureStore, instrument
from bench.stores import features_in_memory, open_store


class Pipeline(PygNodePipeline):

    def __init__(self, data, settings):
        super().__init__(data, settings)
        self.graph = self._graph(data, settings.store)
        self.splits = {"train": shard(data.train_idx, settings.seed), "val": data.val_idx, "test": data.test_idx}
        self.train_loader = self._loader("train", shuffle=True, num_workers=settings.num_workers)
        if self.profile:  # sampling and gathering happen on the CPU in both modes: nothing to sync
            instrument(self.train_loader)
        self.build_model(data)

    @staticmethod
    def _graph(data, store: str):
        if not features_in_memory(store):
            return (RowFeatureStore(open_store(store, "node", data), data.labels),
                    CscGraphStore(data.edge_index[0], data.csc_indptr, data.num_nodes))
        return Data(x=torch.from_numpy(data.features), edge_index=torch.from_numpy(data.edge_index),
                    y=torch.from_numpy(data.labels), num_nodes=data.num_nodes)

    def _loader(self, split: str, shuffle: bool, num_workers: int = 0) -> NeighborLoader:
        # is_sorted: the hub's edges are in CSC order already, so PyG uses the pages every rank
        # shares instead of sorting a private copy per rank
        return NeighborLoader(
            self.graph, num_neighbors=list(self.settings.fanout), is_sorted=True,
            input_nodes=torch.from_numpy(self.splits[split]), batch_size=self.settings.batch_size,
            shuffle=shuffle, num_workers=num_workers, persistent_workers=num_workers > 0,
            pin_memory=bool(self.settings.pin_memory),
            transform=HopCounts(len(self.settings.fanout)) if self.trims else None)
