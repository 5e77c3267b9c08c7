"""Paired cells: two or more cells' workers alive at once, taking turns epoch by epoch, so a slow
stretch of a shared machine falls on both instead of reading as a difference between them.

A group's cells launch together, warm up, then run their measured epochs in rounds, one cell at a
time in one fixed cycle (bench/run/turns.py). Each pair's ratio and interval come from
bench/paired_ratio.py; rounds are added until every pair is resolved, up to `max_rounds` or
TIME_SHARE of the timeout. Cells that cannot live beside another (why_alone, too_big_together)
take turns as whole processes (INTERLEAVED_ROUNDS); the pseudo-axis `runner` pairs each cell with
a twin no memory sampler reads."""

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
from bench.run.runner import Launch, Outcome, launch_cell
from bench.run.suite import Cell
from bench.run.turns import DONE, GO, MAX_TURNS_ENV, READY, STOP, TURNS_ENV

STUCK_FLOOR_S = 30.0  # a turn may always take this long before its worker is taken as stuck
FIRST_LOOK = 10  # rounds before the pairs are first judged (then at 20, 40, ... and the cap: is_look)
TIME_SHARE = 0.7  # warm-ups and rounds end by this share of the shortest timeout after the first launch
MEMORY_SHARE = 0.5  # a group's graphs may take this share of the memory available at its start
INTERLEAVED_ROUNDS = 3  # rounds of whole processes for cells that cannot live together
RUNNER = "runner"  # the pseudo-axis: each cell against a twin of it that no memory sampler watches


@dataclass(frozen=True)
class Pair:
    axis: str
    first: str  # cell ids, in suite order: the ratio is the second's epoch time over the first's
    second: str


def differ_in_alone(a: Cell, b: Cell, axis: str) -> bool:
    """Whether two cells differ in `axis` alone (across backends, the stack and a setting only one
    backend has do not part them)."""
    mine, theirs = ({"backend": c.backend, "dataset": c.dataset, **c.settings.as_dict()} for c in (a, b))
    if mine.get(axis) == theirs.get(axis):
        return False
    across_backends = axis == "backend"
    for key in mine.keys() | theirs.keys():
        if key == axis or (across_backends and key == "stack"):
            continue
        one, other = mine.get(key), theirs.get(key)
        if one != other and not (across_backends and (one is None or other is None)):
            return False
    return True


def pairs_of(cells: list[Cell], axes: list[str]) -> list[Pair]:
    """Every two cells that differ in one of `axes` alone, in suite order."""
    return [Pair(axis, a.id, b.id) for axis in axes for i, a in enumerate(cells) for b in cells[i + 1:]
            if differ_in_alone(a, b, axis)]


def groups_of(cells: list[Cell], pairs: list[Pair], alone: bool = False) -> list[list[Cell]]:
    """The cells that run together: a pair's two, joined with every pair sharing one of them (and with
    `alone`, each cell of no pair on its own)."""
    group_of = {c.id: {c.id} for c in cells}
    for pair in pairs:
        joined = group_of[pair.first] | group_of[pair.second]
        for cell_id in joined:
            group_of[cell_id] = joined
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
    if need > MEMORY_SHARE * available:
        return (f"two workers cannot be alive at once: their graphs take {need / 2**30:.1f} GiB together, "
                f"{available / 2**30:.1f} GiB is available")
    return None


@dataclass
class PairResult:
    """One pair's comparison: the second cell's epoch time over the first's."""
    axis: str
    first: str
    second: str
    paired: bool  # taken over live workers' turns; False: over cells run one after the other
    within: float = paired_ratio.TOLERANCE
    rounds: int = 0
    ratio: float | None = None
    ci95: list[float] | None = None
    settled: str | None = None  # inside | outside | None (unresolved)
    reason: str | None = None  # why not paired, or why unresolved
    # CPU the waiting cell's process tree took, per second it waited (a share of one core)
    first_waiting_cpu: float | None = None
    second_waiting_cpu: float | None = None

    def as_dict(self) -> dict:
        return asdict(self)

    @property
    def precise(self) -> bool:
        """Its interval within ±within of its own ratio (paired_ratio.precise)."""
        return self.ratio is not None and paired_ratio.precise(self.ci95, self.ratio, self.within)

    @property
    def resolved(self) -> bool:
        """Settled (inside or outside the band) and precise: the rounds may stop for this pair."""
        return self.settled is not None and self.precise


def is_look(rounds: int, max_rounds: int) -> bool:
    """Whether the pairs are judged after this many rounds: at FIRST_LOOK, each doubling after it,
    and the cap. Judging after every round and stopping at the first interval outside the band
    would find a difference in an A/A pair far more often than 1 time in 20; a few looks keep that
    near the interval's own 5 %."""
    return rounds == max_rounds or (rounds >= FIRST_LOOK and (rounds // FIRST_LOOK) & (rounds // FIRST_LOOK - 1) == 0
                                    and rounds % FIRST_LOOK == 0)


def paired_result(pair: Pair, rounds: list[dict[str, float]], within: float, waiting: dict[str, float],
                  cap_reason: str | None, with_interval: bool = True, apart: str | None = None) -> PairResult:
    """A pair's ratio over its rounds: live workers' turns, or with `apart` (why they could not live
    together) each round's median epoch of whole processes launched in turns."""
    logs = [math.log(r[pair.second] / r[pair.first]) for r in rounds if pair.first in r and pair.second in r]
    n = len(logs)
    result = PairResult(pair.axis, pair.first, pair.second, paired=apart is None, within=within, rounds=n,
                        first_waiting_cpu=waiting.get(pair.first), second_waiting_cpu=waiting.get(pair.second))
    if n:
        result.ratio = paired_ratio.geometric_median(logs)
    else:
        result.reason = cap_reason or "no round ran"
    too_few = n < paired_ratio.MIN_ROUNDS_TO_SETTLE  # never settled (paired_ratio.settled)
    if n and with_interval:
        found = paired_ratio.interval(n, lambda picked: paired_ratio.geometric_median(logs[i] for i in picked))
        result.ci95 = list(found) if found else None
        result.settled = paired_ratio.settled(found, n, within)
        if result.settled and not result.precise:
            result.reason = (f"its interval reaches beyond ±{within:.0%} of the ratio after {n} rounds"
                             f"{': ' + cap_reason if cap_reason else ''}")
        elif too_few:
            result.reason = (f"{n} rounds{' (' + cap_reason + ')' if cap_reason else ''}, too few to settle a "
                             f"pair ({paired_ratio.MIN_ROUNDS_TO_SETTLE} at least)")
        elif result.settled is None:
            result.reason = (f"unresolved after {n} rounds{': ' + cap_reason if cap_reason else ''}: the "
                             f"interval straddles an edge of ±{within:.0%}")
    if apart is not None:
        result.reason = (f"interleaved processes ({apart}): {n} rounds, each cell launched once a round"
                         + ("; too few to settle a pair" if too_few else f"; {result.reason}" if result.reason else ""))
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
        if why:
            self.stuck = why
        if self.proc is not None:
            with contextlib.suppress(OSError):
                os.killpg(self.proc.pid, signal.SIGKILL)

    def wake_sampler(self) -> None:
        if self.watched and self.sampler is not None:
            self.sampler.resume()

    def read_line(self, deadline: float) -> str | None:
        """The worker's next line, or None where it ended (or the deadline passed) first."""
        while b"\n" not in self._buffer:
            ready, _, _ = select.select([self.done], [], [], 0.2)
            if ready:
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
    outcomes: dict[str, Outcome]
    rounds: list[dict[str, float]]
    waiting: dict[str, float]  # cell id -> CPU share of one core its tree took while it waited
    stopped: str | None  # why the rounds stopped short of settling every pair, if they did


def run_together(members: list[Member], pairs: list[Pair], cache: Path, launch: Launch, within: float,
                 max_rounds: int, say=print) -> GroupRun:
    """Launch the group's workers together (each warms up, then waits its turns), take turns, and
    return each cell's outcome. `pairs`: those whose two cells are both members."""
    ids = {m.cell.id for m in members}
    pairs = [p for p in pairs if p.first in ids and p.second in ids]
    timeout = min(m.cell.settings.timeout for m in members)
    deadline = time.monotonic() + TIME_SHARE * timeout  # the first worker's own timeout runs from now
    stopped = None
    with tempfile.TemporaryDirectory(prefix="gnnbench-turns-") as folder:
        threads = []
        try:
            # launched together: each warms up beside the others, none idles while another warms up
            for i, member in enumerate(members):
                threads.append(_start(member, Path(folder) / str(i), cache, launch, max_rounds))
            for member in members:
                _wait_ready(member, deadline)
            live = [m for m in members if m.ready]
            if len(live) < len(members):
                _one_turn_each(live)
                rounds, stopped = [], "a cell of the group ended before its first turn"
            else:
                rounds, stopped = _take_turns(live, pairs, within, max_rounds, deadline, say)
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
            for member in members:
                for fd in (member.go, member.done):
                    if fd >= 0:
                        os.close(fd)
    for member in members:
        if member.stuck and member.outcome is not None:  # ended by the host, not by a failure of its own
            member.outcome.status, member.outcome.reason = "timeout", f"{member.stuck}\n{member.outcome.reason}"
        if member.outcome is not None:
            member.outcome.other_load = None  # its partners' warm-ups and turns would count as other work
    waiting = {m.cell.id: m.waiting_cpu_s / m.waited_s for m in members if m.waited_s}
    stopped = stopped or next((m.stuck for m in members if m.stuck), None)
    return GroupRun({m.cell.id: m.outcome for m in members}, rounds, waiting, stopped)


def _start(member: Member, turns: Path, cache: Path, launch: Launch, max_rounds: int) -> threading.Thread:
    turns.mkdir()
    for pipe in ("go", "done"):
        os.mkfifo(turns / pipe)
    # the host holds both ends of both pipes: no open blocks, and a dead worker is seen by its outcome
    member.go = os.open(turns / "go", os.O_RDWR)
    member.done = os.open(turns / "done", os.O_RDWR | os.O_NONBLOCK)
    # one wait more than the turns: a worker leaves its loop on the host's stop, never on its own
    # (its evaluation would run beside another's last turn)
    env = {TURNS_ENV: str(turns), MAX_TURNS_ENV: str(max_rounds + 1)}
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


def _take_turns(live: list[Member], pairs: list[Pair], within: float, max_rounds: int, deadline: float,
                say) -> tuple[list[dict[str, float]], str | None]:
    longest = 0.0
    rounds: list[dict[str, float]] = []
    while len(rounds) < max_rounds:
        times = {}
        round_began = time.monotonic()
        # one fixed cycle, so every turn follows another cell's: turning the order each round made a
        # cell run twice in a row at each round's edge, and a turn right after its own ran ~10 % faster
        # (its caches still warm) than one after another's (A/A rounds: 1.10 and 0.92 by turns)
        for member in live:
            # a turn may take ten times the longest epoch so far, STUCK_FLOOR_S at least, and until the deadline
            seconds = _turn(member, live, max(STUCK_FLOOR_S, 10 * longest, deadline - time.monotonic()))
            if seconds is None:
                _one_turn_each([m for m in live if m is not member])
                return rounds, f"{member.cell.id} ended during its turn{': ' + member.stuck if member.stuck else ''}"
            times[member.cell.id] = seconds
            longest = max(longest, seconds)
        rounds.append(times)
        look = is_look(len(rounds), max_rounds)
        if look or len(rounds) % 10 == 0:  # judged at each look, shown each tenth round: not 320 lines a group
            results = [paired_result(p, rounds, within, {}, None, with_interval=look) for p in pairs]
            say(f"  round {len(rounds)}: " + "; ".join(_progress(p, r) for p, r in zip(pairs, results)))
            if look and all(r.resolved for r in results):
                return rounds, None
        if time.monotonic() + (time.monotonic() - round_began) > deadline:  # another round would pass it
            return rounds, f"the time budget ({TIME_SHARE:.0%} of the cells' timeout) spent"
    return rounds, f"the cap of {max_rounds} rounds"


def _progress(pair: Pair, result: PairResult) -> str:
    first, second = paired_ratio.label(pair.first, pair.second)
    state = (result.settled or "unsettled") + (", imprecise" if result.settled and not result.precise else "")
    interval = f" ({result.ci95[0]:.3f}–{result.ci95[1]:.3f}, {state})" if result.ci95 else ""
    return f"{second} / {first} {paired_ratio.ratio_text(result.as_dict()).split(' ')[0]}{interval}"


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


# --- a group's run, for the session (bench/run/session.py) ----------------------------------------

def run_group(session, group: list[Cell], pairs: list[Pair]) -> None:
    """A group's cells taking turns (or as whole processes in turns, or alone); each pair's result kept
    in both cells' entries."""
    within, max_rounds = session.pairing.within, session.pairing.max_rounds
    ready, done, alone, apart = [], {}, {}, []
    resumed = {c.id for c in group if c.id in session.finished}
    for cell in group:
        if cell.id in resumed:
            done[cell.id] = session.finished[cell.id]
            alone[cell.id] = "its partner was kept from the journal of the run resumed"
            continue
        session.say(f"\n{session.position(cell)}")
        resolved, prepared = session.prepared(cell)
        if isinstance(prepared, Outcome):
            alone[cell.id] = f"{cell.id} did not run ({prepared.status})"
            done[cell.id] = session.after_launch(cell, resolved, prepared)
            continue
        why = why_alone(resolved, session.launch)
        if why:
            apart.append(why)
        session.say(f"  ready{': ' + why if why else '; it takes turns with the others of its group'}")
        ready.append((cell, resolved, prepared))
    members = [Member(r, p.python, p.dataset_dir, p.memory_limit) for _, r, p in ready]
    if RUNNER in session.pairing.by:  # each cell beside its unwatched twin (the runner's cost)
        twins = [Member(unwatched_twin(m.cell), m.python, m.dataset_dir, m.memory_limit, watched=False)
                 for m in members]
        pairs = pairs + [Pair(RUNNER, t.cell.id, m.cell.id) for m, t in zip(members, twins)]
        members += twins
    apart_why = apart[0] if apart else too_big_together([m.dataset_dir for m in members]) if len(members) > 1 else None
    run, results = None, []
    if len(ready) > 1 and apart_why:
        rounds = _run_interleaved(session, ready, apart_why, done)
        ran = {c.id for c, _, _ in ready}
        both = [p for p in pairs if p.first in ran and p.second in ran]
        results = [paired_result(p, rounds, within, {}, None, apart=apart_why) for p in both]
        pairs = [p for p in pairs if p not in both]
        alone.update({p.first: apart_why for p in pairs if p.axis == RUNNER})  # twins need live turns
    elif len(members) > 1 and not apart_why:
        session.say(f"\ntaking turns: {len(members)} cells, {len(pairs)} pair(s), until each is within or outside "
                    f"±{within:.0%} (at most {max_rounds} rounds)")
        run = run_together(members, pairs, session.cache, session.launch, within, max_rounds, session.say)
        for cell, resolved, _ in ready:
            session.say(f"\n{session.position(cell)}")
            done[cell.id] = session.after_launch(cell, resolved, run.outcomes[resolved.id])
    elif len(ready) == 1:
        cell, resolved, prepared = ready[0]
        alone[cell.id] = apart_why or "no other cell of its group could run beside it"
        done[cell.id] = session.after_launch(cell, resolved, session.start(resolved, prepared))
    for pair in pairs:
        why = alone.get(pair.first) or alone.get(pair.second)
        if run is not None and not why:
            results.append(paired_result(pair, run.rounds, within, run.waiting, run.stopped))
        else:
            epochs = {i: done[i].epochs if i in done else [] for i in (pair.first, pair.second)}
            results.append(unpaired_result(pair, epochs, within, why or "not run together"))
    for result in results:
        session.say(f"  paired: {describe(result)}")
    for cell in group:  # each cell journalled as it ended; again now with its pairs (the later line wins)
        if cell.id in resumed or not done[cell.id].measured:
            continue
        extra = done[cell.id].entry["extra_info"]
        extra["pairs"] = [r.as_dict() for r in results if cell.id in (r.first, r.second)]
        if run is not None and cell.id not in alone:
            extra.setdefault("notes", []).append(
                f"measured in turns beside {len(run.outcomes) - 1} other live worker(s) (paired): its measured "
                f"epochs are its {len(run.rounds)} turns; other load not measured (its partners would count)")
        session.keep(cell, done[cell.id])


def _run_interleaved(session, ready: list[tuple], why: str, done: dict) -> list[dict[str, float]]:
    """Each round's median epoch per cell, the cells launched one after another (the order turning);
    a cell's entry (in `done`) is its first run."""
    rounds = []
    session.say(f"\nnot together ({why}): {len(ready)} cells in {INTERLEAVED_ROUNDS} rounds of whole processes")
    for number in range(INTERLEAVED_ROUNDS):
        shift = number % len(ready)
        medians = {}
        for cell, resolved, prepared in ready[shift:] + ready[:shift]:
            session.say(f"\n{session.position(cell)} (round {number + 1} of {INTERLEAVED_ROUNDS})")
            outcome = session.start(resolved, prepared)
            if cell.id not in done:  # its first run is its entry, journalled at once
                done[cell.id] = session.after_launch(cell, resolved, outcome)
            if outcome.status == "ok":
                medians[cell.id] = statistics.median(e["seconds"] for e in outcome.record["epochs"])
        rounds.append(medians)
    for cell, _, _ in ready:
        if done[cell.id].measured:
            done[cell.id].entry["extra_info"].setdefault("notes", []).append(
                f"its pairs ran as interleaved processes ({why}): {INTERLEAVED_ROUNDS} rounds, each cell "
                "launched once a round; this entry is its first run")
    return rounds
