"""The runner: launches one cell in its stack's interpreter, watches it, and returns an outcome.

The worker runs in its own session, so a timeout or a crash takes its whole tree down; memory is
sampled from here, over the tree. A crash, a hang or a kill becomes an outcome with the tail of stderr."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import signal
import subprocess
import threading
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from bench.backends.shared_host import SHARED_HOST_ENV
from bench.machine import cgroup
from bench.machine.load import LoadMeter
from bench.net import free_port
from bench.paths import repo_root
from bench.run import cell_scratch, cluster_env
from bench.run.lifeline import PARENT_ENV, PROGRESS_TAG
from bench.run.suite import Cell

STDERR_TAIL_CHARS = 2000
MEMORY_SAMPLE_S = 0.2
PSS_EVERY_S = 2.0  # PSS is read at least this often, and whenever the tree's RSS reaches a new high
PSS_RSS_STEP = 1.02  # ... by this factor
TREE_EVERY_S = 1.0  # the process tree is listed again this often (new DataLoader workers, ranks)
SHARED_MEMORY = Path("/dev/shm")  # where a cell's shared host copies live (RAM, not disk)
RUN_ID_ENV = "GNNBENCH_RUN_ID"  # marks every process of one cell, so leftovers can be found


@dataclass
class Outcome:
    cell: Cell
    status: str  # ok | failed | timeout | oom | skipped | refused | follower
    reason: str = ""
    record: dict = field(default_factory=dict)  # what the worker wrote
    peak_rss_bytes: int = 0
    peak_pss_bytes: int = 0
    wall_s: float = 0.0
    rank_peaks: dict = field(default_factory=dict)  # rank -> (peak RSS, peak PSS) of its process tree
    other_load: float | None = None  # share of the machine other work kept busy meanwhile (bench.machine.load)
    runner_cpu_s: float | None = None  # CPU seconds the runner's memory sampler took beside the cell (its own cost)


@dataclass(frozen=True)
class Launch:
    """Where a cell's ranks run: this machine alone, or one of several nodes meeting at a torchrun
    c10d rendezvous endpoint."""
    nnodes: int = 1
    node_rank: int = 0
    rdzv_endpoint: str | None = None  # host:port; default: a free port on 127.0.0.1


class TreeMemorySampler(threading.Thread):
    """RSS and PSS peaks of a process tree, in total and per rank (a process torch.distributed.run
    started, with everything below it)."""

    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.root = psutil.Process(pid)
        self.peak_rss = self.peak_pss = 0
        self.rank_peaks: dict[int, tuple[int, int]] = {}
        self._ranks: dict[int, int] = {}  # pid -> rank
        self._cpu: dict[int, float] = {}  # pid -> CPU seconds last seen (for the load of other work)
        self._pss_at = self._rss_at_pss = 0.0  # when PSS was last read, and the highest RSS it was read at
        self._groups: dict | None = None  # rank -> its processes, as last listed (see _tree)
        self._launched, self._listed_at = False, 0.0
        self._stop_event = threading.Event()
        self._awake = threading.Event()  # cleared while the cell waits its turn (a paired cell: bench/run/paired.py)
        self._awake.set()
        self.own_cpu_s = 0.0  # this thread's CPU seconds: what watching the cell cost the cores it shares

    def run(self) -> None:
        started = time.thread_time()
        while not self._stop_event.is_set():
            if not self._awake.is_set():  # an idle cell's memory does not move: nothing to read while it waits
                paused_at = time.monotonic()
                self._awake.wait()
                # its clocks count the cell's running time only, and its turn's start is not read at once:
                # a tree listing and a PSS read due after every wait would fall on every turn's first batch
                waited = time.monotonic() - paused_at
                self._pss_at += waited
                self._listed_at += waited
                self._stop_event.wait(MEMORY_SAMPLE_S)
                if not self._awake.is_set():
                    continue
            self.sample()
            self.own_cpu_s = time.thread_time() - started
            self._stop_event.wait(MEMORY_SAMPLE_S)

    def pause(self) -> None:
        self._awake.clear()

    def resume(self) -> None:
        self._awake.set()

    def _rank_of(self, proc: psutil.Process) -> int | None:
        """The rank a child of the launcher runs (its RANK variable); only a found rank is remembered (a
        child between fork and exec still has the launcher's environment)."""
        if proc.pid not in self._ranks:
            with contextlib.suppress(psutil.Error):
                if (rank := proc.environ().get("RANK")) is not None:
                    self._ranks[proc.pid] = int(rank)
        return self._ranks.get(proc.pid)

    def _tree(self) -> tuple[dict[int, list[psutil.Process]], bool]:
        """The processes of each rank, and whether a launcher started them; kept for TREE_EVERY_S (listing
        children scans every process of the machine) or until one exits."""
        now = time.monotonic()
        if self._groups is None or now - self._listed_at >= TREE_EVERY_S:
            ranked = {p: self._rank_of(p) for p in self.root.children()}
            groups = {rank: [p, *p.children(recursive=True)] for p, rank in ranked.items() if rank is not None}
            launched = bool(groups)
            if not launched:  # a single worker: the whole tree is rank 0
                groups = {0: [self.root, *self.root.children(recursive=True)]}
            self._groups, self._launched, self._listed_at = groups, launched, now
        return self._groups, self._launched

    def sample(self) -> None:
        try:
            groups, launched = self._tree()
        except psutil.Error:
            return
        if not all(p.is_running() for procs in groups.values() for p in procs):
            self._groups = None  # one has exited: list again next time
        for proc in [self.root, *(p for procs in groups.values() for p in procs)]:
            with contextlib.suppress(psutil.Error):
                t = proc.cpu_times()
                self._cpu[proc.pid] = t.user + t.system
        # RSS (statm) is cheap; PSS (smaps_rollup) walks every page table: read it at a new high
        # of the tree's RSS, where its peak is to be found, and every PSS_EVERY_S otherwise.
        rss = {rank: _rss(procs) for rank, procs in groups.items()}
        total_rss = sum(rss.values()) + (_rss([self.root]) if launched else 0)
        now = time.monotonic()
        read_pss = total_rss > self._rss_at_pss * PSS_RSS_STEP or now - self._pss_at >= PSS_EVERY_S
        pss = {rank: _rss(procs, pss=True) for rank, procs in groups.items()} if read_pss else {}
        if read_pss:
            self._pss_at, self._rss_at_pss = now, max(self._rss_at_pss, total_rss)
            total_pss = sum(pss.values()) + (_rss([self.root], pss=True) if launched else 0)
            self.peak_pss = max(self.peak_pss, total_pss)
        for rank in groups:
            old = self.rank_peaks.get(rank, (0, 0))
            self.rank_peaks[rank] = (max(old[0], rss[rank]), max(old[1], pss.get(rank, 0)))
        self.peak_rss = max(self.peak_rss, total_rss)

    def stop(self) -> None:
        self._stop_event.set()
        self._awake.set()
        self.join()

    @property
    def cpu_seconds(self) -> float:
        return sum(self._cpu.values())


def _rss(procs: list[psutil.Process], pss: bool = False) -> int:
    """The tree's RSS, or with `pss` its PSS (smaps_rollup, where the kernel has it)."""
    total = 0
    for proc in procs:
        with contextlib.suppress(psutil.Error):  # exited between listing and reading
            info = proc.memory_full_info() if pss else proc.memory_info()
            total += getattr(info, "pss", info.rss) if pss else info.rss
    return total


def worker_command(python: Path, cell: Cell, args: list[str], launch: Launch) -> list[str]:
    """The worker alone for one rank; under torch.distributed.run for several ranks or nodes."""
    world = int(cell.settings.world_size)
    if world == 1 and launch.nnodes == 1:
        return [str(python), "-m", "bench.run.worker", *args]
    if world % launch.nnodes:
        raise ValueError(f"world size {world} does not split over {launch.nnodes} nodes")
    endpoint = launch.rdzv_endpoint or f"127.0.0.1:{free_port()}"
    return [str(python), "-m", "bench.run.lifeline", "torch.distributed.run", f"--nnodes={launch.nnodes}",
            f"--nproc-per-node={world // launch.nnodes}", f"--node-rank={launch.node_rank}",
            "--rdzv-backend=c10d", f"--rdzv-endpoint={endpoint}",
            f"--rdzv-id={hashlib.sha1(cell.id.encode()).hexdigest()[:16]}", "--max-restarts=0",
            "-m", "bench.run.worker", *args]


def worker_env(cache: Path, run_id: str) -> dict[str, str]:
    # without the RANK, WORLD_SIZE, MASTER_* ... that srun or a pod set: torchrun sets its own
    env = cluster_env.worker_environment(dict(os.environ))
    return {**env, "PYTHONPATH": os.pathsep.join(filter(None, [str(repo_root()), env.get("PYTHONPATH")])),
            "GNNBENCH_CACHE": str(cache), "GNNBENCH_LAUNCHED_AT": repr(time.time()), "DGLBACKEND": "pytorch",
            "PYTHONUNBUFFERED": "1", RUN_ID_ENV: run_id, PARENT_ENV: str(os.getpid()),
            "OUTDATED_IGNORE": "1"}  # ogb's version check would reach for the network


def launch_cell(cell: Cell, python: Path, dataset_dir: Path, cache: Path, memory_limit: int | None,
                on_progress=None, extra_env: dict[str, str] | None = None, launch: Launch = Launch(),
                on_start=None) -> Outcome:
    """Launch a cell whose stack, dataset and store are ready, in the memory cgroup its limit asks for,
    and watch it to its outcome. `on_start(proc, sampler)`: called once both run (paired cells)."""
    timeout = float(cell.settings.timeout)
    run_id = uuid.uuid4().hex
    try:
        group = None if memory_limit is None else cgroup.MemoryCgroup.create(run_id[:16], memory_limit)
    except cgroup.CgroupError as exc:
        return Outcome(cell, "skipped", f"memory_limit {cell.settings.memory_limit}: {exc}")
    with contextlib.ExitStack() as cleanup:  # the cell's folders, then its cgroup
        if group is not None:
            cleanup.callback(group.remove)
        scratch = cleanup.enter_context(cell_scratch.cell_scratch())  # its TMPDIR too: its workers' pymp-* go with it
        # the node's one host copy of what its ranks pin in place (bench/backends/shared_host.py), gone with the cell
        shared = cleanup.enter_context(tempfile.TemporaryDirectory(
            prefix="gnnbench-shared-", dir=SHARED_MEMORY if SHARED_MEMORY.is_dir() else None))
        out_path, err_path = scratch / "result.json", scratch / "stderr.txt"
        cmd = worker_command(python, cell, [cell.to_json(), str(dataset_dir), str(out_path)], launch)
        env = {**worker_env(cache, run_id), **cell_scratch.environment(scratch), SHARED_HOST_ENV: shared,
               **(extra_env or {})}
        started, load = time.monotonic(), LoadMeter()
        join_fd = group.join_fd() if group else None
        try:
            with open(err_path, "w") as err:  # in the cgroup before it runs: all it starts is too
                proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=err, text=True,
                                        start_new_session=True, cwd=repo_root(),
                                        preexec_fn=cgroup.join_in_child(join_fd) if group else None)
        finally:
            if join_fd is not None:
                os.close(join_fd)
        sampler = TreeMemorySampler(proc.pid)
        sampler.start()
        if on_start is not None:
            on_start(proc, sampler)
        reader = threading.Thread(target=_read_progress, args=(proc.stdout, on_progress), daemon=True)
        reader.start()
        timed_out = False
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            sampler.stop()
            kill_tree(proc, run_id)
        reader.join(timeout=5)
        wall = time.monotonic() - started
        stderr = err_path.read_text(errors="replace")
        stderr_tail = stderr[-STDERR_TAIL_CHARS:]
        outcome = Outcome(cell, "ok", peak_rss_bytes=sampler.peak_rss, peak_pss_bytes=sampler.peak_pss,
                          wall_s=wall, rank_peaks=dict(sampler.rank_peaks),
                          other_load=load.other_share(sampler.cpu_seconds), runner_cpu_s=sampler.own_cpu_s)
        oom_kills = group.oom_kills() if group else 0
        written = written_record(out_path)
        failed = proc.returncode != 0 or written is None
        if timed_out:
            outcome.status, outcome.reason = "timeout", f"no result after {timeout:g} s (killed)\n{stderr_tail}"
        elif oom_kills and failed:
            outcome.status = "oom"
            outcome.reason = (f"out of memory under {group.describe()}: the kernel's OOM killer ended {oom_kills} "
                              f"process(es) of the cell; {failure_headline(stderr, proc.returncode)}\n{stderr_tail}")
        elif failed and written is not None and written.get("status") == "oom":
            # a rank ran out of GPU memory and wrote the cell's record before its peers were ended
            outcome.record = written
            outcome.status, outcome.reason = "oom", f"{written.get('reason', '')}\n{stderr_tail}"
        elif failed:
            outcome.status = "failed"
            outcome.reason = f"{failure_headline(stderr, proc.returncode)}\n{stderr_tail}"
        else:
            outcome.record = written
            if written.get("status") != "ok":
                outcome.status, outcome.reason = written.get("status", "failed"), written.get("reason", "")
            outcome.peak_rss_bytes = max(outcome.peak_rss_bytes, written.get("self_max_rss_bytes", 0))
        return outcome


def written_record(out_path: Path) -> dict | None:
    """The record the worker wrote, or None where it wrote none (or none whole)."""
    with contextlib.suppress(OSError, ValueError):
        found = json.loads(out_path.read_text())
        return found if isinstance(found, dict) else None
    return None


def _read_progress(stream, on_progress) -> None:
    for line in stream:
        if line.startswith(PROGRESS_TAG) and on_progress is not None:
            with contextlib.suppress(json.JSONDecodeError):
                on_progress(json.loads(line[len(PROGRESS_TAG):]))


RANK_PREFIX = re.compile(r"^\[(?:rank|default)(\d+)\]:\s*")  # torch.distributed.run tags each rank's lines
EXCEPTION_LINE = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit)): (.*)")  # one line (splitlines)
# torchrun's summary lists each failed rank (rank, exit code); a rank's peers often fail only
# because it did ("Connection reset by peer"), sometimes before it is observed
FAILED_RANK = re.compile(r"^\s*rank\s*:\s*(\d+).*?\n\s*exitcode\s*:\s*(-?\d+)", re.M)


def failure_headline(stderr: str, returncode: int | None) -> str:
    """One line saying what failed: for several ranks, the rank that failed first (one killed by a
    signal, else the first torchrun observed) and its own error; else the worker's exit and last error."""
    summary = stderr[stderr.rfind("ChildFailedError"):] if "ChildFailedError" in stderr else ""
    if failed := [(int(rank), int(code)) for rank, code in FAILED_RANK.findall(summary)]:
        first_observed = failed[-1]  # torchrun prints other failures, then the root cause
        rank, code = next(((r, c) for r, c in failed if c < 0), first_observed)
        error = last_exception(stderr, rank=rank)
        return f"rank {rank} failed first: {exit_words(code)}{': ' + error if error else ''}"
    error = last_exception(stderr)
    return f"worker {exit_words(returncode)}{': ' + error if error else ''}"


def last_exception(stderr: str, rank: int | None = None) -> str | None:
    """The last 'SomeError: message' line in the worker's stderr (not the launcher's ChildFailedError),
    of one rank's tagged lines when `rank` is given."""
    found = None
    for line in stderr.splitlines():
        line = line.strip()
        tag = RANK_PREFIX.match(line)
        if rank is not None and (tag is None or int(tag.group(1)) != rank):
            continue
        match = EXCEPTION_LINE.match(RANK_PREFIX.sub("", line))
        if match and not match.group(1).endswith("ChildFailedError"):
            found = match.group(0)
    return found[:500] if found else None


def exit_words(code: int | None) -> str:
    if code is not None and code < 0:
        name = signal.Signals(-code).name
        return f"killed by {name}{' (out of memory?)' if name == 'SIGKILL' else ''}"
    return f"exited with code {code}"


def kill_tree(proc: subprocess.Popen, run_id: str) -> None:
    """End the worker's process group, then anything else carrying this cell's run id."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            break
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)
            if sig == signal.SIGTERM:
                time.sleep(0.2)  # let the group's other members go too before the SIGKILL
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    for leftover in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if leftover.pid != os.getpid() and leftover.environ().get(RUN_ID_ENV) == run_id:
                leftover.kill()

