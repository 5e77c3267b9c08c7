"""The pytest front door: `pytest suites/ --benchmark-only [--suite NAME|PATH]`.

Every cell of the suite becomes one parametrised test. The test runs the cell in its stack
(bench.run.runner), hands the measured epoch times to pytest-benchmark (bench.run.replay), and puts our
own metrics into `extra_info`. Cells that were skipped, failed or timed out become pytest
skips / xfails with their reason, and the top-level `unmeasured` array of the result file.
Each finished cell is also appended to a journal beside the result file at once, so a run that
dies half-way keeps what it measured.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import shutil
import subprocess
from pathlib import Path

import psutil
import pytest

from bench import __version__, stores
from bench.run import replay, stacks, suite as suite_mod
from bench.backends import BACKENDS
from bench.datasets import SOURCES
from bench.datasets.hub import DatasetError
from bench.paths import cache_root, default_results_dir
from bench.publish.results import SCHEMA_VERSION, add_scaling, extra_info
from bench.datasets import memory
from bench.run.runner import Launch, Outcome, dataset_stats, ensure_dataset, run_cell


def pytest_addoption(parser):
    group = parser.getgroup("gnnbench")
    group.addoption("--suite", default="smoke", help="suite name in suites/ or a YAML path (default: smoke)")
    group.addoption("--results", default=None, metavar="DIR",
                    help="folder for the result JSON when --benchmark-json is not given (default: results/runs)")
    group.addoption("--data-root", default=os.environ.get("GNNBENCH_DATA_ROOT"), metavar="DIR",
                    help="where raw dataset files are looked for (env GNNBENCH_DATA_ROOT)")
    group.addoption("--cache-dir", default=None, metavar="DIR",
                    help="dataset hub folder (env GNNBENCH_CACHE; default: the user cache dir)")
    group.addoption("--no-install", action="store_true",
                    help="do not install missing stacks; their cells are recorded as failed")
    group.addoption("--nnodes", type=int, default=1,
                    help="machines that run each cell together (each runs the same command)")
    group.addoption("--node-rank", type=int, default=0, help="this machine's index among --nnodes")
    group.addoption("--rdzv-endpoint", default=None, metavar="HOST:PORT",
                    help="torchrun c10d rendezvous endpoint shared by the nodes (needed with --nnodes > 1)")


class RunSession:
    def __init__(self, config):
        self.config = config
        try:
            self.suite, self.suite_path = suite_mod.load(config.getoption("suite"))
        except suite_mod.SuiteError as exc:
            raise pytest.UsageError(str(exc)) from None
        self.cells = suite_mod.expand(self.suite)
        self.baseline = self.suite.baseline or (self.cells[0].id if self.cells else None)
        cache = config.getoption("cache_dir")
        self.cache = Path(cache) if cache else cache_root()
        root = config.getoption("data_root")
        self.data_root = Path(root) if root else None
        self.started_at = dt.datetime.now(dt.timezone.utc)
        if not config.getoption("benchmark_json"):
            stamp = self.started_at.strftime("%Y%m%dT%H%M%SZ")
            results = Path(config.getoption("results") or default_results_dir())
            results.mkdir(parents=True, exist_ok=True)
            config.option.benchmark_json = results / f"{self.suite.name}-{stamp}.json"
        self.json_path = Path(config.option.benchmark_json)
        self.journal = self.json_path.with_suffix(".cells.jsonl")
        self.outcomes: list[Outcome] = []
        self.datasets: dict[str, Path | Exception] = {}
        self.stack_errors: dict[str, str] = {}
        self.capture = config.pluginmanager.getplugin("capturemanager")
        self.launch = Launch(config.getoption("nnodes"), config.getoption("node_rank"),
                             config.getoption("rdzv_endpoint"))
        if self.launch.nnodes > 1 and not self.launch.rdzv_endpoint:
            raise pytest.UsageError("--nnodes > 1 needs --rdzv-endpoint HOST:PORT (the same on every node)")

    def say(self, text: str, end: str = "\n") -> None:
        with self.capture.global_and_fixture_disabled():
            writer = self.config.get_terminal_writer()
            writer.write(text + end, flush=True)

    def ensure_stack(self, name: str) -> str | None:
        if name in self.stack_errors or stacks.get(name).installed:
            return self.stack_errors.get(name)
        if self.config.getoption("no_install"):
            self.stack_errors[name] = f"stack {name!r} is not installed (gnnbench stacks install {name})"
        else:
            try:
                stacks.install(name, log=lambda line: self.say(f"  {line}"))
            except stacks.StackError as exc:
                self.stack_errors[name] = str(exc)
        return self.stack_errors.get(name)

    def dataset(self, cell) -> Path:
        if cell.dataset not in self.datasets:
            self.say(f"  preparing dataset {cell.dataset} ...")
            try:
                self.datasets[cell.dataset] = ensure_dataset(cell.dataset_spec, self.cache, self.data_root)
            except DatasetError as exc:
                self.datasets[cell.dataset] = exc
        found = self.datasets[cell.dataset]
        if isinstance(found, Exception):
            raise found
        return found

    def measure(self, cell) -> Outcome:
        index = len(self.outcomes) + 1
        self.say(f"\n[{index}/{len(self.cells)}] {cell.id}")
        outcome = self.precheck(cell)
        if outcome is None:
            outcome = run_cell(cell, self.dataset(cell), self.cache, on_progress=self._show_epoch,
                               launch=self.launch)
        self.say(f"\r  -> {outcome.status}"
                 + (f": {outcome.reason.splitlines()[0]}" if outcome.reason else f" in {outcome.wall_s:.1f} s"))
        self.outcomes.append(outcome)
        with open(self.journal, "a") as journal:  # survives a crash of this process
            journal.write(json.dumps({"id": cell.id, "status": outcome.status, "reason": outcome.reason,
                                      "extra_info": extra_info(outcome) if outcome.status == "ok" else None}) + "\n")
        return outcome

    def precheck(self, cell) -> Outcome | None:
        """What stops a cell before it starts: a stack that is not there (the cell's own, or the
        one its dataset is prepared in), too little memory, a dataset that cannot be prepared."""
        for stack in filter(None, (cell.stack, SOURCES[cell.dataset_spec["source"]][1])):
            problem = self.ensure_stack(stack)
            if problem:
                return Outcome(cell, "failed", problem)
        refused = self.refusal(cell)
        if refused:
            return Outcome(cell, "refused", refused)
        try:
            dataset_dir = self.dataset(cell)
        except DatasetError as exc:
            return Outcome(cell, "failed", f"dataset: {exc}")
        try:
            stores.prepare(cell.settings["store"], dataset_dir, BACKENDS[cell.backend].task, say=self.say)
        except Exception as exc:  # noqa: BLE001 - any failed build is this cell's failure, recorded
            return Outcome(cell, "failed", f"store: {type(exc).__name__}: {exc}")
        return None

    def refusal(self, cell) -> str | None:
        """Refuse, with the numbers, a cell that cannot fit in the memory available now."""
        try:
            stats = dataset_stats(cell.dataset_spec, self.cache)
        except DatasetError:
            return None  # preparing the dataset will report what is wrong
        local_ranks = max(1, cell.settings["world_size"] // self.launch.nnodes)
        need = memory.estimate(stats, cell.backend, local_ranks, cell.settings["store"])
        return memory.refusal(need["total_bytes"], psutil.virtual_memory().available,
                              f"{local_ranks} rank(s) of {cell.backend} on {cell.dataset}")

    def _show_epoch(self, event: dict) -> None:
        kind = "warm-up" if event.get("warmup") else "epoch"
        self.say(f"\r  {kind} {event['epoch']}/{event['of']}: {event['seconds']:.3f} s   ", end="")

    def unmeasured(self) -> list[dict]:
        return [{"id": o.cell.id, "status": o.status, "reason": o.reason, "backend": o.cell.backend,
                 "dataset": o.cell.dataset, "settings": o.cell.settings}
                for o in self.outcomes if o.status != "ok"]


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    # tryfirst: the result path must be set before pytest-benchmark reads --benchmark-json
    config._gnnbench = RunSession(config)


def pytest_generate_tests(metafunc):
    if "cell" in metafunc.fixturenames:
        cells = metafunc.config._gnnbench.cells
        metafunc.parametrize("cell", cells, ids=[c.id for c in cells])


def pytest_collection_modifyitems(config, items):
    for item in items:
        cell = getattr(item, "callspec", None) and item.callspec.params.get("cell")
        if cell is not None:
            item.add_marker(pytest.mark.benchmark(timer=replay.clock, group=cell.dataset,
                                                  disable_gc=False, warmup=False))


@pytest.fixture
def gnnbench(request) -> RunSession:
    return request.config._gnnbench


def benchmark_cell(session: RunSession, cell, benchmark) -> None:
    outcome = session.measure(cell)
    if outcome.status in ("skipped", "refused", "follower"):
        pytest.skip(f"{outcome.status}: {outcome.reason}")
    if outcome.status != "ok":
        pytest.xfail(f"{outcome.status}: {outcome.reason.strip()[-500:]}")
    durations = [epoch["seconds"] for epoch in outcome.record["epochs"]]
    benchmark.extra_info.update(extra_info(outcome, baseline=session.baseline))
    benchmark.pedantic(replay.next_round, setup=None, rounds=replay.load(durations), iterations=1)


def pytest_benchmark_update_machine_info(config, machine_info):
    installed = {name: stacks.recorded_versions(s) for name, s in stacks.available().items() if s.installed}
    machine_info["gnnbench"] = {
        "version": __version__,
        "stacks": installed,
        "cpu_count_logical": psutil.cpu_count(),
        "cpu_count_physical": psutil.cpu_count(logical=False),
        "memory_total_bytes": psutil.virtual_memory().total,
        "kernel": platform.release(),
        "gpu": gpu_info(),
        "container_image": os.environ.get("GNNBENCH_IMAGE"),
        "container_revision": os.environ.get("GNNBENCH_REVISION"),
    }


def gpu_info() -> dict | None:
    if shutil.which("nvidia-smi") is None:
        return None
    query = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                            "--format=csv,noheader"], capture_output=True, text=True)
    topo = subprocess.run(["nvidia-smi", "topo", "-m"], capture_output=True, text=True)
    return {"gpus": [line.strip() for line in query.stdout.splitlines() if line.strip()],
            "topology": topo.stdout if topo.returncode == 0 else None}


def pytest_benchmark_update_json(config, benchmarks, output_json):
    session: RunSession = config._gnnbench
    add_scaling(output_json["benchmarks"])
    output_json["gnnbench"] = {
        "schema_version": SCHEMA_VERSION,
        "suite": session.suite.name,
        "suite_file": str(session.suite_path),
        "description": session.suite.description,
        "baseline": session.baseline,
        "cells": [c.id for c in session.cells],
        "started_at": session.started_at.isoformat(),
    }
    output_json["unmeasured"] = session.unmeasured()


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session):
    """pytest-benchmark writes no file when no cell was measured; a run whose cells all failed
    or were refused is still a result, so write the same file through pytest-benchmark's hooks."""
    run: RunSession = session.config._gnnbench
    written_now = run.json_path.exists() and run.json_path.stat().st_mtime >= run.started_at.timestamp()
    if written_now or not run.outcomes:
        return
    hook = session.config.hook
    machine_info = hook.pytest_benchmark_generate_machine_info(config=session.config)
    hook.pytest_benchmark_update_machine_info(config=session.config, machine_info=machine_info)
    commit_info = hook.pytest_benchmark_generate_commit_info(config=session.config)
    output = hook.pytest_benchmark_generate_json(config=session.config, benchmarks=[], include_data=True,
                                                 machine_info=machine_info, commit_info=commit_info)
    hook.pytest_benchmark_update_json(config=session.config, benchmarks=[], output_json=output)
    run.json_path.write_text(json.dumps(output, indent=4))
