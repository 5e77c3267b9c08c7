"""One owner for a cell's preparation: everything a cell needs is made ready here, once, before it
starts, and what stops it is said here, with the reason.

    Preparation(cache, data_root, nnodes, no_install, say).prepare(cell) -> PreparedCell | Outcome

In order: the stacks it needs (its own, and the one its dataset is prepared in, unless the hub has
the dataset already), installed once per run unless --no-install; its memory need against the
memory available now (refused if it cannot fit); its dataset in the hub (prepared once per run,
in the interpreter its source needs); its store (built once, into the dataset's folder); its
memory limit; for a link cell, its dataset's edge split (bench/datasets/link_split.py). The session calls `prepare` once per cell and hands what it returns to the runner
(bench/run/runner.py launch_cell), which only launches and watches.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import psutil

from bench import datasets, locks, stacks, stores
from bench.backends import BACKENDS
from bench.datasets import hub, link_split
from bench.datasets.hub import DatasetError
from bench.machine import cgroup
from bench.run import memory_plan as memory
from bench.run.runner import Outcome, worker_env
from bench.run.suite import Cell


@dataclass(frozen=True)
class PreparedCell:
    """A cell ready to launch: what the runner needs and nothing it must look up again."""
    cell: Cell
    python: Path  # its stack's interpreter
    dataset_dir: Path  # its dataset in the hub (checked)
    store: Path | None  # where its store was built (None: the hub's arrays, or a framework's own format)
    memory_limit: int | None  # bytes its memory cgroup allows (`memory_limit`), None: no cgroup


class Preparation:
    """What one run prepares for its cells, each thing once: stacks (or the problem that keeps one
    away), datasets (or the error preparing one gave)."""

    def __init__(self, cache: Path, data_root: Path | None, nnodes: int = 1, no_install: bool = False,
                 say: Callable[..., None] = print):
        self.cache, self.data_root, self.nnodes, self.no_install, self.say = cache, data_root, nnodes, no_install, say
        self.datasets: dict[str, Path | DatasetError] = {}  # by dataset name
        self._stack_errors: dict[str, str] = {}
        self._image_only: set[str] = set()  # stacks the GPU images alone build (every pin container-only)

    def prepare(self, cell: Cell) -> PreparedCell | Outcome:
        """The cell ready to launch, or the outcome that stops it before it starts: a stack that is
        not there (the cell's own, or the one its dataset is prepared in, unless the hub has it
        already: a node given a prepared Cora needs no pyg stack), too little memory, a dataset that
        cannot be prepared, a store that cannot be built."""
        spec = cell.dataset_spec
        preparer = None if hub.is_materialised(spec, self.cache) else datasets.stack_of(spec["source"])
        for stack in filter(None, (cell.stack, preparer)):
            problem = self.ensure_stack(stack)
            if problem:  # a stack only the GPU images build is not this machine's failure: skipped
                return Outcome(cell, "skipped" if stack in self._image_only else "failed", problem)
        refused = self.refusal(cell)
        if refused:
            return Outcome(cell, "refused", refused)
        try:
            dataset_dir = self.dataset(cell)
        except DatasetError as exc:
            return Outcome(cell, "failed", f"dataset: {exc}")
        if BACKENDS[cell.backend].task == "link":
            try:  # the edge split every link cell of this dataset trains and scores on, built once
                link_split.ensure(dataset_dir)
            except DatasetError as exc:
                return Outcome(cell, "failed", f"link split: {exc}")
        try:
            store = stores.prepare(cell.settings["store"], dataset_dir, BACKENDS[cell.backend].task, say=self.say)
        except Exception as exc:  # noqa: BLE001 - any failed build is this cell's failure, recorded
            return Outcome(cell, "failed", f"store: {type(exc).__name__}: {exc}")
        return PreparedCell(cell, stacks.get(cell.stack).python, dataset_dir, store,
                            cgroup.parse_limit(cell.settings.get("memory_limit")))

    def ensure_stack(self, name: str) -> str | None:
        """Install a missing stack once (unless --no-install); the problem, if it cannot be had."""
        if name in self._stack_errors:
            return self._stack_errors[name]
        stack = stacks.get(name)  # a pinned or a registered stack (reads the registry once)
        if stack.installed:
            return None
        if getattr(stack, "container_only", False) and not stacks.in_container():
            self._stack_errors[name] = stacks.CONTAINER_ONLY_STACK.format(name=name, pins=stack.requirements.name)
            self._image_only.add(name)
        elif stack.external:
            self._stack_errors[name] = (f"stack {name!r}: its registered interpreter {stack.python} "
                                        f"is gone (gnnbench stacks add {name} --python PATH registers another)")
        elif self.no_install:
            self._stack_errors[name] = f"stack {name!r} is not installed (gnnbench stacks install {name})"
        else:
            try:
                stacks.install(name, log=lambda line: self.say(f"  {line}"))
            except stacks.StackError as exc:
                self._stack_errors[name] = str(exc)
        return self._stack_errors.get(name)

    def refusal(self, cell: Cell) -> str | None:
        """Refuse, with the numbers, a cell that cannot fit in the memory available now."""
        try:
            stats = dataset_stats(cell.dataset_spec, self.cache)
        except DatasetError:
            return None  # preparing the dataset will report what is wrong
        local_ranks = max(1, cell.settings["world_size"] // self.nnodes)
        need = memory.estimate(stats, cell.backend, local_ranks, cell.settings["store"], cell.settings["mode"])
        return memory.refusal(need["total_bytes"], psutil.virtual_memory().available,
                              f"{local_ranks} rank(s) of {cell.backend} on {cell.dataset}")

    def dataset(self, cell: Cell) -> Path:
        """The cell's dataset in the hub, prepared once per run (an error, once, too)."""
        if cell.dataset not in self.datasets:
            self.say(f"  preparing dataset {cell.dataset} ...")
            try:
                self.datasets[cell.dataset] = ensure_dataset(cell.dataset_spec, self.cache, self.data_root, say=self.say)
            except DatasetError as exc:
                self.datasets[cell.dataset] = exc
        found = self.datasets[cell.dataset]
        if isinstance(found, DatasetError):
            raise found
        return found


def dataset_stats(spec: dict, cache: Path) -> dict:
    """Sizes of a dataset: measured if it is in the hub, else as published (or bounded)."""
    if hub.is_materialised(spec, cache):
        # sizes only: the files are checked where they are read (ensure_dataset, the worker)
        return hub.load_dataset(spec["source"], hub.dataset_dir(spec, cache), mmap=True, check=False).card()
    return datasets.source_module(spec["source"]).expected_stats(spec.get("params", {}))


def ensure_dataset(spec: dict, cache: Path, data_root: Path | None, interactive: bool = False,
                   say: Callable[..., None] | None = None) -> Path:
    """Materialise a dataset into the hub once, in the interpreter its source needs, under the
    dataset folder's lock (bench/locks.py): a conversion of the same dataset by another process,
    here or on another node sharing the cache, is waited for (said) and its result reused.
    `interactive`: the user's terminal answers a download's questions (ogb asks before large ones)."""
    folder = hub.dataset_dir(spec, cache)
    if hub.is_materialised(spec, cache) and hub.has_checksums(folder):
        hub.verify(folder, hub.read_meta(folder / "meta.json"))  # a corrupt or changed file fails here, named
        return folder
    Path(cache).mkdir(parents=True, exist_ok=True)
    say = say or (lambda line: print(line, flush=True))
    with locks.held(folder, f"converting dataset {spec['name']}", say=lambda line: say(f"  {line}")) as lock:
        if lock is not None and lock.waited_for and hub.is_materialised(spec, cache):
            say(f"  dataset {spec['name']!r}: converted meanwhile by {locks.describe(lock.waited_for).split(',')[0]}; "
                "reusing it")
        return _ensure_dataset(spec, cache, data_root, interactive)


def _ensure_dataset(spec: dict, cache: Path, data_root: Path | None, interactive: bool) -> Path:
    folder = hub.dataset_dir(spec, cache)
    if hub.is_materialised(spec, cache) and not hub.has_checksums(folder):
        # without its checksums a folder's files cannot be told from corrupt ones: never adopted
        # (a flipped byte would then pass every later check); it is built again from its source
        print(f"  dataset {spec['name']!r}: {folder} has no checksums.json, so its files cannot be checked; "
              "building it again from its source", flush=True)
        hub.discard(folder)
    if hub.is_materialised(spec, cache):
        hub.verify(folder, hub.read_meta(folder / "meta.json"))  # a corrupt or changed file fails here, named
        return folder
    Path(cache).mkdir(parents=True, exist_ok=True)
    # converting holds the raw arrays and the hub arrays at once (not a user's graph: it is
    # converted in pieces, bench/datasets/hub_stream.py)
    too_big = None
    if not datasets.user_files(spec["source"]):
        too_big = memory.refusal(2 * memory.hub_bytes(dataset_stats(spec, cache)),
                                 psutil.virtual_memory().available, f"preparing dataset {spec['name']!r}")
    if too_big:
        raise hub.DatasetError(too_big)
    stack_name = datasets.stack_of(spec["source"])
    if stack_name is None:
        return datasets.materialiser(spec["source"])(spec, cache, data_root)
    stack = stacks.get(stack_name)
    if not stack.installed:
        raise hub.DatasetError(f"dataset {spec['name']!r} is prepared in the {stack_name} stack, "
                               f"which is not installed (gnnbench stacks install {stack_name})")
    cmd = [str(stack.python), "-m", "bench.datasets", "prepare", json.dumps(spec), str(cache),
           str(data_root or "")]
    # the child converts under this process's lock (it inherits it); an interrupt here stops it
    # with SIGTERM, so that it removes its half-written folder (bench/datasets/__main__.py)
    proc = subprocess.Popen(cmd, env=locks.env_holding(folder, worker_env(cache, "prepare")), text=True,
                            stdout=subprocess.PIPE, stderr=None if interactive else subprocess.PIPE,
                            stdin=None if interactive else subprocess.DEVNULL)
    try:
        stdout, stderr = proc.communicate()
    except BaseException:
        stop_child(proc)
        raise
    proc = subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)
    if proc.returncode != 0 and interactive:
        raise hub.DatasetError(f"preparing {spec['name']!r} failed ({proc.returncode}); see the messages above")
    if proc.returncode != 0:
        last = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit code {proc.returncode}"
        raise hub.DatasetError(last.removeprefix("error: ") if last.startswith("error: ")
                               else f"preparing {spec['name']!r} failed: {last}")
    return Path(proc.stdout.strip().splitlines()[-1])


def stop_child(proc: subprocess.Popen, grace_s: float = 30.0) -> None:
    """End a child that writes the cache: SIGTERM first (it removes what it half wrote), SIGKILL
    after `grace_s` (what it leaves is then swept by the next command)."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
