"""Stacks: pin files parse into two install passes; the folder follows the pins."""

import pytest

from bench import stacks


def test_pin_files_parse_into_plain_and_no_isolation_passes():
    plain, no_isolation = stacks.get("pyg").requirement_lines(container=False)
    assert "torch==2.13.0" in plain and "torch-geometric==2.8.1" in plain
    assert no_isolation == ["torch-scatter==2.1.2", "torch-sparse==0.6.18"]
    assert not any(line.startswith("pyg-lib") for line in plain)  # not on PyPI: a pass of its own
    plain, no_isolation = stacks.get("dgl").requirement_lines(container=False)
    assert {"torch==2.2.1", "dgl==2.1.0", "torchdata==0.7.1"} <= set(plain) and no_isolation == []


def test_pyg_lib_comes_from_pyg_wheel_index_on_a_machine_and_in_the_images_alike():
    """pyg-lib is taken from PyG's wheel index in a pass of its own; torch-sparse/-scatter are only the
    fallback for where that index gives none (tests/test_pyg_wheels.py runs both)."""
    pyg, dist, dgl = (stacks.get(n) for n in ("pyg", "pyg-dist", "dgl"))
    assert pyg.pyg_wheel_lines() == ["pyg-lib>=0.7.0"] == dist.pyg_wheel_lines() and dgl.pyg_wheel_lines() == []
    assert pyg.fallback_lines() == ["torch-scatter==2.1.2", "torch-sparse==0.6.18"]
    assert dist.fallback_lines() == []  # pyg-dist cannot run without pyg-lib: its cells are skipped instead
    machine, image = pyg.requirement_lines(False), pyg.requirement_lines(True)
    # the same pins on a machine and in the images, but for NVML (container-only: the GPU images')
    assert image[0] == machine[0] + [line for line in image[0] if line.startswith("nvidia-ml-py==")]
    assert image[1] == machine[1]
    for container in (False, True):
        plain, _ = dist.requirement_lines(container)
        assert "torch-geometric==2.6.1" in plain and not any(line.startswith("pyg-lib") for line in plain)


def stack_folder(tmp_path, pin_text: str):
    """The folder a stack named x with these pins would live in (GNNBENCH_STACKS_DIR set by the caller)."""
    pins = tmp_path / "requirements-x.txt"
    pins.write_text(pin_text)
    return stacks.Stack("x", pins).path


def test_the_sampler_pins_are_part_of_the_stack_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("GNNBENCH_STACKS_DIR", str(tmp_path))
    first = stack_folder(tmp_path, "numpy==1.26.4\npyg-lib>=0.7.0  # pyg-wheels\n")
    assert stack_folder(tmp_path, "numpy==1.26.4\npyg-lib>=0.8.0  # pyg-wheels\n") != first


def test_comments_do_not_change_the_stack_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("GNNBENCH_STACKS_DIR", str(tmp_path))
    first = stack_folder(tmp_path, "numpy==1.26.4\n")
    assert stack_folder(tmp_path, "# a note\nnumpy==1.26.4  # why this pin\n") == first


def test_stack_folder_changes_with_its_pins(tmp_path, monkeypatch):
    monkeypatch.setenv("GNNBENCH_STACKS_DIR", str(tmp_path))
    pins = tmp_path / "requirements-x.txt"
    pins.write_text("numpy==1.26.4\n")
    first = stacks.Stack("x", pins).path
    assert first == stacks.Stack("x", pins).path and first.parent == tmp_path
    pins.write_text("numpy==2.4.6\n")
    assert stacks.Stack("x", pins).path != first
    assert not stacks.Stack("x", pins).installed


def test_unknown_stack_is_a_clear_error():
    try:
        stacks.get("tensorflow")
    except stacks.StackError as exc:
        assert "pyg" in str(exc) and "dgl" in str(exc)
    else:
        raise AssertionError("no error")


def test_install_builds_pinned_stacks_only():
    with pytest.raises(stacks.StackError, match=r"`stacks install` builds the pinned stacks: .*pyg"):
        stacks.install("tensorflow")


# what docker/Dockerfile copies before it installs the stacks (tests/test_containers.py checks the COPY lines)
INSTALL_ENTRY = ("__init__.py", "paths.py", "locks.py", "stacks/__init__.py", "stacks/__main__.py", "stacks/versions.py")


def test_the_install_entry_runs_with_only_what_the_images_copy_first(tmp_path):
    """docker/Dockerfile copies bench/__init__.py, bench/paths.py, bench/locks.py and bench/stacks/'s
    __init__, __main__ and versions before the rest of gnnbench, and runs `python -m bench.stacks install NAME` there."""
    import shutil
    import subprocess
    import sys

    from tests.conftest import REPO

    for name in INSTALL_ENTRY:
        (tmp_path / "bench" / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / "bench" / name, tmp_path / "bench" / name)
    done = subprocess.run([sys.executable, "-m", "bench.stacks"], cwd=tmp_path, capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin"}, timeout=60)
    assert done.returncode == 1 and "usage: python -m bench.stacks install NAME" in done.stderr, done.stderr
