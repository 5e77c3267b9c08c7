"""The Python the workflows under .github/ run (`python -c "..."` in a step's `run:`) is run here,
in the interpreter the step names, so a moved module or a renamed function fails a test instead
of the published workflow (ci.yml once ran `from bench import stacks` while that module lived in bench/run/)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from bench import stacks

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
# INTERPRETER -c "CODE" [ARGS up to the end of the command]
SNIPPET = re.compile(r'(?P<python>\S+)\s+-c\s+"(?P<code>(?:[^"\\]|\\.)*)"(?P<args>(?:[ \t]*\\\n|[^\n;|)])*)')


def snippets() -> list[tuple[str, str, str, str]]:
    """(workflow:step, interpreter, code, args) of every `-c` snippet of every step."""
    found = []
    for path in WORKFLOWS:
        for job in (yaml.safe_load(path.read_text()).get("jobs") or {}).values():
            for step in job.get("steps") or []:
                for m in SNIPPET.finditer(step.get("run") or ""):
                    python = m.group("python").split("$(")[-1].strip('"')  # PYG=$(.venv/bin/python -c ...)
                    if "python" in python or python.startswith("$"):
                        found.append((f"{path.name}: {step.get('name', '?')}", python, m.group("code"),
                                      m.group("args").replace("\\\n", " ").strip()))
    return found


def test_the_workflows_have_snippets_to_check():
    assert snippets(), "no `python -c` snippet found: the pattern no longer matches the workflows"


@pytest.mark.parametrize("where, python, code, args", snippets(), ids=lambda v: v if isinstance(v, str) and ":" in v else None)
def test_workflow_snippet_runs(where, python, code, args, tmp_path):
    compile(code, where, "exec")  # at least valid Python wherever it runs
    if python == ".venv/bin/python":
        interpreter = sys.executable
    elif python == "$PYG":  # ci.yml: the pyg stack's interpreter, found by the snippet above it
        interpreter = str(stacks.get("pyg").python)
        if not Path(interpreter).exists():
            pytest.fail(f"{where}: the pyg stack is not installed (make stacks)")
    else:
        pytest.fail(f"{where}: a snippet run by {python!r}: teach this test which interpreter that is")
    # the workflow's Planetoid folder: a copy of the raw files the tests read, so nothing is
    # written into the shared folder (PyG processes them in place)
    if "github.workspace" in args:
        source = Path(os.environ.get("GNNBENCH_DATA_ROOT", ROOT.parent / "shared" / "datasets" / "planetoid"))
        if not (source / "Cora" / "raw").exists():  # skipped as the other Cora tests are; under CI=true a failure
            (pytest.fail if os.environ.get("CI") == "true" else pytest.skip)(
                f"{where}: needs Planetoid's raw files under {source} (GNNBENCH_DATA_ROOT)")
        for name in ("Cora", "CiteSeer"):
            shutil.copytree(source / name / "raw", tmp_path / "planetoid" / name / "raw")
        args = re.sub(r'"?\$\{\{ github.workspace \}\}/shared/datasets/planetoid"?', str(tmp_path / "planetoid"), args)
    assert "${{" not in args, f"{where}: an argument this test cannot stand in for: {args}"
    done = subprocess.run([interpreter, "-c", code, *args.split()], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "GNNBENCH_OFFLINE": "1"}, timeout=600)
    assert done.returncode == 0, f"{where}: {python} -c {code!r} failed:\n{done.stderr[-2000:]}"


def test_the_nightly_tests_are_the_ones_docs_testing_md_lists_and_a_workflow_runs():
    from tests.nightly import NIGHTLY
    doc = (ROOT / "docs" / "testing.md").read_text()
    section = doc.split("## Nightly tests", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"^\| `([^`]+)` \|", section, re.M))
    assert listed == set(NIGHTLY), (f"in tests/nightly.py, not in docs/testing.md: {sorted(set(NIGHTLY) - listed)}; "
                                    f"in docs/testing.md, not in tests/nightly.py: {sorted(listed - set(NIGHTLY))}")
    assert all(reason.strip() for reason in NIGHTLY.values())
    makefile = (ROOT / "Makefile").read_text()
    assert '$(call PYTEST,"not nightly")' in makefile and "$(call PYTEST,nightly)" in makefile
    ci = yaml.safe_load((ROOT / ".github/workflows/ci.yml").read_text())
    assert "schedule" in ci[True]  # PyYAML reads the key `on` as True
    runs = [step.get("run", "") for job in ci["jobs"].values() for step in job["steps"]]
    assert "${{ github.event_name == 'schedule' && 'make test-nightly' || 'bash .ci/run' }}" in runs
