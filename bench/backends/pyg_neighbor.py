"""PyG: `NeighborLoader`, GraphSAGE from `torch_geometric.nn.SAGEConv`, in modes cpu-cpu and
cpu-cuda, over an in-memory `Data` or a disk-backed store of feature rows (PyG's remote backend,
bench/backends/pyg_node.py).
"""

from __future__ import annotations

import torch
from torch_geometric.data import Data

from bench.backends.pyg_node import CscGraphStore, HopCounts, PygNodePipeline, RowFeatureStore, SampledFromHub
from bench.stores import features_in_memory, open_store


class Pipeline(SampledFromHub, PygNodePipeline):

    @property
    def transform(self):
        return HopCounts(len(self.settings.fanout)) if self.trims else None

    @staticmethod
    def _graph(data, store: str):
        if not features_in_memory(store):
            return (RowFeatureStore(open_store(store, "node", data), data.labels),
                    CscGraphStore(data.edge_index[0], data.csc_indptr, data.num_nodes))
        return Data(x=torch.from_numpy(data.features), edge_index=torch.from_numpy(data.edge_index),
                    y=torch.from_numpy(data.labels), num_nodes=data.num_nodes)
