"""Each rank of a GPU cell and its loader workers on the CPU cores next to its GPU: a rank on the
other socket copies every batch across the socket link. Pinned before it loads the dataset (its
pages land on that NUMA node); PyG's loader workers get one core each. How the GPU and its cores
are found: docs/gpus.md. Each rank's record (`Plan.record`) says what was done, or why not.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path

from bench.machine import nvml
from bench.machine.gpu_facts import parse_cpulist, parse_query
from bench.machine.gpus import run_tool
from bench.machine.nvml import find_gpu, normal_pci

SYSFS_PCI = Path("/sys/bus/pci/devices")
_LISTING: tuple[list[dict] | None, str] | None = None
_WHY: list[str] = []  # why NVML gave no listing, for the reason a rank stays unpinned


def mask_to_cores(words) -> list[int]:
    """NVML's CPU set (an array of 64-bit words, lowest CPUs first) as core numbers."""
    return [64 * w + bit for w, word in enumerate(words) for bit in range(64) if int(word) >> bit & 1]


def split_share(cores: list[int], sharers: list[int], me: int) -> list[int]:
    """My equal, contiguous share of `cores` among the local ranks `sharers` (all where too few)."""
    cores = sorted(cores)
    k, i = len(sharers), sorted(sharers).index(me)
    if len(cores) < k:
        return cores
    per = len(cores) // k
    return cores[i * per:(i + 1) * per]


def split_loader(share: list[int], num_workers: int) -> tuple[list[int], list[int] | None]:
    """(the rank's own cores, one core per loader worker) from its share; (share, None) if too few."""
    too_few = num_workers <= 0 or len(share) <= num_workers
    return (share, None) if too_few else (share[:-num_workers], share[-num_workers:])


def node_listing() -> tuple[list[dict] | None, str]:
    """This node's GPUs in PCI bus order, each {"index", "uuid", "pci"} (and "cores" from NVML),
    and where they came from (NVML, else nvidia-smi); (None, why). Asked once per process."""
    global _LISTING
    if _LISTING is None:
        _LISTING = _nvml_listing() or _smi_listing()
    return _LISTING


def _nvml_listing() -> tuple[list[dict], str] | None:
    lib, reason = nvml.load()
    if lib is None:
        _WHY.append(reason)
        return None
    try:
        words = -(-(os.cpu_count() or 1) // 64)
        listed = nvml.listing(lib)
        for device in listed:
            device["cores"] = mask_to_cores(lib.nvmlDeviceGetCpuAffinity(device.pop("handle"), words))
        return listed, "NVML nvmlDeviceGetCpuAffinity"
    except Exception as exc:  # noqa: BLE001 - fall back to nvidia-smi and the kernel's view
        _WHY.append(f"NVML could not list the GPUs ({type(exc).__name__}: {exc})")
        return None


def _smi_listing() -> tuple[list[dict] | None, str]:
    rows = parse_listing(run_tool(["nvidia-smi", "--query-gpu=index,uuid,pci.bus_id", "--format=csv,noheader"]) or "")
    return ((rows, "nvidia-smi --query-gpu") if rows
            else (None, "; ".join(_WHY + ["and nvidia-smi lists no GPU"])))


def parse_listing(text: str) -> list[dict]:
    """`nvidia-smi --query-gpu=index,uuid,pci.bus_id --format=csv,noheader` as [{"index", "uuid", "pci"}]."""
    return [row for row in parse_query(text, ("index", "uuid", "pci")) if isinstance(row["index"], int)]


def gpu_cores(entry: str, listing: tuple[list[dict] | None, str] | None = None) -> tuple[list[int] | None, str]:
    """The usable cores next to the GPU a CUDA_VISIBLE_DEVICES `entry` names, and how found; or (None, why)."""
    devices, source = listing if listing is not None else node_listing()
    if devices is None:
        return None, f"the GPU's cores are unknown: {source}"
    device, how = find_gpu(entry, devices)
    if device is None:
        return None, f"the GPU's cores are unknown: {how}"
    found = device.get("cores")
    if found:
        how = f"{source} ({how})"
    else:
        pci = normal_pci(device.get("pci"))
        listed = SYSFS_PCI / pci / "local_cpulist" if pci else None
        if listed is None or not listed.exists():
            return None, f"the GPU's cores are unknown: {source} gives PCI bus id {device.get('pci')!r} and the kernel has no {listed}"
        found, how = parse_cpulist(listed.read_text()), f"{listed} (PCI bus id from {source}, {how})"
    allowed = set(os.sched_getaffinity(0))
    if not (usable := sorted(set(found) & allowed)):
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
        """The loader's affinity context (PyG's enable_cpu_affinity), one core of the rank's share
        per worker; a null context where that cannot be (the record says why)."""
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


def pin_rank(device, gpus: list[str], local_rank: int, num_workers: int) -> Plan:
    """Pin this rank to its share of its GPU's cores, before it loads anything (a CPU `device`: an
    empty record). `gpus`: each local rank's CUDA_VISIBLE_DEVICES entry (base.rank_gpus)."""
    if device is None or device.type != "cuda":
        return Plan()
    mine, how = gpu_cores(gpus[local_rank])
    if mine is None:
        return Plan({"reason": f"not pinned: {how}"})
    sharers = [local_rank, *(other for other, gpu in enumerate(gpus)
                             if other != local_rank and gpu_cores(gpu)[0] == mine)]
    share = split_share(mine, sharers, local_rank)
    os.sched_setaffinity(0, share)
    return Plan({"gpu": gpus[local_rank], "gpu_cores": mine, "how": how, "shared_with_local_ranks": sorted(sharers),
                 "rank_cores": share, "num_workers": num_workers, "torch_threads": _limit_threads(share)}, share)
