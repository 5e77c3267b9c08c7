"""Paired cells: two or more cells' workers alive at once, taking turns epoch by epoch, so a slow
stretch of a shared machine falls on both instead of reading as a difference between them.

A group is measured in `launches` launches (fresh processes, so what differs between launches is
measured too), the member order reversed every other launch. In each, the cells launch together,
warm up, then run `rounds` measured epochs in rounds, one cell at a time in one fixed cycle
(bench/run/turns.py). Each pair's ratio and interval come from bench/paired_ratio.py, read once on
this fixed plan. Cells that cannot live beside another (why_alone, too_big_together) take turns as
whole processes, one round a launch. RUNNER and BASELINE (below) add pairs of their own."""

from __future__ import annotations

import contextlib
import math
import os
import select
import signal
import statistics
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import psutil

from bench import modes, paired_ratio
from bench.machine.load import LoadMeter
from bench.run import record
from bench.run.executor import Executor
from bench.run.runner import Launch, Outcome, launch_cell
from bench.run.suite import Cell, Paired
from bench.run.turns import DONE, GO, MAX_TURNS_ENV, READY, STOP, TURNS_ENV
from bench.settings import DEFAULTS, WHEN_SET

STUCK_FLOOR_S = 30.0  # a turn may always take this long before its worker is taken as stuck
TIME_SHARE = 0.7  # warm-ups and rounds end by this share of the shortest timeout after the first launch
MEMORY_SHARE = 0.5  # a group's graphs may take this share of the memory available at its start
RUNNER = "runner"  # the pseudo-axis: each cell against a twin of it that no memory sampler watches
BASELINE = "baseline"  # each cell of the baseline's group against the baseline (the tables' speedups)


@dataclass(frozen=True)
class Pair:
    axis: str
    first: str  # cell ids, in suite order: the ratio is the second's epoch time over the first's
    second: str


def differ_in_alone(a: Cell, b: Cell, axis: str) -> bool:
    """Whether two cells differ in `axis` alone: across backends the stack and a setting only one backend
    has do not part them, nor on any axis a WHEN_SET setting one cell lacks (`replay_batch` of a cell
    without a model) where the other has it at its default."""
    mine, theirs = ({"backend": c.backend, "dataset": c.dataset, **c.settings.as_dict()} for c in (a, b))
    if mine.get(axis) == theirs.get(axis):
        return False
    across_backends = axis == "backend"
    for key in mine.keys() | theirs.keys():
        if key == axis or (across_backends and key == "stack"):
            continue
        one, other = mine.get(key), theirs.get(key)
        lacked = one is None or other is None
        if one != other and not (lacked and (across_backends or (key in WHEN_SET and getattr(DEFAULTS, key) in (one, other)))):
            return False
    return True


def pairs_of(cells: list[Cell], axes: list[str]) -> list[Pair]:
    return [Pair(axis, a.id, b.id) for axis in axes for i, a in enumerate(cells) for b in cells[i + 1:]
            if differ_in_alone(a, b, axis)]


def groups_of(cells: list[Cell], pairs: list[Pair], alone: bool = False) -> list[list[Cell]]:
    """The cells that run together: a pair's two, joined with every pair sharing one of them (and with
    `alone`, each cell of no pair on its own)."""
    group_of = {c.id: {c.id} for c in cells}
    for pair in pairs:
        joined = group_of[pair.first] | group_of[pair.second]
        group_of.update(dict.fromkeys(joined, joined))
    seen, groups = set(), []
    for cell in cells:
        ids = group_of[cell.id]
        if (len(ids) > 1 or alone) and cell.id not in seen:
            seen |= ids
            groups.append([c for c in cells if c.id in ids])
    return groups


def unwatched_twin(cell: Cell) -> Cell:
    """The cell's twin for the `runner` axis: the same worker, its runner's memory sampler never reading."""
    return Cell(f"{cell.id}/{RUNNER}=off", cell.backend, cell.stack, cell.dataset, cell.dataset_spec, cell.settings)


def why_alone(cell: Cell, launch: Launch) -> str | None:
    """Why a cell cannot take turns beside another, or None."""
    settings = cell.settings
    if modes.mode(settings.mode).needs_gpu:
        return "a GPU cell: two live workers would share the GPU's memory and clocks"
    if settings.world_size > 1 or launch.nnodes > 1:
        return "several ranks: turns are taken by single-rank cells"
    if settings.memory_limit != "none":
        return "a memory-limited cell: two workers alive at once would share the memory it measures"
    if settings.target_acc is not None:
        return "a time-to-accuracy cell: it trains as many epochs as its target asks"
    return None


def too_big_together(dataset_dirs: list[Path]) -> str | None:
    """Why a group's graphs cannot all be held at once, or None: each live worker holds its graph."""
    need = sum(f.stat().st_size for folder in dataset_dirs for f in folder.rglob("*") if f.is_file())
    available = psutil.virtual_memory().available
    return (f"two workers cannot be alive at once: their graphs take {need / 2**30:.1f} GiB together, "
            f"{available / 2**30:.1f} GiB is available") if need > MEMORY_SHARE * available else None


@dataclass
class PairResult:
    """One pair's comparison: the second cell's epoch time over the first's (bench/paired_ratio.py)."""
    axis: str
    first: str
    second: str
    paired: bool  # taken over live workers' turns; False: over cells run one after the other
    within: float = paired_ratio.TOLERANCE
    rounds: int = 0  # rounds (one turn of each side) over all launches
    launches: int = 0  # launches (fresh processes) the ratio and its interval are taken over
    ratio: float | None = None
    ci95: list[float] | None = None  # a t interval over the launches: what differs between launches is in it
    settled: str | None = None  # inside | outside | None: the interval against the band (paired_ratio.band_state)
    reading: str | None = None  # what the interval says (paired_ratio.READINGS)
    reason: str | None = None  # why not paired, or why no interval
    launch_ratios: list[float] | None = None  # each launch's drift-free ratio, in launch order
    # CPU the waiting cell's process tree took, per second it waited (a share of one core)
    first_waiting_cpu: float | None = None
    second_waiting_cpu: float | None = None

    def as_dict(self) -> dict:
        return asdict(self)


def paired_result(pair: Pair, launches: list[list[dict[str, float]]], within: float, waiting: dict[str, float],
                  stopped: str | None, apart: str | None = None) -> PairResult:
    """A pair's ratio over its launches, each a list of rounds (cell id -> epoch seconds, in the order
    the turns ran): live workers' turns, or with `apart` (why they could not live together) whole
    processes, one round a launch. Each launch gives a drift-free ratio (paired_ratio.sandwich_logs);
    the ratio and its 95 % interval are taken over the launches (paired_ratio.over_launches)."""
    estimates, rounds_run = [], 0
    for rounds in launches:
        both = [r for r in rounds if pair.first in r and pair.second in r]
        order = [(cell, r[cell]) for r in both for cell in r if cell in (pair.first, pair.second)]
        estimate = paired_ratio.launch_estimate(paired_ratio.sandwich_logs(order, pair.first, pair.second))
        if estimate is not None:
            estimates.append(estimate)
            rounds_run += len(both)
    result = PairResult(pair.axis, pair.first, pair.second, paired=apart is None, within=within, rounds=rounds_run,
                        launches=len(estimates), first_waiting_cpu=waiting.get(pair.first),
                        second_waiting_cpu=waiting.get(pair.second))
    if not estimates:
        result.reason = stopped or "no round ran"
        return result
    result.ratio, found = paired_ratio.over_launches(estimates)
    result.launch_ratios = [round(math.exp(e), 6) for e in estimates]
    if len(estimates) >= paired_ratio.MIN_LAUNCHES and found:
        result.ci95, result.settled = list(found), paired_ratio.band_state(found, within)
        result.reading = paired_ratio.reading(result.ratio, found, within)
    else:
        result.reason = (f"{len(estimates)} launch(es), fewer than the {paired_ratio.MIN_LAUNCHES} an interval over "
                         "launches needs")
    interleaved = apart and f"interleaved processes ({apart}): each cell launched once a round"
    result.reason = "; ".join(filter(None, (interleaved, result.reason, stopped))) or None
    return result


def unpaired_result(pair: Pair, epochs: dict[str, list[float]], within: float, why: str) -> PairResult:
    """A pair whose cells ran one after the other: the ratio of their median epochs, no interval."""
    result = PairResult(pair.axis, pair.first, pair.second, paired=False, within=within, reason=why)
    first, second = epochs.get(pair.first), epochs.get(pair.second)
    if first and second:
        result.ratio = statistics.median(second) / statistics.median(first)
    return result


@dataclass
class Member:
    """One live worker of a group."""
    cell: Cell
    python: Path
    dataset_dir: Path
    memory_limit: int | None
    go: int = -1
    done: int = -1
    proc: object = None
    sampler: object = None
    outcome: Outcome | None = None
    ready: bool = False
    turns: int = 0
    waiting_cpu_s: float = 0.0
    waited_s: float = 0.0
    watched: bool = True  # False: a twin run without the runner's memory sampler (the `runner` axis)
    stuck: str | None = None  # why the host ended it, where it did
    _buffer: bytes = b""
    _started: threading.Event = field(default_factory=threading.Event)

    def started(self, proc, sampler) -> None:
        self.proc, self.sampler = proc, sampler
        if not self.watched:
            sampler.pause()  # never read: the worker as it runs with no runner watching it
        self._started.set()

    def kill(self, why: str | None = None) -> None:
        """End the worker's process group now (the runner then records its outcome)."""
        self.stuck = why or self.stuck
        if self.proc is not None:
            with contextlib.suppress(OSError):
                os.killpg(self.proc.pid, signal.SIGKILL)

    def wake_sampler(self) -> None:
        if self.watched and self.sampler is not None:
            self.sampler.resume()

    def read_line(self, deadline: float) -> str | None:
        """The worker's next line, or None where it ended (or the deadline passed) first."""
        while b"\n" not in self._buffer:
            if select.select([self.done], [], [], 0.2)[0]:
                self._buffer += os.read(self.done, 4096)
            elif self.outcome is not None or time.monotonic() > deadline:
                return None
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode()

    def say(self, word: str) -> None:
        with contextlib.suppress(OSError):
            os.write(self.go, f"{word}\n".encode())

    def tree_cpu(self) -> float:
        """CPU seconds of the worker and everything below it (its DataLoader workers)."""
        total = 0.0
        with contextlib.suppress(psutil.Error):
            root = psutil.Process(self.proc.pid)
            for proc in [root, *root.children(recursive=True)]:
                with contextlib.suppress(psutil.Error):
                    t = proc.cpu_times()
                    total += t.user + t.system + t.children_user + t.children_system
        return total


@dataclass
class GroupRun:
    """One launch of a group: each cell's outcome and the rounds its turns made."""
    outcomes: dict[str, Outcome]
    rounds: list[dict[str, float]]  # each round: cell id -> epoch seconds, in the order the turns ran
    waiting: dict[str, float]  # cell id -> CPU share of one core its tree took while it waited
    stopped: str | None  # why the rounds stopped short of those planned, if they did
    other_load: float | None = None  # the machine's share other work took during the launch (machine/load.py)


def run_together(members: list[Member], cache: Path, launch: Launch, rounds: int) -> GroupRun:
    """One launch: the group's workers started together (each warms up, then waits its turns), `rounds`
    rounds of turns in the members' order, and each cell's outcome."""
    timeout = min(m.cell.settings.timeout for m in members)
    deadline = time.monotonic() + TIME_SHARE * timeout  # the first worker's own timeout runs from now
    meter, stopped = LoadMeter(), None
    with tempfile.TemporaryDirectory(prefix="gnnbench-turns-") as folder:
        threads = []
        try:
            # launched together: each warms up beside the others, none idles while another warms up
            for i, member in enumerate(members):
                threads.append(_start(member, Path(folder) / str(i), cache, launch, rounds))
            for member in members:
                _wait_ready(member, deadline)
            live = [m for m in members if m.ready]
            if len(live) < len(members):
                _one_turn_each(live)
                made, stopped = [], "a cell of the group ended before its first turn"
            else:
                made, stopped = _take_turns(live, rounds, deadline)
        except BaseException:  # interrupted (Ctrl-C): the workers end now, not after their evaluation
            for member in members:
                member.kill()
            raise
        finally:
            for member in members:
                member.say(STOP)
                member.wake_sampler()
            for thread in threads:
                thread.join()
            for fd in [fd for m in members for fd in (m.go, m.done) if fd >= 0]:
                os.close(fd)
    # the workers were waited for: their CPU is the runner's children's, so the rest is other work's
    other_load = meter.other_share(0.0)
    for member in members:
        if member.stuck and member.outcome is not None:  # ended by the host, not by a failure of its own
            member.outcome.status, member.outcome.reason = "timeout", f"{member.stuck}\n{member.outcome.reason}"
        if member.outcome is not None:
            member.outcome.other_load = other_load  # the whole launch's: partners' turns are ours, not other work
    waiting = {m.cell.id: m.waiting_cpu_s / m.waited_s for m in members if m.waited_s}
    stopped = stopped or next((m.stuck for m in members if m.stuck), None)
    return GroupRun({m.cell.id: m.outcome for m in members}, made, waiting, stopped, other_load)


def _start(member: Member, turns: Path, cache: Path, launch: Launch, rounds: int) -> threading.Thread:
    turns.mkdir()
    for pipe in ("go", "done"):
        os.mkfifo(turns / pipe)
    # the host holds both ends of both pipes: no open blocks, and a dead worker is seen by its outcome
    member.go = os.open(turns / "go", os.O_RDWR)
    member.done = os.open(turns / "done", os.O_RDWR | os.O_NONBLOCK)
    # one wait more than the turns: a worker leaves its loop on the host's stop, never on its own
    # (its evaluation would run beside another's last turn)
    env = {TURNS_ENV: str(turns), MAX_TURNS_ENV: str(rounds + 1)}
    thread = threading.Thread(target=_launch, args=(member, cache, launch, env), daemon=True)
    thread.start()
    return thread


def _launch(member: Member, cache: Path, launch: Launch, env: dict[str, str]) -> None:
    try:
        member.outcome = launch_cell(member.cell, member.python, member.dataset_dir, cache, member.memory_limit,
                                     extra_env=env, launch=launch, on_start=member.started)
    except Exception as exc:  # a runner that could not start it: the cell's outcome, the group goes on
        member.outcome = Outcome(member.cell, "failed", f"{type(exc).__name__}: {exc}")
    finally:
        member._started.set()


def _wait_ready(member: Member, deadline: float) -> None:
    """Until the worker has warmed up and waits its first turn; one still warming up at the group's
    deadline is ended (its partners' timeouts would run out with its own)."""
    member._started.wait()
    member.ready = member.read_line(deadline) == READY
    if member.ready:
        member.sampler.pause()
    elif member.outcome is None:
        member.kill(f"still warming up at {TIME_SHARE:.0%} of its timeout: ended by the host (paired cells)")


def _take_turns(live: list[Member], rounds: int, deadline: float) -> tuple[list[dict[str, float]], str | None]:
    """`rounds` rounds, one turn of each live member a round in their order (the launch's order: its
    first side alternates from one launch to the next in _run_launches). No verdict is read here: the plan
    is fixed, so each verdict's error rate is the interval's own (paired_ratio)."""
    longest, made = 0.0, []
    while len(made) < rounds:
        times, round_began = {}, time.monotonic()
        # one fixed cycle within a launch, so every turn follows another cell's: a turn right after its
        # own ran ~10 % faster (its caches still warm) than one after another's (A/A rounds: 1.10 and 0.92)
        for member in live:
            # a turn may take ten times the longest epoch so far, STUCK_FLOOR_S at least, and until the deadline
            seconds = _turn(member, live, max(STUCK_FLOOR_S, 10 * longest, deadline - time.monotonic()))
            if seconds is None:
                _one_turn_each([m for m in live if m is not member])
                return made, f"{member.cell.id} ended during its turn{': ' + member.stuck if member.stuck else ''}"
            times[member.cell.id] = seconds
            longest = max(longest, seconds)
        made.append(times)
        if time.monotonic() + (time.monotonic() - round_began) > deadline and len(made) < rounds:
            return made, f"the time budget ({TIME_SHARE:.0%} of the cells' timeout) spent after {len(made)} rounds"
    return made, None


def _turn(member: Member, live: list[Member], limit: float) -> float | None:
    """One epoch of `member` while the others wait: its seconds, or None where it ended (or was ended,
    stuck past `limit`) instead."""
    others = [m for m in live if m is not member]
    before = [m.tree_cpu() for m in others]
    started = time.monotonic()
    member.wake_sampler()
    member.say(GO)
    line = member.read_line(started + limit)
    member.sampler.pause()
    waited = time.monotonic() - started
    for other, cpu in zip(others, before):
        other.waiting_cpu_s += max(0.0, other.tree_cpu() - cpu)
        other.waited_s += waited
    if line is None or not line.startswith(DONE):
        if member.outcome is None:
            member.kill(f"no end of its epoch after {limit:g} s in its turn: ended by the host (paired cells)")
        return None
    member.turns += 1
    return float(line.split()[1])


def _one_turn_each(members: list[Member]) -> None:
    """A measured epoch for each live cell that has none yet, so its record stands once the group ends early."""
    for member in members:
        if not member.turns and member.ready and member.outcome is None:
            _turn(member, members, STUCK_FLOOR_S * 10)


def describe(result: PairResult) -> str:
    first, second = paired_ratio.label(result.first, result.second)
    found = result.as_dict()
    return (f"{second} against {first} ({result.axis}): epoch time {paired_ratio.ratio_text(found)}, "
            f"{paired_ratio.verdict(found)}")


def baseline_pairs(group: list[Cell], pairs: list[Pair], baseline: str | None) -> list[Pair]:
    """Every other cell of the baseline's group against the baseline (axis BASELINE), where no pair of
    the axes holds them already: cells that take turns together compare alike whatever parts them, so
    the tables' speedups come from turns too."""
    ids = [c.id for c in group]
    if baseline not in ids:
        return []
    have = {(p.first, p.second) for p in pairs}
    return [Pair(BASELINE, baseline, other) for other in ids if other != baseline and (baseline, other) not in have]


# --- the scheduler of cells in turns: it drives the executor (bench/run/executor.py), never the session

def run_group(executor: Executor, pairing: Paired, group: list[Cell], pairs: list[Pair]) -> None:
    """A group's cells in `launches` launches of live workers taking turns (or as whole processes in
    turns, or alone); each pair's result kept in both cells' entries."""
    within, planned = pairing.within, pairing.launches
    ready, done, alone, apart = [], {}, {}, []
    resumed = {c.id for c in group if c.id in executor.finished}
    for cell in group:
        if cell.id in resumed:
            done[cell.id] = executor.finished[cell.id]
            alone[cell.id] = "its partner was kept from the journal of the run resumed"
            continue
        executor.say(f"\n{executor.position(cell)}")
        resolved, prepared = executor.prepared(cell)
        if isinstance(prepared, Outcome):
            alone[cell.id] = f"{cell.id} did not run ({prepared.status})"
            done[cell.id] = executor.after_launch(cell, resolved, prepared)
            continue
        if why := why_alone(resolved, executor.launch):
            apart.append(why)
        executor.say(f"  ready{': ' + why if why else '; it takes turns with the others of its group'}")
        ready.append((cell, resolved, prepared))
    members = [Member(r, p.python, p.dataset_dir, p.memory_limit) for _, r, p in ready]
    if RUNNER in pairing.by:  # each cell beside its unwatched twin (the runner's cost)
        twins = [Member(unwatched_twin(m.cell), m.python, m.dataset_dir, m.memory_limit, watched=False)
                 for m in members]
        pairs = pairs + [Pair(RUNNER, t.cell.id, m.cell.id) for m, t in zip(members, twins)]
        members += twins
    pairs = pairs + baseline_pairs(group, pairs, executor.baseline)
    apart_why = apart[0] if apart else too_big_together([m.dataset_dir for m in members]) if len(members) > 1 else None
    launched, results = None, []
    if len(ready) > 1 and apart_why:
        launches = _run_interleaved(executor, pairing, ready, apart_why, done)
        ran = {c.id for c, _, _ in ready}
        both = [p for p in pairs if p.first in ran and p.second in ran and p.axis != RUNNER]
        results = [paired_result(p, launches, within, {}, None, apart=apart_why) for p in both]
        alone.update({p.first: apart_why for p in pairs if p.axis == RUNNER})  # twins need live turns
        pairs = [p for p in pairs if p not in both]
    elif len(members) > 1 and not apart_why:
        launched = _run_launches(executor, pairing, ready, members, planned, done, pairs)
    elif len(ready) == 1:
        cell, resolved, prepared = ready[0]
        alone[cell.id] = apart_why or "no other cell of its group could run beside it"
        done[cell.id] = executor.after_launch(cell, resolved, executor.start(resolved, prepared))
    for pair in pairs:
        why = alone.get(pair.first) or alone.get(pair.second)
        if launched is not None and not why:
            launches, waiting, stopped = launched
            results.append(paired_result(pair, launches, within, waiting, stopped))
        else:
            epochs = {i: done[i].epochs if i in done else [] for i in (pair.first, pair.second)}
            results.append(unpaired_result(pair, epochs, within, why or "not run together"))
    for result in results:
        executor.say(f"  paired: {describe(result)}")
    for cell in group:  # each cell journalled as it ended; again now with its pairs (the later line wins)
        if cell.id in resumed or not done[cell.id].measured:
            continue
        done[cell.id].entry["extra_info"]["pairs"] = [r.as_dict() for r in results
                                                      if cell.id in (r.first, r.second)]
        executor.keep(cell, done[cell.id])


def _run_launches(executor: Executor, pairing: Paired, ready: list[tuple], members: list[Member], planned: int, done: dict,
                  pairs: list[Pair]) -> tuple[list[list[dict[str, float]]], dict[str, float], str | None]:
    """The group's `planned` launches of live workers, the member order reversed every other launch so
    each pair's first turn alternates between its two sides. A cell's entry is made from its first
    launch's outcome, its later launches' measured epochs added to it (each launch trains afresh for
    the same epochs, so its accuracy stays a same-epoch figure)."""
    rounds = pairing.rounds or min(m.cell.settings.epochs for m in members)
    executor.say(f"\ntaking turns: {len(members)} cells, {planned} launches of {rounds} rounds each (a fixed plan: "
                f"the verdicts are read once, at the end, against ±{pairing.within:.0%})")
    launches, waiting, stopped, first, loads = [], {}, None, {}, []
    for number in range(planned):
        order = members if number % 2 == 0 else members[::-1]
        fresh = [Member(m.cell, m.python, m.dataset_dir, m.memory_limit, watched=m.watched) for m in order]
        executor.say(f"  launch {number + 1} of {planned}: first turn {fresh[0].cell.id}")
        began = time.monotonic()
        run = run_together(fresh, executor.cache, executor.launch, rounds)
        launches.append(run.rounds)
        this = [paired_result(p, [run.rounds], pairing.within, {}, None) for p in pairs]
        executor.say(f"    {len(run.rounds)} rounds in {time.monotonic() - began:.0f} s; this launch's ratios: "
                    + "; ".join(f"{'/'.join(reversed(paired_ratio.label(r.first, r.second)))} {r.ratio:.3f}"
                                for r in this if r.ratio) + (f"; other load {run.other_load:.0%}" if run.other_load else ""))
        loads.append(run.other_load)
        for cell_id, share in run.waiting.items():
            waiting[cell_id] = waiting.get(cell_id, 0.0) + share / planned
        for cell_id, outcome in run.outcomes.items():
            if cell_id not in first:
                first[cell_id] = outcome
            elif outcome is not None and outcome.status == "ok" and first[cell_id].status == "ok":
                first[cell_id].record["epochs"].extend(outcome.record.get("epochs", []))
        if run.stopped:
            stopped = f"launch {number + 1}: {run.stopped}"
            break
    busiest = max((x for x in loads if x is not None), default=None)
    for cell, resolved, _ in ready:
        outcome = first[resolved.id]
        if outcome is not None:
            outcome.other_load = busiest  # the busiest launch's: a busy stretch in any one marks the cell
        executor.say(f"\n{executor.position(cell)}")
        done[cell.id] = executor.after_launch(cell, resolved, outcome)
        if done[cell.id].measured:
            record.add_note(done[cell.id].entry,
                f"measured in turns beside {len(members) - 1} other live worker(s) (paired): {len(launches)} "
                f"launch(es) of {rounds} turns, its first turn's side alternating; its epochs are all its turns; "
                "its accuracy and memory are its first launch's")
    return launches, waiting, stopped


def _run_interleaved(executor: Executor, pairing: Paired, ready: list[tuple], why: str, done: dict) -> list[list[dict[str, float]]]:
    """Each launch's median epoch per cell, the cells launched one after another (the order turning);
    a cell's entry (in `done`) is its first run. One launch is one round here."""
    planned, launches = pairing.launches, []
    executor.say(f"\nnot together ({why}): {len(ready)} cells in {planned} rounds of whole processes")
    for number in range(planned):
        shift = number % len(ready)
        medians = {}
        for cell, resolved, prepared in ready[shift:] + ready[:shift]:
            executor.say(f"\n{executor.position(cell)} (round {number + 1} of {planned})")
            outcome = executor.start(resolved, prepared)
            if cell.id not in done:  # its first run is its entry, journalled at once
                done[cell.id] = executor.after_launch(cell, resolved, outcome)
            if outcome.status == "ok":
                medians[cell.id] = statistics.median(e["seconds"] for e in outcome.record["epochs"])
        launches.append([medians])
    for cell, _, _ in ready:
        if done[cell.id].measured:
            record.add_note(done[cell.id].entry,
                f"its pairs ran as interleaved processes ({why}): {planned} rounds, each cell launched once a "
                "round; this entry is its first run")
    return launches
