"""One run of a suite, the only run path (`gnnbench run` and `pytest suites/`):

    Session(options) -> .selected cells -> .result_of(cell) for each -> .write() the result file

Each finished cell is also a journal line beside the result file, written at once, so a run that
dies keeps what it measured and `--resume JOURNAL` finishes it."""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import functools
import json
import os
import tempfile
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Callable

from bench import inputs
from bench.datasets.ready import DatasetError, reads_user_files, sweep_stale
from bench.machine import ceilings
from bench.machine.core_budget import usable_cores
from bench.paths import cache_dir, cache_root, default_results_dir
from bench.result_format import UNMEASURED_STATUSES
from bench.run import cell_scratch, cluster_env, paired, plan as run_plan, record, suite as suite_mod
from bench.run.plan import SessionError
from bench.run.executor import Executor, Finished
from bench.run.prepare import Preparation
from bench.run.runner import Launch
from bench.run.suite import Cell

JOURNAL_SUFFIX = ".cells.jsonl"
JOURNAL_STATUSES = ("ok", *UNMEASURED_STATUSES)


# --- options, declared once for `gnnbench run` (argparse) and `pytest suites/` (pytest) --------

def option(default=None, **argparse_kwargs):
    """A field of RunOptions that is also a command-line option (--NAME-WITH-DASHES) taking these kwargs."""
    return field(default=default, metadata=argparse_kwargs)


@dataclass
class RunOptions:
    suite: str = "smoke"
    results: Path | None = option(type=Path, metavar="DIR", help="folder for the result file (default: results/runs)")
    output: Path | None = None  # the exact result file (pytest's --benchmark-json); default: in `results`
    data_root: Path | None = option(type=Path, metavar="DIR",
                                    help="where raw dataset files are looked for first (env GNNBENCH_DATA_ROOT)")
    cache_dir: Path | None = option(type=Path, metavar="DIR",
                                    help="dataset hub folder (env GNNBENCH_CACHE; default: the user cache dir)")
    no_install: bool = option(False, action="store_true",
                              help="do not install missing stacks; their cells are recorded as failed")
    resume: Path | None = option(type=Path, metavar="JOURNAL",
                                 help=f"finish an interrupted run: its {JOURNAL_SUFFIX} file; finished cells are kept, "
                                      "the others run, and one complete result file is written beside it")
    stack: list[str] | None = option(action="append", metavar="NAME",
                                     help="the suite's `stack` axis, replaced: run each backend in stack NAME where it "
                                          "has the backend's framework (repeatable; 'own': each backend's pinned stack), "
                                          "e.g. --stack own --stack mine runs the PyG cells in both and DGL's in its own")
    mode: list[str] | None = option(action="append", metavar="MODE",
                                    help="the suite's `mode` axis, replaced (repeatable), e.g. --mode pinned-cuda asks a "
                                         "CPU suite's question on GPUs; backends without the mode are listed, not run")
    seed: list[int] | None = option(action="append", type=int, metavar="N",
                                    help="the suite's `seed` axis, replaced (repeatable): every cell once per seed, e.g. "
                                         "--seed 0 --seed 1 --seed 2 tells a gap between pipelines from the seed's spread")
    paired: list[str] | None = option(action="append", metavar="AXIS",
                                      help="cells that differ in AXIS alone take turns, epoch by epoch, in live workers "
                                           "(repeatable; backend, dataset or a setting, e.g. --paired backend): each pair's "
                                           "ratio with its 95 %% interval, rounds added until it is within or outside the band")
    paired_within: float | None = option(type=float, metavar="FRACTION",
                                         help="the band a paired ratio settles in or out of (default 0.03: ±3 %%)")
    paired_launches: int | None = option(type=int, metavar="N",
                                         help="launches (fresh processes) each pair is measured in (default 6, at "
                                              "least 3): the interval is taken over them")
    paired_rounds: int | None = option(type=int, metavar="N",
                                       help="rounds of turns per launch (default: the cells' epochs)")
    nnodes: int | None = option(type=int, help="machines that run each cell together (each runs the same command); "
                                               "default: SLURM's or Kubeflow's node count where they started it, else 1")
    node_rank: int | None = option(type=int, help="this machine's index among --nnodes; default: SLURM_NODEID or "
                                                  "PET_NODE_RANK where set, else 0")
    rdzv_endpoint: str | None = option(metavar="HOST:PORT",
                                       help="torchrun c10d rendezvous endpoint shared by the nodes (needed with --nnodes > 1; "
                                            "under srun: the job's first node and a port from its job id, under "
                                            "Kubeflow: PET_MASTER_ADDR:PET_MASTER_PORT)")

    @classmethod
    def from_namespace(cls, namespace, **given) -> RunOptions:
        """From parsed arguments (argparse's namespace or pytest's config.option)."""
        values = {f.name: getattr(namespace, f.name) for f in fields(cls) if hasattr(namespace, f.name)}
        return cls(**{k: v for k, v in (values | given).items() if v is not None})


def add_run_options(add: Callable) -> None:
    """Declare the run options, once for `gnnbench run` and `pytest suites/`, through `add(flag, **kwargs)`:
    argparse's add_argument or pytest's addoption."""
    for f in fields(RunOptions):
        if f.metadata:
            add("--" + f.name.replace("_", "-"), **f.metadata)


# --- what a finished cell leaves ---------------------------------------------------------------

class Journal:
    """One JSON line per finished cell, fsync'd as each cell ends, the journal locked by its run; first
    a `selected` line, so that `--resume` finishes that run's cells and not the whole suite."""

    def __init__(self, path: Path, suite: str):
        self.path, self.suite, self._file = path, suite, None
        self._selection: dict | None = None  # written before the first cell's line

    def select(self, cells: list[Cell], expression: str | None) -> None:
        """The run's selection, journalled with its first cell (after pytest's own selection)."""
        self._selection = {"suite": self.suite, "selected": [c.id for c in cells], "select": expression}

    def claim(self, fresh: bool) -> None:
        """Lock the journal for this run; `fresh` empties what an earlier run left there."""
        self._file = open(self.path, "a")
        try:
            fcntl.flock(self._file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._file.close()
            raise SessionError(f"{self.path}: another gnnbench run is writing this journal and its result "
                               "file; wait for it, or give this run another result file") from None
        if fresh:
            self._file.truncate(0)

    def close(self) -> None:
        """Unlock the journal (the process's end does it too)."""
        if self._file is not None:
            self._file.close()
            self._file = None

    def append(self, done: Finished, cell: Cell) -> None:
        if self._selection is not None:
            self._file.write(json.dumps(self._selection) + "\n")
            self._selection = None
        line = {"suite": self.suite, "id": done.cell_id, "status": done.status, "reason": done.reason,
                "entry": done.entry, "cell_digest": cell.digest}  # what it ran with: a resume after an edit re-runs it
        self._file.write(json.dumps(line) + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())

    def read(self, cells: list[Cell], say: Callable[..., None] = print) -> dict[str, Finished]:
        """The cells an interrupted run finished, less those whose digest changed since (they run again)."""
        known = {c.id: c for c in cells}
        finished, changed = {}, []  # cell id -> Finished; the ids that run again
        for where, suite, done, digest in read_journal(self.path)[0]:
            if suite != self.suite:
                raise SessionError(f"{where}: a cell of suite {suite!r}, not {self.suite!r}")
            if done.cell_id not in known:
                raise SessionError(f"{where}: cell {done.cell_id!r} is not a cell of suite {self.suite!r} "
                                   "as it is now (the suite file changed since the run?)")
            if digest != known[done.cell_id].digest:
                changed.append(done.cell_id)
                finished.pop(done.cell_id, None)
                continue
            finished[done.cell_id] = done
        if changed:
            say(f"resume: {len(changed)} finished cell(s) run again: their settings or dataset changed since "
                f"(or the journal predates settings digests): {', '.join(dict.fromkeys(changed))}")
        return finished


def journal_selection(path: Path) -> tuple[list[str], str | None] | None:
    """The cell ids a journal's run selected and its -k expression, or None (every cell was selected)."""
    return read_journal(path)[1]


def read_journal(path: Path) -> tuple[list[tuple], tuple[list[str], str | None] | None]:
    """A journal's finished cells as (FILE:LINE, suite, cell, digest), in order, and its run's selection
    (journal_selection). A torn last line (a run killed while writing it) is dropped; any other bad
    line is an error naming it."""
    try:
        lines = Path(path).read_text().splitlines()
    except UnicodeDecodeError:
        raise SessionError(f"{path}: not a journal (not UTF-8 text)") from None
    except OSError as exc:
        raise SessionError(f"{path}: cannot read the journal ({exc.strerror or exc})") from None
    out, selection = [], None
    for number, text in enumerate(lines, 1):
        where = f"{path}:{number}"
        try:
            line = json.loads(text)
        except json.JSONDecodeError:
            if number == len(lines):
                continue  # the last line of a run killed while writing it: that cell runs again
            raise SessionError(f"{where}: not a journal line (invalid JSON)") from None
        if (isinstance(line, dict) and "id" not in line and isinstance(line.get("selected"), list)
                and all(isinstance(i, str) for i in line["selected"])):  # the run's selection, not a cell
            selection = line["selected"], line.get("select") if isinstance(line.get("select"), str) else None
            continue
        if (not isinstance(line, dict) or not isinstance(line.get("entry"), dict)
                or not isinstance(line.get("id"), str) or not isinstance(line.get("status"), str)):
            raise SessionError(f"{where}: not a journal line of this gnnbench (no 'id', 'status' and "
                               "'entry'); a journal written by an older version cannot be resumed or recovered")
        if line["status"] not in JOURNAL_STATUSES:
            raise SessionError(f"{where}: status {line['status']!r} is not one gnnbench writes; allowed: "
                               f"{', '.join(JOURNAL_STATUSES)}")
        done = Finished(line["id"], line["status"], line.get("reason") or "", line["entry"])
        out.append((where, line.get("suite"), done, line.get("cell_digest")))
    return out, selection


def check_launch(launch: Launch) -> None:
    """--nnodes, --node-rank and --rdzv-endpoint fit together."""
    if not 1 <= launch.nnodes <= 1024:
        raise SessionError(f"--nnodes {launch.nnodes}: allowed: 1 to 1024 machines")
    if not 0 <= launch.node_rank < launch.nnodes:
        raise SessionError(f"--node-rank {launch.node_rank}: allowed: 0 to {launch.nnodes - 1} "
                           f"(this machine's index among --nnodes {launch.nnodes})")
    if launch.nnodes > 1 and not launch.rdzv_endpoint:
        raise SessionError("--nnodes > 1 needs --rdzv-endpoint HOST:PORT (the same on every node)")
    if launch.rdzv_endpoint:
        host, colon, port = launch.rdzv_endpoint.rpartition(":")
        if not (host and colon and port.isdigit() and 1 <= int(port) <= 65535):
            raise SessionError(f"--rdzv-endpoint {launch.rdzv_endpoint!r}: not HOST:PORT; allowed: a host name "
                               "or address, a colon, a port from 1 to 65535")


def journal_of(result_path: Path) -> Path:
    return result_path.with_name(result_path.name.removesuffix(".json") + JOURNAL_SUFFIX)


def result_of_journal(journal: Path, where: str, hint: str) -> Path:
    """SUITE-STAMP.json beside SUITE-STAMP.cells.jsonl; `where` names the input in the error, `hint` the fix."""
    journal = Path(journal)
    if not journal.name.endswith(JOURNAL_SUFFIX):
        raise SessionError(f"{where}: {hint}")
    return journal.with_name(journal.name.removesuffix(JOURNAL_SUFFIX) + ".json")


# --- the session -------------------------------------------------------------------------------

class Session:
    def __init__(self, options: RunOptions, say: Callable[..., None] = functools.partial(print, flush=True), select: str | None = None):
        """`select`: a -k expression, checked before any file is made (no match: SessionError)."""
        self.options, self.say = options, say
        self.suite, self.suite_path = suite_mod.load(options.suite)
        plan = run_plan.make(self.suite, options, select, say)
        self.suite, self.cells, self.selected, self.baseline = plan.suite, plan.cells, plan.selected, plan.baseline
        self.pairing, self.not_run = plan.pairing, plan.not_run
        self.cache = cache_dir(options.cache_dir, writable=True)
        sweep_stale(self.cache, say=say)  # what a killed prepare or store build left in the cache
        cell_scratch.sweep(say=say)  # and the scratch folders (TMPDIRs) of cells a killed run left
        if options.data_root:
            inputs.folder(f"--data-root {options.data_root}", options.data_root, writable=False)
        root = options.data_root or os.environ.get("GNNBENCH_DATA_ROOT")
        self.data_root = Path(root) if root else None
        try:  # srun or a Kubeflow pod: the node count, rank and endpoint come from their variables
            nnodes, node_rank, endpoint, self.cluster = cluster_env.resolve(options.nnodes, options.node_rank,
                                                                            options.rdzv_endpoint)
        except cluster_env.ClusterEnvError as exc:
            raise SessionError(str(exc)) from None
        self.launch = Launch(nnodes, node_rank, endpoint)
        check_launch(self.launch)
        if self.cluster:
            say(f"{self.cluster.scheduler}: node {node_rank} of {nnodes}"
                + (f" ({', '.join(self.cluster.nodes)})" if self.cluster.nodes else "")
                + (f", rendezvous at {endpoint}" if endpoint else ""))
        self.preparation = Preparation(self.cache, self.data_root, nnodes, options.no_install, say,
                                       run_stacks=options.stack)
        self.check_user_graphs()
        self.started_at = dt.datetime.now(dt.timezone.utc)
        self.commit_at_start = record.commit_info()  # the code the cells run with (record.commit_info)
        self.finished: dict[str, Finished] = {}
        self.resumed_from: list[str] = []
        if options.resume:
            journal = Path(options.resume)
            if not journal.is_file():
                raise SessionError(f"--resume {journal}: no such journal")
            self.result_path = result_of_journal(journal, f"--resume {journal}",
                                                 f"expected the {JOURNAL_SUFFIX} journal of a run")
            self.journal = Journal(journal, self.suite.name)
            self.keep_the_runs_selection(journal)
            self.finished = self.journal.read(self.cells, say)
            self.resumed_from = [str(journal)]
            if options.results:  # a resume completes the run's own result file, where its journal is
                say(f"--results {options.results} is not used with --resume: the result is written beside the "
                    f"journal, as {self.result_path}")
        try:
            if not options.resume:
                self.result_path = Path(options.output) if options.output else unclaimed_result_path(
                    Path(options.results or default_results_dir()), f"{self.suite.name}-{self.started_at:%Y%m%dT%H%M%SZ}")
                self.journal = Journal(journal_of(self.result_path), self.suite.name)
                self.journal.select(self.selected, select)
            self.result_path.parent.mkdir(parents=True, exist_ok=True)
            self.journal.claim(fresh=not options.resume)
        except OSError as exc:
            where = exc.filename or self.result_path.parent
            raise SessionError(f"{where}: cannot write results there ({exc.strerror or exc}); "
                               "give a writable folder with --results") from None
        self.executor = Executor(self.selected, self.baseline, self.suite.name, self.suite.requires == "gpu", self.cache,
                                 self.launch, self.preparation, self.journal, say, self.finished)
        self.gpu_refusal, self.node_refusal = self.executor.gpu_refusal, self.executor.node_refusal
        self.written_to: Path | None = None  # where write() put the result file
        self.write_problem: str | None = None  # why it is not where it was asked for, if so
        self._ceilings: dict | None = None
        self._groups: dict[str, tuple[list[Cell], list[paired.Pair]]] | None = None  # cell id -> its group, pairs

    def check_user_graphs(self) -> None:
        """A user's own graph, checked and converted before any cell starts: a bad file is one error."""
        for name, spec in {c.dataset: c.dataset_spec for c in self.selected}.items():
            if not reads_user_files(spec):
                continue
            stack = self.preparation.building_stack(spec)
            if stack and (problem := self.preparation.ensure_stack(stack)):
                raise SessionError(f"dataset {name!r} ({spec['source']}) is read in the {stack} stack: {problem}")
            self.say(f"checking dataset {name} ({spec['source']}:{spec['params'].get('path')}) ...")
            try:
                self.preparation.dataset(name, spec)
            except DatasetError as exc:
                raise DatasetError(f"dataset {name!r} ({spec['source']}): {exc}") from None

    # --- which cells ---------------------------------------------------------------------------

    def keep_only(self, cell_ids: set[str]) -> None:
        """The cells pytest kept after its own selection (-k, deselection), in suite order."""
        self.selected = [c for c in self.cells if c.id in cell_ids]
        self.executor.selected = self.selected
        if not self.options.resume:
            self.journal.select(self.selected, None)

    def keep_the_runs_selection(self, journal: Path) -> None:
        """A resume finishes the cells its run selected (a -k given now narrows them further)."""
        if (selection := journal_selection(journal)) is None:
            return
        ids, expression = selection
        known = {c.id for c in self.cells}
        if missing := [i for i in ids if i not in known]:
            raise SessionError(f"--resume {journal}: the run selected {len(missing)} cell(s) that this suite, with the "
                               f"options given now, does not have (e.g. {missing[0]!r}): resume with the run's own "
                               "--stack and --mode options, and its suite file as it was")
        self.selected = [c for c in self.selected if c.id in ids]
        self.say(f"resume: the run's own selection, {len(ids)} cell(s)" + (f" (-k {expression!r})" if expression else ""))

    # --- running -------------------------------------------------------------------------------

    def run(self) -> Path:
        """Every selected cell, then the result file (also when interrupted: what finished is kept)."""
        try:
            for cell in self.selected:
                self.result_of(cell)
        finally:
            self.write()
        return self.result_path

    def result_of(self, cell: Cell) -> Finished:
        """A finished cell: from the journal being resumed, else measured now (with its group, if paired)."""
        if cell.id in self.finished:
            done = self.finished[cell.id]
            if cell.id not in self.executor.ran_now:
                self.say(f"\n{self.executor.position(cell)}\n  -> {done.status} "
                         f"(kept from {self.journal.path.name})")
            return done
        if (group := self.groups().get(cell.id)) is not None:  # the scheduler of cells in turns
            paired.run_group(self.executor, self.pairing, *group)
            return self.finished[cell.id]
        return self.executor.run_one(cell)

    def groups(self) -> dict[str, tuple[list[Cell], list[paired.Pair]]]:
        """Each paired cell's group and the group's pairs, over the cells selected (taken once)."""
        if self._groups is None:
            self._groups = {}
            if self.pairing is not None:
                pairs = paired.pairs_of(self.selected, self.pairing.by)
                # with `runner`, every cell takes turns, with its twin at least
                for group in paired.groups_of(self.selected, pairs, alone=paired.RUNNER in self.pairing.by):
                    ids = [c.id for c in group]
                    self._groups.update(dict.fromkeys(ids, (group, [p for p in pairs if p.first in ids])))
        return self._groups

    # --- the result file -----------------------------------------------------------------------

    def document(self) -> dict:
        """The result file's content: the selected cells finished so far, in suite order."""
        done = [self.finished[c.id] for c in self.selected if c.id in self.finished]
        meta = {"suite": self.suite.name, "suite_file": str(self.suite_path), "description": self.suite.description,
                "baseline": self.baseline, "cells": [c.id for c in self.selected],
                "started_at": self.started_at.isoformat()}
        # --stack replaced the suite's stack axis; what an option left without a cell; the journal resumed
        meta.update({key: value for key, value in (("stacks_given", list(self.options.stack or [])),
                                                   ("backends_not_run", self.not_run),
                                                   ("resumed_from", self.resumed_from)) if value})
        if self.pairing is not None:
            meta["paired"] = {**self.pairing.model_dump(), "method": "launches"}
            meta["pairs"] = record.run_pairs(done)
        return record.document(done, meta, ceilings=self.ceilings() if done else None,
                               commit_at_start=self.commit_at_start)

    def ceilings(self) -> dict:
        """The machine's ceilings for this run's datasets, probed once after its cells (the probe evicts
        files from the page cache)."""
        if self._ceilings is None:
            self._ceilings = (ceilings.for_run(self.cache, self.preparation.folders())
                              if any(d.measured for d in self.finished.values())  # else no reason to probe
                              else {"usable_cores": usable_cores(), "notes": ["ceilings not measured: no cell ran"]})
        return self._ceilings

    def write(self) -> Path:
        """Write the result file whole or not at all; where that fails, to a rescue folder, and as a last
        resort to stdout: what was measured is never lost. `write_problem` says why, if not where asked."""
        text = json.dumps(self.document(), indent=4)
        problem = None
        for path in [self.result_path, *(folder / self.result_path.name for folder in rescue_folders())]:
            try:
                self.written_to = write_whole(path, text)
            except OSError as exc:
                problem = problem or f"could not write {self.result_path} ({exc.strerror or exc})"
                continue
            if problem:
                self.write_problem = f"{problem}; the result file is at {self.written_to} instead"
            return self.written_to
        self.write_problem = f"{problem}, nor in {', '.join(map(str, rescue_folders()))}; it follows on stdout"
        print(text, flush=True)
        return self.result_path


def write_whole(path: Path, text: str) -> Path:
    """Write a file whole or not at all (written aside, fsync'd, renamed over it)."""
    partial = path.with_name(path.name + ".partial")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(partial, "w") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        partial.replace(path)
    except BaseException:
        with contextlib.suppress(OSError):
            partial.unlink(missing_ok=True)  # the previous file, if any, stays whole
        raise
    return path


def rescue_folders() -> list[Path]:
    """Where a result file goes when its own folder cannot take it (likely another filesystem)."""
    return [cache_root() / "rescued", Path(tempfile.gettempdir()) / "gnnbench-rescued"]


def unclaimed_result_path(folder: Path, stem: str) -> Path:
    """SUITE-STAMP.json, or SUITE-STAMP-2.json...: the first run to create a name's journal owns the name."""
    folder.mkdir(parents=True, exist_ok=True)
    for n in range(1, 1000):
        path = folder / (f"{stem}.json" if n == 1 else f"{stem}-{n}.json")
        with contextlib.suppress(FileExistsError):
            os.close(os.open(journal_of(path), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))  # data, not a program
            return path
    raise SessionError(f"{folder}: 999 runs named {stem}; choose another --results folder")
