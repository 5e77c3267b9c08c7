"""PyG graph classification: a collection of small graphs (bench/datasets/molecules.py) from
memory (an `InMemoryDataset` over the concatenated arrays), sqlite (PyG's own `OnDiskDataset`,
written once by the first cell that needs it) or a store built on the host (e.g. LMDB). Each reads
a whole batch of graph ids in one call (`read_many`), collated once as `Batch.from_data_list`
would: the stores differ only in their reads (the `fetch` stage). `model: sage`: `len(fanout)` mean
SAGEConv layers over each whole graph, a global mean pool and a linear head.
"""

from __future__ import annotations

import json
import os
import time
import warnings
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import BatchSampler, DataLoader, Dataset, SubsetRandomSampler
from torch_geometric.data import Batch, Data, InMemoryDataset, OnDiskDataset
from torch_geometric.nn import SAGEConv, global_mean_pool

from bench.settings import DROPOUT
from bench.backends import base, stages
from bench.backends.base import shard
from bench.datasets import molecules
from bench.datasets.hub import atomic_dir
from bench.stores import StoreError, features_in_memory, open_store
from bench.stores.lmdb_features import fingerprint

# graphs read from LMDB are views of immutable bytes, which batching copies: the warning is noise
warnings.filterwarnings("ignore", message="The given NumPy array is not writable")

NATIVE_STORE = "sqlite"  # PyG's own OnDiskDataset (no module in bench/stores)
SQLITE_DIR = "sqlite-graphs"
SQLITE_INFO = "gnnbench.json"  # what the sqlite store was built from (fingerprint)
SQLITE_BUILD_GRAPHS = 10000  # graphs per OnDiskDataset.extend call while building


def _graph(x, edge_index, label: int) -> Data:
    """One graph as a PyG Data."""
    return Data(x=torch.from_numpy(x), edge_index=torch.from_numpy(edge_index), y=torch.tensor([label]))


class ArrayGraphs(InMemoryDataset):
    """Every graph in memory: the dataset's arrays already are PyG's `(data, slices)` layout."""

    def __init__(self, data):
        super().__init__(root=None, log=False)
        self._data = Data(x=torch.from_numpy(np.ascontiguousarray(data.x)),
                          edge_index=torch.from_numpy(np.ascontiguousarray(data.edge_index)),
                          y=torch.from_numpy(np.ascontiguousarray(data.y)))
        self.slices = {"x": torch.from_numpy(np.asarray(data.node_ptr)),
                       "edge_index": torch.from_numpy(np.asarray(data.edge_ptr)),
                       "y": torch.arange(data.num_graphs + 1)}

    def read_many(self, ids: list[int]) -> molecules.GraphColumns:
        return molecules.take(self._data.x.numpy(), self._data.edge_index.numpy(), self.slices["x"].numpy(),
                              self.slices["edge_index"].numpy(), self._data.y.numpy(), ids)


class StoredGraphs(Dataset):
    """Graphs from a graph store's reader (e.g. LMDB: a batch's graphs in one transaction)."""

    def __init__(self, store):
        self.store = store

    def __len__(self) -> int:
        return len(self.store)

    def __getitem__(self, g: int) -> Data:  # one graph (test_graph_level compares it with PyG's collate)
        return _graph(*self.store.get(int(g)))

    def read_many(self, ids: list[int]) -> molecules.GraphColumns:
        return self.store.read_many(ids)


class Batches(Dataset):
    """A dataset whose items are whole batches (a list of graph ids), read in one call."""

    def __init__(self, graphs, timed: bool = False):
        self.graphs = graphs
        self.timed = timed  # stamp each batch with its read + collate seconds (bench/backends/stages.py)

    def __len__(self) -> int:
        return len(self.graphs)

    def __getitem__(self, ids: list[int]) -> Batch:
        started = time.perf_counter()
        columns = self.graphs.read_many(ids)  # collated as `Batch.from_data_list` of their `Data` would
        batch = Batch(**{k: torch.from_numpy(v) for k, v in molecules.collate(columns).items()})
        batch._num_graphs = len(columns.y)
        return stages.stamp(batch, "fetch", time.perf_counter() - started) if self.timed else batch


class SqliteGraphs(OnDiskDataset):
    """PyG's OnDiskDataset with a typed schema (tensors stored as raw blobs, not pickles)."""

    def __init__(self, root: Path, feature_dim: int):
        schema = {"x": dict(dtype=torch.float32, size=(-1, feature_dim)),
                  "edge_index": dict(dtype=torch.int64, size=(2, -1)), "y": int}
        self._pid = os.getpid()
        super().__init__(str(root), backend="sqlite", schema=schema, log=False)

    @property
    def db(self):
        if self._db is not None and self._pid != os.getpid():
            # inherited across a fork: a sqlite connection must not cross processes, so connect anew
            self._db = None
        self._pid = os.getpid()
        return OnDiskDataset.db.fget(self)

    def release(self) -> None:
        """Close the connection (before forking workers); the next read reconnects."""
        if self._db is not None:
            self._db.close()
            self._db = None

    def read_many(self, ids: list[int]) -> molecules.GraphColumns:
        """One query through PyG's sqlite database (its typed schema decodes the blobs)."""
        rows = self.db.multi_get(list(ids))
        return molecules.GraphColumns.of([(row["x"].numpy(), row["edge_index"].numpy(), int(row["y"])) for row in rows])

    def serialize(self, data: Data) -> dict:
        return {"x": data.x, "edge_index": data.edge_index, "y": int(data.y)}

    def deserialize(self, row: dict) -> Data:
        return Data(x=row["x"], edge_index=row["edge_index"], y=torch.tensor([row["y"]]))


def sqlite_store(data) -> SqliteGraphs:
    """PyG's sqlite OnDiskDataset of this dataset, written once into a folder renamed when whole."""
    target = Path(data.path) / "stores" / SQLITE_DIR
    expected = fingerprint(data.path)
    with atomic_dir(target, marker=SQLITE_INFO) as tmp:  # skipped when a finished store is there
        if tmp is not None:
            store = SqliteGraphs(tmp, data.feature_dim)
            for start in range(0, data.num_graphs, SQLITE_BUILD_GRAPHS):
                end = min(start + SQLITE_BUILD_GRAPHS, data.num_graphs)
                # graphs that own their arrays (the dataset's may be read-only memory maps)
                store.extend([_graph(np.array(x), np.array(edge_index), y)
                              for x, edge_index, y in map(data.graph, range(start, end))])
            store.release()
            (tmp / SQLITE_INFO).write_text(json.dumps({"fingerprint": expected, "graphs": data.num_graphs}))
    built_from = json.loads((target / SQLITE_INFO).read_text()).get("fingerprint")
    if built_from != expected:
        raise StoreError(f"sqlite graph store {target} was built from another version of dataset "
                         f"{data.meta.get('name')!r} (fingerprint {built_from}, the dataset has {expected}); "
                         "delete the folder and run again to rebuild it")
    store = SqliteGraphs(target, data.feature_dim)
    if len(store) != data.num_graphs:
        raise StoreError(f"sqlite graph store {target} holds {len(store)} graphs, the dataset "
                         f"{data.num_graphs}; delete the folder and run again to rebuild it")
    return store


def graph_dataset(data, store: str):
    """The graphs as the store keeps them."""
    if store == NATIVE_STORE:
        return sqlite_store(data)
    if features_in_memory(store):
        return ArrayGraphs(data)
    return StoredGraphs(open_store(store, "graph", data))


class GraphClassifier(torch.nn.Module):
    """SAGEConv mean layers over whole graphs, a global mean pool, a linear head."""

    def __init__(self, in_dim: int, hidden: int, num_classes: int, num_layers: int):
        super().__init__()
        dims = [in_dim] + [hidden] * num_layers
        self.convs = torch.nn.ModuleList(SAGEConv(a, b, aggr="mean") for a, b in zip(dims, dims[1:]))
        self.head = torch.nn.Linear(hidden, num_classes)

    def forward(self, x, edge_index, batch, num_graphs: int):
        for i, conv in enumerate(self.convs):
            x = F.relu(conv(x, edge_index))
            if i < len(self.convs) - 1:
                x = F.dropout(x, p=DROPOUT, training=self.training)
        return self.head(global_mean_pool(x, batch, size=num_graphs))


class Pipeline(base.TrainingPipeline):

    def __init__(self, data, settings):
        super().__init__(data, settings)
        self.dataset = graph_dataset(data, settings.store)
        self.splits = {"train": shard(np.asarray(data.train_idx), settings.seed),
                       "val": np.asarray(data.val_idx), "test": np.asarray(data.test_idx)}
        self.train_loader = self._loader("train", shuffle=True, num_workers=settings.num_workers)
        self.build_model(data)
        if isinstance(self.dataset, SqliteGraphs):
            self.dataset.release()  # workers fork on the first epoch: no open connection to inherit

    def make_model(self, data):
        model = GraphClassifier(data.feature_dim, self.settings.hidden, data.num_classes, len(self.settings.fanout))
        base.same_start(model)  # the one initialisation every task's model starts from
        return model

    def _loader(self, split: str, shuffle: bool, num_workers: int = 0) -> DataLoader:
        ids = self.splits[split].tolist()
        order = SubsetRandomSampler(ids) if shuffle else ids
        return DataLoader(Batches(self.dataset, timed=self.profile and split == "train"), batch_size=None,
                          sampler=BatchSampler(order, self.settings.batch_size, drop_last=False),
                          num_workers=num_workers, persistent_workers=num_workers > 0,
                          pin_memory=bool(self.settings.pin_memory))

    @staticmethod
    def count(batch) -> tuple[int, int]:
        return int(batch.num_graphs), int(batch.edge_index.size(1))

    @staticmethod
    def forward(model, batch):
        return model(batch.x, batch.edge_index, batch.batch, batch.num_graphs), batch.y

    @staticmethod
    def work(batch) -> stages.BatchWork:
        nodes = int(batch.num_nodes)
        return stages.BatchWork([nodes], [int(batch.edge_index.size(1))], nodes, stages.tensor_bytes([batch.x]))
