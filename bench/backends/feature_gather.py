"""The feature gather alone: the rows of real sampled batches read from a store, nothing else.

It answers "what does the disk cost per batch?" without the sampler and the model in the way:
at build time PyG's NeighborLoader samples the training batches once (at most MAX_BATCHES of
them, with the suite's batch size and fanout) and keeps each batch's node ids; an epoch then
gathers exactly those rows again from the store:
  memory   `torch.index_select` on the features in this process's memory
  a disk-backed store   its row reader's batched read, e.g. LMDB's (bench/stores/lmdb_features.py)
Every cell of a dataset gathers the same rows in the same order (the sampler is seeded), and the
warm-up epoch leaves the page cache warm, so the measured epochs compare the two reads of the same
rows. Seeds per second here means rows gathered per second; the model setting is ignored.
Stages (`profile: true`): the step's gather is `fetch`; nothing is sampled in the epoch. Work:
input_nodes and feature_bytes are the rows gathered; no hops are counted (hop lists empty).
"""

from __future__ import annotations

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
        self.train_loader = []
        for batch in sampler:
            self.train_loader.append(batch.n_id)
            if len(self.train_loader) == MAX_BATCHES:
                break
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
