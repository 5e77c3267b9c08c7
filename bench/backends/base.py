"""What every backend provides to the worker, and what they all do the same way: `Pipeline`.

A backend turns the hub's arrays into its framework's own structures, and exposes:
  train_loader        an iterable of batches (re-iterated every epoch)
  count(batch)        (seed nodes, sampled edges) of one batch
  step(batch)         one training step (or, with model "none", nothing: the loader alone)
  evaluate(split)     accuracy on "val" or "test" with the same sampler settings
  full_accuracy(data, split)  accuracy with every node's full neighbourhood, layer-wise (where the
                      backend defines full_layer), as DGL's examples report their test accuracy
  synchronize()       wait for the device, so clocks read after it are honest
  model, comm, device the model (DDP-wrapped across ranks), its all-reduce timer, its device
  work(batch)         the batch's work counts (bench/backends/stages.py), with `profile: true`
With `profile: true` (the default) a backend wraps its framework's sampler and feature gather in
timers (bench/backends/stages.py) and `step` marks where its stages end; `profile: false` leaves
the framework's pipeline and the step as they are.
The node backends train the same GraphSAGE: len(fanout) mean-aggregation layers, ReLU and
dropout between them, Adam with the suite's learning rate. Every model of every task starts from
one initialisation in both frameworks (`same_start`). Imported inside the stacks only;
torch is imported where it is used, so importing this module needs no framework.
"""

from __future__ import annotations

import abc
import os
import time

from bench import modes
from bench.backends import AMP_DTYPES
from bench import cuda_fit
from bench.backends.stages import BatchWork, tensor_bytes
from bench.backends.initialisation import INITIALISATION, same_start  # noqa: F401 - re-exported
from bench.backends.typed import typed_model
from bench.settings import DROPOUT, CellSettings

# Full-neighbourhood (layer-wise) inference runs in chunks of destination nodes whose per-edge
# messages (edges × input width × 4 bytes) stay under this, so that it adds little to a cell's
# peak memory (which the runner measures over the whole run, evaluation included)
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
    """The one GraphSAGE both backends train; `conv(a, b)` makes a framework's mean-aggregation
    SAGEConv from a to b features, and the model is called as model(x, [graph per layer]).
    `trim(i, x, graph, hops) -> (x, graph)`: what layer i runs on, where the call passes `hops`
    (PyG's trim_to_layer with the batch's nodes and edges per hop: bench/backends/pyg_node.py)."""
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
    """Why a mode cannot run in this interpreter, or None. Imported inside a stack. The ranks that
    need a GPU each are this node's (LOCAL_WORLD_SIZE, set by torchrun): a cell spread over
    several nodes needs world_size / nodes GPUs on each."""
    import torch

    if not modes.mode(mode).needs_gpu:
        return None
    if not torch.cuda.is_available():
        return fit_problem(available=False) or (f"mode {mode} needs a CUDA GPU and a CUDA build of the framework; "
                                                f"this process sees none (torch {torch.__version__})")
    local_ranks = local_world_size(world_size)
    if one_gpu():  # this rank sees its own GPU alone: the node's count is the list it came from
        shown = len(rank_gpus(os.environ, local_ranks))
        if local_ranks > shown:
            return f"{local_ranks} ranks on this node need {local_ranks} GPUs; {shown} visible"
        return fit_problem()
    if local_ranks > torch.cuda.device_count():
        return f"{local_ranks} ranks on this node need {local_ranks} GPUs; {torch.cuda.device_count()} visible"
    return fit_problem()


def fit_problem(available: bool = True) -> str | None:
    """Why this stack's CUDA build cannot run on this driver or these GPUs (the driver's CUDA
    version, each GPU's compute capability against torch.cuda.get_arch_list()), in one line that
    names the image tag to use instead (bench/cuda_fit.py), or None."""
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


# --- the rank's GPU: one visible device per rank ---------------------------------------------
# Each rank of a GPU cell sees its own GPU alone (CUDA_VISIBLE_DEVICES narrowed to it before torch
# is imported: bench/run/worker.py main), so whatever a framework runs on a thread of its own lands
# on it: DGL 2.1's gb.DataLoader with num_workers 0 fetches features in a prefetch thread whose
# current device is cuda:0 (set_device is per thread), which would otherwise be every rank's GPU 0.
NODE_GPUS_ENV = "GNNBENCH_NODE_GPUS"  # the node's CUDA_VISIBLE_DEVICES before a rank narrowed it ("" = unset)
RANK_GPU_ENV = "GNNBENCH_RANK_GPU"  # the rank's own entry of it


def rank_gpus(environ, local_world: int) -> list[str]:
    """Each local rank's GPU as a CUDA_VISIBLE_DEVICES entry: the node's list (as the launcher saw
    it), rank i taking its i-th entry; where it was unset, GPU i (in PCI bus order: the runner sets
    CUDA_DEVICE_ORDER=PCI_BUS_ID, NVML's and nvidia-smi's order)."""
    listed = environ.get(NODE_GPUS_ENV) if NODE_GPUS_ENV in environ else environ.get("CUDA_VISIBLE_DEVICES")
    entries = [e.strip() for e in (listed or "").split(",") if e.strip()]
    return entries if listed else [str(i) for i in range(local_world)]


def one_gpu_env(environ, local_rank: int) -> dict[str, str]:
    """The variables that give this rank its own GPU alone: CUDA_VISIBLE_DEVICES its entry of the
    node's list, the list kept in GNNBENCH_NODE_GPUS; {} where the list has no entry for it (the
    rank then sees what the node shows, and unavailable_reason says it lacks a GPU)."""
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
    import torch

    if not modes.mode(mode).trains_on_gpu:
        return torch.device("cpu")
    return torch.device("cuda", 0 if one_gpu() else int(os.environ.get("LOCAL_RANK", 0)))


def select_device(mode: str) -> None:
    """First thing in each rank of a GPU cell: make its own GPU the current device (cuda:0 where it
    sees its GPU alone, else LOCAL_RANK's), so NCCL's collectives, all_gather_object, synchronize()
    and the framework's ops land there and not all on cuda:0."""
    device = device_of(mode)
    if device.type == "cuda":
        import torch

        torch.cuda.set_device(device)


def grad_scaler(device_type: str):
    """fp16's GradScaler: torch.amp's where it exists (torch >= 2.3), else torch.cuda.amp's (torch
    2.2, the dgl stack), so fp16 cells run in both stacks."""
    import torch

    scaler = getattr(torch.amp, "GradScaler", None)
    if scaler is not None:
        return scaler(device_type)
    return torch.cuda.amp.GradScaler(enabled=device_type == "cuda")


def rank_and_world() -> tuple[int, int]:
    return int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))


def shard(seeds, seed: int):
    """This rank's equal share of the training seeds (a seeded shuffle, the remainder dropped),
    so that every rank runs the same number of batches, as DDP needs."""
    import numpy as np

    rank, world = rank_and_world()
    if world == 1:
        return seeds
    per_rank = len(seeds) // world
    order = np.random.default_rng(seed).permutation(len(seeds))
    # rows in their order in `seeds` (node ids sorted; a link task's [P, 2] seed edges kept whole)
    return seeds[np.sort(order[rank * per_rank:(rank + 1) * per_rank])]


def chunks(indptr, max_edges: int):
    """(first, end) node ranges over a CSC whose in-edges number at most `max_edges` (a node with
    more is a chunk of its own)."""
    import numpy as np

    n, a = len(indptr) - 1, 0
    while a < n:
        b = int(np.searchsorted(indptr, indptr[a] + max_edges, side="right")) - 1
        b = min(n, max(b, a + 1))
        yield a, b
        a = b


class CommTimer:
    """Times DDP's gradient all-reduce: a communication hook around PyTorch's default one records
    the time from a bucket being ready to its all-reduce completing (overlapping backward).
    On gloo (CPU) the future completes when the all-reduce has; on NCCL it completes at enqueue,
    so there the time is read from CUDA events recorded around the collective on the current
    stream, settled (without blocking the step) when the epoch's clock synchronises."""

    def __init__(self, device=None):
        self.seconds = 0.0
        self.cuda = device is not None and getattr(device, "type", None) == "cuda"
        self._events: list = []

    def hook(self, state, bucket):
        from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

        if self.cuda:
            import torch

            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fut = allreduce_hook(state, bucket)

            def recorded(f):
                end.record()  # NCCL's work is queued on the stream before this event
                self._events.append((start, end))
                return f.value()[0] if isinstance(f.value(), list) else f.value()

            return fut.then(recorded)
        started = time.perf_counter()

        def done(fut):
            self.seconds += time.perf_counter() - started
            return fut.value()[0] if isinstance(fut.value(), list) else fut.value()

        return allreduce_hook(state, bucket).then(done)

    def settle(self) -> None:
        """Add the CUDA events' times (call after the device is synchronised)."""
        for start, end in self._events:
            self.seconds += start.elapsed_time(end) / 1000
        self._events.clear()


def distribute(model, device, find_unused: bool = False, timed: bool = True):
    """Wrap a model in DDP when this process is one of several ranks; returns (model, timer).
    `find_unused`: some parameters may take no part in a step's loss (a typed model's relations
    without sampled edges, or into types the loss does not read), which DDP must look for.
    `timed` (the cell's `profile`): the all-reduce timed by a Python comm hook, run per gradient
    bucket, which no framework's own loop runs; without it DDP keeps its own C++ all-reduce and
    the timer is None (the all-reduce is not measured)."""
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
    return getattr(model, "module", model)


class Pipeline(abc.ABC):
    """The shared part of every backend: the pipeline contract. A subclass sets `train_loader`
    (an iterable of batches, re-iterated every epoch) in its __init__ after this one's, and
    defines the abstract methods below; a backend that trains the shared model subclasses
    `TrainingPipeline`, which asks for the loader, model and forward pass too. A backend that
    does something else per batch (no model at all) overrides `step`; a typed or link backend also
    subclasses its task's hooks (TypedHooks, LinkHooks, below: TASK_HOOKS). Python refuses to build
    a backend that lacks one (TypeError naming it), before any cell runs on it."""

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

    def __init__(self, data, settings: CellSettings):
        self.settings = settings
        self.device = device_of(settings.mode)
        self.profile = settings.profile

    def sage(self, conv, in_dim: int, num_classes: int, trim=None):
        """The shared GraphSAGE with this suite's hidden width and one layer per fanout hop."""
        return graphsage(conv, in_dim, self.settings.hidden, num_classes, len(self.settings.fanout), trim)

    def build_model(self, data) -> None:
        """With a model (`sage`; a typed backend's `rgcn` or `rgat`), the backend's model on its
        device, wrapped in DDP across ranks, and Adam at the suite's learning rate and weight decay; with
        `model: none`, no model (the loader alone)."""
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
        # a pinned batch (pin_memory) is copied asynchronously, as PyTorch advises
        return batch.to(self.device, non_blocking=bool(self.settings.pin_memory))

    def autocast(self):
        """The `amp` setting: bf16 or fp16 autocast on the training device, or nothing."""
        import torch

        amp = self.settings.amp
        dtype = getattr(torch, AMP_DTYPES.get(amp, "bfloat16"))
        return torch.autocast(self.device.type, dtype=dtype, enabled=amp != "off")

    def step(self, batch, clock=None) -> None:
        """One training step; `clock` (a stages.EpochClock, when profiling) is told where the copy,
        forward+backward and optimizer stages end."""
        if self.model is None:
            return
        self.model.train()
        if clock is not None and self.device.type == "cuda":
            copied = self.transfer_bytes(batch)
            batch = self.to_device(batch)
            clock.mark("copy", copied)
        else:  # on the CPU nothing is copied: no copy stage (README: "copy ... 0 on CPU")
            batch = self.to_device(batch)
        self.optimizer.zero_grad()
        with self.autocast():
            out, target = self.forward(self.model, batch)
        loss = self.loss(out, target)
        if self.scaler is not None:  # fp16: scaled, so small gradients do not underflow
            self.scaler.scale(loss).backward()
            if clock is not None:
                clock.mark("forward_backward")
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            loss.backward()
            if clock is not None:
                clock.mark("forward_backward")
            self.optimizer.step()
        if clock is not None:
            clock.mark("optimizer")

    @staticmethod
    def loss(out, target):
        """The training loss of a batch's outputs (the node tasks: cross-entropy over the classes)."""
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
        """Bytes `to_device` copies host -> device for this batch (0 on the CPU). PyG batches
        (Data) are counted here; a backend whose loader copies overrides it."""
        if self.device.type != "cuda" or not hasattr(batch, "to_dict"):
            return 0

        return tensor_bytes(v for v in batch.to_dict().values() if getattr(v, "is_cuda", True) is False)

    def evaluate(self, split: str) -> float | None:
        if self.model is None:
            return None
        correct, total = self.count_correct(split)
        return correct / max(total, 1)

    def full_accuracy(self, data, split: str = "test") -> float | None:
        """Accuracy over `split` with full neighbourhoods, by layer-wise inference as DGL's
        node-classification example reports its test accuracy (`full_embeddings` over the
        dataset's whole graph). None without a model or where the backend has no `full_layer`."""
        import numpy as np
        import torch

        if self.model is None or self.full_layer is None:
            return None
        x = self.full_embeddings(unwrap(self.model).convs, data, data)
        idx = torch.from_numpy(np.asarray(getattr(data, f"{split}_idx")))
        labels = torch.from_numpy(np.asarray(data.labels))[idx]
        return float((x[idx.to(x.device)].argmax(dim=-1).cpu() == labels).float().mean()) if idx.numel() else None

    def full_embeddings(self, convs, graph, data):
        """Every node's output of the layers `convs` with full neighbourhoods over `graph` (its
        csc_indptr, edge_index and num_nodes: the dataset's, or a link split's training graph):
        each layer's output for every node from the previous layer's output for all nodes, no
        sampling anywhere, in chunks of destination nodes (a chunk's in-edges are one slice of the
        CSC), the input layer reading only the feature rows a chunk needs from data.features (so
        a disk-backed store stays on disk)."""
        import numpy as np
        import torch
        import torch.nn.functional as F

        for conv in convs:
            conv.eval()
        indptr, sources, n = np.asarray(graph.csc_indptr), graph.edge_index[0], graph.num_nodes
        x = None  # the previous layer's output for every node; the input layer reads data.features
        with torch.no_grad(), self.autocast():
            for i, conv in enumerate(convs):
                out = None
                width = data.features.shape[1] if x is None else x.shape[1]
                for a, b in chunks(indptr, max(1, FULL_CHUNK_BYTES // (4 * width))):
                    src = np.asarray(sources[indptr[a]:indptr[b]])
                    rows, src_local = np.unique(src, return_inverse=True)
                    dst_local = np.repeat(np.arange(b - a), np.diff(indptr[a:b + 1]))
                    x_src, x_dst = (self._rows(data, x, r) for r in (rows, np.arange(a, b)))
                    h = self.full_layer(conv, x_src, x_dst, torch.from_numpy(src_local.reshape(-1)),
                                        torch.from_numpy(dst_local))
                    if out is None:
                        out = torch.empty((n, h.shape[1]), dtype=h.dtype, device=h.device)
                    out[a:b] = h
                x = out if i == len(convs) - 1 else F.relu(out)  # dropout is off in eval
        return x

    def _rows(self, data, x, rows):
        import numpy as np
        import torch

        if x is not None:
            return x[torch.from_numpy(rows).to(x.device)]
        return torch.from_numpy(np.ascontiguousarray(data.features[rows])).to(self.device)

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
        """Seed the random streams the training loader draws from in this process, so that the
        same seed gives the same batches: Python's, numpy's and torch's (the shuffle, and PyG's
        torch-sparse sampler). A backend whose framework keeps streams of its own seeds them too
        (GraphBolt)."""
        seed_everything(seed)

    def allreduce_seconds(self) -> float | None:
        """DDP's all-reduce seconds so far: None where DDP runs it untimed (`profile: false`,
        distribute), 0 where nothing is all-reduced (one rank, or no model)."""
        if self.comm is not None:
            return self.comm.seconds
        return None if unwrap(self.model) is not self.model else 0.0

    def synchronize(self) -> None:
        if self.device.type == "cuda":
            import torch

            torch.cuda.synchronize(self.device)
            if self.comm is not None:
                self.comm.settle()


class TrainingPipeline(Pipeline):
    """A backend that trains the shared GraphSAGE (`model: sage`): it calls `build_model(data)` in
    its __init__, and defines how it loads a split, builds the model and runs it on a batch.
    Where its loader does not already deliver batches on the device, it defines `to_device`."""

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
    """What a typed-node backend gives (listed before its framework's pipeline among its bases): the
    framework's layer over every relation; the shared typed model is built around it."""
    # a relation without sampled edges in a batch, or into a type the loss does not read (the output
    # layer's relations into authors, fields, institutes), leaves its parameters out of the step
    unused_parameters = True

    @staticmethod
    @abc.abstractmethod
    def hetero_layer(kind: str, relations: list[tuple[str, str, str]]):
        """make(in_widths, out, heads, concat) -> one layer over every relation, summed (bench/backends/typed.py)."""

    def make_model(self, data):
        return typed_model(self.hetero_layer(self.settings.model, data.relations), data, self.settings)


class LinkHooks(abc.ABC):
    """What a link backend gives the link task's shared part (bench/backends/link.py LinkPipeline,
    listed first among its bases), each in its framework's terms. The encoder's layer is the node
    pipeline's own `conv_factory` (listed after these hooks, so not declared here: an abstract one
    would hide it)."""

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


TASK_HOOKS = {"typed-node": TypedHooks, "link": LinkHooks}  # the hooks a backend of each task declares besides
