"""What a GPU user needs to know about the machine a GPU result came from: each GPU's model,
driver, memory, clocks, PCIe link and MIG mode, the topology, CUDA_VISIBLE_DEVICES and the NCCL_*
settings; and, from the worker inside its stack, the NCCL version its torch carries. The parsers
take nvidia-smi's text, so they are tested without a GPU. Stdlib only.
"""

from __future__ import annotations

import contextlib
import csv
import os
import re
import shutil

from bench.machine.gpus import run_tool

# nvidia-smi --query-gpu fields, in this order (nvidia-smi --help-query-gpu)
QUERY_FIELDS = ("index", "name", "uuid", "pci.bus_id", "driver_version", "memory.total", "clocks.sm",
                "clocks.mem", "clocks.max.sm", "clocks.max.mem", "pcie.link.gen.current",
                "pcie.link.width.current", "mig.mode.current", "power.limit", "compute_mode")
ENV_PREFIXES = ("NCCL_", "TORCH_NCCL_")
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def nccl_env(environ=None) -> dict[str, str]:
    """The NCCL settings in force: NCCL_* and torch's TORCH_NCCL_* variables."""
    environ = os.environ if environ is None else environ
    return {k: environ[k] for k in sorted(environ) if k.startswith(ENV_PREFIXES)}


def parse_cpulist(text: str) -> list[int]:
    """'0-3,8,10-11' as [0, 1, 2, 3, 8, 10, 11] (the kernel's and nvidia-smi's cpulist form)."""
    ranges = (part.strip().partition("-") for part in text.split(",") if part.strip())
    return sorted({core for lo, _, hi in ranges for core in range(int(lo), int(hi or lo) + 1)})


def _value(text: str):
    text = text.strip()
    if text.startswith("[") and text.endswith("]") or text in ("", "N/A"):  # [N/A], [Not Supported]
        return None
    for kind in (int, float):
        with contextlib.suppress(ValueError):
            return kind(text)
    return text


def parse_query(text: str, fields=QUERY_FIELDS) -> list[dict]:
    """`nvidia-smi --query-gpu=<fields> --format=csv,noheader,nounits` as one dict per GPU ('[N/A]': None)."""
    rows = csv.reader((line for line in text.splitlines() if line.strip()), skipinitialspace=True)
    return [{f: _value(cell) for f, cell in zip(fields, row)} for row in rows if len(row) == len(fields)]


def parse_topology(text: str) -> dict:
    """`nvidia-smi topo -m` as {"GPU0": {"links": {"GPU1": "NV12", "NIC0": "PXB"}, "cpu_affinity":
    "0-23", "cpus": [0, ..., 23], "numa_affinity": "0"}, ...} (GPUs and NICs; the legend dropped)."""
    lines = [ANSI.sub("", line).rstrip() for line in text.splitlines()]
    header_at = next((i for i, line in enumerate(lines) if re.match(r"^\s+GPU0\b", line)), None)
    if header_at is None:
        return {}
    columns = [c.strip() for c in lines[header_at].split("\t") if c.strip()]
    out = {}
    for line in lines[header_at + 1:]:
        if not re.match(r"^(GPU|NIC|mlx)\S*\t", line):
            if out:
                break  # the legend follows the matrix
            continue
        name, *cells = [c.strip() for c in line.split("\t")]
        if len(cells) > len(columns):
            cells = [c for c in cells if c]
        values = dict(zip(columns, cells))
        entry = {"links": {c: values[c] for c in columns if c in values and re.fullmatch(r"(GPU|NIC)\d+", c) and c != name}}
        if values.get("CPU Affinity") not in (None, "", "N/A"):
            entry["cpu_affinity"] = values["CPU Affinity"]
            with contextlib.suppress(ValueError):
                entry["cpus"] = parse_cpulist(values["CPU Affinity"])
        if values.get("NUMA Affinity") not in (None, "", "N/A"):
            entry["numa_affinity"] = values["NUMA Affinity"]
        out[name] = entry
    return out


def gpu_info() -> dict | None:
    """The machine's GPUs for the result's machine info (None without nvidia-smi)."""
    if shutil.which("nvidia-smi") is None:
        return None
    query = run_tool(["nvidia-smi", f"--query-gpu={','.join(QUERY_FIELDS)}", "--format=csv,noheader,nounits"])
    topo = run_tool(["nvidia-smi", "topo", "-m"])
    devices = parse_query(query or "")
    return {"gpus": [f"{d['name']}, {d['driver_version']}, {d['memory.total']} MiB" for d in devices],
            "devices": devices, "topology": topo, "topology_matrix": parse_topology(topo or "") or None,
            "mig_mode": sorted({str(d["mig.mode.current"]) for d in devices if d.get("mig.mode.current")}) or None,
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"), "nccl_env": nccl_env()}


def worker_facts() -> dict:
    """Inside the stack: its torch's NCCL version (None: a CPU build), CUDA_VISIBLE_DEVICES, NCCL_*."""
    import torch

    version = None
    try:
        if torch.distributed.is_available() and torch.distributed.is_nccl_available():
            found = torch.cuda.nccl.version()
            version = ".".join(map(str, found)) if isinstance(found, tuple) else str(found)
    except Exception:  # noqa: BLE001 - a torch without NCCL
        version = None
    return {"nccl_version": version, "nccl_env": nccl_env(),
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}
