"""Where a series of runs stepped: change points in one configuration's median epoch time over its
runs on one machine, beyond the noise the runs themselves show (docs/history.md says how and why).
Each run is one point, ln(median), of variance between^2 + se^2 (history.median_se, shrunk halfway
to the series' median): a cost over rounds would call every run-to-run wobble a step.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import ruptures
from scipy import stats as scipy_stats

from bench.publish import history
from bench.publish.fmt import pct, when
from bench.publish.history import Point, SeriesKey, duration, factor_words
from bench.publish.results import RunResult

MIN_RUNS = 4              # runs a series needs before steps are looked for
ALPHA = 0.01              # a step's p value, adjusted for the scan, must be below this
PENALTY_SIGMAS = 3.0      # PELT's penalty: a new segment must explain (3 sigma)^2 of weighted cost
INTERVAL = 0.95           # the interval reported around a step's ratio
LOCATION_DOF = 1          # degrees of freedom a step's place costs the noise estimate (it was fitted too)
LEAST_SE = 1e-4           # a run's median is never known better than 0.01 % (identical rounds, one round)


@dataclass(frozen=True)
class Found:
    """One step in a numeric series: the first point after it and the test that kept it."""
    index: int            # position of the first point after the step
    log_ratio: float      # weighted mean of the right side minus that of the left (ln)
    sd: float             # standard deviation of that difference
    p_value: float        # two-sided, adjusted for the scan over every position
    low: float            # INTERVAL of the ratio, as a factor
    high: float
    left: tuple[int, int]     # the points each side was judged on: [start, end)
    right: tuple[int, int]


@dataclass
class Detection:
    """What the scan of one numeric series found."""
    steps: list[Found]
    bounds: list[int]         # segment boundaries: 0, steps..., n
    between: float            # run-to-run noise of a median (ln), as finally estimated
    dof: int                  # its degrees of freedom
    outliers: list[int] = field(default_factory=list)  # points set aside: one run off between agreeing sides


class WeightedMeanCost(ruptures.base.BaseCost):
    """ruptures cost of a segment: sum w_i (y_i - ybar_w)^2 over columns (y, w), O(1) from cumulative sums."""

    model = "weighted_mean"
    min_size = 1

    def fit(self, signal):
        self.signal = signal  # ruptures reads its length
        y, w = np.asarray(signal[:, 0], float), np.asarray(signal[:, 1], float)
        self._sums = [np.concatenate([[0.0], np.cumsum(v)]) for v in (w, w * y, w * y * y)]
        return self

    def error(self, start, end):
        w, wy, wyy = (c[end] - c[start] for c in self._sums)
        return max(0.0, wyy - wy * wy / w) if w > 0 else 0.0


def detect(y, se, floor: float = 0.05) -> Detection:
    """Steps of a series of ln-medians `y` (errors `se`, ln), in positions of `y` (outliers included)."""
    y, se = np.asarray(y, float), np.asarray(se, float)
    active = list(range(len(y)))
    outliers: list[int] = []
    while True:
        found = _scan(y[active], _shrunk(se[active]), floor)
        lonely = _lonely_runs(found, y[active], _shrunk(se[active]))
        if not lonely or len(active) - len(lonely) < MIN_RUNS:
            break
        outliers += [active[i] for i in lonely]
        active = [a for i, a in enumerate(active) if i not in set(lonely)]
    return dataclasses.replace(found, steps=[_at(s, active) for s in found.steps], outliers=sorted(outliers))


def _shrunk(se: np.ndarray) -> np.ndarray:
    """Each run's median error, halfway (in variance) to the series' median error, and never
    below LEAST_SE (a run of identical rounds, or of one, would weigh infinitely)."""
    typical = float(np.median(se ** 2)) if len(se) else 0.0
    return np.maximum(np.sqrt((se ** 2 + typical) / 2), LEAST_SE)


def _at(step: Found, active: list[int]) -> Found:
    """A step found among the active points, in positions of the whole series."""
    def pos(i: int) -> int:
        return active[i] if i < len(active) else active[-1] + 1
    return Found(active[step.index], step.log_ratio, step.sd, step.p_value, step.low, step.high,
                 (pos(step.left[0]), pos(step.left[1] - 1) + 1), (pos(step.right[0]), pos(step.right[1] - 1) + 1))


def _scan(y: np.ndarray, se: np.ndarray, floor: float) -> Detection:
    n = len(y)
    if n < MIN_RUNS:
        return Detection([], [0, n], 0.0, 0)
    first = _between_from_differences(y, se)
    bounds = [0, *_pelt(y, se, first[0]), n]
    for _ in range(2):  # the noise from the residuals of the segments found, then the candidates again
        between, dof = _between_from_segments(y, se, bounds, first)
        bounds = [0, *_pelt(y, se, between), n]
    while True:  # drop the weakest candidate that fails, re-estimate, re-test the rest
        between, dof = _between_from_segments(y, se, bounds, first)
        tests = [_test(y, se, between, dof, bounds[i - 1], bounds[i], bounds[i + 1], floor)
                 for i in range(1, len(bounds) - 1)]
        failing = [(t.p_value, i) for i, (t, ok) in enumerate(tests, 1) if not ok]
        if not failing:
            return Detection([t for t, _ in tests], bounds, between, dof)
        bounds.pop(max(failing)[1])


def _pelt(y: np.ndarray, se: np.ndarray, between: float) -> list[int]:
    """The candidate steps (first index after each) PELT finds under the weighted cost."""
    w = 1.0 / (between ** 2 + se ** 2)
    algo = ruptures.Pelt(custom_cost=WeightedMeanCost(), min_size=1, jump=1)
    return algo.fit(np.column_stack([y, w])).predict(pen=PENALTY_SIGMAS ** 2)[:-1]


def _between_from_differences(y: np.ndarray, se: np.ndarray) -> tuple[float, int]:
    """Run-to-run noise from successive differences (their median absolute size ignores the
    few differences that span a step): a first estimate, before any segment is known."""
    diffs = np.diff(y)
    total = (history.SIGMA_PER_MAD * float(np.median(np.abs(diffs)))) ** 2 / 2
    return math.sqrt(max(0.0, total - float(np.mean(se ** 2)))), max(1, len(diffs) // 2)


def _between_from_segments(y, se, bounds, first: tuple[float, int]) -> tuple[float, int]:
    """Run-to-run noise from the runs' spread around their segment's mean less what their median
    errors explain; each segment's mean and step's place cost a degree of freedom (they were fitted)."""
    dof = len(y) - (len(bounds) - 1) - (len(bounds) - 2) * LOCATION_DOF
    if dof < 2:
        return first
    residuals = np.concatenate([y[a:b] - np.mean(y[a:b]) for a, b in zip(bounds, bounds[1:])])
    total = float(np.sum(residuals ** 2)) / dof
    return math.sqrt(max(0.0, total - float(np.mean(se ** 2)))), dof


def _test(y, se, between, dof, a, b, c, floor) -> tuple[Found, bool]:
    """The step at b, judged on the runs [a, b) against [b, c)."""
    w = 1.0 / (between ** 2 + se ** 2)
    left_w, right_w = float(np.sum(w[a:b])), float(np.sum(w[b:c]))
    d = float(np.sum(w[b:c] * y[b:c])) / right_w - float(np.sum(w[a:b] * y[a:b])) / left_w
    sd = math.sqrt(1 / left_w + 1 / right_w)
    p = 2 * float(scipy_stats.t.sf(abs(d) / sd, dof)) * (len(y) - 1)
    half = float(scipy_stats.t.ppf(0.5 + INTERVAL / 2, dof)) * sd
    found = Found(b, d, sd, min(1.0, p), math.exp(d - half), math.exp(d + half), (a, b), (b, c))
    return found, found.p_value < ALPHA and abs(d) >= math.log1p(floor)


def _lonely_runs(found: Detection, y: np.ndarray, se: np.ndarray) -> list[int]:
    """Single runs between two steps whose sides agree with each other (an off run, not two
    steps), and a first run alone before a step: their positions."""
    bounds = found.bounds
    # the first run alone before a step: nothing before it tells a step from an off run
    lonely = [0] if len(bounds) > 2 and bounds[1] == 1 else []
    for i in range(1, len(bounds) - 2):
        a, b, c, d = bounds[i - 1], bounds[i], bounds[i + 1], bounds[i + 2]
        if c - b != 1:
            continue
        joined = np.concatenate([y[a:b], y[c:d]]), np.concatenate([se[a:b], se[c:d]])
        _, differ = _test(*joined, found.between, found.dof, 0, b - a, len(joined[0]), 0.0)
        if not differ:
            lonely.append(b)
    return lonely


@dataclass(frozen=True)
class Step:
    """A step in a series of runs: between the runs `before` and `after` (neighbours in the series)."""
    position: int          # index in the series' points of the first run after the step
    before: Point
    after: Point
    found: Found
    runs_before: int       # the runs each side was judged on (outliers left out)
    runs_after: int
    changed: str           # what the environment records of `before` and `after` say changed

    @property
    def ratio(self) -> float:
        return math.exp(self.found.log_ratio)

    @property
    def slower(self) -> bool:
        return self.found.log_ratio > 0


@dataclass
class Series:
    """One configuration on one machine over its runs, oldest first, and where it stepped."""
    key: SeriesKey
    points: list[Point]
    steps: list[Step] = field(default_factory=list)
    outliers: list[Point] = field(default_factory=list)
    between: float | None = None   # run-to-run noise of a median (ln), None: too few runs to tell
    note: str | None = None        # why steps were not looked for

    @property
    def levels(self) -> list[tuple[int, int, float]]:
        """Each segment between steps: (first, last position, geometric mean of its medians, outliers out)."""
        bounds = [0, *(s.position for s in self.steps), len(self.points)]
        off = {id(p) for p in self.outliers}
        segments = [(a, b, [math.log(p.median_s) for p in self.points[a:b] if id(p) not in off])
                    for a, b in zip(bounds, bounds[1:])]
        return [(a, b - 1, math.exp(sum(logs) / len(logs))) for a, b, logs in segments if logs]

    def recent_slower_step(self, recent: int) -> Step | None:
        """The newest step to slower whose first run after it is among the last `recent` runs."""
        return next((s for s in reversed(self.steps) if s.slower and s.position >= len(self.points) - recent), None)


def analyse(results: Sequence[RunResult], floor: float = 0.05) -> list[Series]:
    """Every series of the runs (history.series) with its steps, ordered by suite, machine, cell."""
    return sorted((analyse_series(key, points, floor) for key, points in history.series(results).items()),
                  key=lambda s: (s.key.suite, s.key.machine, s.key.cell_id, s.key.configuration))


def analyse_series(key: SeriesKey, points: list[Point], floor: float = 0.05) -> Series:
    if len(points) < MIN_RUNS:
        return Series(key, points, note=f"too few runs to look for steps ({MIN_RUNS} needed)")
    found = detect([math.log(p.median_s) for p in points], [history.median_se(p.cell) for p in points], floor)
    outliers = set(found.outliers)
    steps = []
    for f in found.steps:
        before = max(i for i in range(f.index) if i not in outliers)
        kept = [i for i in range(len(points)) if i not in outliers]
        steps.append(Step(f.index, points[before], points[f.index], f,
                          sum(f.left[0] <= i < f.left[1] for i in kept), sum(f.right[0] <= i < f.right[1] for i in kept),
                          what_changed(points[before], points[f.index])))
    return Series(key, points, steps, [points[i] for i in found.outliers], found.between)


def environment(point: Point) -> dict[str, str]:
    """What the result file records of the software and machine a measurement ran on."""
    cell, run = point.cell, point.run
    env = {"stack": cell.stack, **{k: v for k, v in sorted(cell.versions.items())},
           "CUDA": cell.device.get("torch_cuda"),
           "driver": ", ".join(sorted({g.driver for g in run.machine.gpus if g.driver})) or None,
           "kernel": run.machine.kernel, "container": run.machine.container_image,
           "gnnbench": run.machine.gnnbench_version, "commit": history.commit_text(run)}
    return {k: str(v) for k, v in env.items() if v is not None}


def what_changed(before: Point, after: Point) -> str:
    """One line: the recorded differences between two runs' environments, the commit last."""
    old, new = environment(before), environment(after)
    changes = [f"{k} {old.get(k, '–')} -> {new.get(k, '–')}" for k in dict.fromkeys([*old, *new])
               if k != "commit" and old.get(k) != new.get(k)]
    if not changes:
        changes = ["nothing recorded (packages, driver, kernel, container the same): the machine's state or "
                   "something the result files do not record"]
    if old.get("commit") != new.get("commit"):
        changes.append(f"commit {old.get('commit', '?')} -> {new.get('commit', '?')}")
    return "; ".join(changes)


def run_words(point: Point) -> str:
    """A run as the text names it: its date, commit and file."""
    return f"{when(point.when)}, commit {point.commit or '?'}, {Path(point.path).name}"


def step_words(step: Step, series: Series) -> str:
    """One step in a sentence: where, by how much, with what confidence."""
    f = step.found
    alone = " (one run past it: the next run tells a step from an off run)" if step.runs_after == 1 and \
        step.position == len(series.points) - 1 else ""
    return (f"step at run {step.position + 1} of {len(series.points)} ({run_words(step.after)}): "
            f"{factor_words(f.log_ratio)} ({duration(step.before.median_s)} -> {duration(step.after.median_s)}; "
            f"{INTERVAL:.0%} interval {f.low:.2f}x-{f.high:.2f}x), confidence {confidence_words(f.p_value)}; "
            f"judged on {step.runs_before} runs before and {step.runs_after} after{alone}")


def confidence_words(p_value: float) -> str:
    """1 - p as a percentage with the digits that matter (99.99 %, not 100.0 %)."""
    if p_value <= 0:
        return "> 99.9999 %"
    digits = min(4, max(1, math.ceil(-math.log10(p_value)) - 1))
    text = f"{100 * (1 - p_value):.{digits}f}"
    return (f"> {100 - 10 ** -4:.4f}" if text.startswith("100") else text) + " %"


def noise_words(series: Series) -> str:
    # `between` is what the runs' medians move by beyond their own rounds' error: 0 % says that error
    # explains all of it, not that the runs agree
    if series.between is None:
        return "run-to-run noise –"
    return f"run-to-run noise {pct(math.expm1(series.between))} beyond each run's own spread"


def text(all_series: list[Series], recent: int = 3) -> str:
    """The terminal report: per suite and machine, each series with its steps (or "no step")."""
    out = []
    heading = None
    for s in all_series:
        if (s.key.suite, s.key.machine) != heading:
            heading = (s.key.suite, s.key.machine)
            out.append(f"{s.key.suite} on {s.key.machine}")
        first, last = s.points[0], s.points[-1]
        span = (f"1 run, {when(first.when)}" if len(s.points) == 1 else
                f"{len(s.points)} runs, {when(first.when)} .. {when(last.when)}")
        if s.note:
            out.append(f"  {s.key.cell_id}: {span}: {s.note}")
            continue
        verdict = f"{len(s.steps)} step{'s' if len(s.steps) != 1 else ''}" if s.steps else "no step"
        out.append(f"  {s.key.cell_id}: {span}: {verdict} ({noise_words(s)})")
        for step in s.steps:
            mark = "NEW " if step.slower and step.position >= len(s.points) - recent else ""
            out.append(f"    {mark}{step_words(step, s)}")
            out.append(f"      what changed: {step.changed}")
        for p in s.outliers:
            out.append(f"    off run left out: {duration(p.median_s)} ({run_words(p)})")
    n_steps = sum(len(s.steps) for s in all_series)
    scanned = sum(s.note is None for s in all_series)
    out.append(f"{len(all_series)} series ({scanned} with enough runs to look for steps): {n_steps} step"
               f"{'s' if n_steps != 1 else ''}")
    return "\n".join(out)
