"""Which configuration to use, per dataset, task and machine, and the numbers that say so: every
sentence is computed from the result files and names the cells it rests on. The candidates are as
docs/reading-results.md says; then, in order: one below the best test figure by more than ACC_SIGMAS
binomial standard errors of the difference (which bound an MRR's too) and by MIN_ACC_GAP is set
aside; the fastest median epoch wins (where cells trained to `target_acc`, the soonest there), but
within NEAR_TIE of it the leanest wins where it saves MEMORY_GAIN; then scaling, why slower (stages,
diagnosis), and cautions: failed cells' smallest setting pattern no ok cell shares, skips, and
upgrades slower beyond the noise (history.release_groups). A cell measured in several files counts
as its latest run measured it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import combinations

from bench.backends import BACKENDS
from bench.publish import diagnosis, history, lifecycle, stages
from bench.publish.fmt import first_line, group_by, host_label, mib, pct
from bench.publish.results import CellResult, RunResult, scaling_scores, scaling_series
from bench.tasks import DEFAULT, TASKS, Task

ACC_SIGMAS = 3.0      # accuracy below the best by more than this many standard errors is "much lower"
MIN_ACC_GAP = 0.01    # ... and by at least one percentage point
NEAR_TIE = 0.10       # within this relative epoch time of the fastest counts as a near tie
MEMORY_GAIN = 0.10    # the least memory must save at least this much to win a near tie
PATTERN_IGNORE = ("seed", "timeout")   # settings that do not describe a configuration


@dataclass
class Advice:
    dataset: str
    machine: str
    recommended: str | None   # cell id
    summary: str              # one sentence
    evidence: list[str]       # sentences with the numbers they rest on
    cautions: list[str] = field(default_factory=list)   # failing setting patterns, skips, costly upgrades
    # what each compared pipeline's maintainers say (bench/publish/lifecycle.py), one line each
    lifecycle: list[str] = field(default_factory=list)


def task(cell: CellResult) -> Task:
    """The task a cell trains (bench/tasks.py), by its backend's registry line; the default for a backend since removed."""
    line = BACKENDS.get(cell.backend)
    return TASKS[line.task if line else DEFAULT]


def accuracy(cell: CellResult) -> float | None:
    """The test figure its task is judged by: accuracy (a typed graph's on its target type), a link cell's MRR."""
    return getattr(cell.metrics, task(cell).figure)


def figure(cell: CellResult, split: str = "test") -> str:
    """That figure's name: 'test MRR', 'test accuracy on paper nodes', 'validation accuracy'."""
    target = cell.card.target if cell.card else None
    return f"{split} {task(cell).metric}" + (f" on {target} nodes" if target else "")


def judged_over(cell: CellResult) -> tuple[int | None, str]:
    """How many test items the figure averages over, and what they are (a split's edges, else the card's nodes)."""
    count = (cell.metrics.link_split or {}).get("num_test_pos") if task(cell).edge_split else getattr(cell.card, "num_test", None)
    return count, task(cell).judged_over


def quality(cell: CellResult) -> str:
    """'test MRR 0.216 (Hits@10 0.649, Hits@50 0.937)', 'test accuracy on paper nodes 0.968'."""
    hits = ", ".join(f"Hits@{k} {v:.3f}" for k, v in (cell.metrics.test_hits or {}).items() if v is not None)
    return f"{figure(cell)} {accuracy(cell):.3f}" + (f" ({hits})" if hits else "")


def memory_bytes(cell: CellResult) -> float | None:
    """What a cell costs in memory: total PSS of all ranks, else peak PSS, else peak RSS."""
    m = cell.metrics
    return m.total_pss_bytes or m.peak_pss_bytes or m.peak_rss_bytes


@dataclass
class Group:
    dataset: str
    machine: str
    measured: dict[str, CellResult] = field(default_factory=dict)
    unmeasured: dict[str, CellResult] = field(default_factory=dict)


def advise(results: list[RunResult]) -> list[Advice]:
    """One Advice per (dataset, machine) found in the files, in the order first seen."""
    advice = []
    for g in group(results).values():
        a = advise_speed(g)
        # a sentence per configuration measured at 1 rank and more (across the group's runs)
        series = [s for s in scaling_series(g.measured.values()).values()
                  if s[0].world_size == 1 and len(s) > 1]
        a.evidence += [scaling_sentence(s) for s in sorted(series, key=lambda s: s[0].config_label)]
        a.evidence += [f"Why slower: {d.line}" for d in diagnosis.diagnose(g.measured.values())]
        a.cautions = failure_patterns(g) + skipped(g) + upgrade_costs(results, a.dataset, a.machine)
        a.lifecycle = lifecycle_lines(g, a.recommended)
        advice.append(a)
    return advice


def upgrade_costs(results: list[RunResult], dataset: str, machine: str) -> list[str]:
    """Newer framework releases slower than the oldest beyond the noise, in the newest run that measured several."""
    runs = sorted((r for r in results if (host_label(r.machine) or "unknown machine") == machine),
                  key=lambda r: (r.finished_at, str(r.path)))
    for i in range(len(runs) - 1, -1, -1):
        if found := [g for g in history.release_groups(runs[i], runs[:i]) if g.dataset == dataset]:
            return [f"Upgrading {g.framework} {g.oldest.release} -> {row.release} costs {1 + row.verdict.change:.2f}x "
                    f"on {g.configuration}, beyond the {1 + row.verdict.threshold:.2f}x either way the noise allows."
                    for g in found for row in g.rows if row.verdict and row.verdict.verdict == "regression"]
    return []


def group(results: list[RunResult]) -> dict[tuple, Group]:
    """Cells by (dataset, machine, task), each as its latest run left it; cells never reached left out."""
    groups: dict[tuple, Group] = {}
    for run in sorted(results, key=lambda r: (r.finished_at, str(r.path))):   # later runs overwrite
        machine = host_label(run.machine) or "unknown machine"
        for cell in run.measured + run.unmeasured:
            g = groups.setdefault((cell.dataset, machine, task(cell).name), Group(cell.dataset, machine))
            now, before = (g.measured, g.unmeasured) if cell.measured else (g.unmeasured, g.measured)
            before.pop(cell.id, None)
            now[cell.id] = cell
    return groups


def lifecycle_lines(g: Group, recommended: str | None) -> list[str]:
    """Each compared pipeline's lifecycle line (bench/publish/lifecycle.py), the recommended one's first."""
    backends = {c.backend for c in [*g.measured.values(), *g.unmeasured.values()] if c.backend}
    chosen = lifecycle.for_backend(next((c.backend for c in g.measured.values() if c.id == recommended), None))
    lines = sorted(lifecycle.lines_for(backends), key=lambda line: line is not chosen)  # the chosen first
    return [f"{line.pipeline} ({line.status}{', recommended here' if line is chosen else ''}): {line.says} "
            f"({line.source}, read {line.read_on})" for line in lines]


def advise_speed(g: Group) -> Advice:
    candidates = [m for m in g.measured.values() if accuracy(m) is not None]
    evidence = []
    if loader_only := sorted(c for c, m in g.measured.items() if accuracy(m) is None):
        evidence.append(f"{len(loader_only)} cell(s) trained no model and time the loader alone, so they "
                        f"are not candidates: {', '.join(loader_only)}.")
    replayed = sorted(m.id for m in candidates if m.settings.replay_batch)
    if replayed:  # the model alone: no loader, one batch trained again; a control, not a way to train
        candidates = [m for m in candidates if m.id not in replayed]
        evidence.append(f"{len(replayed)} cell(s) trained one batch again and again (replay_batch) and time the "
                        f"model alone, so they are not candidates: {', '.join(replayed)}.")
    leaky = sorted(m.id for m in candidates if (m.metrics.leaks or {}).get("leaked_edges"))
    if leaky and len(leaky) < len(candidates):
        candidates = [m for m in candidates if m.id not in leaky]
        evidence.append(f"{len(leaky)} cell(s) trained on batches that sampled their own positive seed edges "
                        "(exclusion none): their MRR includes that leak, so they are not candidates: "
                        f"{', '.join(leaky)}.")
    if not candidates:
        summary = f"No cell trained a model on {g.dataset} on {g.machine}: nothing to recommend."
        return Advice(g.dataset, g.machine, None, summary, evidence)
    accurate, set_aside = accuracy_check(candidates)
    if any(m.target_seconds is not None for m in accurate):
        return target_advice(g, accurate, set_aside, evidence)
    if missed := sorted((m for m in accurate if m.to_target), key=diagnosis.target_rank):
        evidence.insert(0, "No configuration reached its validation target, so epoch time ranks them: "
                           + "; ".join(f"{m.id}: {diagnosis.target_text(m)}" for m in missed) + ".")
    fastest = min(accurate, key=lambda m: m.median)
    choice, memory_note = memory_tie(fastest, accurate)
    evidence = ([speed_evidence(choice, fastest, accurate)] + where_time_goes(choice)
                + ([memory_note] if memory_note else [])
                + accuracy_notes(choice, set_aside) + evidence)
    return Advice(g.dataset, g.machine, choice.id, summary_of(g, choice, fastest, accurate), evidence)


def accuracy_check(candidates: list[CellResult]) -> tuple[list[CellResult], list[tuple[CellResult, CellResult, float]]]:
    """The candidates not much less accurate than the best, and those set aside (cell, best, margin missed)."""
    sign = 1 if task(candidates[0]).higher_is_better else -1  # the figure's direction (one task a group)
    best = max(candidates, key=lambda m: sign * accuracy(m))
    n, pa = judged_over(best)[0], accuracy(best)
    kept, set_aside = [], []
    for m in candidates:
        pb = accuracy(m)
        margin = max(MIN_ACC_GAP, ACC_SIGMAS * math.sqrt(pa * (1 - pa) / n + pb * (1 - pb) / n)) if n else None
        if margin is None or sign * (pa - pb) <= margin:
            kept.append(m)
        else:
            set_aside.append((m, best, margin))
    return kept, set_aside


def accuracy_notes(choice: CellResult, set_aside: list[tuple[CellResult, CellResult, float]]) -> list[str]:
    """A sentence for each set-aside cell that is faster than the recommended one."""
    return [f"{m.id} is {choice.median / m.median:.2f}x faster than {choice.id} "
            f"({m.median:.4g} s vs {choice.median:.4g} s per epoch) but reaches {figure(m)} "
            f"{accuracy(m):.3f} against the best {accuracy(best):.3f} ({best.id}), lower by more than "
            f"the {margin:.3f} that {' '.join(map(str, judged_over(m)))} explain: not recommended."
            for m, best, margin in sorted(set_aside, key=lambda t: t[0].median) if m.median < choice.median]


def memory_tie(fastest: CellResult, candidates: list[CellResult]) -> tuple[CellResult, str | None]:
    near = [m for m in candidates if m.median <= fastest.median * (1 + NEAR_TIE) and memory_bytes(m)]
    if not near or not memory_bytes(fastest):
        return fastest, None
    leanest = min(near, key=memory_bytes)
    saving = 1 - memory_bytes(leanest) / memory_bytes(fastest)
    if leanest is fastest or saving < MEMORY_GAIN:
        return fastest, None
    return leanest, (f"{leanest.id} needs {pct(saving, 0)} less memory than the fastest {fastest.id} "
                     f"({memory_text(leanest)} vs {memory_text(fastest)}) and is only "
                     f"{pct(leanest.median / fastest.median - 1, 0)} slower ({leanest.median:.4g} s vs "
                     f"{fastest.median:.4g} s per epoch; a near tie is within {pct(NEAR_TIE, 0)}).")


def speed_evidence(choice: CellResult, fastest: CellResult, candidates: list[CellResult]) -> str:
    ranked = sorted(candidates, key=lambda m: m.median)
    text = (f"{choice.id}: {choice.median:.4g} s median epoch, {quality(choice)}, "
            f"{memory_text(choice)}, {pct(choice.metrics.loader_stall, 0)} of the epoch waiting for the loader "
            f"(from {choice.file})")
    if choice is fastest and len(ranked) > 1:
        runner_up = ranked[1]
        text += (f"; the fastest of {len(ranked)} candidates, {runner_up.median / choice.median:.2f}x "
                 f"ahead of the next, {runner_up.id} ({runner_up.median:.4g} s)")
    return text + "."


def summary_of(g: Group, choice: CellResult, fastest: CellResult, candidates: list[CellResult]) -> str:
    why = (f"the fastest of {len(candidates)} configurations that train to a comparable {figure(choice)}"
           if choice is fastest else
           f"within {pct(choice.median / fastest.median - 1, 0)} of the fastest, with "
           f"{pct(1 - memory_bytes(choice) / memory_bytes(fastest), 0)} less memory")
    return f"On {g.dataset}, on {g.machine}: use {choice.id}: {choice.median:.4g} s per epoch, {why}."


def target_advice(g: Group, candidates: list[CellResult], set_aside, evidence: list[str]) -> Advice:
    """The advice where cells trained to a validation target: ranked by time to it among those trained to
    the soonest one's target (the others named, not ranked)."""
    choice = min(candidates, key=diagnosis.target_rank)
    found = choice.to_target
    ranked = sorted((m for m in candidates if m.settings.target_acc == found["target"]), key=diagnosis.target_rank)
    if others := sorted(m.id for m in candidates if m.settings.target_acc != found["target"]):
        evidence = [f"{len(others)} cell(s) trained to another target or none, not ranked with these: "
                    f"{', '.join(others)}."] + evidence
    summary = (f"On {g.dataset}, on {g.machine}: use {choice.id}: it reaches {figure(choice, 'validation')} "
               f"{found['target']:g} in {found['seconds']:.4g} s of training ({diagnosis.epochs(found['epochs'])}, "
               f"{choice.median:.4g} s per epoch), the soonest of {len(ranked)} configurations that train to a "
               f"comparable {figure(choice)}.")
    order = "; ".join(f"{m.id}: {diagnosis.target_text(m)}" for m in ranked)
    lines = [f"Ranked by time to {figure(choice, 'validation')} {found['target']:g} (training time, evaluation "
             f"apart; from {choice.file}): {order}; {choice.id} reaches {quality(choice)}."]
    lines += where_time_goes(choice) + accuracy_notes(choice, set_aside)
    lines += [f"Epoch time against time to accuracy: {line}" for line in diagnosis.target_lines(g.measured.values())]
    return Advice(g.dataset, g.machine, choice.id, summary, lines + evidence)


def scaling_sentence(series: list[CellResult]) -> str:
    single, config = series[0], series[0].config_label
    by_ws = {m.world_size: m for m in series}
    scores = {ws: scaling_scores(single, m) for ws, m in sorted(by_ws.items()) if ws > 1}
    speedups = {ws: speedup for ws, (speedup, _) in scores.items()}
    best_ws = max(speedups, key=speedups.get)
    cells = ", ".join(by_ws[ws].id for ws in sorted(by_ws))
    if speedups[best_ws] < 1:
        worst_ws = min(speedups, key=speedups.get)
        head = f"1 rank beats {worst_ws} by {1 / speedups[worst_ws]:.2f}x on {config}" + "".join(
            f" (and {ws} by {1 / s:.2f}x)" for ws, s in speedups.items() if ws != worst_ws)
        split = epoch_split(by_ws[worst_ws], worst_ws)
    else:
        head = (f"{best_ws} ranks are {speedups[best_ws]:.2f}x faster than 1 on {config} "
                f"(scaling efficiency {pct(scores[best_ws][1], 0)})" + "".join(
                    f" ({ws} ranks: {s:.2f}x)" for ws, s in speedups.items() if ws != best_ws))
        split = epoch_split(by_ws[best_ws], best_ws)
    return f"{head}: {split} [{cells}]."


def epoch_split(m: CellResult, world: int) -> str:
    comm = (m.metrics.comm_s or 0.0) / m.median
    text = f"at {world} rank{'s' if world > 1 else ''} {pct(m.metrics.loader_stall, 0)} of each epoch waits for the loader"
    return text + (f" and {pct(comm, 0)} is communication" if comm > 0 else "")


def where_time_goes(cell: CellResult) -> list[str]:
    """Where the recommended cell's epoch goes, where its file records the stages."""
    headline = stages.headline(cell)
    return [f"Where {cell.id}'s epoch goes: {headline}."] if headline else []


def failure_patterns(g: Group) -> list[str]:
    """Failed or timed-out cells, grouped by the smallest setting pattern no ok cell shares."""
    notes = []
    failing = [u for u in g.unmeasured.values() if u.status in history.FAILED]
    for backend in sorted({u.backend for u in failing}):
        bad = [u for u in failing if u.backend == backend]
        good = [m for m in g.measured.values() if m.backend == backend]
        every = [u.settings for u in bad] + [m.settings for m in good]
        keys = [k for k in sorted({k for s in every for k in s if k not in PATTERN_IGNORE})
                if len({hashable(s.get(k)) for s in every}) > 1]
        patterns = group_by(bad, lambda u: smallest_pattern(u.settings, [m.settings for m in good], keys))
        notes += [failure_sentence(backend, pattern, members, good)
                  for pattern, members in merge_patterns(patterns).items()]
    return notes


def smallest_pattern(settings: dict, ok_settings: list[dict], keys: list[str]) -> tuple:
    """The first one- or two-setting pattern ((key, {value}), ...) no ok cell matches, else all keys."""
    own = [(k, frozenset([hashable(settings.get(k))])) for k in keys]
    for size in (1, 2):
        for pattern in combinations(own, size):
            if not any(matches(ok, pattern) for ok in ok_settings):
                return pattern
    return tuple(own)


def matches(settings: dict, pattern) -> bool:
    return all(hashable(settings.get(k)) in values for k, values in pattern)


def merge_patterns(patterns: dict[tuple, list[CellResult]]) -> dict[tuple, list[CellResult]]:
    """Patterns that differ in one setting's values only become one: workers {2}, workers {4} -> workers {2, 4}."""
    merged: dict[tuple, list[CellResult]] = {}
    for pattern, members in patterns.items():
        for other in list(merged):
            differing = [i for i, (a, b) in enumerate(zip(other, pattern)) if a != b]
            if [k for k, _ in other] == [k for k, _ in pattern] and len(differing) == 1:
                i = differing[0]
                joined = other[:i] + ((other[i][0], other[i][1] | pattern[i][1]),) + other[i + 1:]
                merged[joined] = merged.pop(other) + members
                break
        else:
            merged[pattern] = list(members)
    return merged


def failure_sentence(backend: str, pattern: tuple, members: list[CellResult], good: list[CellResult]) -> str:
    statuses = ", ".join(f"{s} {sum(u.status == s for u in members)}" for s in history.FAILED
                         if any(u.status == s for u in members))
    example = first_line(members[0].reason, 100)
    setting = f" with {describe_pattern(pattern)}" if pattern else " (no setting tells it from cells that ran)"
    text = (f"{backend}{setting} does not run ({statuses} of {len(members)}; "
            f"e.g. {example!r}) [{', '.join(u.id for u in members)}]")
    alternative = working_alternative(pattern, good)
    return text + (f"; {alternative}." if alternative else ".")


def working_alternative(pattern: tuple, good: list[CellResult]) -> str | None:
    """For the pattern's merged setting (else its last), the values that ran when the rest held."""
    if not pattern:
        return None
    i = next((i for i, (_, v) in enumerate(pattern) if len(v) > 1), len(pattern) - 1)
    key, rest = pattern[i][0], pattern[:i] + pattern[i + 1:]
    ran = [m for m in good if matches(m.settings, rest)]
    values = sorted({hashable(m.settings.get(key)) for m in ran}, key=str)
    if not ran or not values:
        return None
    where = f" with {describe_pattern(tuple(rest))}" if rest else ""
    return (f"{where.strip() + ', ' if where else ''}{key} {' or '.join(map(shown, values))} ran: use "
            f"{key} {shown(values[0])} [{', '.join(sorted(m.id for m in ran))}]")


def shown(value) -> str:
    return "default" if value is None else str(value)


def describe_pattern(pattern: tuple) -> str:
    return " and ".join(f"{key} {' or '.join(map(shown, sorted(values, key=str)))}" if len(values) > 1
                        else f"{key}={shown(next(iter(values)))}" for key, values in pattern)


def skipped(g: Group) -> list[str]:
    by_reason = group_by((u for u in g.unmeasured.values() if u.status not in history.FAILED),
                         lambda u: (u.backend, u.status, first_line(u.reason, 100)))
    return [f"{len(cells)} {backend} cell(s) {status}: {reason} [{', '.join(sorted(u.id for u in cells))}]."
            for (backend, status, reason), cells in by_reason.items()]


def hashable(value):
    return tuple(value) if isinstance(value, list) else value


def memory_text(cell: CellResult) -> str:
    return mib(memory_bytes(cell), " MiB") if memory_bytes(cell) else "memory unknown"
