"""One core budget for the whole project: how a node's usable cores are shared among a cell's
ranks, their torch threads and DataLoader workers. Each rank gets an equal share (at least one
core), its workers a core each and its threads the rest, so a world-size sweep compares the same
machine; only a setting asks for more, and the budget then says by what. Stdlib only.
"""

from __future__ import annotations

import contextlib
import math
import os
from dataclasses import asdict, dataclass
from pathlib import Path

AUTO = "auto"  # the `threads` setting's default: the rank's share of the cores, less its workers
PER_GPU = "per-gpu"  # `num_workers`: the rank's share of the cores, less one for its own thread
CGROUP = Path("/sys/fs/cgroup")


def usable_cores() -> int:
    """The cores this process may use: its affinity, capped by its cgroup's CPU quota."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    quota = cgroup_quota()
    return max(1, min(cores, math.ceil(quota))) if quota else cores


def cgroup_quota(proc_cgroup: Path = Path("/proc/self/cgroup"), root: Path = CGROUP) -> float | None:
    """Cores' worth of CPU time this process's cgroup may use (quota ÷ period), or None."""
    try:
        lines = proc_cgroup.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        rel = path.lstrip("/")
        with contextlib.suppress(OSError, ValueError):  # an unreadable entry: the next one
            if controllers == "":  # v2
                quota, period = (root / rel / "cpu.max").read_text().split()[:2]
                if quota != "max":
                    return int(quota) / int(period)
            elif "cpu" in controllers.split(","):
                folder = next((root / name / rel for name in (controllers, "cpu", "cpu,cpuacct")
                               if (root / name / rel / "cpu.cfs_quota_us").is_file()), None)
                if folder is not None:
                    quota = int((folder / "cpu.cfs_quota_us").read_text())
                    if quota > 0:
                        return quota / int((folder / "cpu.cfs_period_us").read_text())
    return None


@dataclass(frozen=True)
class Budget:
    """One node's plan: `ranks` on `cores`, each with `threads` torch threads and `workers`
    loader workers. `asked`: what the settings ask beyond the policy (empty: within it)."""
    cores: int
    ranks: int
    threads: int
    workers: int
    threads_rule: str  # "auto" (the policy) or "set" (the `threads` setting)
    asked: tuple[str, ...] = ()

    @property
    def used(self) -> int:
        """Cores the plan keeps busy at once: every rank's threads and workers."""
        return self.ranks * (self.threads + self.workers)

    @property
    def oversubscribed(self) -> bool:
        return self.used > self.cores

    def describe(self) -> str:
        """'2 ranks × (1 thread + 0 workers) = 2 of 2 cores'."""
        return (f"{_n(self.ranks, 'rank')} × ({_n(self.threads, 'thread')} + {_n(self.workers, 'worker')}) = "
                f"{self.used} of {_n(self.cores, 'core')}")

    def as_dict(self) -> dict:
        return {**asdict(self), "asked": list(self.asked), "used": self.used, "oversubscribed": self.oversubscribed}


def _n(count: int, word: str) -> str:
    return f"{count} {word}{'s' if count != 1 else ''}"


def share(cores: int, ranks: int) -> int:
    """Each rank's share of a node's cores (at least one)."""
    return max(1, cores // max(1, ranks))


def per_gpu_workers(cores: int, ranks: int) -> int:
    """`num_workers: per-gpu`: the rank's share less one core for its own thread (at least one)."""
    return max(1, share(cores, ranks) - 1)


def plan(cores: int, ranks: int = 1, workers: int | str = 0, threads: int | str = AUTO) -> Budget:
    """The budget of `ranks` ranks on `cores` cores; `workers` an int or "per-gpu", `threads` "auto" or an int."""
    cores, ranks = max(1, int(cores)), max(1, int(ranks))
    mine = share(cores, ranks)
    workers = per_gpu_workers(cores, ranks) if workers == PER_GPU else int(workers)
    asked = []
    if ranks > cores:
        asked.append(f"{ranks} ranks on {_n(cores, 'core')}")
    if workers >= mine and workers:
        asked.append(f"num_workers {workers} with a share of {_n(mine, 'core')} per rank")
    if threads == AUTO or threads is None:
        count, rule = max(1, mine - workers), AUTO
    else:
        count, rule = int(threads), "set"
        if count + workers > mine:
            asked.append(f"threads {count} beyond the share of {_n(mine, 'core')} per rank"
                         + (f" less {_n(workers, 'worker')}" if workers else ""))
    return Budget(cores, ranks, count, workers, rule, tuple(asked))


def pinned(cores: int, workers: int | str = 0, threads: int | str = AUTO, rule: str | None = None) -> Budget:
    """The budget of a rank pinned to `cores` cores of its own (its share of its GPU's): `per-gpu`
    workers (`rule`) recomputed from them (the host's count can exceed a socket's share)."""
    if rule == PER_GPU or workers == PER_GPU:
        workers = per_gpu_workers(cores, 1)
    return plan(cores, 1, workers, threads)
