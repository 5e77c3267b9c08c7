"""How two sides timed in turns compare, and how sure that is: the statistics `gnnbench fidelity` and
paired cells (bench/run/paired.py) share (docs/comparisons.md, "How a verdict is reached").

A pair is measured in several launches (fresh processes; the side that takes the first turn
alternates from one launch to the next), each a run of turns. Within a launch, each turn is held
against the other side's turns just before and after it (a sandwich: a drift that is linear over
three turns cancels), and the launch's estimate is the median of those log ratios. What differs
between launches (where a process's threads and pages land) is in the spread of the launches'
estimates, so the ratio is their mean and its interval a Student-t interval over launches: a
random-effects model with the launch as its unit. The verdict is read once, on a fixed plan of
launches and rounds (or at planned looks, each spending an equal share of ALPHA), against a band
of ±tolerance that is symmetric in log space (1/(1+t) .. 1+t)."""

from __future__ import annotations

import functools
import math
import statistics
from typing import Iterable, Sequence

TOLERANCE = 0.03  # the band two sides must be within (issue 27: ±3 %), either direction
ALPHA = 0.05  # each verdict's error rate by design: a 95 % interval read at one planned look
MIN_LAUNCHES = 3  # fewer launches never reach a verdict: a t interval over 2 is 12.7 standard errors wide
# The verdicts a pair's interval gives, against the band (reading())
SLOWER, FASTER, SAME = "slower", "faster", "same"
LEANS_SLOWER, LEANS_FASTER, UNRESOLVED = "leans slower", "leans faster", "unresolved"
READINGS = (SLOWER, FASTER, SAME, LEANS_SLOWER, LEANS_FASTER, UNRESOLVED)


# --- the band ----------------------------------------------------------------------------------

def band(tolerance: float = TOLERANCE) -> tuple[float, float]:
    """The band of ratios counted as the same: 1/(1+t) .. 1+t, so a ratio reads alike from either side."""
    return 1 / (1 + tolerance), 1 + tolerance


def band_state(found: Sequence[float] | None, tolerance: float = TOLERANCE) -> str | None:
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


def within(ratio: float, tolerance: float = TOLERANCE) -> bool:
    """A ratio inside the band (a little slack for the float's last digits)."""
    lower, upper = band(tolerance)
    return lower - 1e-9 <= ratio <= upper + 1e-9


def reading(ratio: float, found: Sequence[float] | None, tolerance: float = TOLERANCE) -> str:
    """What an interval says against the band: SLOWER or FASTER (wholly beyond it), SAME (wholly
    inside it), LEANS_SLOWER or LEANS_FASTER (it excludes 1 but reaches into the band), or UNRESOLVED
    (it holds 1 and reaches beyond the band; also without an interval)."""
    state = band_state(found, tolerance)
    if state == "inside":
        return SAME
    if found is None:
        return UNRESOLVED
    low, high = found  # "outside" lies wholly beyond one edge, so it is also wholly on one side of 1
    if low > 1:
        return SLOWER if state == "outside" else LEANS_SLOWER
    if high < 1:
        return FASTER if state == "outside" else LEANS_FASTER
    return UNRESOLVED


# --- within a launch ---------------------------------------------------------------------------

def sandwich_logs(turns: Sequence[tuple[str, float]], first: str, second: str) -> list[float]:
    """log(second / first) from one launch's turns, in the order they ran (side, seconds; other sides'
    turns are skipped): each turn held against the geometric mean of the other side's turns either
    side of it, so a drift that is linear over three turns cancels. Without turns on both sides of
    it (the first and the last), a turn is left out."""
    mine = [(side, math.log(seconds)) for side, seconds in turns if side in (first, second) and seconds > 0]
    # B between two A's, or A between two B's: its log less their mean, signed as log(second / first)
    logs = [(x - (a + b) / 2) * (1 if side == second else -1)
            for (left, b), (side, x), (right, a) in zip(mine, mine[1:], mine[2:]) if left == right != side]
    if not logs and len(mine) == 2 and mine[0][0] != mine[1][0]:  # one turn each: their plain ratio
        logs.append(dict(mine)[second] - dict(mine)[first])
    return logs


def launch_estimate(logs: Iterable[float]) -> float | None:
    """One launch's log ratio: the median of its sandwiches (a turn that caught a stray burst moves it little)."""
    logs = list(logs)
    return statistics.median(logs) if logs else None


# --- over launches -----------------------------------------------------------------------------

def _t_cdf(x: float, df: int) -> float:
    """Student's t distribution function at x >= 0 (Simpson's rule over the density: smooth, and
    exact enough for a quantile's third digit)."""
    norm = math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2)) / math.sqrt(df * math.pi)
    steps = 2000
    h = x / steps
    total = sum((1 if i in (0, steps) else 4 if i % 2 else 2) * (1 + (i * h) ** 2 / df) ** (-(df + 1) / 2)
                for i in range(steps + 1))
    return 0.5 + norm * total * h / 3


@functools.lru_cache(maxsize=None)
def t_quantile(p: float, df: int) -> float:
    """The p-quantile (p > 0.5) of Student's t with df degrees of freedom, by bisection."""
    low, high = 0.0, 1.0
    while _t_cdf(high, df) < p:
        high *= 2
    for _ in range(50):
        middle = (low + high) / 2
        low, high = (middle, high) if _t_cdf(middle, df) < p else (low, middle)
    return (low + high) / 2


def over_launches(estimates: Sequence[float], alpha: float = ALPHA) -> tuple[float, tuple[float, float] | None]:
    """The ratio (exp of the launches' mean log ratio) and its (1 - alpha) interval, a t interval over
    the launches' estimates; no interval below 2 launches (or where they all read alike to the last
    digit: nothing measured the spread)."""
    mean = statistics.fmean(estimates)
    if len(estimates) < 2:
        return math.exp(mean), None
    spread = statistics.stdev(estimates)
    half = t_quantile(1 - alpha / 2, len(estimates) - 1) * spread / math.sqrt(len(estimates))
    return math.exp(mean), (math.exp(mean - half), math.exp(mean + half))


def look_alpha(looks: int, alpha: float = ALPHA) -> float:
    """Each look's share of alpha where a plan judges at `looks` planned points (Bonferroni: whichever
    look gives a verdict, its error stays at most alpha)."""
    return alpha / max(1, looks)


# --- words -------------------------------------------------------------------------------------

def label(first: str, second: str) -> tuple[str, str]:
    """What tells two cells' ids apart: the parts of each the other lacks ("(default)" for none)."""
    a, b = first.split("/"), second.split("/")
    return ("/".join(p for p in a if p not in b) or "(default)", "/".join(p for p in b if p not in a) or "(default)")


def ratio_text(r: dict) -> str:
    """'0.962 (0.951–0.973)': a pair's ratio and its interval, '–' where it has none."""
    if r.get("ratio") is None:
        return "–"
    return f"{r['ratio']:.3f}" + (f" ({r['ci95'][0]:.3f}–{r['ci95'][1]:.3f})" if r.get("ci95") else "")


def _span(found: Sequence[float]) -> str:
    """An interval as changes: '(+2.6% to +3.5%)'."""
    return f"({found[0] - 1:+.1%} to {found[1] - 1:+.1%})"


def verdict(r: dict) -> str:
    """A pair's verdict in words that say no more than its interval: '6.0% slower (+4.1% to +7.9%)',
    'same within ±3%', '3.1% slower (+2.6% to +3.5%): slower, not surely beyond ±3%', '1.2% slower
    (-0.8% to +3.4%): unresolved, leans slower', or why there is no ratio. "same" only where the
    interval lies inside the band."""
    if r.get("ratio") is None:
        return f"no ratio: {r.get('reason')}"
    ratio, found, band_text = r["ratio"], r.get("ci95"), f"±{r.get('within', TOLERANCE):.0%}"
    lean = "slower" if ratio >= 1 else "faster"
    change = f"{abs(ratio - 1):.1%} {lean}"  # '3.1% slower': the second side's epoch against the first's
    why = f"; {r['reason']}" if r.get("reason") else ""
    if not found:
        if not r.get("paired") and not r.get("rounds"):
            return f"{change}, not paired ({r.get('reason')}): run one after the other, the noise not cancelled"
        return f"{change}, no interval{why}"
    one_launch = ("; one launch: the interval leaves out what differs between launches"
                  if r.get("paired") and not r.get("launches") else "")
    said = reading(ratio, found, r.get("within", TOLERANCE))
    if said == SAME:
        words = f"same within {band_text} {_span(found)}"
    elif said in (SLOWER, FASTER):
        words = f"{change} {_span(found)}"
    elif said in (LEANS_SLOWER, LEANS_FASTER):
        words = f"{change} {_span(found)}: {said.split()[1]}, not surely beyond {band_text}"
    else:
        words = f"{change} {_span(found)}: unresolved, leans {lean} (the interval holds 1.00 and reaches beyond {band_text})"
    return words + one_launch + why
