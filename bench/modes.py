"""What a `mode` means, declared once: where sampling runs, where training runs, where the graph
and features are kept, and so what is pinned. Nothing else parses a mode's name,
"<where sampling runs>-<where training runs>" as GraphBolt names them:

  cpu-cpu      graph and features in host memory; sample and train on the CPU
  cpu-cuda     graph and features in host memory; sample on the CPU, copy each batch to the GPU
  pinned-cuda  graph and features in pinned host memory; the GPU samples and gathers through UVA
  cuda-cuda    graph and features in GPU memory; sample, gather and train on the GPU

Plain data, no dependencies. A new mode: one line in MODES (and its name in the `modes` of the
BACKENDS that offer it, with the code that builds it).
"""

from __future__ import annotations

from dataclasses import dataclass

CPU, CUDA, PINNED = "cpu", "cuda", "pinned"


@dataclass(frozen=True)
class Mode:
    name: str
    samples_on: str  # "cpu" or "cuda": the device that samples neighbourhoods
    trains_on: str  # "cpu" or "cuda": the device the model runs on
    storage: str  # where the graph and features are kept: "cpu", "pinned" (host, page-locked) or "cuda"

    @property
    def needs_gpu(self) -> bool:
        return CUDA in (self.samples_on, self.trains_on) or self.storage == CUDA

    @property
    def trains_on_gpu(self) -> bool:
        return self.trains_on == CUDA

    @property
    def pinned(self) -> bool:
        """The mode itself pins the graph and features (page-locked host memory, read through UVA)."""
        return self.storage == PINNED

    @property
    def features_off_rank(self) -> bool:
        """Each rank leaves the hub's features mapped rather than reading its own copy (pinned in place
        once per node, or read from the map straight to the GPU)."""
        return self.storage in (PINNED, CUDA)

    @property
    def seeds_to_device_first(self) -> bool:
        """The seeds go to the GPU before sampling (the GPU samples): pinned or GPU storage."""
        return self.storage in (PINNED, CUDA)

    @property
    def copies_batches(self) -> bool:
        """Each sampled batch is built on the host and copied to the training device at the end."""
        return self.storage == CPU

    @property
    def overlap_feature_fetch(self) -> bool:
        """GraphBolt's feature fetch on a side CUDA stream, one batch ahead of training: on wherever
        training is on the GPU (DGL 2.1's default), off in cpu-cpu (the CPU-only build lacks the op).
        Its prefetch thread's device is cuda:0, so each rank sees its own GPU alone (base.one_gpu_env)."""
        return self.trains_on_gpu

    @property
    def backend_for_ranks(self) -> str:
        """torch.distributed's backend for this mode's ranks: NCCL when training on GPUs."""
        return "nccl" if self.trains_on_gpu else "gloo"

    @property
    def workers_allowed(self) -> bool:
        """DGL requires num_workers 0 when the seeds are on the GPU (CUDA cannot be re-initialised in a
        forked worker): such cells are kept only as that recorded failure, never as a speed figure."""
        return not self.seeds_to_device_first


MODES: dict[str, Mode] = {m.name: m for m in (
    Mode("cpu-cpu", samples_on=CPU, trains_on=CPU, storage=CPU),
    Mode("cpu-cuda", samples_on=CPU, trains_on=CUDA, storage=CPU),
    Mode("pinned-cuda", samples_on=CUDA, trains_on=CUDA, storage=PINNED),
    Mode("cuda-cuda", samples_on=CUDA, trains_on=CUDA, storage=CUDA),
)}
DEFAULT = "cpu-cpu"
KNOWN_WORKER_ERRORS = ("cudaHostUnregister", "Cannot re-initialize CUDA in forked subprocess")


def mode(name: str) -> Mode:
    """The declared mode of this name (KeyError names the allowed ones)."""
    if name not in MODES:
        raise KeyError(f"unknown mode {name!r}; allowed: {', '.join(MODES)}")
    return MODES[name]


def known_worker_failure(mode_name: str, num_workers: int, reason: str) -> str | None:
    """The label of a failed cell whose recorded error is the known one of workers with GPU seeds."""
    if mode(mode_name).workers_allowed or not num_workers:
        return None
    if any(marker in (reason or "") for marker in KNOWN_WORKER_ERRORS):
        return (f"known limitation: num_workers > 0 in mode {mode_name} (the seeds are on the GPU; DGL "
                "requires num_workers=0 there, DGL #7381, #6921, #6981)")
    return None


def pins(settings) -> bool:
    """Whether a cell's host-to-device copies come from pinned memory: its mode pins its data, or
    its loader pins each batch (`pin_memory: true`, PyG's). `settings`: bench/settings.py's."""
    return mode(settings.mode).pinned or bool(settings.pin_memory)
