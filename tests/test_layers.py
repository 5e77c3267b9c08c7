"""The import structure holds: import-linter's layer contract (pyproject.toml, [tool.importlinter])
passes, no two modules of bench/ import each other (function-level and TYPE_CHECKING imports count
too), and the contract check itself fails on a planted import against the layers."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[1]
LINT = Path(sys.executable).with_name("lint-imports")


def lint(cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(LINT), "--no-cache"], cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={"PYTHONPATH": str(cwd), "PATH": "/usr/bin:/bin"})


def test_the_layer_contract_holds():
    done = lint(ROOT)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "2 kept, 0 broken" in done.stdout


def test_no_two_modules_import_each_other():
    graph = grimp.build_graph("bench", include_external_packages=False)
    pairs = sorted({tuple(sorted((a, b))) for a in graph.modules for b in graph.find_modules_directly_imported_by(a)
                    if a in graph.find_modules_directly_imported_by(b)})
    assert pairs == []


def test_an_import_against_the_layers_is_caught(tmp_path):
    shutil.copytree(ROOT / "bench", tmp_path / "bench", ignore=shutil.ignore_patterns("__pycache__", "templates"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    modes = tmp_path / "bench" / "datasets" / "synthetic.py"
    modes.write_text("from bench.publish import results  # planted: a dataset source reading results\n"
                     + modes.read_text())
    done = lint(tmp_path)
    assert done.returncode != 0 and "bench.datasets.synthetic -> bench.publish.results" in done.stdout, done.stdout
