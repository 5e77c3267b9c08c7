"""Result files over time: a trend per cell, and verdicts for a NEW run against an OLD one that call
a change only beyond the noise the files themselves measure (`gnnbench compare` and `history`). The
rounds of one run share one moment of the machine's load, so run-to-run noise comes from several
runs. In log space (r = new/old), per cell:

    sigma^2   = between^2 + se_old^2 + se_new^2
    se_run    = 1.2533 * (IQR / 1.349) / median / sqrt(rounds)   standard error of a run's median
    between   = sqrt(2) * stdev of the cell's ln medians in >= MIN_HISTORY earlier runs, else
                1.4826 * median |ln r| over >= MIN_POOLED_CELLS other cells of both runs, else 0
    threshold = max(ln(1 + floor), K_SIGMA * sigma)

`between` already holds some of each median's error: counting it again widens the threshold on
purpose (a false alarm on a shared machine costs more than a late one).
"""

from __future__ import annotations

import functools
import json
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from bench.publish.fmt import first_line, group_by, host_label, pct
from bench.publish.results import CellResult, Machine, RunResult, ResultsError
from bench.suite_format import Settings
from bench.stacks import versions

K_SIGMA = 3.0          # how many standard deviations of run-to-run noise a verdict needs
COMPARE_FLOOR = 0.10   # least relative change a verdict ever calls (`gnnbench compare --floor`)
MIN_HISTORY = 3        # earlier medians of a cell needed for its own run-to-run spread
MIN_POOLED_CELLS = 4   # other cells in both runs needed for the pooled (machine) run-to-run spread
VERDICTS = ("regression", "now failing", "improvement", "fixed", "new", "gone", "not comparable", "unchanged")
FAILED = ("failed", "timeout")
NOT_TRIED = ("skipped", "not run", "refused", "follower")
IQR_PER_SIGMA = 1.349          # IQR of a normal distribution, in standard deviations
MEDIAN_SE_FACTOR = 1.2533      # standard error of a median / standard error of a mean (normal)
SIGMA_PER_MAD = 1.4826         # standard deviations of a centred normal per median |x|


@dataclass
class Verdict:
    cell_id: str
    dataset: str | None
    verdict: str          # one of VERDICTS
    old_median_s: float | None
    new_median_s: float | None
    change: float | None  # new/old - 1
    threshold: float | None  # relative change needed to call it, from the noise
    reason: str           # one human sentence with the numbers


@dataclass
class Point:
    cell_id: str
    when: str
    commit: str | None
    machine: str | None
    median_s: float | None
    status: str
    path: str
    # what the point was read from (the series and their steps read the rounds and the environment)
    cell: CellResult | None = field(default=None, repr=False, compare=False)
    run: RunResult | None = field(default=None, repr=False, compare=False)


def commit_text(run: RunResult) -> str | None:
    commit = run.commit.get("id")
    return commit + "+dirty" if commit and run.commit.get("dirty") else commit


def trend(results: list[RunResult]) -> dict[str, list[Point]]:
    """The runs of ONE suite (mixing suites raises ResultsError) as a series per cell, oldest first."""
    check_same_suite(results)
    runs = sorted(results, key=lambda r: (r.finished_at, str(r.path)))
    return group_by((Point(cell.id, run.finished or "", commit_text(run), host_label(run.machine),
                           cell.median, cell.status, str(run.path), cell=cell, run=run)
                     for run in runs for cell in run.cells), lambda point: point.cell_id)


# Settings that say how a cell is watched, not what it measures: a change of them keeps a series.
WATCH_SETTINGS = ("timeout",)


@dataclass(frozen=True)
class SeriesKey:
    """What the runs of one series share: suite, cell, configuration (settings and graph), machine."""
    suite: str
    cell_id: str
    configuration: str   # JSON: the settings and the graph, sorted keys
    machine: str         # the fingerprint, in words


def series(results: Sequence[RunResult]) -> dict[SeriesKey, list[Point]]:
    """Every measured cell of the runs by configuration and machine, oldest first, a copied run once."""
    runs = distinct(results)
    points = [p for suite in sorted({str(run.suite or "?") for run in runs})
              for cell_points in trend([run for run in runs if str(run.suite or "?") == suite]).values()
              for p in cell_points if p.status == "ok" and p.median_s]
    return group_by(points, lambda p: SeriesKey(str(p.run.suite or "?"), p.cell_id,
                                                configuration(p.cell, p.run), fingerprint(p.run.machine)))


def configuration(cell: CellResult, run: RunResult | None = None) -> str:
    """A cell's configuration as text; a setting at its default is left out (files written before it
    existed do not record it, and the default measured the same); with its run, the model's definition
    and how it was measured too (a series splits where either changed)."""
    defaults = setting_defaults()
    settings = {k: v for k, v in cell.settings.items()
                if k not in WATCH_SETTINGS and json.dumps(v) != defaults.get(k)}
    graph = {name: getattr(cell.card, name) for name in GRAPH_FIELDS} if cell.card else {}
    how = {k: v for k, v in definition(cell, run).items() if not k.startswith("setting ")} if run else {}
    return json.dumps({"settings": settings, "graph": graph, **how}, sort_keys=True, default=str)


@functools.cache
def setting_defaults() -> dict[str, str]:
    """Each suite setting's default value, as JSON text."""
    return {k: json.dumps(v) for k, v in Settings().model_dump().items()}


def fingerprint(machine: Machine) -> str:
    """The machine a series runs on (Machine.key, as `compare` tells machines apart, and its GPUs)."""
    gpus = sorted({gpu.name for gpu in machine.gpus})
    return (host_label(machine) or "unknown machine") + (f", {len(machine.gpus)}x {' + '.join(gpus)}" if gpus else "")


def same_run(a: RunResult, b: RunResult) -> bool:
    """Two files of one run (a copy under another folder): a history counts it once."""
    return (a.path.name == b.path.name and a.datetime == b.datetime and a.started_at == b.started_at
            and a.machine.key == b.machine.key)


def distinct(runs: Sequence[RunResult]) -> list[RunResult]:
    """The runs, each once: of a run's copies (same_run), the first."""
    return [run for i, run in enumerate(runs) if not any(same_run(run, other) for other in runs[:i])]


def check_same_suite(results: Sequence[RunResult]) -> None:
    for result in results[1:]:
        if result.suite != results[0].suite:
            raise ResultsError(f"{result.path}: suite {result.suite!r}, but {results[0].path} "
                               f"is suite {results[0].suite!r}: compare runs of one suite at a time")


def median_se(cell: CellResult) -> float:
    """Standard error of ln(median) of one run, from its rounds' IQR (0 when unknown)."""
    if cell.stats is None or not cell.stats.iqr or not cell.median or cell.stats.rounds < 2:
        return 0.0
    sigma = cell.stats.iqr / IQR_PER_SIGMA / cell.median
    return MEDIAN_SE_FACTOR * sigma / math.sqrt(cell.stats.rounds)


def history_between(cell_id: str, earlier: Sequence[RunResult]) -> tuple[float | None, int]:
    """A cell's own run-to-run noise of a median, from its medians in earlier runs."""
    medians = [c.median for r in earlier for c in r.cells if c.id == cell_id and c.status == "ok"]
    if len(medians) < MIN_HISTORY:
        return None, len(medians)
    return math.sqrt(2) * statistics.stdev(math.log(m) for m in medians), len(medians)


def latest(runs: Sequence[RunResult], floor: float = COMPARE_FLOOR) -> list[tuple[RunResult, RunResult, list[Verdict]]]:
    """Per suite and machine, the newest run's verdicts against the one before (the earlier its history)."""
    groups = group_by(runs, lambda run: (str(run.suite), str(run.machine.key)))
    ordered = [sorted(group, key=lambda r: (r.finished_at, str(r.path))) for _, group in sorted(groups.items())]
    return [(g[-2], g[-1], compare(g[-2], g[-1], floor=floor, history=g[:-1])) for g in ordered if len(g) >= 2]


def compare(old: RunResult, new: RunResult, *, floor: float = COMPARE_FLOOR, force: bool = False,
            history: Sequence[RunResult] = ()) -> list[Verdict]:
    """Verdicts for every cell of either run, in NEW's cell order then OLD's leftovers; `history`:
    earlier runs of the suite (on another machine unless `force`, or not before NEW: left out)."""
    check_same_suite([old, new, *history])
    old_cells, new_cells = {c.id: c for c in old.cells}, {c.id: c for c in new.cells}
    comparable = force or old.machine.key == new.machine.key
    earlier = [r for r in {str(r.path): r for r in [*history, old]}.values()
               if r.finished_at < new.finished_at and (force or r.machine.key == new.machine.key)]
    verdicts = []
    for cell_id in [*new_cells, *(c for c in old_cells if c not in new_cells)]:
        o, n = old_cells.get(cell_id), new_cells.get(cell_id)
        if not (comparable and o and n and o.status == n.status == "ok"):
            verdicts.append(status_verdict(cell_id, o, n, comparable, old, new))
            if o and n and o.measured and n.measured and (changed := definition_changes(o, n, old, new)):
                verdicts[-1].reason += f"; what the cell measures changed too ({changed})"
        # a new synthetic generator: same dataset name, another graph; or same cell id, another measurement
        elif (graph := graph_changes(o, n)) or (changed := definition_changes(o, n, old, new)):
            why = (f"the dataset changed between the runs ({graph}): timings on different graphs are "
                   "not compared" if graph else
                   f"what the cell measures changed between the runs ({changed}): the series is split here, "
                   "not read as noise")
            verdicts.append(Verdict(cell_id, n.dataset or o.dataset, "not comparable", o.median, n.median,
                                    n.median / o.median - 1, None, why))
        else:
            verdicts.append(timing_verdict(o, n, floor, *run_to_run(cell_id, earlier, old_cells, new_cells)))
    return verdicts


GRAPH_FIELDS = ("num_nodes", "num_edges", "feature_dim", "num_classes", "num_train", "num_val", "num_test",
                "num_graphs")


def graph_changes(o: CellResult, n: CellResult) -> str:
    """What differs between the graphs two measurements ran on, in words ("" where nothing recorded does)."""
    pairs = [(name, getattr(o.card, name), getattr(n.card, name)) for name in GRAPH_FIELDS] if o.card and n.card else []
    return "; ".join(f"{name} {a:,} -> {b:,}" for name, a, b in pairs if None not in (a, b) and a != b)


# What the recorded model says of its definition: a change of any of them is another measurement
MODEL_FIELDS = ("name", "parameters", "embedding_parameters", "heads", "init", "same_layer_edges", "weight_decay")


def measurement(cell: CellResult, run: RunResult) -> str:
    """How the cell's epochs were measured: "paired turns over N launches", "paired turns in one launch"
    (before launches), "interleaved processes" or "solo"."""
    mine = [p for p in run.pairs if cell.id in (p.get("first"), p.get("second"))]
    if any(p.get("paired") and p.get("launches") for p in mine):
        return f"paired turns over {max(p['launches'] for p in mine if p.get('launches'))} launches"
    if any(p.get("paired") for p in mine):
        return "paired turns in one launch"
    return "interleaved processes" if any(p.get("rounds") for p in mine) else "solo"


def definition(cell: CellResult, run: RunResult) -> dict:
    """What defines a cell's measurement beyond its id: its settings as recorded (a default recorded in
    one file and absent in the other counts), its model's definition, how it was measured."""
    model = (cell.metrics.model if cell.metrics else None) or {}
    return {**{f"setting {k}": v for k, v in cell.settings.items() if k not in WATCH_SETTINGS},
            **{f"model {k}": model.get(k) for k in MODEL_FIELDS if model}, "measured as": measurement(cell, run)}


def definition_changes(o: CellResult, n: CellResult, old: RunResult, new: RunResult) -> str:
    """What differs between two measurements' definitions, in words ("" where nothing recorded does)."""
    a, b = definition(o, old), definition(n, new)
    return "; ".join(f"{key} {'absent' if a.get(key) is None else json.dumps(a.get(key))} -> "
                     f"{'absent' if b.get(key) is None else json.dumps(b.get(key))}"
                     for key in sorted(a.keys() | b.keys()) if a.get(key) != b.get(key))


def run_to_run(cell_id: str, earlier: Sequence[RunResult], old_cells: dict[str, CellResult],
               new_cells: dict[str, CellResult]) -> tuple[float | None, str]:
    """The noise a change is judged against, and its source in words: the cell's own history, else
    the machine's, pooled over the OTHER cells measured in both runs (a cell's own change is what is
    being judged, so it is left out of its yardstick)."""
    hist, hist_n = history_between(cell_id, earlier)
    if hist is not None:
        return hist, f"run-to-run {pct(hist)} from its {hist_n} earlier medians"
    logs = [abs(math.log(new_cells[c].median / old_cells[c].median)) for c in old_cells
            if c != cell_id and c in new_cells and old_cells[c].status == new_cells[c].status == "ok"]
    if len(logs) >= MIN_POOLED_CELLS:
        pooled = statistics.median(logs) * SIGMA_PER_MAD
        return pooled, f"run-to-run {pct(pooled)} pooled over {len(logs)} other cells of both runs"
    return None, f"no run-to-run estimate ({len(logs)} other shared cells, {hist_n} earlier medians)"


def timing_verdict(o: CellResult, n: CellResult, floor: float, between: float | None, source: str) -> Verdict:
    """`n` against `o` beyond the run-to-run `between` (from `source`) and the medians' errors, never under `floor`."""
    sigma = math.sqrt((between or 0.0) ** 2 + median_se(o) ** 2 + median_se(n) ** 2)
    threshold_log = max(math.log1p(floor), K_SIGMA * sigma)
    log_ratio = math.log(n.median / o.median)
    kind = "regression" if log_ratio > threshold_log else "improvement" if log_ratio < -threshold_log else "unchanged"
    needed = math.exp(threshold_log)
    why = f"floor {pct(floor)}" if threshold_log == math.log1p(floor) else f"{K_SIGMA:g} sigma of {pct(sigma)}"
    where = "within" if kind == "unchanged" else "beyond"
    reason = (f"{factor_words(log_ratio)} ({duration(o.median)} -> {duration(n.median)} median epoch), "
              f"{where} the {needed:.2f}x either way that the noise allows ({why}; {source}; "
              f"error of each run's median {pct(median_se(o))} / {pct(median_se(n))})")
    old, new = o.versions or {}, n.versions or {}
    changed = [f"{k} {old.get(k)} -> {new.get(k)}" for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]
    if old and new and changed:
        reason += f"; versions changed: {', '.join(changed)}"
    return Verdict(o.id, n.dataset or o.dataset, kind, o.median, n.median,
                   n.median / o.median - 1, needed - 1, reason)


def status_verdict(cell_id: str, o: CellResult | None, n: CellResult | None, comparable: bool,
                   old: RunResult, new: RunResult) -> Verdict:
    """Verdicts that are not about timing: appearance, disappearance, status, machines."""
    # measured, or tried and failed (skipped and not-run cells were not tried)
    o_there, n_there = (c is not None and c.status not in NOT_TRIED for c in (o, n))
    if not o_there and not n_there:
        kind, reason = "unchanged", f"not measured in either run (old {describe(o)}, new {describe(n)})"
    elif not o_there:
        kind, reason = "new", f"not measured in the old run ({describe(o)}); now {describe(n)}"
    elif not n_there:
        kind, reason = "gone", f"was {describe(o)}; not measured in the new run ({describe(n)})"
    elif not comparable:
        kind = "not comparable"
        reason = (f"old ran on {host_label(old.machine)}, new on {host_label(new.machine)}: timings of different "
                  f"machines are not compared (--force compares them); old {describe(o)}, new {describe(n)}")
    elif (o.status == "ok" and n.status in FAILED) or (o.status in FAILED and n.status == "ok"):
        kind = "now failing" if n.status in FAILED else "fixed"
        reason = f"was {describe(o)}; now {describe(n)}"
    else:
        kind, reason = "unchanged", f"{o.status} in both runs; now {describe(n)}"
    o_med, n_med = o.median if o_there else None, n.median if n_there else None
    change = n_med / o_med - 1 if o_med and n_med else None
    return Verdict(cell_id, (n and n.dataset) or (o and o.dataset), kind, o_med, n_med, change, None, reason)


def verdict_table(verdicts: list[Verdict], floor: float = COMPARE_FLOOR) -> str:
    """Plain aligned text: one line per cell, its reason below it, then the count per verdict."""
    header = ("verdict", "old", "new", "change", "needs", "cell")
    lines = [(v.verdict, duration(v.old_median_s), duration(v.new_median_s), signed_pct(v.change),
              "–" if v.threshold is None else f"{1 + v.threshold:.2f}x", v.cell_id) for v in verdicts]
    widths = [max(len(row[i]) for row in [header, *lines]) for i in range(len(header) - 1)]
    out = []
    for row, v in zip([header, *lines], [None, *verdicts]):
        out.append("  ".join(col.ljust(w) for col, w in zip(row, widths)) + "  " + row[-1])
        if v is not None:
            out.append(" " * 4 + v.reason)
    counts = {kind: sum(v.verdict == kind for v in verdicts) for kind in VERDICTS}
    out.append(f"{len(verdicts)} cells: " + ", ".join(f"{n} {kind}" for kind, n in counts.items() if n))
    shift = run_shift(verdicts, floor)
    return "\n".join(out + ([shift] if shift else []))


def run_shift(verdicts: list[Verdict], floor: float = COMPARE_FLOOR) -> str | None:
    """A sentence where the median change over the run's cells exceeds the floor: the machine's, or every cell's."""
    logs = [math.log(v.new_median_s / v.old_median_s) for v in verdicts
            if v.old_median_s and v.new_median_s and v.verdict != "not comparable"]
    median = statistics.median(logs) if len(logs) >= MIN_POOLED_CELLS else 0.0  # too few cells: none read
    if abs(median) <= math.log(1 + floor):
        return None
    return (f"the whole run moved: median change {signed_pct(math.exp(median) - 1)} over {len(logs)} cells "
            "(this machine's load or clocks, or a change common to every cell: two runs cannot tell "
            "which; give earlier runs with --history)")


def verdict_report(old: RunResult, new: RunResult, verdicts: list[Verdict], floor: float = COMPARE_FLOOR) -> str:
    """What `gnnbench compare` prints: the two runs, then their verdict_table."""
    runs = [f"{label}: {run.path} ({run.finished or 'no date'}, commit {commit_text(run) or '?'}, "
            f"{host_label(run.machine) or 'unknown machine'})" for label, run in (("old", old), ("new", new))]
    return "\n".join([*runs, verdict_table(verdicts, floor)])


def signed_pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:+.1f} %"


def describe(cell: CellResult | None) -> str:
    if cell is None:
        return "absent"
    if cell.measured:
        return f"ok at {duration(cell.median)} median epoch"
    reason = first_line(cell.reason)
    return f"{cell.status}: {reason}" if reason else cell.status


def factor_words(log_ratio: float) -> str:
    return f"{math.exp(abs(log_ratio)):.2f}x {'slower' if log_ratio > 0 else 'faster'}"


def duration(s: float | None) -> str:
    """An epoch time in verdicts: four significant digits."""
    return "–" if s is None else f"{s:.4g} s"


# --- one configuration on several releases of its framework in one run (versioned stacks,
# bench/stacks/versions.py): two cells measured minutes apart, so each newer release is judged
# against the oldest as a timing change (judge_release).

RELEASE_FLOOR = 0.05   # least relative change between releases ever called


@dataclass(frozen=True)
class ReleaseRow:
    release: str
    cell: CellResult
    verdict: Verdict | None   # against the oldest release (None for the oldest itself)
    paired: dict | None = None        # its paired comparison with the oldest (bench/run/paired.py), where one ran


@dataclass(frozen=True)
class ReleaseGroup:
    """One configuration on each release of one framework in a run, oldest release first."""
    framework: str
    configuration: str     # the cell id without its stack
    dataset: str | None
    rows: tuple[ReleaseRow, ...]

    @property
    def oldest(self) -> ReleaseRow:
        return self.rows[0]


def release_key(release: str) -> tuple:
    """2.10.0 after 2.9.1: numbers compare as numbers, a suffix (post1, rc1) as text."""
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in release.replace("-", ".").split("."))


def release_groups(run: RunResult, earlier: Sequence[RunResult] = (), floor: float = RELEASE_FLOOR) -> list[ReleaseGroup]:
    """The configurations the run measured on two or more releases of a framework."""
    by_config: dict[tuple[str, str], dict[str, CellResult]] = {}
    for cell in run.cells:
        parsed = versions.split(str(cell.settings.stack or ""))
        if parsed is None or not cell.measured:
            continue
        framework, release = parsed
        config = "/".join(p for p in cell.id.split("/") if p != f"stack={cell.settings.stack}")
        by_config.setdefault((framework, config), {})[release] = cell
    out = []
    for (framework, config), cells in by_config.items():
        (first, oldest), *newer = sorted(cells.items(), key=lambda item: release_key(item[0]))
        rows = [ReleaseRow(first, oldest, None)] + [
            ReleaseRow(release, cell, judge_release(oldest, cell, earlier, floor), run.pair(oldest.id, cell.id))
            for release, cell in newer]
        if newer:
            out.append(ReleaseGroup(framework, config, oldest.dataset, tuple(rows)))
    return out


def judge_release(old: CellResult, new: CellResult, earlier: Sequence[RunResult], floor: float) -> Verdict:
    """`new` (a newer release) against `old` beyond the noise (earlier runs' where both have MIN_HISTORY)."""
    old_between, old_n = history_between(old.id, earlier)
    new_between, new_n = history_between(new.id, earlier)
    if old_between is not None and new_between is not None:
        between = math.sqrt((old_between ** 2 + new_between ** 2) / 2)
        source = f"run-to-run {pct(between)} from {min(old_n, new_n)}+ earlier runs of both cells"
    else:
        between, source = None, (f"no run-to-run estimate (earlier medians: {old_n} and {new_n}; "
                                 f"{MIN_HISTORY} of each needed): the medians' errors and the floor alone")
    return timing_verdict(old, new, floor, between, source)
