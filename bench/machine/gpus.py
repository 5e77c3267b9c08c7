"""The GPUs this machine shows, seen from the host (no framework imported): whether a GPU cell
can run here at all. `nvidia-smi -L`, else the driver's /proc entries and /dev/nvidia<N> nodes;
CUDA_VISIBLE_DEVICES narrows them as CUDA does (empty or -1 hides every GPU).
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
from dataclasses import dataclass


def run_tool(args: list[str], timeout: float = 30) -> str | None:
    """A tool's output, or None where it is missing, fails or hangs."""
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


@dataclass(frozen=True)
class Gpus:
    names: tuple[str, ...]  # the GPUs a process may use here
    how: str  # how they were found, or why none were

    def __len__(self) -> int:
        return len(self.names)


def _from_driver() -> tuple[list[str], str]:
    if shutil.which("nvidia-smi"):
        try:
            out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return [], f"nvidia-smi -L failed ({type(exc).__name__})"
        names = [m.group(1).strip() for m in re.finditer(r"^GPU \d+: (.*?)(?: \(UUID:.*)?$", out.stdout, re.M)]
        if out.returncode != 0:
            return [], f"nvidia-smi -L exited {out.returncode}: {(out.stderr or out.stdout).strip()[-200:]}"
        return names, "nvidia-smi -L"
    if proc := sorted(glob.glob("/proc/driver/nvidia/gpus/*")):
        return ["NVIDIA GPU"] * len(proc), "/proc/driver/nvidia/gpus (nvidia-smi not found)"
    if nodes := [p for p in glob.glob("/dev/nvidia*") if re.fullmatch(r"/dev/nvidia\d+", p)]:
        return ["NVIDIA GPU"] * len(nodes), "/dev/nvidia<N> (nvidia-smi not found)"
    return [], "no NVIDIA driver here (no nvidia-smi, /proc/driver/nvidia or /dev/nvidia<N>)"


def visible() -> Gpus:
    names, how = _from_driver()
    limit = os.environ.get("CUDA_VISIBLE_DEVICES")
    if limit is not None and names:
        wanted = [d for d in limit.split(",") if d.strip()]
        if not wanted or wanted[0].strip() == "-1":
            return Gpus((), f"CUDA_VISIBLE_DEVICES={limit!r} hides the {len(names)} GPU(s) {how} shows")
        names = names[:len(wanted)]
        how += f", CUDA_VISIBLE_DEVICES={limit}"
    return Gpus(tuple(names), how)
