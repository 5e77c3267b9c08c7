from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from bench import stacks
from tests.nightly import NIGHTLY

REPO = Path(__file__).resolve().parents[1]

# The tests never download: a dataset they need is made by the tests or read from a data root.
os.environ["GNNBENCH_OFFLINE"] = "1"


# Folders of results/ that hold no committed suite run: runs/ (your own runs, uncommitted),
# fidelity/ (`gnnbench fidelity` comparisons) and convert/ (the conversion benchmark of a user's
# graph); the Makefile's RESULTS leaves the same out.
NOT_SUITE_RUNS = ("runs", "fidelity", "convert")
CALIBRATION_SUMMARY = ".calibration.json"  # `gnnbench calibrate`'s rates beside its result files: not a result


def committed_results() -> list[Path]:
    """The committed suite result files (what `make site` and `make results-readme` render)."""
    return sorted(p for p in REPO.glob("results/*/*.json") if p.parent.name not in NOT_SUITE_RUNS
                  and not p.name.endswith(CALIBRATION_SUMMARY))


def tiny_pair_suite(name: str, include: str) -> str:
    """A suite of one tiny synthetic graph with both node backends, one rank, 0 workers: the cells
    `gnnbench fidelity` (and its --clocks) measure; `include` adds cells (YAML list items)."""
    return f"""
name: {name}
datasets:
  tiny: {{source: synthetic, params: {{scale: 9, edge_factor: 4, feature_dim: 8, num_classes: 3, seed: 1}}}}
backends: [pyg-neighbor, dgl-graphbolt]
settings: {{num_workers: 0, mode: cpu-cpu, batch_size: 64, fanout: [4, 2], epochs: 2, warmup_epochs: 1,
           model: sage, hidden: 8, timeout: 300}}
include:
{include}"""


def require_stacks(*names: str) -> None:
    """Stack tests need the installed stacks. Under CI they are installed by .ci/run, so a
    missing stack there is a failure, not a skip."""
    missing = [n for n in names if not stacks.get(n).installed]
    if missing:
        message = f"stacks not installed: {', '.join(missing)} (gnnbench stacks install {' '.join(missing)})"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


def offline_data_root() -> Path:
    """The offline Planetoid copies (GNNBENCH_DATA_ROOT; `make test` points it at
    ../shared/datasets/planetoid). Absent on a machine without them: skipped there, a failure
    under CI, which has them."""
    root = os.environ.get("GNNBENCH_DATA_ROOT")
    if not root or not (Path(root) / "Cora" / "raw").is_dir():
        message = (f"GNNBENCH_DATA_ROOT ({root or 'not set'}) holds no Cora/raw: point it at a folder "
                   "with the Planetoid raw files")
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return Path(root)


@pytest.fixture
def write_suite(tmp_path):
    def write(text: str, name: str = "suite.yaml") -> Path:
        path = tmp_path / name
        path.write_text(text)
        return path
    return write


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory) -> Path:
    """A dataset hub private to this test session (the stacks stay in the shared stacks dir)."""
    return tmp_path_factory.mktemp("hub")


def run_suite(suite: Path, out: Path, cache_dir: Path, *options: str, env: dict | None = None, timeout: int = 900):
    """Run a suite through the front door users take: `pytest suites/ --benchmark-only`."""
    cmd = [sys.executable, "-m", "pytest", str(REPO / "suites"), "--benchmark-only", "--suite", str(suite),
           "--benchmark-json", str(out), "--cache-dir", str(cache_dir), "--no-install",
           "-p", "no:cacheprovider", "-rsx", *options]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, env={**os.environ, **(env or {})},
                          timeout=timeout)
    print(proc.stdout[-6000:], proc.stderr[-3000:])
    return proc


def run_suite_text(text: str, folder: Path, cache_dir: Path, *options: str, name: str = "suite",
                   env: dict | None = None, timeout: int = 900):
    """Write a suite's YAML into `folder` and run it (run_suite); returns (process, result path)."""
    suite = Path(folder) / f"{name}.yaml"
    suite.write_text(text)
    out = Path(folder) / f"{name}.json"
    return run_suite(suite, out, cache_dir, *options, env=env, timeout=timeout), out


def processes_with(variable: str, marker: str) -> list[psutil.Process]:
    """The processes whose environment variable `variable` contains `marker`: how the tests find
    what a run left behind (each run gives its processes a unique hub folder or fault token)."""
    found = []
    for proc in psutil.process_iter():
        try:
            if marker in proc.environ().get(variable, ""):
                found.append(proc)
        except psutil.Error:
            continue
    return found


def nightly_key(nodeid: str) -> str | None:
    """The NIGHTLY key naming this test (its id, or a prefix: its file or its unparametrized name)."""
    for key in NIGHTLY:
        if nodeid == key or nodeid.startswith(key + "::") or nodeid.startswith(key + "["):
            return key
    return None


def pytest_collection_modifyitems(config, items):
    """Marks the tests tests/nightly.py names with `nightly` (make test deselects them); a key that
    names no test of a collected file is an error, so a renamed test cannot slip back into make test."""
    used, files = set(), {item.nodeid.split("::")[0] for item in items}
    for item in items:
        key = nightly_key(item.nodeid)
        if key:
            item.add_marker(pytest.mark.nightly)
            used.add(key)
    if any("::" in str(arg) for arg in config.args):
        return  # single tests named on the command line: the others are not collected
    stale = [k for k in NIGHTLY if not (REPO / k.split("::")[0]).exists() or (k.split("::")[0] in files and k not in used)]
    if stale:
        raise pytest.UsageError(f"tests/nightly.py names tests that do not exist: {', '.join(stale)}")
