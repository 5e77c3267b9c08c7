"""What every backend provides to the worker, and the model settings they share.

A backend turns the hub's arrays into its framework's own structures, and exposes:
  train_loader        an iterable of batches (re-iterated every epoch)
  count(batch)        (seed nodes, sampled edges) of one batch
  step(batch)         one training step (or, with model "none", nothing: the loader alone)
  evaluate(split)     accuracy on "val" or "test" with the same sampler settings
  synchronize()       wait for the device, so clocks read after it are honest
Both backends train the same GraphSAGE: len(fanout) mean-aggregation layers, ReLU and dropout
between them, Adam with the suite's learning rate.
"""

from __future__ import annotations

import os
import time

DROPOUT = 0.5


class Unavailable(Exception):
    """Raised while a pipeline is built when this stack cannot run the cell (recorded as skipped)."""


def graphsage(conv, in_dim: int, hidden: int, out_dim: int, num_layers: int):
    """The one GraphSAGE both backends train; `conv(a, b)` makes a framework's mean-aggregation
    SAGEConv from a to b features, and the model is called as model(x, [graph per layer])."""
    import torch
    import torch.nn.functional as F

    class GraphSAGE(torch.nn.Module):
        def __init__(self):
            super().__init__()
            dims = [in_dim] + [hidden] * (num_layers - 1) + [out_dim]
            self.convs = torch.nn.ModuleList(conv(a, b) for a, b in zip(dims, dims[1:]))

        def forward(self, x, graphs):
            for i, (layer, graph) in enumerate(zip(self.convs, graphs)):
                x = layer(x, graph)
                if i < len(self.convs) - 1:
                    x = F.dropout(F.relu(x), p=DROPOUT, training=self.training)
            return x

    return GraphSAGE()


def unavailable_reason(mode: str, world_size: int = 1) -> str | None:
    """Why a mode cannot run in this interpreter, or None. Imported inside a stack."""
    import torch

    if mode != "cpu-cpu" and not torch.cuda.is_available():
        return (f"mode {mode} needs a CUDA GPU and a CUDA build of the framework; "
                f"this process sees none (torch {torch.__version__})")
    if mode != "cpu-cpu" and world_size > torch.cuda.device_count():
        return f"{world_size} ranks need {world_size} GPUs; {torch.cuda.device_count()} visible"
    return None


def device_of(mode: str):
    import torch

    if mode.endswith("-cpu"):
        return torch.device("cpu")
    return torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))


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
    return np.sort(seeds[order[rank * per_rank:(rank + 1) * per_rank]])


class CommTimer:
    """Times DDP's gradient all-reduce: a communication hook around PyTorch's default one records
    the time from a bucket being ready to its all-reduce completing (overlapping backward)."""

    def __init__(self):
        self.seconds = 0.0

    def hook(self, state, bucket):
        from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

        started = time.perf_counter()

        def done(fut):
            self.seconds += time.perf_counter() - started
            return fut.value()[0] if isinstance(fut.value(), list) else fut.value()

        return allreduce_hook(state, bucket).then(done)


def distribute(model, device):
    """Wrap a model in DDP when this process is one of several ranks; returns (model, timer)."""
    import torch

    _, world = rank_and_world()
    timer = CommTimer()
    if world == 1:
        return model, timer
    ddp = torch.nn.parallel.DistributedDataParallel(
        model, device_ids=[device.index] if device.type == "cuda" else None)
    ddp.register_comm_hook(None, timer.hook)
    return ddp, timer


def unwrap(model):
    return getattr(model, "module", model)
