"""`gnnbench bundle` and the install.sh it writes, the offline half for real: the bundle is built
here, then a container with no network (podman --network none) and the bundle as its only mount
stands for the GPU node: a Debian bookworm with its own Python (3.11, as here), no torch. The
bundle carries a CPU torch for it (--with-torch) and the sampler as the wheels the local pyg stack
built (pip's cache); install.sh installs, registers the node's interpreter and runs the smoke suite,
then a Cora cell runs from the Cora prepared in the bundle (the node has no pyg stack to prepare it).

Needs podman, runc and mmdebstrap (`make podman`; `make test` runs it first), the pyg stack and the
offline Planetoid copies; under CI=true a missing one is a failure, never a skip.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

from bench import cli
from tests.conftest import REPO, offline_data_root, require_stacks

NODE_IMAGE = "localhost/gnnbench-node-test:bookworm"  # built once, kept by name
NODE_PYTHON = "3.11"  # Debian bookworm's python3
GNNBENCH = str(Path(sys.executable).with_name("gnnbench"))


def missing(message: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def require_podman() -> None:
    absent = [tool for tool in ("podman", "runc", "mmdebstrap") if not shutil.which(tool)]
    if absent:
        missing(f"{', '.join(absent)} not installed: run `make podman` (apt-get install podman runc mmdebstrap "
                "and the containers.conf it writes)")


def node_image() -> str:
    """A stand-in for the GPU node: Debian bookworm minbase with python3 and venv, nothing else
    (made with mmdebstrap from Debian's mirror, as no image registry is reachable; once, by name)."""
    if subprocess.run(["podman", "image", "exists", NODE_IMAGE]).returncode == 0:
        return NODE_IMAGE
    with tempfile.TemporaryDirectory() as tmp:
        tar = Path(tmp) / "node.tar"
        proc = subprocess.run(["nice", "mmdebstrap", "--variant=minbase", "--include=python3,python3-venv",
                               "bookworm", str(tar)], capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, f"mmdebstrap failed: {proc.stderr[-3000:]}"
        proc = subprocess.run(["podman", "import", str(tar), NODE_IMAGE], capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, f"podman import failed: {proc.stderr[-3000:]}"
    return NODE_IMAGE


def podman_run(bundle: Path, script: str, name: str, timeout: int = 900) -> subprocess.CompletedProcess:
    """`script` (bash) in the node image: no network, the bundle read-only as its only mount."""
    return subprocess.run(["podman", "run", "--name", name, "--network", "none", "-v", f"{bundle}:/bundle:ro",
                           node_image(), "bash", "-c", script], capture_output=True, text=True, timeout=timeout)


def bad(capsys, *argv: str) -> str:
    """A `gnnbench bundle` that must be refused: exit 2 and one line saying why."""
    code = cli.main(["bundle", *argv])
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1 and err.startswith("gnnbench: error: "), err
    return err


def test_bad_target_is_one_line_exit_2(tmp_path, capsys):
    out = str(tmp_path / "b")
    assert "--python 3.9" in bad(capsys, out, "--python", "3.9", "--platform", "x86_64")
    assert "one of 3.10" in bad(capsys, out, "--python", "311", "--platform", "x86_64")
    assert "x86_64, aarch64" in bad(capsys, out, "--python", "3.11", "--platform", "arm64")
    assert "--cuda cu13.0" in bad(capsys, out, "--python", "3.11", "--platform", "x86_64", "--cuda", "cu13.0")
    assert "--torch 2.11.0+cu130" in bad(capsys, out, "--python", "3.11", "--platform", "x86_64",
                                         "--torch", "2.11.0+cu130")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "mine.txt").write_text("not a bundle")
    assert "no bundle.json" in bad(capsys, out, "--python", "3.11", "--platform", "aarch64")
    assert not (tmp_path / "b" / "wheels").exists()  # nothing was written


def test_platform_tags_cover_older_manylinux():
    from bench.commands.bundle import Target

    tags = Target("3.12", "aarch64").platform_tags()
    assert tags[0] == "manylinux_2_28_aarch64" and "manylinux_2_17_aarch64" in tags
    assert "manylinux2014_aarch64" in tags and not any("x86_64" in t for t in tags)
    assert Target("3.12", "aarch64").abi == "cp312"
    assert Target("3.11", "x86_64").platform_tags(local=True)[-1] == "linux_x86_64"


def test_offline_node_installs_and_runs_smoke(tmp_path):
    require_podman()
    require_stacks("pyg")
    data_root = offline_data_root()
    if (f"{sys.version_info.major}.{sys.version_info.minor}", platform.machine()) != (NODE_PYTHON, "x86_64"):
        missing(f"the node image's Python is {NODE_PYTHON} on x86_64; the sampler wheels the bundle carries are "
                f"this machine's pyg stack's (Python {sys.version_info.major}.{sys.version_info.minor} on "
                f"{platform.machine()})")
    bundle = tmp_path / "bundle"
    proc = subprocess.run([GNNBENCH, "bundle", str(bundle), "--python", NODE_PYTHON, "--platform", "x86_64",
                           "--torch", "2.13.0", "--cuda", "cpu", "--with-torch", "--suite", "gpu",
                           "--data-root", str(data_root)],
                          cwd=REPO, capture_output=True, text=True, timeout=1800)
    print(proc.stdout[-5000:], proc.stderr[-3000:])
    assert proc.returncode == 0, proc.stderr[-3000:]
    steps = [line for line in proc.stdout.splitlines() if line.startswith("bundle: [")]
    assert len(steps) == 6, proc.stdout  # a line per step
    manifest = json.loads((bundle / "bundle.json").read_text())
    assert manifest["target"]["python"] == NODE_PYTHON and manifest["target"]["platform"] == "x86_64"
    assert manifest["datasets"]["prepared"] == ["cora"], manifest["datasets"]
    assert manifest["datasets"]["generated_on_node"] == ["products-s21", "igbh-tiny", "link-s18"]  # synthetic: made there
    sampler = manifest["sampler"]["wheels"].get("torch-2.13.0+cpu", [])
    assert any(w.startswith("torch_sparse-") for w in sampler), manifest["sampler"]
    assert any(s.startswith("torch_sparse-") for s in manifest["sampler"]["sources"])
    # compiled dependencies for the named target, not whatever this machine would take
    assert list((bundle / "wheels").glob("numpy-*-cp311-cp311-manylinux*_x86_64.whl"))
    assert list((bundle / "wheels").glob("pydantic_core-*-cp311-*manylinux*_x86_64.whl"))

    # the node: install, register, run the smoke suite; then a Cora cell from the bundle's Cora
    cora = ("name: cora-node\ndatasets: {cora: 'planetoid:Cora'}\nbackends: [pyg-neighbor]\n"
            "settings: {num_workers: 0, mode: cpu-cpu, batch_size: 32, fanout: [5, 5], epochs: 2, "
            "warmup_epochs: 1, model: sage, hidden: 16, timeout: 300}\n")
    script = f"""set -u
bash /bundle/install.sh --prefix /node --suite smoke; echo "install exit $?"
cat > /tmp/cora.yaml <<'EOF'
{cora}EOF
. /node/env.sh
gnnbench run /tmp/cora.yaml --stack node --no-install --results /node/results-cora; echo "cora exit $?"
"""
    name = f"gnnbench-node-test-{uuid.uuid4().hex[:8]}"
    try:
        run = podman_run(bundle, script, name)
        print(run.stdout[-8000:], run.stderr[-4000:])
        assert run.returncode == 0, run.stderr[-3000:]
        got = tmp_path / "node"
        got.mkdir()
        for folder in ("results", "results-cora"):
            copied = subprocess.run(["podman", "cp", f"{name}:/node/{folder}", str(got / folder)],
                                    capture_output=True, text=True)
            assert copied.returncode == 0, copied.stderr
    finally:
        subprocess.run(["podman", "rm", "-f", name], capture_output=True)
    assert "install exit 0" in run.stdout and "cora exit 0" in run.stdout, run.stdout[-4000:]
    assert "torch: none imports on this Python; installing the bundle's torch-2.13.0+cpu" in run.stdout
    assert "sampler: the bundle's wheels for torch-2.13.0+cpu" in run.stdout
    assert "no DGL on this Python" in run.stdout  # said, as DGL's cells are not part of the run

    smoke = [json.loads(p.read_text()) for p in (got / "results").glob("smoke-*.json")]
    assert len(smoke) == 1
    doc = smoke[0]
    assert doc["gnnbench"]["suite"] == "smoke" and not doc["unmeasured"], doc["unmeasured"]
    cells = {b["extra_info"]["cell_id"]: b["extra_info"] for b in doc["benchmarks"]}
    assert sorted(cells) == sorted(f"pyg-neighbor/rmat-s12/mode=cpu-cpu/{rest}/stack=node" for rest in
                                   ("workers=0/ws=1", "workers=2/ws=1", "workers=0/ws=1/model=none",
                                    "workers=0/ws=1/replay_batch=on"))
    for info in cells.values():
        assert info["stack"] == "node"
        assert info["versions"]["torch"] == "2.13.0+cpu" and info["versions"]["python"].startswith("3.11.")
        assert "torch_sparse" in info["versions"]  # the sampler that ran, from the bundle's wheels
    stack = doc["machine_info"]["gnnbench"]["stacks"]["node"]
    assert stack["external"] is True and stack["interpreter"] == "/node/venv/bin/python"

    (cora_doc,) = [json.loads(p.read_text()) for p in (got / "results-cora").glob("cora-node-*.json")]
    (entry,) = cora_doc["benchmarks"]
    assert entry["extra_info"]["dataset"]["num_nodes"] == 2708 and entry["extra_info"]["val_acc"] > 0.3


def test_install_refuses_another_target(tmp_path):
    """install.sh on a node its bundle was not made for: exit 2, one line naming both and the fix."""
    require_podman()
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    shutil.copy2(REPO / "docker" / "node-install.sh", bundle / "install.sh")
    (bundle / "bundle.json").write_text(json.dumps({"complete": True, "target": {"python": NODE_PYTHON, "platform": "aarch64"}}))
    name = f"gnnbench-node-test-{uuid.uuid4().hex[:8]}"
    try:
        run = podman_run(bundle, "bash /bundle/install.sh --prefix /node", name, timeout=300)
    finally:
        subprocess.run(["podman", "rm", "-f", name], capture_output=True)
    assert run.returncode == 2, run.stdout + run.stderr
    assert run.stderr.strip() == (
        f"install: error: this bundle is for Python {NODE_PYTHON} on aarch64; python3 is Python {NODE_PYTHON} on "
        f"x86_64 (on a machine with internet: gnnbench bundle DIR --python {NODE_PYTHON} --platform x86_64)")
