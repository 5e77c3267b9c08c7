"""How busy the machine was with other work while a cell ran: the machine's CPU time around the
cell (psutil.cpu_times, steal included) less the cell's process tree and the runner's, as a share
of all cores over the cell's wall time; flagged in the tables from HIGH_LOAD.
"""

from __future__ import annotations

import resource
import time

import psutil

HIGH_LOAD = 0.25  # a quarter of the machine busy with other work: the cell's times are suspect


def _busy_seconds() -> float:
    t = psutil.cpu_times()
    return sum(getattr(t, name, 0.0) for name in ("user", "nice", "system", "irq", "softirq", "steal"))


def _usage(who: int) -> float:
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


class LoadMeter:
    """Started before a cell's process, finished after it was waited for."""

    def __init__(self):
        self.wall0 = time.monotonic()
        self.busy0 = _busy_seconds()
        self.children0 = _usage(resource.RUSAGE_CHILDREN)
        self.self0 = _usage(resource.RUSAGE_SELF)

    def other_share(self, tree_cpu_s: float) -> float | None:
        """The share of the machine's cores that other work kept busy; None if too short to tell."""
        wall = time.monotonic() - self.wall0
        if wall < 0.5:
            return None
        cores = psutil.cpu_count() or 1  # cpu_times covers every core, not only this process's
        ours = max(tree_cpu_s, _usage(resource.RUSAGE_CHILDREN) - self.children0) + (_usage(resource.RUSAGE_SELF) - self.self0)
        other = _busy_seconds() - self.busy0 - ours
        return round(min(max(other / (wall * cores), 0.0), 1.0), 4)
