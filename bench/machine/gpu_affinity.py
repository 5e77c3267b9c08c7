"""Each rank of a GPU cell and its loader workers on the CPU cores next to its GPU.

A GPU hangs off one CPU socket (NUMA node); a rank that runs on the other socket copies every
batch across the socket link. So, where the GPU's cores are known, each rank of a GPU cell is
pinned to its GPU's cores (its share of them, where several of this node's GPUs sit on the same
cores) before it loads the dataset, so its pages land on that node; and where the framework offers
it (PyG's loaders: `enable_cpu_affinity(loader_cores)`), each loader worker gets one core of that
share, the rank's own threads the rest. GraphBolt offers no per-worker affinity: its workers
inherit the rank's cores. CPU cells are left as they are.

The GPU's cores come from NVML (nvmlDeviceGetCpuAffinity) or, without it, from the kernel
(/sys/bus/pci/devices/<bus id>/local_cpulist), always within the cores this process may use.
What was done is recorded per rank (`Plan.record`): the cores, how they were found, or why the
rank was left alone. Stdlib only at import (torch inside the functions that need it).
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path

SYSFS_PCI = Path("/sys/bus/pci/devices")


def parse_cpulist(text: str) -> list[int]:
    """'0-3,8,10-11' as [0, 1, 2, 3, 8, 10, 11] (the kernel's and nvidia-smi's cpulist form)."""
    cores: set[int] = set()
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        lo, _, hi = part.partition("-")
        cores.update(range(int(lo), int(hi or lo) + 1))
    return sorted(cores)


def mask_to_cores(words) -> list[int]:
    """NVML's CPU set (an array of 64-bit words, lowest CPUs first) as core numbers."""
    return [64 * w + bit for w, word in enumerate(words) for bit in range(64) if int(word) >> bit & 1]


def split_share(cores: list[int], sharers: list[int], me: int) -> list[int]:
    """My equal, contiguous share of `cores` among the local ranks `sharers` (their GPUs sit on
    the same cores); the whole set where there are fewer cores than sharers."""
    cores = sorted(cores)
    k, i = len(sharers), sorted(sharers).index(me)
    if len(cores) < k:
        return cores
    per = len(cores) // k
    return cores[i * per:(i + 1) * per]


def split_loader(share: list[int], num_workers: int) -> tuple[list[int], list[int] | None]:
    """(the rank's own cores, one core per loader worker) from its share: the workers take the
    last cores, the rank keeps at least one; (share, None) where there are too few."""
    if num_workers <= 0 or len(share) <= num_workers:
        return share, None
    return share[:-num_workers], share[-num_workers:]


def gpu_cores(cuda_index: int) -> tuple[list[int] | None, str]:
    """The cores next to CUDA device `cuda_index` that this process may use, and how they were
    found (or why not)."""
    from bench.machine import nvml

    allowed = set(os.sched_getaffinity(0))
    found, how = None, None
    device, reason = nvml.open_device(cuda_index)
    if device is not None:
        try:
            words = device.nvml.nvmlDeviceGetCpuAffinity(device.handle, -(-(os.cpu_count() or 1) // 64))
            found, how = mask_to_cores(words), f"NVML nvmlDeviceGetCpuAffinity ({device.how})"
        except Exception as exc:  # noqa: BLE001 - fall back to the kernel's view
            reason = f"nvmlDeviceGetCpuAffinity failed ({type(exc).__name__}: {exc})"
    if found is None:
        pci, _ = nvml.torch_ids(cuda_index)
        listed = SYSFS_PCI / pci / "local_cpulist" if pci else None
        if listed is not None and listed.exists():
            found, how = parse_cpulist(listed.read_text()), f"{listed}"
        elif pci:
            return None, f"the GPU's cores are unknown: {reason}; and the kernel has no {listed}"
        else:
            return None, (f"the GPU's cores are unknown: {reason}; and this torch reports no PCI bus id for "
                          "the kernel's local_cpulist")
    usable = sorted(set(found) & allowed)
    if not usable:
        return None, f"none of the GPU's cores {found} ({how}) may be used by this process ({sorted(allowed)})"
    return usable, how


def _limit_threads(cores: list[int]) -> int:
    """No more torch compute threads than the rank's own cores; the count it runs with."""
    import torch

    if torch.get_num_threads() > len(cores):
        torch.set_num_threads(len(cores))
    return torch.get_num_threads()


@dataclass
class Plan:
    record: dict = field(default_factory=dict)  # what extra_info keeps for this rank
    share: list[int] = field(default_factory=list)  # the cores this rank was pinned to

    def loader(self, loader):
        """The loader's own affinity context (PyG's enable_cpu_affinity) with one core of the
        rank's share per worker, the rank keeping the rest; a null context where the rank was not
        pinned, has no workers, the framework offers no such context or the cores are too few."""
        workers = self.record.get("num_workers", 0)
        if not self.share or not workers:
            return contextlib.nullcontext()
        if not hasattr(loader, "enable_cpu_affinity"):
            self.record["loader_how"] = (f"{type(loader).__name__} offers no per-worker affinity: "
                                         "its workers inherit the rank's cores")
            return contextlib.nullcontext()
        own, loader_cores = split_loader(self.share, workers)
        if loader_cores is None:
            self.record["loader_how"] = (f"{workers} worker(s) and the rank on {len(self.share)} core(s): "
                                         "the workers share the rank's cores")
            return contextlib.nullcontext()
        os.sched_setaffinity(0, own)
        self.record.update(rank_cores=own, loader_cores=loader_cores, torch_threads=_limit_threads(own),
                           loader_how=f"{type(loader).__name__}.enable_cpu_affinity, one core per worker")
        return loader.enable_cpu_affinity(loader_cores=list(loader_cores))


def pin_rank(device, local_rank: int, local_world: int, num_workers: int) -> Plan:
    """Pin this rank to its GPU's cores (its share of them), before it loads anything. `device`:
    the rank's torch.device; a CPU one leaves everything as it is (an empty record)."""
    if device is None or device.type != "cuda":
        return Plan()
    mine, how = gpu_cores(device.index or 0)
    if mine is None:
        return Plan({"reason": f"not pinned: {how}"})
    sharers = [local_rank]
    for other in range(local_world):  # this node's ranks train on CUDA devices 0..local_world-1
        if other != local_rank and gpu_cores(other)[0] == mine:
            sharers.append(other)
    share = split_share(mine, sharers, local_rank)
    os.sched_setaffinity(0, share)
    return Plan({"gpu_cores": mine, "how": how, "shared_with_local_ranks": sorted(sharers),
                 "rank_cores": share, "num_workers": num_workers, "torch_threads": _limit_threads(share)}, share)
