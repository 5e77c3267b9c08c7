"""The pytest entry: `pytest suites/ --benchmark-only [--suite NAME|PATH]`.

It drives the same session as `gnnbench run`, one parametrised test per selected cell; each test
hands its cell's epochs to pytest-benchmark as its rounds (so its table, --benchmark-compare and
--benchmark-save work as usual); a cell without a number is a skip or an xfail with its reason.
The result file is the session's, written when pytest ends; `--benchmark-json PATH` names it."""

from __future__ import annotations

import pytest

from bench.run import suite as suite_mod
from bench.inputs import InputError, check_environment, terminal_safe
from bench.datasets.ready import DatasetError
from bench.run.session import RunOptions, Session, SessionError, add_run_options


def pytest_addoption(parser):
    group = parser.getgroup("gnnbench")
    group.addoption("--suite", default="smoke", help="suite name in suites/ or a YAML path (default: smoke)")
    add_run_options(group.addoption)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    # tryfirst: the result file is the session's; pytest-benchmark must not write its own there
    output = config.getoption("benchmark_json", None)
    try:
        check_environment()
        config._gnnbench = Session(RunOptions.from_namespace(config.option, output=output),
                                   say=lambda text, end="\n": _say(config, text, end))
    except (suite_mod.SuiteError, SessionError, InputError, DatasetError) as exc:  # DatasetError: a user's graph
        raise pytest.UsageError(str(exc)) from None
    config.option.benchmark_json = None


def _say(config, text: str, end: str) -> None:
    text = terminal_safe(text)  # as `gnnbench` prints every line (bench/cli.py)
    if config.pluginmanager.get_plugin("terminalreporter") is None:
        # said while configuring (the session's notes, e.g. --mode/--stack), before pytest's writer exists
        print(text, end=end, flush=True)
        return
    with config.pluginmanager.getplugin("capturemanager").global_and_fixture_disabled():
        config.get_terminal_writer().write(text + end, flush=True)


def pytest_generate_tests(metafunc):
    if "cell" in metafunc.fixturenames:
        cells = metafunc.config._gnnbench.cells
        metafunc.parametrize("cell", cells, ids=[c.id for c in cells])


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """After pytest's own selection (-k, -m): the cells that will run are the session's."""
    cells = {item: item.callspec.params["cell"] for item in items
             if getattr(item, "callspec", None) and "cell" in item.callspec.params}
    config._gnnbench.keep_only({cell.id for cell in cells.values()})
    for item, cell in cells.items():
        item.add_marker(pytest.mark.benchmark(group=cell.dataset, warmup=False))


@pytest.fixture
def gnnbench(request) -> Session:
    return request.config._gnnbench


def benchmark_cell(session: Session, cell, benchmark) -> None:
    done = session.result_of(cell)
    if done.status in ("skipped", "refused", "follower"):
        pytest.skip(f"{done.status}: {done.reason}")
    if not done.measured:
        pytest.xfail(f"{done.status}: {done.reason.strip()[-500:]}")
    # the epochs become the benchmark's rounds through the statistics object `pedantic` uses: there is
    # no public call for rounds timed elsewhere (pytest-benchmark 5.x, pinned in pyproject.toml)
    rounds = benchmark._make_stats(1)
    for value in done.epochs:
        rounds.update(value)
    benchmark._mode = "gnnbench: epochs measured in the cell's worker"  # the fixture was used
    benchmark.extra_info.update(done.entry["extra_info"])


def pytest_benchmark_update_json(config, benchmarks, output_json):
    """A file pytest-benchmark saves itself holds the session's document."""
    output_json.clear()
    output_json.update(config._gnnbench.document())


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session):
    run: Session = getattr(session.config, "_gnnbench", None)
    if run is None:
        return
    written = run.write()
    run.say(f"\ngnnbench: {run.write_problem}" if run.write_problem else f"\nresults: {written}")
    if run.write_problem:
        session.exitstatus = 3  # as `gnnbench run`: the numbers are not where they were asked for
