"""What this machine can do at most, measured once: the ceilings each cell's stages are held
against (docs/reading-results.md, "Machine ceilings"). Each figure is cached under the cache
folder, keyed by the hardware, the row width and the file, so a run pays a few seconds, once.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import mmap
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np

from bench.stores import page_cache
from bench.machine.core_budget import usable_cores  # the one count: affinity, capped by a cgroup quota
from bench import stacks
from bench.paths import write_atomic
from bench.machine import gpus

FORMAT = 1
MIB = 2**20
DEFAULT_LLC_BYTES = 32 * MIB           # where the last-level cache size cannot be read
ARRAY_OVER_LLC = 4                      # the gathered-from array is this many times the LLC ...
MIN_ARRAY_BYTES, MAX_ARRAY_BYTES = 128 * MIB, 512 * MIB   # ... within these bounds
MEMCPY_BYTES = 128 * MIB                # each copy moves this much
GATHER_BYTES = 32 * MIB                 # each gather round collects this much
SECONDS_PER_FIGURE = 0.3                # each figure's repeats stop after this long (one at least)
SEQ_READ_LIMIT = 256 * MIB              # sequential reads cover at most this much of a file
RANDOM_READS = 2000                     # random reads per measurement (or SECONDS_PER_FIGURE)
READ_CHUNK = 8 * MIB
COLD_RESIDENT_MAX = 0.05                # after eviction, more resident than this: not cold
H2D_TIMEOUT_S = 120
DMI = Path("/sys/class/dmi/id")


# --- the figures --------------------------------------------------------------------------------

def _repeat(step: Callable[[], int]) -> float:
    """Bytes per second of the best run of `step` (a shared machine only ever makes a run slower)."""
    best, started = 0.0, time.perf_counter()
    while True:
        t0 = time.perf_counter()
        moved = step()
        best = max(best, moved / max(time.perf_counter() - t0, 1e-9))
        if time.perf_counter() - started > SECONDS_PER_FIGURE:
            return best


def llc_bytes() -> int:
    """The largest CPU cache's size (sysfs), else DEFAULT_LLC_BYTES."""
    sizes = []
    for index in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        with contextlib.suppress(OSError):
            text = (index / "size").read_text().strip()
            sizes.append(int(text.rstrip("KMG")) * {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1:], 1))
    return max(sizes, default=DEFAULT_LLC_BYTES)


def memcpy_bandwidth() -> float:
    """Bytes copied per second, array to array, both far larger than the caches."""
    src = np.ones(MEMCPY_BYTES, dtype=np.uint8)  # written, so its pages exist (not the zero page)
    dst = np.zeros_like(src)
    dst.fill(0)

    def copy() -> int:
        np.copyto(dst, src)
        return src.nbytes
    return _repeat(copy)


def gather_bandwidth(row_bytes: int, source: np.ndarray | None = None) -> float:
    """Bytes per second gathering random rows of `row_bytes` (repeats too) from beyond the LLC."""
    if row_bytes <= 0:
        raise ValueError(f"gather_bandwidth: row width {row_bytes} bytes; allowed: a positive number")
    flat = source if source is not None else _gather_source()
    dtype = np.float32 if row_bytes % 4 == 0 else np.uint8
    width = row_bytes // np.dtype(dtype).itemsize
    rows = flat.nbytes // row_bytes
    table = flat[:rows * row_bytes].view(dtype).reshape(rows, width)
    picks = max(1, GATHER_BYTES // row_bytes)
    index = np.random.default_rng(0).integers(0, rows, picks)
    out = np.empty((picks, width), dtype=dtype)

    def gather() -> int:
        np.take(table, index, axis=0, out=out)
        return out.nbytes
    return _repeat(gather)


def _gather_source() -> np.ndarray:
    size = int(min(MAX_ARRAY_BYTES, max(MIN_ARRAY_BYTES, ARRAY_OVER_LLC * llc_bytes())))
    return np.ones(size, dtype=np.uint8)  # written, so its pages exist (not the zero page)


# --- disk --------------------------------------------------------------------------------------

def sequential_read(path: Path) -> float:
    """Bytes per second reading the file's first SEQ_READ_LIMIT bytes in READ_CHUNK pieces."""
    buffer = bytearray(READ_CHUNK)
    total, t0 = 0, time.perf_counter()
    with open(path, "rb", buffering=0) as f:
        while total < SEQ_READ_LIMIT:
            if not (n := f.readinto(buffer)):
                break
            total += n
    return total / max(time.perf_counter() - t0, 1e-9)


def random_read(path: Path, record_bytes: int, data_offset: int = 0, seed: int = 0) -> float:
    """Bytes per second of one-record reads at random record boundaries, readahead off."""
    records = max(1, (os.path.getsize(path) - data_offset) // record_bytes)
    offsets = data_offset + np.random.default_rng(seed).integers(0, records, RANDOM_READS) * record_bytes
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
        total, t0 = 0, time.perf_counter()
        for offset in offsets.tolist():
            total += len(os.pread(fd, record_bytes, offset))
            if time.perf_counter() - t0 > SECONDS_PER_FIGURE:
                break
        elapsed = time.perf_counter() - t0
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_NORMAL)
    finally:
        os.close(fd)
    return total / max(elapsed, 1e-9)


def disk_reads(path: Path, record_bytes: int, data_offset: int = 0, label: str | None = None
               ) -> tuple[dict, list[str]]:
    """Sequential and random read bandwidth of one file, cold and warm; notes where cold is not cold."""
    label, stayed = label or path.name, []

    def cold() -> None:
        page_cache.evict([path])
        cached, pages = page_cache.resident(path, SEQ_READ_LIMIT)  # of the part the probe reads
        if pages and cached / pages > COLD_RESIDENT_MAX:
            stayed.append(cached / pages)
    cold()
    figures = {"seq_cold_bytes_per_s": sequential_read(path)}
    figures["seq_warm_bytes_per_s"] = sequential_read(path)
    cold()
    figures["random_cold_bytes_per_s"] = random_read(path, record_bytes, data_offset)
    figures["random_warm_bytes_per_s"] = random_read(path, record_bytes, data_offset)  # the same reads, now cached
    notes = [f"{label}: up to {max(stayed):.0%} of it stayed in the page cache after eviction (another process "
             "maps it, or it lives in memory): its cold figures are partly warm"] if stayed else []
    if figures["seq_cold_bytes_per_s"] >= figures["seq_warm_bytes_per_s"]:
        notes.append(f"{label}: read as fast cold as warm: the eviction did not take, or the storage is memory")
    return figures, notes


def npy_layout(path: Path) -> tuple[int, int]:
    """(row width in bytes, offset of the first row) of a 2-D .npy file."""
    mapped = np.load(path, mmap_mode="r")  # reads the header only
    return int(np.prod(mapped.shape[1:])) * mapped.dtype.itemsize, mapped.offset


# --- GPU ---------------------------------------------------------------------------------------

H2D_SCRIPT = """
import json, sys, time
try:
    import torch
except ImportError:
    print(json.dumps({"note": "no torch"})); sys.exit()
if not torch.cuda.is_available():
    print(json.dumps({"note": f"torch {torch.__version__} sees no CUDA device"})); sys.exit()
n = 256 * 2**20
dev = torch.empty(n, dtype=torch.uint8, device="cuda")
out = {"device": torch.cuda.get_device_name(0) + " (cuda:0; the others are taken to be alike)", "torch": torch.__version__}
for kind, pin in (("pageable", False), ("pinned", True)):
    host = torch.ones(n, dtype=torch.uint8, pin_memory=pin)
    dev.copy_(host); torch.cuda.synchronize()
    best = 0.0
    for _ in range(5):
        t0 = time.perf_counter(); dev.copy_(host, non_blocking=pin); torch.cuda.synchronize()
        best = max(best, n / (time.perf_counter() - t0))
    out[kind] = best
print(json.dumps(out))
"""


def h2d_bandwidth(interpreters: Iterable[Path]) -> tuple[dict | None, str]:
    """Pinned and pageable host-to-device bytes/s from the first CUDA torch found; else None and why."""
    if shutil.which("nvidia-smi") is None:
        return None, "no NVIDIA GPU here (nvidia-smi not found): host-to-device figures not measured"
    tried = []
    for python in interpreters:
        try:
            proc = subprocess.run([str(python), "-c", H2D_SCRIPT], capture_output=True, text=True,
                                  timeout=H2D_TIMEOUT_S)
            answer = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.stdout.strip() else {}
        except (OSError, subprocess.TimeoutExpired, json.JSONDecodeError) as exc:
            answer = {"note": f"{type(exc).__name__}"}
        if "pinned" in answer:
            return answer, f"host-to-device measured with {python} ({answer.get('torch')}, {answer.get('device')})"
        tried.append(f"{python}: {answer.get('note') or proc.stderr.strip()[-200:]}")
    return None, "host-to-device not measured: no CUDA torch found (" + "; ".join(tried) + ")"


def torch_interpreters() -> list[Path]:
    """This interpreter, then the installed stacks' (one of them has a CUDA torch on a GPU host)."""
    return list(dict.fromkeys([Path(sys.executable), *(s.python for s in stacks.available().values() if s.installed)]))


# --- the cached probe --------------------------------------------------------------------------

def machine_key() -> dict:
    """What makes two machines' ceilings the same: the hardware, GPUs included (a host-to-device
    figure belongs to its GPU), never the hostname (each container gets its own)."""
    model = platform.processor()
    with contextlib.suppress(OSError):
        model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                      if line.startswith("model name")), model)
    pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return {"board": board(), "cpu": model, "cpus": os.cpu_count(), "usable_cores": usable_cores(),
            "memory_bytes": pages, "gpus": list(gpus.visible().names), "gpu_uuids": gpu_uuids(), "format": FORMAT}


def board(dmi: Path = DMI) -> str | None:
    """The machine's maker and model as its firmware names them (the same inside a container), or None."""
    found = [(dmi / name).read_text().strip() for name in ("sys_vendor", "product_name", "board_name")
             if os.access(dmi / name, os.R_OK)]
    return " / ".join(found) or None


def gpu_uuids() -> list[str]:
    """The UUIDs of the GPUs nvidia-smi lists (each card's own, the same in every container)."""
    return re.findall(r"UUID: (GPU-[0-9a-fA-F-]+)", gpus.run_tool(["nvidia-smi", "-L"]) or "")


def cache_file(cache: Path) -> Path:
    key = json.dumps(machine_key(), sort_keys=True)
    return Path(cache) / "ceilings" / f"{hashlib.sha256(key.encode()).hexdigest()[:16]}.json"


def probe(cache: Path, row_widths: Iterable[int] = (), files: dict[str, tuple[Path, int, int]] | None = None,
          interpreters: Callable[[], Iterable[Path]] = torch_interpreters) -> dict:
    """machine_info["ceilings"], each figure cached or measured now. `files`: label -> (path,
    record bytes for random reads, offset of the first record)."""
    path = cache_file(cache)
    try:
        known = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        known = {}
    known = {"gather": {}, "disk": {}} | known
    notes: list[str] = []
    if "memcpy" not in known:
        known["memcpy"] = memcpy_bandwidth()
    widths = sorted({int(w) for w in row_widths if w and int(w) > 0})
    if missing := [w for w in widths if str(w) not in known["gather"]]:
        source = _gather_source()
        known["gather"].update({str(width): gather_bandwidth(width, source) for width in missing})
        del source
    disk = {}
    for label, (file, record_bytes, offset) in (files or {}).items():
        stat = os.stat(file)
        key = f"{Path(file).resolve()}:{stat.st_size}:{stat.st_mtime_ns}"
        if (entry := known["disk"].get(key)) is None:
            figures, file_notes = disk_reads(Path(file), record_bytes, offset, label)
            entry = known["disk"][key] = {"figures": figures, "notes": file_notes}
        disk[label] = entry["figures"]
        notes += entry["notes"]
    h2d_entry = known.pop("h2d", None)
    if not (h2d_entry and h2d_entry.get("figures")):  # "not measured" is never kept: asked again next run
        shown = gpus.visible()
        figures, note = (h2d_bandwidth(interpreters()) if shown else
                         (None, f"no GPU visible here ({shown.how}): host-to-device figures not measured"))
        h2d_entry = {"figures": figures, "note": note}
    if h2d_entry["figures"]:
        known["h2d"] = h2d_entry
    h2d = h2d_entry["figures"] or {}
    notes.append(h2d_entry["note"])
    write_atomic(path, json.dumps(known | {"machine": machine_key()}, indent=1))
    return {"usable_cores": usable_cores(), "memcpy_bytes_per_s": known["memcpy"],
            "gather_bytes_per_s": {str(w): known["gather"][str(w)] for w in widths}, "disk": disk,
            "h2d_pinned_bytes_per_s": h2d.get("pinned"), "h2d_pageable_bytes_per_s": h2d.get("pageable"),
            "notes": notes}


def dataset_targets(datasets: dict[str, Path]) -> tuple[list[int], dict[str, tuple[Path, int, int]]]:
    """Row widths and files to probe for a run's hub folders: each features.npy and store data file."""
    widths, files = [], {}
    for name, folder in datasets.items():
        folder = Path(folder)
        features = folder / "features.npy"
        if features.is_file():
            width, offset = npy_layout(features)
            widths.append(width)
            files[f"{name}/features.npy"] = (features, width, offset)
        for store_file in sorted(folder.glob("stores/*/data.mdb")):
            files[f"{name}/{store_file.parent.name}/data.mdb"] = (store_file, mmap.PAGESIZE, 0)
    return widths, files


def for_run(cache: Path, datasets: dict[str, Path]) -> dict:
    """The ceilings of a run that used these hub folders; a failed probe says why in its notes."""
    try:
        widths, files = dataset_targets(datasets)
        return probe(cache, widths, files)
    except Exception as exc:  # noqa: BLE001 - a run's results outweigh its ceilings
        return {"usable_cores": usable_cores(), "notes": [f"ceilings not measured: {type(exc).__name__}: {exc}"]}
