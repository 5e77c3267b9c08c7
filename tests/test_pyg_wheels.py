"""PyG's wheel index first: the `pyg` and `pyg-dist` stacks take pyg-lib from GNNBENCH_PYG_WHEELS
(PyG's index for the stack's torch build, a mirror, a folder of wheels); where that gives none, the
`pyg` stack builds torch-sparse/torch-scatter and `pyg-dist` goes without, saying which and why.

The decision is tested directly (quick: an unreachable index answers at once); the real installs
run in a private stacks folder (tmp), never in the shared one. The pyg-lib path needs a pyg-lib
wheel for this machine's torch, which is not on PyPI and too slow to build in a test (about 20 min
on 2 cores): give a folder holding one in GNNBENCH_TEST_PYG_LIB_WHEELS, else that test is skipped
with that reason.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from bench import paths, stacks
from tests.conftest import REPO

UNREACHABLE = "http://127.0.0.1:9/whl/torch-{TORCH}+{CUDA}.html"  # the discard port: refused at once
WHEELS_ENV = "GNNBENCH_TEST_PYG_LIB_WHEELS"


def wheel(folder: Path, name: str = "pyg_lib", version: str = "0.9.0") -> Path:
    """A small pure-Python wheel, written as pip reads one (a zip with the module and its dist-info):
    what a folder of PyG's wheels holds, to pip, without the 20-minute build of a real pyg-lib."""
    folder.mkdir(parents=True, exist_ok=True)
    info = f"{name}-{version}.dist-info"
    files = {f"{name}/__init__.py": f"__version__ = {version!r}\n",
             f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name.replace('_', '-')}\nVersion: {version}\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    files[f"{info}/RECORD"] = "".join(f"{path},,\n" for path in [*files, f"{info}/RECORD"])
    path = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as whl:
        for member, text in files.items():
            whl.writestr(member, text)
    return path


@pytest.fixture
def private_stacks(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "stacks"
    monkeypatch.setenv("GNNBENCH_STACKS_DIR", str(folder))
    return folder


@pytest.fixture
def cpu_torch(monkeypatch):
    """The torch build a stack's interpreter would report, without one: 2.13.0 on CPU."""
    monkeypatch.setattr(stacks, "torch_build", lambda python: ("2.13.0", "cpu"))


def test_the_index_setting_is_filled_in_with_the_stacks_torch_build(monkeypatch):
    monkeypatch.delenv(paths.PYG_WHEELS_ENV, raising=False)
    assert stacks.pyg_wheels_url("2.13.0", "cpu") == "https://data.pyg.org/whl/torch-2.13.0+cpu.html"
    assert stacks.pyg_wheels_url("2.13.0", "cu130") == "https://data.pyg.org/whl/torch-2.13.0+cu130.html"
    monkeypatch.setenv(paths.PYG_WHEELS_ENV, "https://mirror.example/pyg/torch-{TORCH}+{CUDA}.html")
    assert stacks.pyg_wheels_url("2.13.0", "cu126") == "https://mirror.example/pyg/torch-2.13.0+cu126.html"
    monkeypatch.setenv(paths.PYG_WHEELS_ENV, "/srv/wheels")  # a folder, as it is
    assert stacks.pyg_wheels_url("2.13.0", "cpu") == "/srv/wheels"


def test_an_unreachable_index_falls_back_quickly_saying_the_url_and_why(monkeypatch, cpu_torch):
    monkeypatch.setenv(paths.PYG_WHEELS_ENV, UNREACHABLE)
    said: list[str] = []
    ran: list[list[str]] = []
    monkeypatch.setattr(stacks, "_run", lambda cmd, *a, **k: ran.append(cmd))
    started = time.monotonic()
    record = stacks.take_pyg_wheels(stacks.get("pyg"), ["pip", "install"], log=said.append)
    assert time.monotonic() - started < stacks.INDEX_TIMEOUT
    url = "http://127.0.0.1:9/whl/torch-2.13.0+cpu.html"
    assert record["source"] == stacks.FALLBACK and record["index"] == url and record["torch_build"] == "2.13.0+cpu"
    assert record["reason"].startswith(f"{url} cannot be reached: ") and "refused" in record["reason"]
    assert record["fallback"] == ["torch-scatter==2.1.2", "torch-sparse==0.6.18"]
    assert ran == []  # pip was not even asked
    message = said[-1]
    assert message.startswith(f"stack pyg: no pyg-lib: {url} cannot be reached: ")
    assert "building torch-scatter==2.1.2, torch-sparse==0.6.18 from source instead" in message
    versions = {"torch_sparse": "0.6.18", "torch_scatter": "2.1.2"}
    assert paths.sampler_summary(record, versions) == (
        f"torch-scatter 2.1.2, torch-sparse 0.6.18 built from source, as PyG's wheel index gave no pyg-lib: "
        f"{record['reason']}")


@pytest.mark.parametrize("stack", ["pyg", "pyg-dist"])
@pytest.mark.parametrize("folder", ["no-such-folder", "empty"])
def test_a_missing_or_empty_wheel_folder_is_an_error_naming_it(tmp_path, monkeypatch, cpu_torch, stack, folder):
    """A folder is the user's own word: a slip is said, not taken for a mirror without the wheel
    (which would build torch-sparse for 20 minutes, or leave pyg-dist without pyg-lib)."""
    wheels = tmp_path / folder
    if folder == "empty":
        wheels.mkdir()
        (wheels / "pyg_lib-0.9.0.tar.gz").write_text("")  # a source archive is no wheel
    monkeypatch.setenv(paths.PYG_WHEELS_ENV, f"file://{wheels}" if folder == "empty" else str(wheels))
    monkeypatch.setattr(stacks, "_run", lambda cmd, *a, **k: pytest.fail(f"pip was run: {cmd}"))
    with pytest.raises(stacks.StackError) as error:
        stacks.take_pyg_wheels(stacks.get(stack), ["pip", "install"], log=lambda line: None)
    why = "does not exist" if folder == "no-such-folder" else "holds no pyg-lib wheel (pyg_lib-*.whl)"
    assert str(error.value).startswith(f"{paths.PYG_WHEELS_ENV}={os.environ[paths.PYG_WHEELS_ENV]}: {wheels} {why}; ")
    assert "pyg-lib wheels for torch 2.13.0+cpu" in str(error.value)


def test_a_folder_without_a_fitting_wheel_falls_back_with_pips_words(tmp_path, monkeypatch, cpu_torch):
    """A folder holding a pyg-lib wheel whose tags fit, but not the version the pins ask: pip's own words."""
    wheels = tmp_path / "wheels"
    wheel(wheels, version="0.6.0")
    monkeypatch.setenv(paths.PYG_WHEELS_ENV, str(wheels))
    pip = [sys.executable, "-m", "pip", "install", "--dry-run", "--progress-bar", "off"]
    record = stacks.take_pyg_wheels(stacks.get("pyg"), pip, log=lambda line: None)
    assert record["source"] == stacks.FALLBACK
    assert record["reason"].startswith(f"{wheels} holds no pyg-lib>=0.7.0 wheel for torch 2.13.0+cpu and this Python (")
    assert "pyg-lib" in record["reason"].split("(", 1)[1]  # pip's own last line


def test_a_folder_of_wheels_is_taken_installed_and_recorded_as_the_samplers_source(tmp_path, monkeypatch, cpu_torch,
                                                                                 private_stacks):
    """pip really installs the folder's pyg_lib wheel into a fresh environment of the stack's, the
    import check really imports it there, and the record names the folder as the sampler's source."""
    wheels = tmp_path / "wheels"
    wheel(wheels)
    monkeypatch.setenv(paths.PYG_WHEELS_ENV, str(wheels))
    stack = stacks.get("pyg")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(stack.path)], check=True, timeout=120)
    pip = [sys.executable, "-m", "pip", "--python", str(stack.python), "install", "--progress-bar", "off"]
    said: list[str] = []
    record = stacks.take_pyg_wheels(stack, pip, log=said.append)
    assert record == {"index": str(wheels), "torch_build": "2.13.0+cpu", "wanted": ["pyg-lib>=0.7.0"],
                      "source": paths.PYG_INDEX}
    assert said[0] == f"stack pyg: pyg-lib>=0.7.0 from PyG's wheel index for torch 2.13.0+cpu: {wheels}"
    assert stacks.import_problem(stack.python, "pyg_lib") is None
    assert paths.sampler_summary(record, {"pyg_lib": "0.9.0"}) == f"pyg-lib 0.9.0 from {wheels}"


def write_stack(folder: Path, sampler: dict) -> None:
    folder.mkdir(parents=True)
    (folder / paths.COMPLETE_MARK).write_text(json.dumps({"requirements": "", "versions": {"torch": "2.13.0+cpu"},
                                                           "sampler": sampler}))


def test_a_stack_that_fell_back_is_rebuilt_only_once_the_index_answers(tmp_path, monkeypatch):
    stack = stacks.Stack("pyg", stacks.REQUIREMENTS_DIR / "requirements-pyg.txt")
    monkeypatch.setenv("GNNBENCH_STACKS_DIR", str(tmp_path / "stacks"))
    url = "http://127.0.0.1:9/whl/torch-2.13.0+cpu.html"
    reason = f"{url} cannot be reached: [Errno 111] Connection refused"
    write_stack(stack.path, {"source": stacks.FALLBACK, "index": url, "torch_build": "2.13.0+cpu", "reason": reason,
                             "fallback": stack.fallback_lines(), "summary": "torch-sparse ... from source"})
    monkeypatch.setenv(paths.PYG_WHEELS_ENV, UNREACHABLE)
    assert stacks.index_answers_now(stack) is None  # still unreachable: the stack is kept
    assert stacks.recorded_versions(stack) == {"torch": "2.13.0+cpu", "sampler_source": "torch-sparse ... from source"}
    wheels = tmp_path / "mirror"
    wheels.mkdir()
    monkeypatch.setenv(paths.PYG_WHEELS_ENV, str(wheels))
    assert stacks.index_answers_now(stack) is None  # a folder without a wheel answers nothing
    wheel(wheels)
    assert stacks.index_answers_now(stack) == f"{wheels} answers now (when this stack was built: {reason})"
    # one that took pyg-lib, or that the same index answered without a fitting wheel, is never re-checked
    for sampler in ({"source": stacks.PYG_INDEX, "index": url, "torch_build": "2.13.0+cpu"},
                    {"source": stacks.FALLBACK, "index": str(wheels), "torch_build": "2.13.0+cpu",
                     "reason": f"{wheels} holds no pyg-lib>=0.7.0 wheel for torch 2.13.0+cpu and this Python (...)"}):
        (stack.path / paths.COMPLETE_MARK).write_text(json.dumps({"versions": {}, "sampler": sampler}))
        assert stacks.index_answers_now(stack) is None


def test_a_pyg_dist_cell_says_why_its_stack_has_no_pyg_lib(tmp_path, monkeypatch):
    """The worker's reason, from the stack's record (the skip itself: tests/test_pyg_dist.py)."""
    folder = tmp_path / "pyg-dist-000000000000"
    url = "http://127.0.0.1:9/whl/torch-2.13.0+cpu.html"
    write_stack(folder, {"source": stacks.FALLBACK, "index": url, "reason": f"{url} cannot be reached: refused",
                         "fallback": []})
    monkeypatch.setattr(sys, "prefix", str(folder))
    assert paths.running_stack_no_pyg_lib() == f"{url} cannot be reached: refused"
    assert paths.running_stack_sampler() == f"no pyg-lib: {url} cannot be reached: refused"
    monkeypatch.setattr(sys, "prefix", str(tmp_path))  # an external interpreter: no record
    assert paths.running_stack_no_pyg_lib() == "" and paths.running_stack_sampler() == ""


def gnnbench(*args: str, env: dict, timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bench.cli", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=timeout)


@pytest.mark.stacks
def test_a_folder_of_pyg_lib_wheels_is_taken_and_named_by_every_pyg_cell(tmp_path):
    """Builds a private `pyg` stack from GNNBENCH_TEST_PYG_LIB_WHEELS (a folder with a pyg-lib wheel
    for torch 2.13.0 on this machine) and runs a PyG cell in it. Skipped where none is given."""
    wheels = os.environ.get(WHEELS_ENV)
    if not wheels or not list(Path(wheels).glob("pyg_lib-*.whl")):
        pytest.skip(f"{WHEELS_ENV} ({wheels or 'not set'}) names no folder holding a pyg_lib-*.whl for this "
                    "machine's torch (pyg-lib is not on PyPI; build one from its public source)")
    env = {**os.environ, "GNNBENCH_STACKS_DIR": str(tmp_path / "stacks"), paths.PYG_WHEELS_ENV: wheels,
           "GNNBENCH_CACHE": str(tmp_path / "cache")}
    proc = gnnbench("stacks", "install", "pyg", env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert f"stack pyg: pyg-lib>=0.7.0 from PyG's wheel index for torch 2.13.0+cpu: {wheels}" in proc.stdout
    assert "torch-sparse" not in proc.stdout  # neither built nor taken from pip's cache
    sampler = next(line for line in proc.stdout.splitlines() if line.startswith("stack pyg: sampler: "))
    assert sampler.startswith("stack pyg: sampler: pyg-lib ") and sampler.endswith(f" from {wheels}")
    proc = gnnbench("run", "smoke", "-k", "pyg-neighbor and workers=0", "--results", str(tmp_path / "results"),
                    env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads(next((tmp_path / "results").glob("smoke-*.json")).read_text())
    assert result["benchmarks"]
    version = sampler.removeprefix("stack pyg: sampler: pyg-lib ").split()[0]
    for bench in result["benchmarks"]:
        info = bench["extra_info"]
        assert info["sampler"] == f"pyg-lib {version}" and info["versions"]["pyg_lib"] == version
        assert info["versions"]["sampler_source"] == f"pyg-lib {version} from {wheels}"
        assert "torch_sparse" not in info["versions"]


def test_install_takes_the_fallback_once_then_pyg_lib_once_the_index_answers(tmp_path, monkeypatch, private_stacks,
                                                                             cpu_torch):
    """The whole install with pip left out (its commands are recorded, not run): which passes run,
    what the stack records, what it says; and the rebuild once the index answers."""
    monkeypatch.setenv(paths.PYG_WHEELS_ENV, UNREACHABLE)
    ran: list[list[str]] = []

    def run(cmd, name, env=None, log=print):
        ran.append(cmd)
        if cmd[1:3] == ["-m", "venv"]:
            Path(cmd[3], "bin").mkdir(parents=True)
            Path(cmd[3], "bin", "python").symlink_to(sys.executable)

    monkeypatch.setattr(stacks, "_run", run)
    monkeypatch.setattr(stacks, "import_problem", lambda python, module: None)
    installed = {"torch": "2.13.0+cpu", "torch_geometric": "2.8.1", "torch_sparse": "0.6.18", "torch_scatter": "2.1.2"}
    monkeypatch.setattr(stacks, "probe_versions", lambda stack: dict(installed))
    said: list[str] = []
    stack = stacks.install("pyg", log=said.append)
    no_isolation = [cmd for cmd in ran if "--no-build-isolation" in cmd]
    assert len(no_isolation) == 1 and no_isolation[0][-2:] == ["torch-scatter==2.1.2", "torch-sparse==0.6.18"]
    assert not any("--find-links" in cmd for cmd in ran)  # the index did not answer: pip was not sent there
    assert sum(line.startswith("stack pyg: no pyg-lib: http://127.0.0.1:9/") for line in said) == 1
    record = paths.recorded_sampler(stack.path)
    assert record["source"] == stacks.FALLBACK and said[-1] == f"stack pyg: sampler: {record['summary']}"
    assert stacks.recorded_versions(stack)["sampler_source"] == record["summary"]

    ran.clear()
    said.clear()
    assert stacks.install("pyg", log=said.append).path == stack.path and ran == []  # still unreachable: kept
    assert said == [f"stack pyg: up to date at {stack.path} (sampler: {record['summary']})"]

    wheels = tmp_path / "wheels"
    wheel(wheels)
    monkeypatch.setenv(paths.PYG_WHEELS_ENV, str(wheels))
    installed = {"torch": "2.13.0+cpu", "torch_geometric": "2.8.1", "pyg_lib": "0.9.0"}
    said.clear()
    stacks.install("pyg", log=said.append)
    assert said[0].startswith(f"stack pyg: rebuilding it with pyg-lib: {wheels} answers now")
    taken = [cmd for cmd in ran if "--find-links" in cmd]
    assert len(taken) == 1 and taken[0][-3:] == ["--find-links", str(wheels), "pyg-lib>=0.7.0"]
    assert not any("--no-build-isolation" in cmd for cmd in ran)  # no torch-sparse this time
    assert paths.recorded_sampler(stack.path)["summary"] == f"pyg-lib 0.9.0 from {wheels}"
    assert said[-1] == f"stack pyg: sampler: pyg-lib 0.9.0 from {wheels}"
