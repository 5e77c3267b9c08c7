"""The interpreter line: the modules that run inside a framework stack (pyproject.toml's "stack side"
contract, read here) import no host-only package (pydantic, jinja2, yaml, platformdirs, ...) and no
host-side gnnbench module. lint-imports checks every import statement (tests/test_layers.py); this
checks what really happens at import, in an interpreter where those packages cannot be imported, so
an import moved to the top of a stack-side module fails here in seconds, not in a stack at run time."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from bench import stacks
from bench.backends import BACKENDS
from bench.datasets import SOURCES

ROOT = Path(__file__).resolve().parents[1]
CHECKER = Path(__file__).with_name("clean_interpreter.py")
# What a stack has that the host venv lacks: a module failing on these is checked in its stack.
FRAMEWORKS = ("torch", "dgl", "torch_geometric", "torch_sparse", "torch_scatter", "pyg_lib", "torchdata", "ogb",
              "pymetis", "pandas", "cugraph_pyg", "pylibwholegraph", "cupy", "rmm")


def contract() -> dict:
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    (found,) = [c for c in contracts if c["name"] == "stack side imports no host-only package or module"]
    return found


def stack_side_modules(root: Path = ROOT) -> list[str]:
    """Every module the contract declares stack side, a package's modules included."""
    names = []
    for declared in contract()["source_modules"]:
        folder = root.joinpath(*declared.split("."))
        if folder.is_dir():
            for file in sorted(folder.rglob("*.py")):
                parts = file.relative_to(root).with_suffix("").parts
                names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
        else:
            names.append(declared)
    return names


def check(python: str, modules: list[str], pythonpath: Path = ROOT) -> dict[str, str]:
    proc = subprocess.run([python, str(CHECKER), json.dumps(contract()["forbidden_modules"]), json.dumps(modules)],
                          capture_output=True, text=True, cwd=pythonpath, env={"PYTHONPATH": str(pythonpath),
                                                                               "PATH": "/usr/bin:/bin"},
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def blocked(problems: dict[str, str]) -> dict[str, str]:
    return {m: why for m, why in problems.items() if why.startswith("blocked")}


def test_the_declared_stack_side_covers_every_backend_and_source():
    modules = set(stack_side_modules())
    assert {info.module for info in BACKENDS.values()} <= modules
    assert {source.module for source in SOURCES.values()} <= modules
    assert "bench.run.worker" in modules and "bench.harness_costs.plain_loops" in modules


def test_stack_side_imports_without_host_only_packages():
    problems = check(sys.executable, stack_side_modules())
    assert blocked(problems) == {}
    # what did not import lacks only a framework, which the stacks test below has
    for module, why in problems.items():
        assert any(f"'{name}'" in why or f"{name}." in why for name in FRAMEWORKS), (module, why)


def test_a_host_only_import_planted_at_the_top_is_named(tmp_path):
    shutil.copytree(ROOT / "bench", tmp_path / "bench")
    hub = tmp_path / "bench" / "datasets" / "hub.py"
    hub.write_text(hub.read_text().replace("from __future__ import annotations\n",
                                           "from __future__ import annotations\n\nimport pydantic\n", 1))
    problems = blocked(check(sys.executable, ["bench.run.worker", "bench.datasets.hub"], pythonpath=tmp_path))
    assert set(problems) == {"bench.run.worker", "bench.datasets.hub"}
    assert "blocked: pydantic is host-only" in problems["bench.datasets.hub"] and "hub.py:" in problems["bench.datasets.hub"]


@pytest.mark.stacks
@pytest.mark.parametrize("name", ["pyg", "dgl"])
def test_stack_side_imports_in_each_stack(name):
    stack = stacks.get(name)
    if not stack.installed:
        pytest.skip(f"stack {name} is not installed (gnnbench stacks install {name})")
    problems = check(str(stack.python), stack_side_modules())
    assert blocked(problems) == {}
    own = [info.module for info in BACKENDS.values() if stacks.framework_of(info.stack) == name]
    own += [source.module for source in SOURCES.values() if source.stack in (None, name)]
    assert {m: problems[m] for m in own if m in problems} == {}
