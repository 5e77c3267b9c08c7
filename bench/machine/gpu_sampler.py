"""Is the loader starving the GPU? Each rank's GPU utilisation and PCIe traffic, read from NVML
every INTERVAL_S on a background thread (outside the epoch's clock) and reduced per epoch to
means, maxima and bytes moved: estimates, as NVML samples itself. Stdlib only.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from bench.machine import nvml

INTERVAL_S = 0.1
KB = 1024  # NVML's PCIe throughput unit (KB/s)
CPU_ONLY = "the cell trains on the CPU: no GPU to sample"


@dataclass(frozen=True)
class Sample:
    t: float  # time.perf_counter() when read
    util_pct: float | None = None  # GPU busy, % of NVML's sample period
    mem_util_pct: float | None = None  # memory controller busy, %
    h2d_bytes_per_s: float | None = None  # PCIe RX of the GPU
    d2h_bytes_per_s: float | None = None  # PCIe TX of the GPU
    used_bytes: int | None = None  # device memory in use, every process's


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _present(rows: list[dict], key: str) -> list:
    return [r[key] for r in rows if r and r.get(key) is not None]


def _per_s(total: float | None, seconds: float) -> float | None:
    return total / seconds / 1e6 if total is not None and seconds > 0 else None


def _spans(times: list[float], start: float, end: float) -> list[float]:
    """The time each sample stands for: halfway to its neighbours, clipped to [start, end]."""
    bounds = [start] + [(a + b) / 2 for a, b in zip(times, times[1:])] + [end]
    return [max(0.0, min(hi, end) - max(lo, start)) for lo, hi in zip(bounds, bounds[1:])]


def _integral(samples: list[Sample], field: str, start: float, end: float) -> float | None:
    """Bytes moved: each sample's rate times the time it stands for (None: never read)."""
    if not (pairs := [(s.t, getattr(s, field)) for s in samples if getattr(s, field) is not None]):
        return None
    spans = _spans([t for t, _ in pairs], start, end)
    return sum(rate * span for (_, rate), span in zip(pairs, spans))


def reduce(samples: list[Sample], start: float, end: float) -> dict:
    """One epoch's samples as mean/max utilisation (%), bytes and MB/s each way, device memory peak."""
    seconds = max(end - start, 0.0)
    rows = [vars(s) for s in samples]
    util, used = _present(rows, "util_pct"), _present(rows, "used_bytes")
    h2d, d2h = _integral(samples, "h2d_bytes_per_s", start, end), _integral(samples, "d2h_bytes_per_s", start, end)
    return {
        "samples": len(samples), "seconds": seconds,
        "util_mean_pct": _mean(util), "util_max_pct": max(util, default=None),
        "mem_util_mean_pct": _mean(_present(rows, "mem_util_pct")),
        "h2d_bytes": h2d, "d2h_bytes": d2h, "h2d_mb_per_s": _per_s(h2d, seconds), "d2h_mb_per_s": _per_s(d2h, seconds),
        "device_used_max_bytes": max(used, default=None),
    }


def summarise(epochs: list[dict]) -> dict | None:
    """A rank's measured epochs together (mean, max, bytes per epoch, MB/s over all of them)."""
    if not (epochs := [e for e in epochs if e]):
        return None
    seconds = sum(e["seconds"] for e in epochs)
    h2d, d2h = (sum(_present(epochs, k)) if _present(epochs, k) else None for k in ("h2d_bytes", "d2h_bytes"))
    return {
        "epochs": len(epochs), "samples": sum(e["samples"] for e in epochs),
        "util_mean_pct": _mean(_present(epochs, "util_mean_pct")),
        "util_max_pct": max(_present(epochs, "util_max_pct"), default=None),
        "mem_util_mean_pct": _mean(_present(epochs, "mem_util_mean_pct")),
        "h2d_bytes_per_epoch": h2d / len(epochs) if h2d is not None else None,
        "h2d_mb_per_s": _per_s(h2d, seconds), "d2h_mb_per_s": _per_s(d2h, seconds),
        "device_used_max_bytes": max(_present(epochs, "device_used_max_bytes"), default=None),
    }


def across_ranks(ranks: list[dict | None]) -> dict | None:
    """The cell's figure from its ranks' summaries (the least busy rank's too: a starved GPU shows)."""
    found = [r for r in ranks if r and r.get("util_mean_pct") is not None]
    util, h2d = _present(found, "util_mean_pct"), _present(ranks, "h2d_mb_per_s")
    if not found and not h2d:
        return None
    return {"ranks": len(found), "util_mean_pct": _mean(util), "util_min_rank_pct": min(util, default=None),
            "util_max_pct": max(_present(found, "util_max_pct"), default=None),
            "h2d_mb_per_s": _mean(h2d)}  # per GPU: each has its own link


class NvmlSource:
    """Reads one Sample from an NVML device; a counter the GPU does not support (a MIG instance's
    utilisation, PCIe under vGPU) is asked once, then named in `unsupported`."""

    def __init__(self, device):
        self.nvml, self.handle = device.nvml, device.handle
        self.unsupported: set[str] = set()

    def _ask(self, name: str, call):
        if name in self.unsupported:
            return None
        try:
            return call()
        except self.nvml.NVMLError:
            self.unsupported.add(name)
            return None

    def read(self) -> Sample:
        nvml, h = self.nvml, self.handle
        t = time.perf_counter()
        rates = self._ask("utilization", lambda: nvml.nvmlDeviceGetUtilizationRates(h))
        rx = self._ask("pcie", lambda: nvml.nvmlDeviceGetPcieThroughput(h, nvml.NVML_PCIE_UTIL_RX_BYTES))
        tx = self._ask("pcie", lambda: nvml.nvmlDeviceGetPcieThroughput(h, nvml.NVML_PCIE_UTIL_TX_BYTES))
        memory = self._ask("memory", lambda: nvml.nvmlDeviceGetMemoryInfo(h))
        return Sample(t, util_pct=float(rates.gpu) if rates is not None else None,
                      mem_util_pct=float(rates.memory) if rates is not None else None,
                      h2d_bytes_per_s=rx * KB if rx is not None else None,
                      d2h_bytes_per_s=tx * KB if tx is not None else None,
                      used_bytes=int(memory.used) if memory is not None else None)


class EpochSampler:
    """Samples `source` (anything with `read() -> Sample`) on a thread; `stop()` returns the reduction."""

    def __init__(self, source, interval: float = INTERVAL_S):
        self.source, self.interval = source, interval
        self._samples: list[Sample] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._start = 0.0
        self.errors: list[str] = []

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._samples.append(self.source.read())
            except Exception as exc:  # noqa: BLE001 - a failed read loses a sample, never the epoch
                if len(self.errors) < 3:
                    self.errors.append(f"{type(exc).__name__}: {exc}")
            self._stop.wait(self.interval)

    def start(self) -> None:
        self._samples, self._stop = [], threading.Event()
        self._start = time.perf_counter()
        self._thread = threading.Thread(target=self._run, name="gnnbench-gpu-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> dict:
        end = time.perf_counter()
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        return reduce([s for s in self._samples if s.t <= end], self._start, end)


def open_for(device) -> tuple[EpochSampler | None, str | None]:
    """An EpochSampler on this rank's GPU (`device`: a torch.device), or (None, why none)."""
    if device is None or getattr(device, "type", "cpu") != "cuda":
        return None, CPU_ONLY
    found, reason = nvml.open_device(device.index or 0)
    return ((None, f"GPU utilisation and PCIe traffic not sampled: {reason}") if found is None
            else (EpochSampler(NvmlSource(found)), None))
