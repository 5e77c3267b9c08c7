"""The import structure holds: import-linter's layer contract (pyproject.toml, [tool.importlinter])
passes, no two modules of bench/ import each other (function-level and TYPE_CHECKING imports count
too), and the contract check itself fails on a planted import against the layers. bench/run (and the
commands that prepare datasets) ask bench.datasets only for a ready dataset, through its one entry;
no function in bench/ is over 80 lines unless docs/layout.md names it with why."""

from __future__ import annotations

import ast
import json
import re
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
    # layers, publish reads results not run, the schedulers import no session, the plan prepares nothing,
    # the interpreter line
    assert "5 kept, 0 broken" in done.stdout, done.stdout[-2000:]


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


# bench.datasets' one entry for preparing a dataset (keep or discard, verify, build, a link task's split)
ENTRY = "bench.datasets.ready"
# what else the modules that run or prepare cells may import from bench.datasets, and why
OFF_THE_ENTRY = {
    # naming and validating a dataset (the registry, the suite schema), not preparing one
    "bench.run.suite": {"bench.datasets", "bench.datasets.params"},
    "bench.commands.datasets": {"bench.datasets", "bench.datasets.params"},
    # stack side: reads a ready dataset from the hub (ready.py is host only: locks, subprocesses)
    "bench.run.worker": {"bench.datasets.hub"},
}
MAX_LINES = 80


def imports(root: Path) -> dict[str, list[str]]:
    """Each module of `root`/bench and the gnnbench modules it imports directly (grimp, in a child: `root` first)."""
    code = ("import grimp, json\ng = grimp.build_graph('bench', include_external_packages=False)\n"
            "print(json.dumps({m: sorted(g.find_modules_directly_imported_by(m)) for m in g.modules}))")
    done = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=300,
                          env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"}, check=True)
    return json.loads(done.stdout)


def past_the_entry(graph: dict[str, list[str]]) -> dict[str, list[str]]:
    """The bench.datasets modules that bench/run's modules and the preparing commands import other
    than the entry and their OFF_THE_ENTRY."""
    askers = [m for m in graph if m.startswith("bench.run.") or m in ("bench.commands.datasets", "bench.commands.bundle")]
    found = {m: [x for x in graph[m] if (x == "bench.datasets" or x.startswith("bench.datasets."))
                 and x != ENTRY and x not in OFF_THE_ENTRY.get(m, set())] for m in askers}
    return {m: xs for m, xs in found.items() if xs}


def long_functions(root: Path) -> list[str]:
    """`path::name (N lines)` of every function in `root`/bench over MAX_LINES, decorators aside."""
    found = []
    for path in sorted((root / "bench").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno + 1 > MAX_LINES:
                found.append(f"{path.relative_to(root).as_posix()}::{node.name} ({node.end_lineno - node.lineno + 1} lines)")
    return found


def named_long_functions(root: Path) -> set[str]:
    """`path::name` of the long functions docs/layout.md's "Long functions" section names (each with why)."""
    text = (root / "docs" / "layout.md").read_text()
    section = text.split("## Long functions", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^- `([^`]+::[^`]+)`: \S", section, flags=re.M))


def test_run_asks_datasets_only_for_a_ready_dataset():
    graph = imports(ROOT)
    assert past_the_entry(graph) == {}
    assert ENTRY in graph["bench.run.prepare"] and ENTRY in graph["bench.commands.bundle"]


def test_no_function_is_over_80_lines_unless_the_layout_says_why():
    named = named_long_functions(ROOT)
    long = long_functions(ROOT)
    assert [f for f in long if f.split(" (")[0] not in named] == []
    assert named <= {f.split(" (")[0] for f in long}, "docs/layout.md names a long function that is no longer long"


def test_a_planted_import_past_the_entry_and_a_long_function_are_named(tmp_path):
    shutil.copytree(ROOT / "bench", tmp_path / "bench", ignore=shutil.ignore_patterns("__pycache__", "templates"))
    shutil.copytree(ROOT / "docs", tmp_path / "docs", ignore=shutil.ignore_patterns("*.png", "*.svg"))
    prepare = tmp_path / "bench" / "run" / "prepare.py"
    prepare.write_text(prepare.read_text() + "\n\ndef planted():\n    from bench.datasets import link_split\n"
                       + "    x = 0\n" * MAX_LINES + "    return link_split, x\n")
    assert past_the_entry(imports(tmp_path)) == {"bench.run.prepare": ["bench.datasets.link_split"]}
    assert long_functions(tmp_path) == [f"bench/run/prepare.py::planted ({MAX_LINES + 3} lines)"]


def test_the_scheduler_of_cells_in_turns_reads_no_session():
    """bench/run/paired.py drives the executor (bench/run/executor.py) and never the session: no name
    `session` in it, and (pyproject's contract) no import of bench.run.session."""
    import ast
    import inspect

    from bench.run import executor, paired

    tree = ast.parse(inspect.getsource(paired))
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | {
        a.arg for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) for a in n.args.args}
    assert "session" not in names
    assert list(inspect.signature(paired.run_group).parameters) == ["executor", "pairing", "group", "pairs"]
    assert inspect.signature(paired.run_group).parameters["executor"].annotation in ("Executor", executor.Executor)
