"""The pipeline contract every backend fulfils for the worker (`Pipeline`), and what they share:
devices and ranks, DDP with its timed all-reduce, the one GraphSAGE both frameworks train (started
alike: `same_start`), and layer-wise full-neighbourhood inference. Stack side; torch is imported
where it is used.
"""

from __future__ import annotations

import abc
import importlib
import os
import time

from bench import modes
from bench.backends import AMP_DTYPES
from bench import cuda_fit
from bench.backends.stages import BatchWork, tensor_bytes
from bench.backends.initialisation import INITIALISATION, same_start  # noqa: F401 - re-exported
from bench.backends.typed import typed_model
from bench.settings import DROPOUT, CellSettings
from bench.tasks import TASKS

# layer-wise inference runs in chunks whose per-edge messages (edges × width × 4 B) stay under
# this, so that evaluation adds little to the cell's measured peak memory
FULL_CHUNK_BYTES = 8 << 20


class Unavailable(Exception):
    """Raised while a pipeline is built when this stack cannot run the cell (recorded as skipped)."""


def seed_everything(seed: int) -> None:
    """Python's, numpy's and torch's generators, from the cell's seed."""
    import random

    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def graphsage(conv, in_dim: int, hidden: int, out_dim: int, num_layers: int, trim=None):
    """The one GraphSAGE both backends train, model(x, [graph per layer]) from `conv(a, b)`, a
    framework's mean SAGEConv; `trim(i, x, graph, hops) -> (x, graph)`: layer i's input where the
    call passes `hops` (PyG's trim_to_layer)."""
    import torch
    import torch.nn.functional as F

    class GraphSAGE(torch.nn.Module):
        def __init__(self):
            super().__init__()
            dims = [in_dim] + [hidden] * (num_layers - 1) + [out_dim]
            self.convs = torch.nn.ModuleList(conv(a, b) for a, b in zip(dims, dims[1:]))

        def forward(self, x, graphs, hops=None):
            for i, (layer, graph) in enumerate(zip(self.convs, graphs)):
                if trim is not None and hops is not None:
                    x, graph = trim(i, x, graph, hops)
                x = layer(x, graph)
                if i < len(self.convs) - 1:
                    x = F.dropout(F.relu(x), p=DROPOUT, training=self.training)
            return x

    model = GraphSAGE()
    same_start(model)
    return model


def unavailable_reason(mode: str, world_size: int = 1) -> str | None:
    """Why a mode cannot run here, or None: each of this node's ranks needs a GPU."""
    import torch

    if not modes.mode(mode).needs_gpu:
        return None
    if not torch.cuda.is_available():
        return fit_problem(available=False) or (f"mode {mode} needs a CUDA GPU and a CUDA build of the framework; "
                                                f"this process sees none (torch {torch.__version__})")
    local_ranks = local_world_size(world_size)
    # a rank that sees its own GPU alone counts the node's from the list it came from
    shown = len(rank_gpus(os.environ, local_ranks)) if one_gpu() else torch.cuda.device_count()
    if local_ranks > shown:
        return f"{local_ranks} ranks on this node need {local_ranks} GPUs; {shown} visible"
    return fit_problem()


def fit_problem(available: bool = True) -> str | None:
    """Why this stack's CUDA build cannot run on this driver or GPUs (naming the image tag to use), or None."""
    import torch

    if not torch.version.cuda:
        return None
    gpus = [(torch.cuda.get_device_name(i), torch.cuda.get_device_capability(i))
            for i in range(torch.cuda.device_count())] if available else []
    return cuda_fit.problem(torch.version.cuda, cuda_fit.driver_cuda(), gpus,
                            torch.cuda.get_arch_list() if available else [])


def local_world_size(world_size: int = 1) -> int:
    """The ranks on this node: torchrun's LOCAL_WORLD_SIZE, else (one process) the world size."""
    return int(os.environ.get("LOCAL_WORLD_SIZE", world_size))


# Each rank of a GPU cell sees its own GPU alone (CUDA_VISIBLE_DEVICES narrowed before torch is
# imported: bench/run/worker.py), so a framework's own threads land on it too: DGL 2.1's prefetch
# thread's current device is cuda:0 (set_device is per thread), else every rank's GPU 0.
NODE_GPUS_ENV = "GNNBENCH_NODE_GPUS"  # the node's CUDA_VISIBLE_DEVICES before a rank narrowed it ("" = unset)
RANK_GPU_ENV = "GNNBENCH_RANK_GPU"  # the rank's own entry of it


def rank_gpus(environ, local_world: int) -> list[str]:
    """Each local rank's GPU as a CUDA_VISIBLE_DEVICES entry: rank i takes the i-th entry of the
    node's list, or GPU i (PCI bus order) where it was unset."""
    listed = environ.get(NODE_GPUS_ENV) if NODE_GPUS_ENV in environ else environ.get("CUDA_VISIBLE_DEVICES")
    entries = [e.strip() for e in (listed or "").split(",") if e.strip()]
    return entries if listed else [str(i) for i in range(local_world)]


def one_gpu_env(environ, local_rank: int) -> dict[str, str]:
    """The variables that give this rank its own GPU alone; {} where the node's list has no entry
    for it (unavailable_reason then says so)."""
    listed = environ.get(NODE_GPUS_ENV) if NODE_GPUS_ENV in environ else environ.get("CUDA_VISIBLE_DEVICES")
    gpus = rank_gpus(environ, local_rank + 1)
    if local_rank >= len(gpus) or gpus[local_rank] == "-1":
        return {}
    return {NODE_GPUS_ENV: listed or "", RANK_GPU_ENV: gpus[local_rank], "CUDA_VISIBLE_DEVICES": gpus[local_rank],
            "CUDA_DEVICE_ORDER": environ.get("CUDA_DEVICE_ORDER", "PCI_BUS_ID")}


def one_gpu(environ=None) -> bool:
    """Whether this process sees its own GPU alone (one_gpu_env was applied)."""
    return RANK_GPU_ENV in (os.environ if environ is None else environ)


def device_of(mode: str):
    """The training device of a mode: the CPU, or this rank's GPU."""
    import torch

    if not modes.mode(mode).trains_on_gpu:
        return torch.device("cpu")
    return torch.device("cuda", 0 if one_gpu() else int(os.environ.get("LOCAL_RANK", 0)))


def select_device(mode: str) -> None:
    """Make this rank's GPU the current device (first thing in a GPU cell), not cuda:0 for all."""
    device = device_of(mode)
    if device.type == "cuda":
        import torch

        torch.cuda.set_device(device)


def grad_scaler(device_type: str):
    """fp16's GradScaler: torch.amp's (torch >= 2.3), else torch.cuda.amp's (the dgl stack's 2.2)."""
    import torch

    if hasattr(torch.amp, "GradScaler"):
        return torch.amp.GradScaler(device_type)
    return torch.cuda.amp.GradScaler(enabled=device_type == "cuda")


def rank_and_world() -> tuple[int, int]:
    return int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))


def shard(seeds, seed: int):
    """This rank's equal share of the training seeds (seeded, the remainder dropped): every rank
    runs as many batches, as DDP needs. Rows keep their order (a link task's [P, 2] edges whole)."""
    import numpy as np

    rank, world = rank_and_world()
    if world == 1:
        return seeds
    per_rank = len(seeds) // world
    order = np.random.default_rng(seed).permutation(len(seeds))
    return seeds[np.sort(order[rank * per_rank:(rank + 1) * per_rank])]


def chunks(indptr, max_edges: int):
    """(first, end) node ranges of a CSC, each with at most `max_edges` in-edges (or a single node)."""
    import numpy as np

    n, a = len(indptr) - 1, 0
    while a < n:
        b = int(np.searchsorted(indptr, indptr[a] + max_edges, side="right")) - 1
        b = min(n, max(b, a + 1))
        yield a, b
        a = b


class CommTimer:
    """Times DDP's gradient all-reduce with a hook around PyTorch's default one. NCCL's future
    completes at enqueue (gloo's with the all-reduce), so there CUDA events are read at `settle`."""

    def __init__(self, device=None):
        self.seconds = 0.0
        self.cuda = device is not None and getattr(device, "type", None) == "cuda"
        self._events: list = []

    def hook(self, state, bucket):
        import torch
        from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

        if self.cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
        started = time.perf_counter()

        def done(fut):
            if self.cuda:
                end.record()  # NCCL's work is queued on the stream before this event
                self._events.append((start, end))
            else:
                self.seconds += time.perf_counter() - started
            return fut.value()[0] if isinstance(fut.value(), list) else fut.value()

        return allreduce_hook(state, bucket).then(done)

    def settle(self) -> None:
        """Add the CUDA events' times (call after the device is synchronised)."""
        for start, end in self._events:
            self.seconds += start.elapsed_time(end) / 1000
        self._events.clear()


def distribute(model, device, find_unused: bool = False, timed: bool = True):
    """(the model in DDP where there are several ranks, its CommTimer: None unless `timed`, the
    cell's `profile`). `find_unused`: a step may leave some parameters out (a typed model's)."""
    import torch

    _, world = rank_and_world()
    timer = CommTimer(device) if timed else None
    if world == 1:
        return model, timer
    ddp = torch.nn.parallel.DistributedDataParallel(
        model, device_ids=[device.index] if device.type == "cuda" else None, find_unused_parameters=find_unused)
    if timer is not None:
        ddp.register_comm_hook(None, timer.hook)
    return ddp, timer


def unwrap(model):
    """The model inside DDP's wrapper."""
    return getattr(model, "module", model)


class Pipeline(abc.ABC):
    """The contract: a subclass sets `train_loader` in its __init__ and defines the abstract
    methods (a trainer through `TrainingPipeline`; a typed or link backend its task's hooks too: `hooks_of`)."""

    unavailable = staticmethod(unavailable_reason)  # why this stack cannot run a mode, or None
    collective_eval = False  # True: every rank evaluates its own part, and the counts are summed
    model = None
    comm = None
    scaler = None  # fp16's GradScaler
    sampler = None  # what samples the neighbourhoods, with its version (recorded with each cell)
    index_dtype = None  # the sampling graph's index dtypes, {"indices": ..., "indptr": ...} (recorded)
    full_layer = None  # full_layer(conv, x_src, x_dst, src, dst): one layer over whole neighbourhoods
    unused_parameters = False  # True: a step may leave some of the model's parameters out (DDP looks for them)
    epoch = 0  # the training epoch under way, 0 the first (warm-up or not): set by the worker before each
    torch_memory_stats = True  # False: torch's allocator is not the one in use (its peak statistics read nothing)

    @staticmethod
    def before_cuda(device_index: int) -> None:
        """Called once a GPU cell's device is chosen, before its first CUDA allocation (a backend that
        swaps torch's allocator does it here); nothing by default."""

    def __init__(self, data, settings: CellSettings):
        self.settings = settings
        self.device = device_of(settings.mode)
        self.profile = settings.profile

    def sage(self, conv, in_dim: int, num_classes: int, trim=None):
        """The shared GraphSAGE, `hidden` wide, one layer per fanout hop."""
        return graphsage(conv, in_dim, self.settings.hidden, num_classes, len(self.settings.fanout), trim)

    def build_model(self, data) -> None:
        """The model on its device, in DDP across ranks, and its Adam; none with `model: none`."""
        import torch

        self.model, self.comm, self.scaler = None, None, None
        if self.settings.model != "none":
            self.model, self.comm = distribute(self.make_model(data).to(self.device), self.device,
                                               self.unused_parameters, timed=self.profile)
            self.optimizer = torch.optim.Adam(self.model.parameters(), lr=self.settings.lr,
                                              weight_decay=self.settings.weight_decay)
            if self.settings.amp == "fp16":
                self.scaler = grad_scaler(self.device.type)

    def to_device(self, batch):
        """The batch on the training device (asynchronously where the loader pinned it)."""
        return batch.to(self.device, non_blocking=bool(self.settings.pin_memory))

    def autocast(self):
        """The `amp` setting: bf16 or fp16 autocast on the training device, or nothing."""
        import torch

        amp = self.settings.amp
        dtype = getattr(torch, AMP_DTYPES.get(amp, "bfloat16"))
        return torch.autocast(self.device.type, dtype=dtype, enabled=amp != "off")

    def step(self, batch, clock=None) -> None:
        """One training step; `clock` (stages.EpochClock, when profiling) is told where stages end."""
        if self.model is None:
            return
        self.model.train()
        copied = self.transfer_bytes(batch) if clock is not None and self.device.type == "cuda" else None
        batch = self.to_device(batch)
        if copied is not None:  # on the CPU nothing is copied: no copy stage
            clock.mark("copy", copied)
        self.optimizer.zero_grad()
        with self.autocast():
            out, target = self.forward(self.model, batch)
        loss = self.loss(out, target)
        # fp16: the loss scaled, so that small gradients do not underflow
        (loss if self.scaler is None else self.scaler.scale(loss)).backward()
        if clock is not None:
            clock.mark("forward_backward")
        if self.scaler is not None:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
        if clock is not None:
            clock.mark("optimizer")

    @staticmethod
    def loss(out, target):
        """The training loss (the node tasks: cross-entropy)."""
        import torch.nn.functional as F

        return F.cross_entropy(out.float(), target)

    @staticmethod
    @abc.abstractmethod
    def count(batch) -> tuple[int, int]:
        """(seeds, sampled edges) of one batch."""

    @abc.abstractmethod
    def work(self, batch) -> BatchWork:
        """The work of one batch, as bench/backends/stages.py defines it (read with `profile: true`)."""

    def transfer_bytes(self, batch) -> int:
        """Bytes `to_device` copies to the GPU (PyG's Data or HeteroData; 0 on the CPU)."""
        if self.device.type != "cuda" or not hasattr(batch, "stores"):
            return 0
        return tensor_bytes(v for store in batch.stores for v in store.values() if getattr(v, "is_cuda", True) is False)

    def evaluate(self, split: str) -> float | None:
        """Accuracy on a split; with `collective_eval`, each rank's counts summed over ranks."""
        if self.model is None:
            return None
        correct, total = self.count_correct(split)
        if self.collective_eval:
            import torch

            counts = torch.tensor([correct, total], device=self.device)
            if torch.distributed.is_initialized():
                torch.distributed.all_reduce(counts)
            correct, total = int(counts[0]), int(counts[1])
        return correct / max(total, 1)

    def full_accuracy(self, data, split: str = "test") -> float | None:
        """Accuracy over `split` with full neighbourhoods, layer-wise, as DGL's example reports it."""
        import numpy as np
        import torch

        if self.model is None or self.full_layer is None:
            return None
        x = self.full_embeddings(unwrap(self.model).convs, data, data)
        idx = torch.from_numpy(np.asarray(getattr(data, f"{split}_idx")))
        labels = torch.from_numpy(np.asarray(data.labels))[idx]
        return float((x[idx.to(x.device)].argmax(dim=-1).cpu() == labels).float().mean()) if idx.numel() else None

    def full_embeddings(self, convs, graph, data):
        """Every node's output of `convs` with full neighbourhoods over `graph` (csc_indptr,
        edge_index, num_nodes), layer by layer in chunks of destination nodes, each reading only the
        feature rows it needs."""
        import numpy as np
        import torch
        import torch.nn.functional as F

        for conv in convs:
            conv.eval()
        indptr, sources, n = np.asarray(graph.csc_indptr), graph.edge_index[0], graph.num_nodes
        x = None  # the previous layer's output for every node; the input layer reads data.features

        def read(ids):  # the rows of x, or of data.features where there is none yet
            if x is not None:
                return x[torch.from_numpy(ids).to(x.device)]
            return torch.from_numpy(np.ascontiguousarray(data.features[ids])).to(self.device)
        with torch.no_grad(), self.autocast():
            for i, conv in enumerate(convs):
                out = None
                width = data.features.shape[1] if x is None else x.shape[1]
                for a, b in chunks(indptr, max(1, FULL_CHUNK_BYTES // (4 * width))):
                    src = np.asarray(sources[indptr[a]:indptr[b]])
                    rows, src_local = np.unique(src, return_inverse=True)
                    dst_local = np.repeat(np.arange(b - a), np.diff(indptr[a:b + 1]))
                    x_src, x_dst = read(rows), read(np.arange(a, b))
                    h = self.full_layer(conv, x_src, x_dst, torch.from_numpy(src_local.reshape(-1)),
                                        torch.from_numpy(dst_local))
                    if out is None:
                        out = torch.empty((n, h.shape[1]), dtype=h.dtype, device=h.device)
                    out[a:b] = h
                x = out if i == len(convs) - 1 else F.relu(out)  # dropout is off in eval
        return x

    def count_correct(self, split: str) -> tuple[int, int]:
        """(right predictions, predictions) over a split, on this process alone."""
        import torch

        model = unwrap(self.model)  # evaluation runs outside DDP
        model.eval()
        correct = total = 0
        with torch.no_grad(), self.autocast():
            for batch in self._loader(split, shuffle=False):
                out, target = self.forward(model, self.to_device(batch))
                correct += int((out.argmax(dim=-1) == target).sum())
                total += int(target.numel())
        return correct, total

    def reseed(self, seed: int) -> None:
        """Seed the streams the training loader draws from: one seed, the same batches."""
        seed_everything(seed)

    def allreduce_seconds(self) -> float | None:
        """DDP's all-reduce seconds so far: None where untimed, 0 where nothing is all-reduced."""
        if self.comm is not None:
            return self.comm.seconds
        return None if unwrap(self.model) is not self.model else 0.0

    def synchronize(self) -> None:
        """Wait for the device and settle the all-reduce timer, so clocks read after are honest."""
        if self.device.type == "cuda":
            import torch

            torch.cuda.synchronize(self.device)
            if self.comm is not None:
                self.comm.settle()


class TrainingPipeline(Pipeline):
    """A backend that trains a model (calling `build_model(data)` in its __init__)."""

    @abc.abstractmethod
    def _loader(self, split: str, shuffle: bool, num_workers: int = 0):
        """The batches of a split ("train", "val", "test") with the suite's sampler settings."""

    @abc.abstractmethod
    def make_model(self, data):
        """The torch.nn.Module that `model: sage` trains (before it is moved and wrapped in DDP)."""

    @abc.abstractmethod
    def forward(self, model, batch):
        """(logits, targets) of a batch already on the device."""


class TypedHooks(abc.ABC):
    """A typed-node backend's hook (first among its bases): its framework's layer over every relation."""
    unused_parameters = True  # a relation without sampled edges, or into an unread type, sits a step out

    @staticmethod
    @abc.abstractmethod
    def hetero_layer(kind: str, relations: list[tuple[str, str, str]]):
        """make(in_widths, out, heads, concat) -> one layer over every relation, summed (bench/backends/typed.py)."""

    def make_model(self, data):
        return typed_model(self.hetero_layer(self.settings.model, data.relations), data, self.settings)


class LinkHooks(abc.ABC):
    """A link backend's hooks for the task's shared part (bench/backends/link.py); its encoder's
    layer is the node pipeline's `conv_factory` (not declared here: an abstract one would hide it)."""

    @abc.abstractmethod
    def inputs(self, batch):
        """(features, graph per layer) of a batch on the device."""

    @abc.abstractmethod
    def pairs(self, batch):
        """(pos_src, pos_dst, neg_src, neg_dst) in the batch's local ids."""

    @abc.abstractmethod
    def seed_pairs(self, batch):
        """The positive seed edges in global ids, (src, dst) numpy arrays."""

    @abc.abstractmethod
    def sampled_edges(self, batch):
        """The sampled graph's edges in global ids, (src, dst) numpy arrays."""

    @abc.abstractmethod
    def sampled_edge_count(self, batch) -> int:
        """The number of sampled edges (without listing them)."""

    @abc.abstractmethod
    def positives(self, batch) -> int:
        """The number of positive seed edges."""


def hooks_of(task: str) -> type:
    """The abstract class a backend of `task` subclasses: its Task's `hooks` (bench/tasks.py), else Pipeline."""
    module, _, name = (TASKS[task].hooks or f"{__name__}:Pipeline").partition(":")
    return getattr(importlib.import_module(module), name)
