"""Pinned software stacks: one virtual environment per framework, built from docker/requirements-NAME.txt.

PyG and DGL cannot share an interpreter (DGL's wheels stop at torch 2.2, PyG follows current
torch), so every benchmark cell runs in the interpreter of its stack. A stack's folder name
carries a hash of its requirements file and the host Python, so an unchanged pin file reuses the
environment as it is, and a changed one builds a new environment next to the old one.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from bench.paths import repo_root

REQUIREMENTS_DIR = repo_root() / "docker"
# Markers after a pin, in a comment:
#   no-build-isolation  a source package that compiles against the torch installed before it
#   local-only          installed by `gnnbench stacks install` on a machine, not in the images
#   container-only      installed in the GPU images only (from the CUDA wheel indexes they add)
# GNNBENCH_IN_CONTAINER=1 (the GPU images) selects the container lines; the CPU image (bench-cpu)
# sets 0 and installs the machine's lines, so its stacks are the same as a machine's.
NO_ISOLATION_MARK = "no-build-isolation"
LOCAL_ONLY_MARK = "local-only"
CONTAINER_ONLY_MARK = "container-only"
IN_CONTAINER_ENV = "GNNBENCH_IN_CONTAINER"
COMPLETE_MARK = ".gnnbench-complete.json"
# What `stacks list` imports in each stack to report the versions that really load; an
# install fails when one of these does not import.
PROBE_MODULES = {
    "pyg": ["torch", "torch_geometric", "ogb", "numpy"],
    "pyg-dist": ["torch", "torch_geometric", "pymetis", "numpy"],
    "dgl": ["torch", "dgl", "torchdata", "numpy", "pandas"],
}
# Reported where present: which sampling ops a PyG stack has differs between machine and image.
OPTIONAL_PROBES = {"pyg": ["torch_sparse", "torch_scatter", "pyg_lib"], "pyg-dist": ["pyg_lib"]}
ABSENT = "absent"


# The framework each pinned stack carries: a backend runs in any stack of its framework (the
# `stack` setting), e.g. pyg-dist's backend on current PyG, or PyG's in an external interpreter.
FRAMEWORK = {"pyg": "pyg", "pyg-dist": "pyg", "dgl": "dgl"}
OWN = "own"  # the `stack` setting's name for each backend's own pinned stack


class StackError(RuntimeError):
    pass


@dataclass(frozen=True)
class Stack:
    name: str
    requirements: Path

    external = False

    @property
    def frameworks(self) -> tuple[str, ...]:
        return (FRAMEWORK.get(self.name, self.name),)

    @property
    def pins(self) -> str:
        return self.requirements.read_text()

    @property
    def digest(self) -> str:
        """Of what this environment installs (comments and the other side's lines aside)."""
        plain, no_isolation = self.requirement_lines()
        text = "\n".join(plain + ["--no-build-isolation"] + no_isolation)
        text += f"\npython={sys.version_info.major}.{sys.version_info.minor} container={in_container()}"
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    @property
    def path(self) -> Path:
        return stacks_dir() / f"{self.name}-{self.digest}"

    @property
    def python(self) -> Path:
        return self.path / "bin" / "python"

    @property
    def installed(self) -> bool:
        return (self.path / COMPLETE_MARK).is_file() and self.python.exists()

    def requirement_lines(self, container: bool | None = None) -> tuple[list[str], list[str]]:
        """(plain requirements, requirements that compile against the installed torch), for a
        local install or, inside an image, the container's."""
        if container is None:
            container = in_container()
        plain, no_isolation = [], []
        for raw in self.pins.splitlines():
            line, _, comment = raw.partition("#")
            line = line.strip()
            marks = comment.split()
            if not line or (LOCAL_ONLY_MARK in marks and container) or (CONTAINER_ONLY_MARK in marks and not container):
                continue
            (no_isolation if NO_ISOLATION_MARK in marks else plain).append(line)
        return plain, no_isolation


def in_container() -> bool:
    return os.environ.get(IN_CONTAINER_ENV, "") not in ("", "0")


def stacks_dir() -> Path:
    """GNNBENCH_STACKS_DIR, else the user's cache dir; independent of the dataset cache, so a
    run with a private dataset cache still finds the installed stacks."""
    if os.environ.get("GNNBENCH_STACKS_DIR"):
        return Path(os.environ["GNNBENCH_STACKS_DIR"])
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("gnnbench")) / "stacks"


def available() -> dict[str, Stack]:
    return {
        p.stem.removeprefix("requirements-"): Stack(p.stem.removeprefix("requirements-"), p)
        for p in sorted(REQUIREMENTS_DIR.glob("requirements-*.txt"))
    }


def known() -> dict:
    """The pinned stacks and the external ones registered on this machine (`gnnbench stacks add`)."""
    from bench.run.external_stacks import ExternalStackError, registered

    try:
        return {**available(), **registered()}
    except ExternalStackError as exc:
        raise StackError(str(exc)) from None


def get(name: str):
    """A pinned `Stack` or a registered `ExternalStack`."""
    stacks = known()
    if name not in stacks:
        raise StackError(f"unknown stack {name!r}; known stacks: {', '.join(stacks)} "
                         "(register an interpreter you have with: gnnbench stacks add NAME --python PATH)")
    return stacks[name]


def framework_of(backend_stack: str) -> str:
    return FRAMEWORK.get(backend_stack, backend_stack)


def install(name: str, log=print, force: bool = False) -> Stack:
    """Create the stack's virtual environment unless one with the same pins is complete."""
    # pinned stacks only (an external one is the user's environment: never installed into), and
    # without importing more of gnnbench: the images run this module before the rest is copied in
    pinned = available()
    if name not in pinned:
        raise StackError(f"unknown stack {name!r}: `stacks install` builds the pinned stacks: {', '.join(pinned)}")
    stack = pinned[name]
    if stack.installed and not force:
        log(f"stack {name}: up to date at {stack.path}")
        return stack
    if stack.path.exists():
        shutil.rmtree(stack.path)  # a half-built environment is never reused
    stack.path.parent.mkdir(parents=True, exist_ok=True)
    check_wheel_indexes(name)
    started = time.monotonic()
    log(f"stack {name}: creating {stack.path} (downloads and builds are cached by pip, so only "
        "the first install on a machine is slow)")
    _run([sys.executable, "-m", "venv", str(stack.path)], name, log=log)
    pip = [str(stack.python), "-m", "pip", "install", "--progress-bar", "off"]
    plain, no_isolation = stack.requirement_lines()
    _run(pip + plain, name, log=log)
    if no_isolation:
        log(f"stack {name}: building {', '.join(no_isolation)} against its torch (the first time "
            "about 17 min on 2 cores; then from pip's wheel cache)")
        # torch-sparse/torch-scatter build against the torch just installed; MAX_JOBS keeps
        # the compiler within the machine's cores.
        env = dict(os.environ, MAX_JOBS=os.environ.get("MAX_JOBS", str(os.cpu_count() or 2)))
        _run(pip + ["--no-build-isolation"] + no_isolation, name, env=env, log=log)
    versions = probe_versions(stack)
    required = PROBE_MODULES.get(name, [])
    broken = {k: v for k, v in versions.items() if k in required and v.startswith("import failed")}
    if broken:
        raise StackError(f"stack {name}: installed, but does not import: {broken}")
    (stack.path / COMPLETE_MARK).write_text(json.dumps(
        {"requirements": stack.pins, "versions": versions}, indent=2))
    for stale in stack.path.parent.glob(f"{name}-" + "[0-9a-f]" * 12):
        if stale != stack.path and stale.is_dir():
            shutil.rmtree(stale, ignore_errors=True)  # built from pins that have since changed
            log(f"stack {name}: removed {stale} (older pins)")
    log(f"stack {name}: ready in {time.monotonic() - started:.0f} s: "
        + ", ".join(f"{k} {v}" for k, v in versions.items()))
    if versions.get("pyg_lib") == ABSENT and "torch_sparse" in versions:
        log(f"stack {name}: note: without pyg-lib, PyG's recommended sampler (not on PyPI; PyG's wheel index "
            "https://data.pyg.org/whl/ has it), NeighborLoader samples with torch-sparse's slower "
            "neighbor_sample; every PyG result names the sampler that ran")
    return stack


# pip's own settings that name where wheels come from; an image's stack stage sets them.
INDEX_VARIABLES = ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS")


def check_wheel_indexes(name: str, timeout: float = 20.0) -> None:
    """Each http(s) wheel index given to pip in the environment answers, or StackError names the
    ones that do not. pip itself only warns about an index it cannot reach and then fails later on
    whatever pin only that index has (or quietly installs another build from PyPI)."""
    import ssl
    import urllib.error
    import urllib.request

    context = ssl.create_default_context(cafile=os.environ.get("PIP_CERT") or None)  # pip's CA bundle
    unreachable = []
    for variable in INDEX_VARIABLES:
        for url in os.environ.get(variable, "").split():
            if not url.startswith(("http://", "https://")):
                continue
            try:
                urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout,
                                       context=context).close()
            except urllib.error.HTTPError:
                pass  # it answered: an index that refuses HEAD is still there
            except (urllib.error.URLError, OSError) as e:
                unreachable.append(f"{url} ({variable}): {getattr(e, 'reason', e)}")
    if unreachable:
        raise StackError(f"stack {name}: cannot reach the wheel index(es) this install needs: "
                         + "; ".join(unreachable) + ". Build where they can be reached, or give pip a "
                         "mirror of them (PIP_EXTRA_INDEX_URL / PIP_FIND_LINKS).")


# pip lines worth showing while a stack installs: which package, and that a long build is alive
PIP_PROGRESS = ("Collecting", "Building wheel", "Successfully", "Installing collected")


def _run(cmd: list[str], stack: str, env=None, log=print) -> None:
    tail: list[str] = []
    with subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc:
        for line in proc.stdout:
            tail = (tail + [line.rstrip()])[-25:]
            if line.lstrip().startswith(PIP_PROGRESS):
                log(f"stack {stack}: {line.strip()[:160]}")
    if proc.returncode != 0:
        raise StackError(f"stack {stack}: command failed ({proc.returncode}): {' '.join(cmd)}\n" + "\n".join(tail))


def probe_versions(stack: Stack) -> dict[str, str]:
    """Import each probe module in the stack's interpreter and report its __version__."""
    code = (
        "import importlib, importlib.metadata, json, sys\n"
        "out = {}\n"
        "for m in sys.argv[1:]:\n"
        "    try:\n"
        "        mod = importlib.import_module(m)\n"
        "        out[m] = str(getattr(mod, '__version__', None) or importlib.metadata.version(m))\n"
        "    except ModuleNotFoundError as e:\n"
        "        out[m] = 'absent' if e.name == m else 'import failed: ' + str(e)\n"
        "    except Exception as e:\n"
        "        out[m] = 'import failed: ' + type(e).__name__ + ': ' + str(e)\n"
        "print(json.dumps(out))\n"
    )
    modules = PROBE_MODULES.get(stack.name, ["torch", "numpy"]) + OPTIONAL_PROBES.get(stack.name, [])
    proc = subprocess.run([str(stack.python), "-c", code, *modules], capture_output=True, text=True,
                          env=dict(os.environ, DGLBACKEND="pytorch"), timeout=300)
    if proc.returncode != 0:
        raise StackError(f"stack {stack.name}: probing versions failed: {proc.stderr[-2000:]}")
    versions = json.loads(proc.stdout.strip().splitlines()[-1])
    return {k: v for k, v in versions.items() if v != ABSENT}


def recorded_versions(stack: Stack) -> dict[str, str]:
    mark = stack.path / COMPLETE_MARK
    return json.loads(mark.read_text())["versions"] if mark.is_file() else {}


if __name__ == "__main__":
    # `python -m bench.run.stacks install NAME...`: what `gnnbench stacks install` does, needing only
    # this module, so that the images install their stacks before the rest of gnnbench is copied.
    if sys.argv[1:2] != ["install"] or not sys.argv[2:]:
        sys.exit("usage: python -m bench.run.stacks install NAME...")
    try:
        for stack_name in sys.argv[2:]:
            install(stack_name)
    except StackError as e:
        sys.exit(f"error: {e}")
