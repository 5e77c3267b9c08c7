"""The same cell on several releases of its framework (versioned stacks: `stack: [pyg@2.6.1,
pyg@2.8.1]`, bench/stacks/versions.py): release against release in one run, each newer release
judged against the oldest one beyond the noise, with history.py's noise model.

Two releases' cells of one run are two different cells measured minutes apart on one machine:
their ratio moves with each cell's run-to-run noise, as two runs of one cell do. So each ratio is
held against history.timing_verdict's noise with `between` taken from the earlier runs of the suite when they have
at least history.MIN_HISTORY medians of both cells (the variance of a difference of two cells' run
medians: half of each cell's own `between` squared, summed), else from the medians' errors and the
floor alone, and the reason says which.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from bench.publish import history
from bench.publish.fmt import pct
from bench.publish.results import CellResult, RunResult
from bench.stacks import versions

FLOOR = 0.05   # least relative change between releases ever called


@dataclass(frozen=True)
class ReleaseRow:
    release: str
    cell: CellResult
    verdict: history.Verdict | None   # against the oldest release (None for the oldest itself)
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


def groups(run: RunResult, earlier: Sequence[RunResult] = (), floor: float = FLOOR) -> list[ReleaseGroup]:
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
        if len(cells) < 2:
            continue
        ordered = sorted(cells.items(), key=lambda item: release_key(item[0]))
        oldest = ordered[0][1]
        rows = [ReleaseRow(ordered[0][0], oldest, None)]
        rows += [ReleaseRow(release, cell, judge(oldest, cell, earlier, floor), run.pair(oldest.id, cell.id))
                 for release, cell in ordered[1:]]
        out.append(ReleaseGroup(framework, config, oldest.dataset, tuple(rows)))
    return out


def judge(old: CellResult, new: CellResult, earlier: Sequence[RunResult], floor: float) -> history.Verdict:
    """`new` (a newer release) against `old`, beyond the noise."""
    old_between, old_n = history.history_between(old.id, earlier)
    new_between, new_n = history.history_between(new.id, earlier)
    if old_between is not None and new_between is not None:
        between = math.sqrt((old_between ** 2 + new_between ** 2) / 2)
        source = f"run-to-run {pct(between)} from {min(old_n, new_n)}+ earlier runs of both cells"
    else:
        between = None
        source = (f"no run-to-run estimate (earlier medians: {old_n} and {new_n}; {history.MIN_HISTORY} of each "
                  "needed): the medians' errors and the floor alone")
    return history.timing_verdict(old, new, floor, between, source)
