"""PyG: `NeighborLoader`, GraphSAGE from `torch_geometric.nn.SAGEConv`.

Modes: cpu-cpu (sample and train on the CPU) and cpu-cuda (sample on the CPU, train on the GPU).
Stores: memory (an in-memory `Data`) and lmdb (PyG's remote backend: features gathered from
the LMDB store per batch, see bench/backends/pyg_lmdb.py).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch_geometric.data import Data
from torch_geometric.loader import NeighborLoader
from torch_geometric.nn import SAGEConv

from bench.backends.base import device_of, distribute, graphsage, shard, unavailable_reason, unwrap


class Pipeline:
    unavailable = staticmethod(unavailable_reason)

    def __init__(self, data, settings: dict):
        self.settings = settings
        self.device = device_of(settings["mode"])
        self.graph = self._graph(data, settings["store"])
        self.splits = {"train": shard(data.train_idx, settings["seed"]), "val": data.val_idx, "test": data.test_idx}
        workers = settings["num_workers"]
        self.train_loader = self._loader("train", shuffle=True, num_workers=workers)
        self.build_model(data)

    @staticmethod
    def _graph(data, store: str):
        if store == "lmdb":
            from bench.backends.pyg_lmdb import CscGraphStore, LmdbFeatureStore
            from bench.stores import lmdb_features

            features = lmdb_features.LmdbFeatures(lmdb_features.store_dir(data.path),
                                                  lmdb_features.fingerprint(data.path))
            return (LmdbFeatureStore(features, data.labels),
                    CscGraphStore(data.edge_index[0], data.csc_indptr, data.num_nodes))
        return Data(x=torch.from_numpy(data.features), edge_index=torch.from_numpy(data.edge_index),
                    y=torch.from_numpy(data.labels), num_nodes=data.num_nodes)

    def build_model(self, data) -> None:
        """The shared GraphSAGE from PyG's SAGEConv (wrapped in DDP across ranks), or none."""
        self.model, self.comm = None, None
        if self.settings["model"] == "sage":
            model = graphsage(lambda a, b: SAGEConv(a, b, aggr="mean"), data.features.shape[1],
                              self.settings["hidden"], data.num_classes, len(self.settings["fanout"]))
            self.model, self.comm = distribute(model.to(self.device), self.device)
            self.optimizer = torch.optim.Adam(self.model.parameters(), lr=self.settings["lr"])

    def _loader(self, split: str, shuffle: bool, num_workers: int = 0) -> NeighborLoader:
        return NeighborLoader(
            self.graph, num_neighbors=list(self.settings["fanout"]),
            input_nodes=torch.from_numpy(self.splits[split]), batch_size=self.settings["batch_size"],
            shuffle=shuffle, num_workers=num_workers, persistent_workers=num_workers > 0)

    def _layers(self, batch) -> list:
        return [batch.edge_index] * len(self.settings["fanout"])  # every layer on the whole subgraph

    @staticmethod
    def count(batch) -> tuple[int, int]:
        return int(batch.batch_size), int(batch.edge_index.size(1))

    def step(self, batch) -> None:
        if self.model is None:
            return
        self.model.train()
        batch = batch.to(self.device)
        self.optimizer.zero_grad()
        out = self.model(batch.x, self._layers(batch))[: batch.batch_size]
        F.cross_entropy(out, batch.y[: batch.batch_size]).backward()
        self.optimizer.step()

    def evaluate(self, split: str) -> float | None:
        if self.model is None:
            return None
        correct, total = self.count_correct(split)
        return correct / max(total, 1)

    @torch.no_grad()
    def count_correct(self, split: str) -> tuple[int, int]:
        model = unwrap(self.model)  # evaluation runs outside DDP
        model.eval()
        correct = total = 0
        for batch in self._loader(split, shuffle=False):
            batch = batch.to(self.device)
            pred = model(batch.x, self._layers(batch))[: batch.batch_size].argmax(dim=-1)
            correct += int((pred == batch.y[: batch.batch_size]).sum())
            total += int(batch.batch_size)
        return correct, total

    def synchronize(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize()
