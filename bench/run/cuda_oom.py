"""A rank that runs out of GPU memory is a result: status `oom` with the device's memory when it
failed, never a traceback recorded as `failed`. The worker catches the error (`is_cuda_oom`: torch's
OutOfMemoryError, or the RuntimeError of CUDA's allocator failing outside PyTorch's, as DGL raises
it) and writes `record(...)`; a rank of several exits with EXIT_CODE so that torchrun ends its peers."""

from __future__ import annotations

import contextlib
import re
import sys

EXIT_CODE = 3  # a rank of a multi-rank cell that ran out of GPU memory and wrote its record
MARKERS = ("CUDA out of memory", "CUDA error: out of memory", "CUBLAS_STATUS_ALLOC_FAILED")
MIB = 2**20


def is_cuda_oom(exc: BaseException) -> bool:
    oom = getattr(getattr(sys.modules.get("torch"), "cuda", None), "OutOfMemoryError", None)  # None: no torch
    return (oom is not None and isinstance(exc, oom)) or (isinstance(exc, RuntimeError)
                                                          and any(m in str(exc) for m in MARKERS))


def tried_bytes(message: str) -> int | None:
    """What PyTorch's message says it tried to allocate ('Tried to allocate 2.00 GiB')."""
    if not (found := re.search(r"Tried to allocate ([\d.]+) (B|KiB|MiB|GiB|TiB)", message)):
        return None
    return int(float(found.group(1)) * 1024 ** ("B", "KiB", "MiB", "GiB", "TiB").index(found.group(2)))


def memory_when_failed(device) -> dict:
    """The device's memory as the driver sees it (every process's) and this rank's allocator peaks,
    read after the failure; {} where CUDA cannot answer."""
    import torch

    out = {}
    with contextlib.suppress(Exception):  # a broken context still leaves the reason
        free, total = torch.cuda.mem_get_info(device)
        out.update(device_used_bytes=int(total - free), device_total_bytes=int(total))
    with contextlib.suppress(Exception):
        out.update(peak_allocated_bytes=int(torch.cuda.max_memory_allocated(device)),
                   peak_reserved_bytes=int(torch.cuda.max_memory_reserved(device)))
    return out


def reason(exc: BaseException, rank: int, device, memory: dict) -> str:
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
    parts = [f"CUDA out of memory on rank {rank} ({device})"]
    if (tried := tried_bytes(str(exc))) is not None:
        parts.append(f"tried to allocate {tried / MIB:,.0f} MiB")
    if "device_used_bytes" in memory:
        parts.append(f"device-wide {memory['device_used_bytes'] / MIB:,.0f} of "
                     f"{memory['device_total_bytes'] / MIB:,.0f} MiB in use when it failed")
    if "peak_reserved_bytes" in memory:
        parts.append(f"this rank's PyTorch peak {memory['peak_allocated_bytes'] / MIB:,.0f} MiB allocated, "
                     f"{memory['peak_reserved_bytes'] / MIB:,.0f} MiB reserved")
    return "; ".join(parts) + f"\n{type(exc).__name__}: {first}"


def record(exc: BaseException, rank: int, device, base: dict | None = None) -> dict:
    """The worker's record of a rank that ran out of GPU memory (`base`: versions, device info)."""
    memory = memory_when_failed(device) if getattr(device, "type", None) == "cuda" else {}
    return {**(base or {}), "status": "oom", "reason": reason(exc, rank, device, memory),
            "gpu_memory": {"rank": rank, "device": str(device), "tried_bytes": tried_bytes(str(exc)), **memory}}
