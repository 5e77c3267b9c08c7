"""A cell's preparation, each thing once per run, before it starts: its stacks (installed unless
--no-install), its memory need against what is available, its dataset ready for its task
(bench/datasets/ready.py), its store, its memory limit: a PreparedCell, or the Outcome that stops it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import psutil

from bench import stacks, stores
from bench.backends import BACKENDS
from bench.datasets.ready import DatasetError, LinkSplitError, ReadyDataset, ready, sizes, stack_needed
from bench.machine import cgroup
from bench.run import memory_plan as memory
from bench.run.runner import Outcome, worker_env
from bench.run.suite import Cell


class StackHost:
    """bench.datasets.ready's `Host`: this machine's stacks, a build's environment and the memory
    available. `install`: a missing stack is installed when a build needs it (`datasets`, `bundle`)."""

    def __init__(self, cache: Path, install: bool = False, say: Callable[[str], None] = print,
                 run_stacks: list[str] | None = None):
        self.cache, self.install, self.say = cache, install, say
        self.run_stacks = [name for name in run_stacks or () if name != "own"]  # a run's --stack

    def instead_of(self, stack: str | None) -> str | None:
        """The stack a dataset is built in: a run's --stack of the source stack's framework, else its own."""
        if stack is None:
            return None
        framework = stacks.framework_of(stack)
        return next((name for name in self.run_stacks
                     if (found := stacks.get(name)).installed and framework in found.frameworks), stack)

    def python(self, stack: str) -> Path | None:
        stack = self.instead_of(stack)
        if self.install:
            return stacks.install(stack, log=lambda line: self.say(f"  {line}")).python
        found = stacks.get(stack)
        return found.python if found.installed else None

    def env(self) -> dict[str, str]:
        return worker_env(self.cache, "prepare")

    def refusal(self, stats: dict, copies: int, what: str) -> str | None:
        return memory.refusal(copies * memory.hub_bytes(stats), psutil.virtual_memory().available, what)


@dataclass(frozen=True)
class PreparedCell:
    """A cell ready to launch: what the runner needs and nothing it must look up again."""
    cell: Cell
    python: Path  # its stack's interpreter
    dataset_dir: Path  # its dataset in the hub (checked)
    store: Path | None  # where its store was built (None: the hub's arrays, or a framework's own format)
    memory_limit: int | None  # bytes its memory cgroup allows (`memory_limit`), None: no cgroup


class Preparation:
    """What one run prepares for its cells, each thing once (or the problem that kept it away)."""

    def __init__(self, cache: Path, data_root: Path | None, nnodes: int = 1, no_install: bool = False,
                 say: Callable[..., None] = print, run_stacks: list[str] | None = None):
        self.cache, self.data_root, self.nnodes, self.no_install, self.say = cache, data_root, nnodes, no_install, say
        self.host = StackHost(cache, run_stacks=run_stacks)
        self._ready: dict[tuple[str, str | None], ReadyDataset | LinkSplitError] = {}  # by dataset name and task
        self._failed: dict[str, DatasetError] = {}  # by dataset name: a dataset that could not be made ready
        self._stack_errors: dict[str, str] = {}
        self._image_only: set[str] = set()  # stacks the GPU images alone build (every pin container-only)

    def prepare(self, cell: Cell) -> PreparedCell | Outcome:
        for stack in filter(None, (cell.stack, self.building_stack(cell.dataset_spec))):
            # a stack only the GPU images build is not this machine's failure: skipped
            if problem := self.ensure_stack(stack):
                return Outcome(cell, "skipped" if stack in self._image_only else "failed", problem)
        if refused := self.refusal(cell):
            return Outcome(cell, "refused", refused)
        task = BACKENDS[cell.backend].task
        if not self.known(cell.dataset):
            self.say(f"  preparing dataset {cell.dataset} ...")
        try:
            dataset_dir = self.dataset(cell.dataset, cell.dataset_spec, task).folder
        except DatasetError as exc:
            return Outcome(cell, "failed", f"{'link split' if isinstance(exc, LinkSplitError) else 'dataset'}: {exc}")
        try:
            store = stores.prepare(cell.settings.store, dataset_dir, task, say=self.say)
        except Exception as exc:  # noqa: BLE001 - any failed build is this cell's failure, recorded
            return Outcome(cell, "failed", f"store: {type(exc).__name__}: {exc}")
        return PreparedCell(cell, stacks.get(cell.stack).python, dataset_dir, store,
                            cgroup.parse_limit(cell.settings.memory_limit))

    def building_stack(self, spec: dict) -> str | None:
        """The stack `spec` is built in now (None: the hub has it, or any interpreter builds it)."""
        return self.host.instead_of(stack_needed(spec, self.cache))

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
            stats = sizes(cell.dataset_spec, self.cache)
        except DatasetError:
            return None  # preparing the dataset will report what is wrong
        local_ranks = max(1, cell.settings.world_size // self.nnodes)
        need = memory.estimate(stats, cell.backend, local_ranks, cell.settings.store, cell.settings.mode)
        return memory.refusal(need["total_bytes"], psutil.virtual_memory().available,
                              f"{local_ranks} rank(s) of {cell.backend} on {cell.dataset}")

    def dataset(self, name: str, spec: dict, task: str | None = None) -> ReadyDataset:
        """The dataset `name` ready for `task`, once per run (a failure too; a link split's only for links)."""
        if name in self._failed:
            raise self._failed[name]
        if (name, task) not in self._ready:
            try:
                self._ready[name, task] = ready(spec, self.cache, self.data_root, host=self.host,
                                                task=task, say=self.say)
            except LinkSplitError as exc:
                self._ready[name, task] = exc
            except DatasetError as exc:
                self._failed[name] = exc
                raise
        found = self._ready[name, task]
        if isinstance(found, LinkSplitError):
            raise found
        return found

    def known(self, name: str) -> bool:
        return name in self._failed or any(known == name for known, _ in self._ready)

    def folders(self) -> dict[str, Path]:
        return {name: found.folder for (name, _), found in self._ready.items() if isinstance(found, ReadyDataset)}


def ensure_dataset(spec: dict, cache: Path, data_root: Path | None) -> Path:
    """A dataset's folder made ready with this machine's stacks as they are (the harness-cost
    benchmarks' and the tests' short way to bench.datasets.ready)."""
    return ready(spec, cache, data_root, host=StackHost(cache)).folder
