"""The feature gather alone: what the disk costs per batch, without the sampler and the model.
NeighborLoader samples up to MAX_BATCHES training batches once (seeded: the same rows in every cell
of a dataset); each epoch gathers those rows again (the `fetch` stage), in memory or by a store's
batched read. Seeds per second means rows per second; the model setting is ignored.
"""

from __future__ import annotations

import itertools

import numpy as np
import torch
from torch_geometric.data import Data
from torch_geometric.loader import NeighborLoader

from bench import modes
from bench.backends import base
from bench.backends.base import Unavailable, shard
from bench.backends.stages import BatchWork
from bench.backends.pyg_node import neighbor_sampler_in_use
from bench.stores import features_in_memory, open_store

MAX_BATCHES = 64


class Pipeline(base.Pipeline):
    """No model: a step gathers one batch's rows (the shared evaluate returns None)."""

    def __init__(self, data, settings):
        if modes.mode(settings.mode).needs_gpu:
            raise Unavailable("the feature gather is measured on the CPU only (mode cpu-cpu)")
        super().__init__(data, settings)
        self.sampler = neighbor_sampler_in_use()  # picked the rows (once, untimed)
        torch.manual_seed(settings.seed)
        graph = Data(edge_index=torch.from_numpy(np.asarray(data.edge_index)), num_nodes=data.num_nodes)
        sampler = NeighborLoader(graph, num_neighbors=list(settings.fanout),
                                 input_nodes=torch.from_numpy(shard(data.train_idx, settings.seed)),
                                 batch_size=settings.batch_size, shuffle=True)
        self.train_loader = [batch.n_id for batch in itertools.islice(sampler, MAX_BATCHES)]
        if features_in_memory(settings.store):
            features = torch.from_numpy(np.ascontiguousarray(data.features))
            self.gather = lambda ids: torch.index_select(features, 0, ids)
        else:
            store = open_store(settings.store, "node", data)
            self.gather = lambda ids: torch.from_numpy(store.gather(ids.numpy()))
        self.checksum = 0.0
        self.row_bytes = int(data.features.shape[1]) * data.features.dtype.itemsize

    @staticmethod
    def count(ids) -> tuple[int, int]:
        return int(ids.numel()), 0

    def step(self, ids, clock=None) -> None:
        rows = self.gather(ids)
        self.checksum += float(rows[0, 0])  # use the result, so no read can be skipped
        if clock is not None:
            clock.mark("fetch")

    def work(self, ids) -> BatchWork:
        return BatchWork([], [], int(ids.numel()), int(ids.numel()) * self.row_bytes)
