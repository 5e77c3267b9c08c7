"""A dataset made ready to use: the one entry to bench.datasets for everything that prepares one
(docs/layout.md, "A cell's path"). Host only. The stacks, their environment and the memory check
belong to layers above: the caller hands them in as a `Host` (bench/run/prepare.py `StackHost`).
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Protocol

from bench import checksums, datasets, locks
from bench.datasets import hub, link_split
from bench.datasets.hub import DatasetError, sweep_stale
from bench.tasks import TASKS

__all__ = ["DatasetError", "Host", "LinkSplitError", "ReadyDataset", "ready", "reads_user_files", "sizes",
           "stack_needed", "stack_of", "sweep_stale"]


class Host(Protocol):
    """What making a dataset ready needs from the layers above bench.datasets."""

    def python(self, stack: str) -> Path | None:
        """The stack's interpreter (installed now if the host installs), None where it is not there."""

    def env(self) -> dict[str, str]:
        """The environment a dataset's build gets in a stack's interpreter."""

    def refusal(self, stats: dict, copies: int, what: str) -> str | None:
        """Why `copies` copies of the hub arrays of a dataset this size cannot be held now, or None."""


class LinkSplitError(DatasetError):
    """The dataset is ready, its edge split for the link task is not (a cell's outcome tells them apart)."""


@dataclass(frozen=True)
class ReadyDataset:
    folder: Path  # the dataset's hub folder, verified
    built: bool  # built by this call (False: kept from the hub, or built meanwhile by another process)
    link_split: Path | None = None  # its edge split's folder, for the link task


def ready(spec: dict, cache: Path, data_root: Path | None = None, *, host: Host, task: str | None = None,
          interactive: bool = False, say: Callable[[str], None] | None = None) -> ReadyDataset:
    """The dataset `spec` in the hub `cache`, ready for `task` (the link task adds its edge split);
    `interactive`: the user's terminal answers a download's questions."""
    say = say or (lambda line: print(line, flush=True))
    folder = hub.dataset_dir(spec, cache)
    if hub.is_materialised(spec, cache) and checksums.recorded(folder):
        hub.verify(folder, hub.read_meta(folder / "meta.json"))  # a corrupt or changed file fails here, named
        built = False
    else:
        built = _build_once(spec, Path(cache), data_root, host, interactive, say)
    split = None
    if task is not None and TASKS[task].edge_split:
        try:  # the edge split every link cell of this dataset trains and scores on, built once
            split = link_split.ensure(folder)
        except DatasetError as exc:
            raise LinkSplitError(str(exc)) from None
    return ReadyDataset(folder, built, split)


def sizes(spec: dict, cache: Path) -> dict:
    """Sizes of a dataset (hub.STAT_FIELDS): measured if it is in the hub, else as published (or bounded)."""
    if hub.is_materialised(spec, cache):
        # sizes only: the files are checked where they are read (`ready`, the worker)
        return hub.load_dataset(spec["source"], hub.dataset_dir(spec, cache), mmap=True, check=False).card()
    module, params = datasets.source_module(spec["source"]), spec.get("params", {})
    return module.expected_stats(params) if hasattr(module, "expected_stats") else module.KNOWN_STATS[params["name"]]


def stack_of(spec: dict) -> str | None:
    """The stack whose interpreter builds the dataset (bench.datasets.SOURCES); None: any, the host too."""
    return datasets.stack_of(spec["source"])


def stack_needed(spec: dict, cache: Path) -> str | None:
    """The stack whose interpreter `ready` needs for `spec` now (None: the hub has it, or any will do)."""
    return None if hub.is_materialised(spec, cache) else stack_of(spec)


def reads_user_files(spec: dict) -> bool:
    """Whether the dataset is a user's own files (checked and converted before a run's first cell)."""
    return datasets.user_files(spec["source"])


def _build_once(spec: dict, cache: Path, data_root: Path | None, host: Host, interactive: bool, say) -> bool:
    """Build the dataset under its folder's lock; False where another process built it meanwhile."""
    folder = hub.dataset_dir(spec, cache)
    cache.mkdir(parents=True, exist_ok=True)
    with locks.held(folder, f"converting dataset {spec['name']}", say=lambda line: say(f"  {line}")) as lock:
        if lock is not None and lock.waited_for and hub.is_materialised(spec, cache):
            say(f"  dataset {spec['name']!r}: converted meanwhile by {locks.describe(lock.waited_for).split(',')[0]}; "
                "reusing it")
        if hub.is_materialised(spec, cache) and not checksums.recorded(folder):
            say(f"  dataset {spec['name']!r}: {folder} has no checksums.json, so its files cannot be checked; "
                "building it again from its source")
            hub.discard(folder)
        if hub.is_materialised(spec, cache):
            hub.verify(folder, hub.read_meta(folder / "meta.json"))
            return False
        _build(spec, cache, data_root, host, interactive)
        return True


def _build(spec: dict, cache: Path, data_root: Path | None, host: Host, interactive: bool) -> Path:
    """Build the dataset here, or in its stack's interpreter (its last line of stderr is the error)."""
    # building holds the raw and the hub arrays at once (a user's graph is converted in pieces)
    if not datasets.user_files(spec["source"]):
        if too_big := host.refusal(sizes(spec, cache), 2, f"preparing dataset {spec['name']!r}"):
            raise DatasetError(too_big)
    stack = stack_of(spec)
    if stack is None:
        return datasets.materialiser(spec["source"])(spec, cache, data_root)
    python = host.python(stack)
    if python is None:
        raise DatasetError(f"dataset {spec['name']!r} is prepared in the {stack} stack, "
                           f"which is not installed (gnnbench stacks install {stack})")
    cmd = [str(python), "-m", "bench.datasets", "prepare", json.dumps(spec), str(cache), str(data_root or "")]
    # the child converts under this process's lock (it inherits it); an interrupt here stops it
    # with SIGTERM, so that it removes its half-written folder (bench/datasets/__main__.py)
    proc = subprocess.Popen(cmd, env=locks.env_holding(hub.dataset_dir(spec, cache), host.env()), text=True,
                            stdout=subprocess.PIPE, stderr=None if interactive else subprocess.PIPE,
                            stdin=None if interactive else subprocess.DEVNULL)
    try:
        stdout, stderr = proc.communicate()
    except BaseException:
        stop_child(proc)
        raise
    if proc.returncode != 0 and interactive:
        raise DatasetError(f"preparing {spec['name']!r} failed ({proc.returncode}); see the messages above")
    if proc.returncode != 0:
        last = stderr.strip().splitlines()[-1] if stderr.strip() else f"exit code {proc.returncode}"
        raise DatasetError(last.removeprefix("error: ") if last.startswith("error: ")
                           else f"preparing {spec['name']!r} failed: {last}")
    return Path(stdout.strip().splitlines()[-1])


def stop_child(proc: subprocess.Popen, grace_s: float = 30.0) -> None:
    """End a child that writes the cache: SIGTERM (it removes what it half wrote), then SIGKILL."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
