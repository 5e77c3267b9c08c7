"""How two sides timed in turns compare, and how sure that is: the statistics `gnnbench fidelity` and
paired cells (bench/run/paired.py) share. A round is what ran together; the ratio is the geometric
median of the rounds' ratios, its 95 % interval resamples whole rounds, and it settles "inside" a
band of ±tolerance, "outside" it, or stays unsettled where the interval straddles an edge."""

from __future__ import annotations

import math
import random
import statistics
from typing import Callable

TOLERANCE = 0.03  # the band two sides must be within (issue 27: ±3 %), either direction
RESAMPLES = 2000  # bootstrap resamples of the rounds for the 95 % interval
# Fewer rounds than this never settle a ratio: an interval resampled from 3 rounds is too narrow to trust
MIN_ROUNDS_TO_SETTLE = 6


def geometric_median(logs) -> float:
    """exp(median(log ratios)): the middle ratio, the same read from either side (1/r for r)."""
    return math.exp(statistics.median(logs))


def interval(n_rounds: int, ratio_over: Callable[[list[int]], float]) -> tuple[float, float] | None:
    """A 95 % interval of `ratio_over` (the ratio over a list of round indices) over RESAMPLES
    resamples of the rounds; None below 3 rounds. Seeded, so a file always reads the same."""
    if n_rounds < 3:
        return None
    pick = random.Random(0)
    ratios = sorted(ratio_over([pick.randrange(n_rounds) for _ in range(n_rounds)]) for _ in range(RESAMPLES))
    return ratios[int(0.025 * RESAMPLES)], ratios[int(0.975 * RESAMPLES) - 1]


def settled(found: tuple[float, float] | None, n_rounds: int, tolerance: float = TOLERANCE) -> str | None:
    """"inside" where the interval lies within ±tolerance of 1, "outside" wholly beyond an edge, else
    None (or without an interval, or with too few rounds)."""
    if found is None or n_rounds < MIN_ROUNDS_TO_SETTLE:
        return None
    low, high = found
    if low >= 1 - tolerance and high <= 1 + tolerance:
        return "inside"
    if low > 1 + tolerance or high < 1 - tolerance:
        return "outside"
    return None


def band(tolerance: float = TOLERANCE) -> tuple[float, float]:
    """The band of ratios counted as the same: 1/(1+t) .. 1+t, so a ratio reads alike from either side."""
    return 1 / (1 + tolerance), 1 + tolerance


def band_state(found, tolerance: float = TOLERANCE) -> str | None:
    """"inside" where the interval lies in the band, "outside" where it lies wholly beyond one edge,
    else None (it straddles an edge, or there is no interval)."""
    if not found:
        return None
    low, high = found
    lower, upper = band(tolerance)
    if low >= lower - 1e-12 and high <= upper + 1e-12:
        return "inside"
    if low > upper or high < lower:
        return "outside"
    return None


def precise(found: tuple[float, float] | None, ratio: float, tolerance: float = TOLERANCE) -> bool:
    """Whether the interval lies within ±tolerance of the ratio itself: a settled ratio with a wider one
    (1.26, 1.22-1.35) is worth more rounds."""
    return found is not None and found[0] >= ratio * (1 - tolerance) and found[1] <= ratio * (1 + tolerance)


def within(ratio: float, tolerance: float = TOLERANCE) -> bool:
    """A ratio inside ±tolerance (a little slack for the float's last digits)."""
    return abs(ratio - 1) <= tolerance + 1e-9


def label(first: str, second: str) -> tuple[str, str]:
    """What tells two cells' ids apart: the parts of each the other lacks ("(default)" for none)."""
    a, b = first.split("/"), second.split("/")
    return ("/".join(p for p in a if p not in b) or "(default)", "/".join(p for p in b if p not in a) or "(default)")


def ratio_text(r: dict) -> str:
    """'0.962 (0.951–0.973)': a pair's ratio and its 95 % interval, '–' where it has none."""
    if r.get("ratio") is None:
        return "–"
    return f"{r['ratio']:.3f}" + (f" ({r['ci95'][0]:.3f}–{r['ci95'][1]:.3f})" if r.get("ci95") else "")


def verdict(r: dict) -> str:
    """A pair's verdict: '3.8 % faster', 'same within ±3 %', 'same within noise: ...', or why there is none."""
    if r.get("ratio") is None:
        return f"no ratio: {r.get('reason')}"
    ratio = r["ratio"]
    faster = f"{abs(1 - ratio):.1%} {'faster' if ratio < 1 else 'slower'}"
    if not r["paired"] and not r.get("rounds"):
        return f"{faster}, not paired ({r.get('reason')}): run one after the other, the noise not cancelled"
    why = f"; {r['reason']}" if r.get("reason") else ""
    if r.get("settled") == "inside":
        return f"same within ±{r['within']:.0%}{why}"
    if r.get("settled") == "outside":
        return f"{faster}{why}"
    sep = ": " if r["paired"] else "; "  # interleaved processes: their reason says how they ran
    if (r.get("rounds") or 0) < MIN_ROUNDS_TO_SETTLE:
        return f"{faster}, not settled{sep}{r.get('reason')}"
    return f"same within noise{sep}{r.get('reason')}"
