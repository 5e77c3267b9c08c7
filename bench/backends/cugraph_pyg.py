"""cuGraph-PyG: `cugraph_pyg.loader.NeighborLoader` over its `GraphStore` (a distributed cuGraph
graph) and `FeatureStore` (WholeGraph), sampling on the GPU (cuda-cuda); the shared GraphSAGE from
PyG's SAGEConv. Written step for step as cugraph-gnn's gcn_dist_mnmg.py (docs/gpus.md lists what
differs); unverified on a GPU. No RAPIDS import at the top: `unavailable` names what is missing.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os

os.environ.setdefault("RAPIDS_NO_INITIALIZE", "1")  # as the example sets it, before RMM is imported

import torch  # noqa: E402

from bench.backends import base  # noqa: E402
from bench.backends.pyg_node import PygNodePipeline  # noqa: E402

RAPIDS_MODULES = ("cugraph_pyg", "pylibcugraph", "pylibwholegraph", "rmm", "cupy")


def missing() -> str | None:
    """Why cuGraph-PyG cannot be used in this interpreter (its modules absent), or None."""
    absent = [m for m in RAPIDS_MODULES if importlib.util.find_spec(m) is None]
    return (f"cuGraph-PyG is not installed in this interpreter ({', '.join(absent)} missing): its stack "
            "(docker/requirements-cugraph-pyg.txt) is built in the GPU images only") if absent else None


def unavailable(mode: str, world_size: int = 1) -> str | None:
    """base.unavailable_reason, then cuGraph-PyG itself."""
    return base.unavailable_reason(mode, world_size) or missing()


def own_process_group(backend: str = "nccl") -> bool:
    """A one-rank group (in-memory store) where the worker made none: cuGraph-PyG's stores ask
    torch.distributed for the world. True where this made it."""
    import torch.distributed as dist

    if dist.is_initialized():
        return False
    os.environ.setdefault("LOCAL_WORLD_SIZE", "1")
    dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1)
    return True


def rmm_for_the_process(device_index: int) -> None:
    """The example's RMM: a managed-memory pool, and torch's allocator swapped for RMM's, so every thread's
    allocations come from it (backward's and DDP's gradient buckets too: `torch.cuda.use_mem_pool` would route
    the calling thread's alone). Before torch's first CUDA allocation: a used allocator cannot be swapped.
    Unverified on a GPU."""
    import rmm
    from rmm.allocators.torch import rmm_torch_allocator

    rmm.reinitialize(devices=device_index, managed_memory=True, pool_allocator=True)  # the example's pool
    torch.cuda.memory.change_current_allocator(rmm_torch_allocator)


def init_worker(rank: int, local_rank: int, world: int, local_world: int) -> None:
    """The example's init_pytorch_worker, RMM already set (rmm_for_the_process): cupy on RMM, the device,
    cuGraph's comms, WholeGraph."""
    import torch.distributed as dist

    if rank == 0:
        from pylibcugraph.comms import cugraph_comms_create_unique_id

        uid = [cugraph_comms_create_unique_id()]
    else:
        uid = [None]
    dist.broadcast_object_list(uid, src=0, device=torch.device("cuda", local_rank))

    import cupy
    from rmm.allocators.cupy import rmm_cupy_allocator

    cupy.cuda.Device(local_rank).use()
    cupy.cuda.set_allocator(rmm_cupy_allocator)
    torch.cuda.set_device(local_rank)

    from pylibcugraph.comms import cugraph_comms_init
    from pylibwholegraph.torch.initialize import init as wm_init

    cugraph_comms_init(rank=rank, world_size=world, uid=uid[0], device=local_rank)
    # the example passes torch.cuda.device_count(): the node's GPUs, one rank each, all visible
    wm_init(rank, world, local_rank, local_world)


def shutdown_comms() -> None:
    """The example's end: WholeGraph's finalize and cuGraph's comms shut down."""
    from pylibcugraph.comms import cugraph_comms_shutdown
    from pylibwholegraph.torch.initialize import finalize as wm_finalize

    wm_finalize()
    cugraph_comms_shutdown()


def equal_part(idx, rank: int, world: int):
    """This rank's contiguous part of `idx`, all equal (collective sampling: as many batches per rank)."""
    each = len(idx) // world
    return idx[rank * each:(rank + 1) * each]


class Pipeline(PygNodePipeline):
    unavailable = staticmethod(unavailable)
    collective_eval = True  # sampling is collective over the cuGraph graph: every rank evaluates its part
    full_layer = None  # layer-wise inference over all nodes needs the whole graph on one rank: not offered
    before_cuda = staticmethod(rmm_for_the_process)  # the worker calls it before torch's first CUDA allocation
    torch_memory_stats = False  # torch's allocator swapped for RMM's: its peak statistics read nothing

    @property
    def sampler(self) -> str:
        import cugraph_pyg

        return f"cugraph-pyg {cugraph_pyg.__version__} NeighborLoader (GPU, pylibcugraph)"

    def __init__(self, data, settings):
        super().__init__(data, settings)
        import torch.distributed as dist

        self.own_group = own_process_group()
        rank, world = dist.get_rank(), dist.get_world_size()
        try:
            init_worker(rank, self.device.index or 0, world, int(os.environ.get("LOCAL_WORLD_SIZE", world)))
            self.graph = self._stores(data, rank, world)
            dist.barrier()
            # training seeds as every backend shares them; val/test in equal parts (collective sampling)
            self.splits = {"train": base.shard(data.train_idx, settings.seed),
                           **{s: equal_part(idx, rank, world) for s, idx in (("val", data.val_idx), ("test", data.test_idx))}}
            self.train_loader = self._loader("train", shuffle=True)
            self.build_model(data)
        except BaseException:  # a set-up that failed part way leaves what it entered, as close() would
            self.close(failed=True)
            raise

    @staticmethod
    def _stores(data, rank: int, world: int):
        """(FeatureStore, GraphStore) with this rank's slices, as the example's load_partitioned_data."""
        from cugraph_pyg.data import FeatureStore, GraphStore

        graph_store, feature_store = GraphStore(), FeatureStore()
        n = int(data.num_nodes)
        feature_store["node", "x", None] = torch.tensor_split(torch.from_numpy(data.features), world)[rank].clone()
        feature_store["node", "y", None] = torch.tensor_split(torch.from_numpy(data.labels), world)[rank].clone()
        edges = torch.tensor_split(torch.from_numpy(data.edge_index), world, dim=1)[rank].clone()
        graph_store[("node", "rel", "node"), "coo", False, (n, n)] = edges
        return feature_store, graph_store.finalize()

    def _loader(self, split: str, shuffle: bool, num_workers: int = 0):
        from cugraph_pyg.loader import NeighborLoader

        return NeighborLoader(self.graph, num_neighbors=list(self.settings.fanout),
                              batch_size=self.settings.batch_size,
                              input_nodes=torch.from_numpy(self.splits[split]).cuda(), shuffle=shuffle)

    def forward(self, model, batch):
        batch.y = batch.y.view(-1).to(torch.long)  # as the example: the labels come back from WholeGraph
        return super().forward(model, batch)

    def close(self, failed: bool = False) -> None:
        """The example's end (WholeGraph's finalize, cuGraph's comms shut down), the one-rank group made for the
        stores destroyed; `failed` (a set-up failed part way): each step tried regardless."""
        for step in (shutdown_comms, self.own_group and torch.distributed.destroy_process_group):
            with contextlib.suppress(*(Exception,) * failed):  # suppress() with no type suppresses nothing
                step and step()
