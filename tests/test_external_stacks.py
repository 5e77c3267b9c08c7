"""`gnnbench stacks add`: an interpreter the user already has, registered and run as a stack.

The second interpreter is real: the pinned pyg stack's own python, registered under another
name in a stacks folder of this test (the pinned stacks linked into it), so cells run from it
through the same runner, and the result must say the stack was external."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.publish import results
from bench import stacks
from tests.conftest import REPO, offline_data_root, require_stacks, run_suite_text

GNNBENCH = [sys.executable, "-m", "bench.cli"]

SUITE = """
name: mine
datasets:
  rmat-s9: {source: synthetic, params: {scale: 9, edge_factor: 8, feature_dim: 16, num_classes: 4}}
backends: [pyg-neighbor, dgl-graphbolt]
settings: {batch_size: 64, fanout: [5, 5], epochs: 2, warmup_epochs: 1, timeout: 240}
"""


@pytest.fixture
def stacks_folder(tmp_path, monkeypatch):
    """A stacks folder of this test holding the pinned stacks (linked) and no external ones."""
    folder = tmp_path / "stacks"
    folder.mkdir()
    for stack in stacks.available().values():
        if stack.installed:
            (folder / stack.path.name).symlink_to(stack.path)
    monkeypatch.setenv("GNNBENCH_STACKS_DIR", str(folder))
    return folder


def gnnbench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*GNNBENCH, *args], cwd=REPO, capture_output=True, text=True, timeout=600)


def test_bad_interpreters_are_refused_with_the_reason(stacks_folder, tmp_path):
    not_exec = tmp_path / "python"
    not_exec.write_text("")
    cases = {
        ("mine", str(tmp_path / "nope")): "no such file",
        ("mine", str(not_exec)): "not an executable file",
        ("mine", str(tmp_path)): "not an executable file",
        ("pyg", sys.executable): "taken by a pinned stack",
        ("own", sys.executable): "taken by a pinned stack",
        ("../x", sys.executable): "stack name",
        # gnnbench's own interpreter has neither PyG nor DGL: it can run no backend
        ("mine", sys.executable): "can run no backend: pyg needs torch, torch_geometric",
    }
    for (name, python), expected in cases.items():
        proc = gnnbench("stacks", "add", name, "--python", python)
        assert proc.returncode == 2 and expected in proc.stderr, (name, python, proc.stderr)
    assert not (stacks_folder / "external").exists() or not list((stacks_folder / "external").iterdir())


def test_a_registered_interpreter_runs_cells_and_is_recorded_as_external(stacks_folder, tmp_path, cache_dir):
    require_stacks("pyg", "dgl")
    pyg_python = stacks.get("pyg").python
    proc = gnnbench("stacks", "add", "mine", "--python", str(pyg_python))
    assert proc.returncode == 0, proc.stderr
    assert "registered as an external stack for pyg backends" in proc.stdout
    listed = gnnbench("stacks", "list")
    assert f"mine: external, {pyg_python}" in listed.stdout and "torch_geometric 2.8.1" in listed.stdout

    # --stack own --stack mine: PyG's cell in both interpreters, GraphBolt's only in its own
    run, out = run_suite_text(SUITE, tmp_path, cache_dir, "--stack", "own", "--stack", "mine")
    assert run.returncode == 0, run.stdout[-3000:]
    doc = json.loads(out.read_text())
    results.read(out)  # the result model reads it (an external stack's record included)
    markdown = subprocess.run([*GNNBENCH, "report", str(out)], cwd=REPO, capture_output=True, text=True).stdout
    assert f"Stack `mine` (external: `{pyg_python}`, distributions hash" in markdown
    cells = {b["extra_info"]["cell_id"]: b["extra_info"] for b in doc["benchmarks"]}
    assert set(cells) == {"pyg-neighbor/rmat-s9/mode=cpu-cpu/workers=0/ws=1",
                          "pyg-neighbor/rmat-s9/mode=cpu-cpu/workers=0/ws=1/stack=mine",
                          "dgl-graphbolt/rmat-s9/mode=cpu-cpu/workers=0/ws=1"}
    mine = cells["pyg-neighbor/rmat-s9/mode=cpu-cpu/workers=0/ws=1/stack=mine"]
    assert mine["stack"] == "mine" and mine["versions"]["torch_geometric"] == "2.8.1"
    assert mine["sampler"] == cells["pyg-neighbor/rmat-s9/mode=cpu-cpu/workers=0/ws=1"]["sampler"]
    recorded = doc["machine_info"]["gnnbench"]["stacks"]["mine"]
    assert recorded["external"] is True and recorded["interpreter"] == str(pyg_python)
    assert len(recorded["freeze_sha256"]) == 64 and recorded["torch"].startswith("2.13.0")
    assert doc["gnnbench"]["stacks_given"] == ["own", "mine"]

    # the interpreter goes away: its cells fail with the reason, the others still run
    (stacks_folder / "external" / "mine.json").write_text(json.dumps(
        {**json.loads((stacks_folder / "external" / "mine.json").read_text()), "python": str(tmp_path / "gone")}))
    run, out = run_suite_text(SUITE, tmp_path, cache_dir, "--stack", "mine", "-k", "pyg", name="again")
    doc = json.loads(out.read_text())
    # through pytest's front door too, the backend no given stack runs is said and recorded
    assert "--stack mine: dgl-graphbolt runs in none of these stacks" in run.stdout
    assert doc["gnnbench"]["backends_not_run"] == [
        "--stack mine: dgl-graphbolt runs in none of these stacks (it needs dgl): its cells are not run"]
    assert [(u["id"], u["status"]) for u in doc["unmeasured"]] == \
        [("pyg-neighbor/rmat-s9/mode=cpu-cpu/workers=0/ws=1/stack=mine", "failed")]
    assert "registered interpreter" in doc["unmeasured"][0]["reason"] and "is gone" in doc["unmeasured"][0]["reason"]

    assert gnnbench("stacks", "remove", "mine").returncode == 0
    proc = gnnbench("stacks", "remove", "mine")
    assert proc.returncode == 2 and "no external stack named 'mine'" in proc.stderr


def test_unknown_stacks_name_the_way_to_register_one(stacks_folder, tmp_path):
    suite = tmp_path / "s.yaml"
    suite.write_text(SUITE.replace("timeout: 240}", "timeout: 240, stack: theirs}"))
    proc = gnnbench("run", str(suite), "--results", str(tmp_path))
    assert proc.returncode == 2
    assert "unknown stack 'theirs'" in proc.stderr and "gnnbench stacks add NAME --python PATH" in proc.stderr
    proc = gnnbench("run", "smoke", "--stack", "theirs", "--results", str(tmp_path))
    assert proc.returncode == 2 and "--stack theirs" in proc.stderr and "unknown stack 'theirs'" in proc.stderr
    # a registry file someone broke is named, not a traceback
    (stacks_folder / "external").mkdir()
    (stacks_folder / "external" / "broken.json").write_text("{not json")
    proc = gnnbench("stacks", "list")
    assert proc.returncode == 2 and "broken.json: not a registered stack" in proc.stderr


def test_a_stack_runs_only_the_backends_of_its_framework(stacks_folder, monkeypatch):
    """Registering writes the probe; expansion reads the frameworks from it (no import here)."""
    from bench.run import suite as suite_mod
    from bench.stacks import external as external_stacks

    folder = stacks_folder / "external"
    folder.mkdir()
    probe = {"versions": {"torch": "2.13.0", "torch_geometric": "2.8.1", "numpy": "2.4.6", "dgl": "absent"}}
    (folder / "pygonly.json").write_text(json.dumps({"python": sys.executable, "probe": probe}))
    assert external_stacks.registered()["pygonly"].frameworks == ("pyg",)
    suite, _ = suite_mod.load("smoke")
    changed, not_run = suite_mod.with_stacks(suite, ["pygonly"])
    ids = [c.id for c in suite_mod.expand(changed)]
    assert ids and all(i.startswith("pyg-neighbor/") and i.endswith("/stack=pygonly") for i in ids)
    # DGL's backend is named, never dropped without a word
    assert not_run == ["--stack pygonly: dgl-graphbolt runs in none of these stacks (it needs dgl): its cells "
                       "are not run"]
    with pytest.raises(suite_mod.SuiteError, match="no backend of suite 'smoke' runs in this stack"):
        (folder / "nothing.json").write_text(json.dumps({"python": sys.executable, "probe": {"versions": {}}}))
        suite_mod.with_stacks(suite, ["nothing"])


def test_rules_name_each_backends_own_stack_as_own(write_suite):
    from bench.run import suite as suite_mod

    text = SUITE.replace("timeout: 240}", "timeout: 240, stack: [own, pyg]}") + \
        "exclude:\n  - {stack: own, backend: dgl-graphbolt}\n"
    suite, _ = suite_mod.load(write_suite(text))
    # pyg is pyg-neighbor's own stack: one cell for it; GraphBolt's own is excluded, and pyg has no DGL
    assert [c.id for c in suite_mod.expand(suite)] == ["pyg-neighbor/rmat-s9/mode=cpu-cpu/workers=0/ws=1"]


CORA_SUITE = """
name: node-cora
datasets:
  cora: planetoid:Cora
backends: [pyg-neighbor]
settings: {batch_size: 32, fanout: [5, 5], epochs: 1, warmup_epochs: 1, timeout: 240}
"""


def test_a_node_with_only_its_own_interpreter_prepares_cora_in_it(tmp_path, monkeypatch):
    """On the GPU machine, `--stack node` (the image's own python, PyG in it) failed every Cora cell
    with "stack 'pyg' is not installed": Planetoid's files are read with PyG, and the dataset was
    built in the pinned `pyg` stack, which such a node never installs. A run's --stack that has the
    framework builds it now."""
    require_stacks("pyg")
    data_root = offline_data_root()
    pyg_python = stacks.get("pyg").python
    folder = tmp_path / "stacks"  # the external stack alone: no pinned stack to fall back on
    folder.mkdir()
    monkeypatch.setenv("GNNBENCH_STACKS_DIR", str(folder))
    assert gnnbench("stacks", "add", "node", "--python", str(pyg_python)).returncode == 0
    hub = tmp_path / "hub"  # an empty hub: Cora is built in this run
    run, out = run_suite_text(CORA_SUITE, tmp_path, hub, "--stack", "node", "--no-install",
                              env={"GNNBENCH_DATA_ROOT": str(data_root)})
    doc = json.loads(out.read_text())
    assert [b["extra_info"]["cell_id"] for b in doc["benchmarks"]] == \
        ["pyg-neighbor/cora/mode=cpu-cpu/workers=0/ws=1/stack=node"], run.stdout[-3000:]
    assert doc["unmeasured"] == []
