"""PyG partitioned distributed training: `torch_geometric.distributed`. Each rank stands for one
machine holding one METIS partition (PyG's `Partitioner`, once per dataset and partition count, its
seconds, edge cut and balance recorded; `pymetis` where PyG finds no METIS), samples with
`DistNeighborLoader` over torch RPC and trains the shared GraphSAGE under DDP (gloo). Needs pyg-lib's
`dist_neighbor_sample`; torch-geometric 2.7.0 to 2.8.1's sampler raises TypeError (recorded). Stages
are not split: sampling, RPC and the gather run in one coroutine, so next() stays in `wait`.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import time
from pathlib import Path

import numpy as np
import torch
import torch_geometric.distributed.partition as pyg_partition
from torch_geometric.data import Data
from torch_geometric.loader import ClusterData

from bench.backends.base import Unavailable, rank_and_world, unavailable_reason
from bench.backends.pyg_node import PygNodePipeline
from bench.net import free_port
from bench.paths import PYG_WHEELS_ENV, running_stack_no_pyg_lib

GROUP = "gnnbench-pyg-dist"


class PymetisClusterData(ClusterData):
    """PyG's ClusterData, with pymetis where neither torch-sparse nor pyg-lib brings METIS."""

    def _metis(self, edge_index: torch.Tensor, num_nodes: int) -> torch.Tensor:
        try:
            return super()._metis(edge_index, num_nodes)
        except ImportError:  # neither torch-sparse nor pyg-lib brings METIS here
            import pymetis

            order = torch.argsort(edge_index[0] * num_nodes + edge_index[1])
            row, col = edge_index[0][order], edge_index[1][order]
            indptr = torch.zeros(num_nodes + 1, dtype=torch.long)
            indptr[1:] = torch.cumsum(torch.bincount(row, minlength=num_nodes), 0)
            _, membership = pymetis.part_graph(self.num_parts, xadj=indptr.numpy(), adjncy=col.numpy())
            return torch.tensor(membership, dtype=torch.long)


def ensure_partitions(data, num_parts: int, cache: Path) -> tuple[Path, dict]:
    """(folder, record) of the dataset's partitions into `num_parts`, made once under a file lock."""
    root = Path(cache) / "partitions" / f"{data.path.name}-p{num_parts}"
    root.parent.mkdir(parents=True, exist_ok=True)
    with open(root.parent / f"{root.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        record_file = root / "partition.json"
        if record_file.is_file():
            return root, {**json.loads(record_file.read_text()), "reused": True}
        tmp = root.with_name(root.name + ".partial")
        shutil.rmtree(tmp, ignore_errors=True)
        graph = Data(x=torch.from_numpy(data.features), edge_index=torch.from_numpy(data.edge_index),
                     y=torch.from_numpy(data.labels), num_nodes=data.num_nodes)
        pyg_partition.ClusterData = PymetisClusterData  # PyG's own Partitioner, with pymetis underneath
        started = time.perf_counter()
        pyg_partition.Partitioner(graph, num_parts, str(tmp)).generate_partition()
        seconds = time.perf_counter() - started
        part_of = torch.load(tmp / "node_map.pt").numpy()
        src, dst = data.edge_index
        sizes = np.bincount(part_of, minlength=num_parts)
        record = {"seconds": seconds, "num_parts": num_parts,
                  "edge_cut": float((part_of[src] != part_of[dst]).mean()) if src.size else 0.0,
                  "balance": float(sizes.max() / sizes.mean()), "part_sizes": sizes.tolist()}
        np.save(tmp / "part_of.npy", part_of)
        (tmp / "partition.json").write_text(json.dumps(record, indent=2))
        os.rename(tmp, root)
        return root, {**record, "reused": False}


class Pipeline(PygNodePipeline):
    """PyG's node-classification step and model (as NeighborLoader's), over partitions."""

    collective_eval = True  # every partition evaluates its own nodes (remote ones over RPC); counts summed

    @property
    def sampler(self) -> str:
        import pyg_lib

        return f"pyg-lib {pyg_lib.__version__} dist_neighbor_sample (over RPC)"

    @staticmethod
    def unavailable(mode: str, world_size: int = 1) -> str | None:
        if world_size < 2:
            return "pyg-dist partitions the graph over its ranks: it needs a world size of at least 2"
        return unavailable_reason(mode, world_size)

    def __init__(self, data, settings):
        from torch_geometric.distributed import DistContext, LocalFeatureStore, LocalGraphStore
        from torch_geometric.distributed.dist_neighbor_sampler import DistNeighborSampler

        super().__init__(data, settings)
        rank, world = rank_and_world()
        cache = Path(os.environ["GNNBENCH_CACHE"])
        root, self.partition = ensure_partitions(data, world, cache)
        graph = LocalGraphStore.from_partition(str(root), rank)
        features = LocalFeatureStore.from_partition(str(root), rank)
        features.labels = torch.from_numpy(data.labels)
        self.stores = (features, graph)
        self.ctx = DistContext(rank=rank, global_rank=rank, world_size=world, global_world_size=world,
                               group_name=GROUP)
        # The constructor DistNeighborLoader calls first: on torch-geometric 2.7.0-2.8.1 it raises.
        DistNeighborSampler(self.ctx, self.stores, list(settings.fanout))
        if not hasattr(torch.ops.pyg, "dist_neighbor_sample"):
            why = running_stack_no_pyg_lib() or "not installed in this environment"
            raise Unavailable(f"pyg-dist needs pyg-lib's dist_neighbor_sample operator, and this stack has "
                              f"no pyg-lib: {why}. pyg-lib is not on PyPI: point {PYG_WHEELS_ENV} at a "
                              "reachable PyG wheel index (or a folder of its wheels) and install the stack again")
        part_of = np.load(root / "part_of.npy")
        # every rank must run as many batches as the others (DDP): the smallest partition's count
        mine = data.train_idx[part_of[data.train_idx] == rank]
        fewest = min(int((part_of[data.train_idx] == p).sum()) for p in range(world))
        self.splits = {"train": np.sort(np.random.default_rng(settings.seed).permutation(mine)[:fewest]),
                       "val": data.val_idx[part_of[data.val_idx] == rank],
                       "test": data.test_idx[part_of[data.test_idx] == rank]}
        self.rpc_port = _shared_free_port()
        # Under torch.distributed.run every tcp:// rendezvous expects the launcher's store to be
        # the server; the samplers' RPC meets on a port of its own, which rank 0 must host.
        os.environ["TORCHELASTIC_USE_AGENT_STORE"] = "False"
        self.train_loader = self._loader("train", shuffle=True, num_workers=settings.num_workers)
        self.build_model(data)

    def _loader(self, split: str, shuffle: bool, num_workers: int = 0):
        from torch_geometric.distributed import DistNeighborLoader

        return DistNeighborLoader(
            data=self.stores, num_neighbors=list(self.settings.fanout),
            input_nodes=torch.from_numpy(self.splits[split]), batch_size=self.settings.batch_size,
            shuffle=shuffle, device=torch.device("cpu"), num_workers=num_workers, concurrency=1,
            master_addr=os.environ.get("MASTER_ADDR", "127.0.0.1"), master_port=self.rpc_port,
            current_ctx=self.ctx, persistent_workers=num_workers > 0, filter_per_worker=False)


def _shared_free_port() -> int:
    """A free port chosen on rank 0 for the samplers' RPC, known to every rank."""
    port = [free_port("") if rank_and_world()[0] == 0 else None]
    if torch.distributed.is_initialized():
        torch.distributed.broadcast_object_list(port, src=0)
    return port[0]
