"""Software stacks: the interpreters cells run in. Here the pinned ones, one virtual environment per
framework built from docker/requirements-NAME.txt (its folder named by a hash of its pins and the
host Python, so changed pins build a new one beside it, under the folder's lock), and `get`/`known`
for every stack. Needs only bench.paths and bench.locks: the images run `python -m bench.stacks
install NAME` first. PyG's sampler (pyg-lib, else the fallback built from source): docs/comparisons.md.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from bench import locks
from bench.paths import (ABSENT, COMPLETE_MARK, FALLBACK, OPTIONAL_PROBES, PROBE_MODULES, PYG_INDEX, PYG_WHEELS_ENV,
                         VERSIONS_CODE, recorded_sampler, repo_root, sampler_summary, stacks_dir, write_atomic)
from bench.stacks import versions

REQUIREMENTS_DIR = repo_root() / "docker"
# Markers after a pin, in a comment (docs/containers.md); GNNBENCH_IN_CONTAINER=1 selects container-only.
NO_ISOLATION_MARK = "no-build-isolation"  # compiled against the torch installed before it
CUDA_MAJOR_MARKS = {"cuda12": "12", "cuda13": "13"}  # only in the image tag of that CUDA major
TORCH_CUDA_ENV = "GNNBENCH_TORCH_CUDA"  # the images' CUDA wheel tag (cu130, cu126)
LOCAL_ONLY_MARK = "local-only"
CONTAINER_ONLY_MARK = "container-only"
PYG_WHEELS_MARK = "pyg-wheels"
FALLBACK_MARK = "pyg-wheels-fallback"
# {TORCH} and {CUDA}: the stack's own torch build (2.13.0, cpu / cu130...)
PYG_WHEELS_DEFAULT = "https://data.pyg.org/whl/torch-{TORCH}+{CUDA}.html"
INDEX_TIMEOUT = 10.0  # seconds an index may take to answer before the fallback is taken
IN_CONTAINER_ENV = "GNNBENCH_IN_CONTAINER"
THIS_PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"  # the pinned stacks' (venvs of this interpreter)
# pip's own settings that name where wheels come from; an image's stack stage sets them.
INDEX_VARIABLES = ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS")
# pip lines worth showing while a stack installs: which package, and that a long build is alive
PIP_PROGRESS = ("Collecting", "Building wheel", "Successfully", "Installing collected")
CONTAINER_ONLY_STACK = ("stack {name} is built in the GPU images only (every pin in {pins} is container-only: "
                        "its wheels are CUDA-only): run its cells in the GPU image (docker compose run bench), "
                        "or register an interpreter that has it (gnnbench stacks add {name} --python PATH)")


# The framework each pinned stack carries: a backend runs in any stack of its framework (`stack`).
FRAMEWORK = {"pyg": "pyg", "pyg-dist": "pyg", "dgl": "dgl", "cugraph-pyg": "pyg"}
OWN = "own"  # the `stack` setting's name for each backend's own pinned stack
# A versioned stack (pyg@2.6.1, bench.stacks.versions) runs, and is probed as, its base stack.
for _name in versions.names():
    FRAMEWORK[_name] = versions.split(_name)[0]
    _base = versions.BASES[FRAMEWORK[_name]][0]
    PROBE_MODULES[_name], OPTIONAL_PROBES[_name] = PROBE_MODULES[_base], OPTIONAL_PROBES[_base]


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
        text = "\n".join(plain + ["--no-build-isolation"] + no_isolation + ["--pyg-wheels"] + self.pyg_wheel_lines())
        text += f"\npython={sys.version_info.major}.{sys.version_info.minor} container={in_container()}"
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    @property
    def path(self) -> Path:
        return stacks_dir() / f"{self.name}-{self.digest}"

    @property
    def python(self) -> Path:
        return self.path / "bin" / "python"

    @property
    def container_only(self) -> bool:
        """Every pin is container-only: a machine never builds it (its wheels are CUDA-only)."""
        lines = self._lines()
        return bool(lines) and all(CONTAINER_ONLY_MARK in marks for _, marks in lines)

    @property
    def installed(self) -> bool:
        return (self.path / COMPLETE_MARK).is_file() and self.python.exists()

    def requirement_lines(self, container: bool | None = None) -> tuple[list[str], list[str]]:
        """(plain requirements, those that compile against the installed torch) here or in an image;
        the pyg-wheels pins apart (`pyg_wheel_lines`)."""
        container = in_container() if container is None else container
        plain, no_isolation = [], []
        for line, marks in self._lines():
            if (LOCAL_ONLY_MARK in marks and container) or (CONTAINER_ONLY_MARK in marks and not container) \
                    or PYG_WHEELS_MARK in marks or not for_this_cuda(marks):
                continue
            (no_isolation if NO_ISOLATION_MARK in marks else plain).append(line)
        return plain, no_isolation

    def pyg_wheel_lines(self) -> list[str]:
        """The pins taken from PyG's wheel index (pyg-lib)."""
        return [line for line, marks in self._lines() if PYG_WHEELS_MARK in marks]

    def fallback_lines(self) -> list[str]:
        """The pins built only where PyG's wheel index gave no pyg-lib (torch-sparse, torch-scatter)."""
        return [line for line, marks in self._lines() if FALLBACK_MARK in marks]

    def _lines(self) -> list[tuple[str, list[str]]]:
        split = [raw.partition("#") for raw in self.pins.splitlines()]
        return [(line.strip(), comment.split()) for line, _, comment in split if line.strip()]


def for_this_cuda(marks: list[str]) -> bool:
    """A line marked cuda12/cuda13 belongs to the image tag of that CUDA major (GNNBENCH_TORCH_CUDA)."""
    wanted = {CUDA_MAJOR_MARKS[m] for m in marks if m in CUDA_MAJOR_MARKS}
    return not wanted or os.environ.get(TORCH_CUDA_ENV, "cu130").removeprefix("cu")[:2] in wanted


def in_container() -> bool:
    return os.environ.get(IN_CONTAINER_ENV, "") not in ("", "0")


def available() -> dict[str, Stack]:
    named = ((p.stem.removeprefix("requirements-"), p) for p in sorted(REQUIREMENTS_DIR.glob("requirements-*.txt")))
    return {name: Stack(name, p) for name, p in named}


@dataclass(frozen=True)
class VersionedStack(Stack):
    """A framework's pinned stack at another release (bench.stacks.versions), its pins generated."""
    text: str = ""
    base: Stack | None = None

    @property
    def pins(self) -> str:
        return self.text

    def write_requirements(self) -> None:
        write_atomic(self.requirements, self.pins)

    @property
    def path(self) -> Path:
        """The base stack's environment where the pins are the same (pyg@2.8.1 is the pyg stack)."""
        return self.base.path if self.base is not None and self.base.digest == self.digest else super().path


def versioned_stacks() -> dict[str, VersionedStack]:
    """The stacks of each framework release in bench.stacks.versions.RELEASES (pyg@2.6.1, ...)."""
    pinned, out = available(), {}
    for name in versions.names():
        framework, release = versions.split(name)
        base = pinned.get(versions.BASES[framework][0])
        if base is not None:  # else a checkout without the framework's pin file (an install entry of its own)
                out[name] = VersionedStack(name, versions.requirements_path(name),
                                       versions.pins(framework, release, base.pins, base.requirements), base)
    return out


def known() -> dict:
    """The pinned stacks, the versioned ones and the external ones registered here."""
    from bench.stacks.external import ExternalStackError, registered  # external imports this module; the images run this one alone

    try:
        return {**available(), **versioned_stacks(), **registered()}
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
    """Create the stack's virtual environment unless one with the same pins is complete (and, for a
    stack that fell back from PyG's wheel index, unless that index now answers). Pinned stacks only."""
    pinned = {**available(), **versioned_stacks()}
    if name not in pinned:
        raise StackError(f"unknown stack {name!r}: `stacks install` builds the pinned stacks: {', '.join(pinned)}")
    stack = pinned[name]
    if stack.container_only and not in_container():
        raise StackError(CONTAINER_ONLY_STACK.format(name=name, pins=stack.requirements.name))
    if isinstance(stack, VersionedStack):
        stack.write_requirements()
    with locks.held(stack.path, f"installing stack {name}", say=lambda line: log(f"stack {name}: {line}")):
        built = _install(stack, log, force)
    if built:
        sweep_older(stack, log)
    return stack


def _install(stack: Stack, log, force: bool) -> bool:
    """Build the stack unless it is up to date; whether it was built."""
    name = stack.name
    if stack.installed and not force:
        if not (now_there := index_answers_now(stack)):
            sampler = recorded_sampler(stack.path)
            log(f"stack {name}: up to date at {stack.path}"
                + (f" (sampler: {sampler_summary(sampler)})" if sampler else ""))
            return False
        log(f"stack {name}: rebuilding it with pyg-lib: {now_there}")
    if stack.pyg_wheel_lines():  # before anything is removed or built: the pinned torch (its build once installed)
        check_wheels(next((line.split("==")[1] for line in stack.requirement_lines()[0] if line.startswith("torch==")), None))
    if stack.path.exists():
        shutil.rmtree(stack.path)  # a half-built environment is never reused (the lock says none is being built)
    stack.path.parent.mkdir(parents=True, exist_ok=True)
    check_wheel_indexes(name)
    try:
        _build(stack, log)
    except BaseException:  # failed, interrupted (Ctrl-C, SIGTERM): nothing half-built is left
        shutil.rmtree(stack.path, ignore_errors=True)
        raise
    return True


def _build(stack: Stack, log) -> None:
    name = stack.name
    started = time.monotonic()
    log(f"stack {name}: creating {stack.path} (downloads and builds are cached by pip, so only "
        "the first install on a machine is slow)")
    _run([sys.executable, "-m", "venv", str(stack.path)], name, log=log)
    pip = [str(stack.python), "-m", "pip", "install", "--progress-bar", "off"]
    plain, no_isolation = stack.requirement_lines()
    _run(pip + plain, name, log=log)
    sampler = take_pyg_wheels(stack, pip, log=log)
    if sampler.get("source") == PYG_INDEX:
        no_isolation = [line for line in no_isolation if line not in stack.fallback_lines()]
    if no_isolation:
        log(f"stack {name}: building {', '.join(no_isolation)} against its torch (the first time "
            "about 17 min on 2 cores; then from pip's wheel cache)")
        # against the torch just installed; MAX_JOBS keeps the compiler within the machine's cores
        env = dict(os.environ, MAX_JOBS=os.environ.get("MAX_JOBS", str(os.cpu_count() or 2)))
        _run(pip + ["--no-build-isolation"] + no_isolation, name, env=env, log=log)
    versions = probe_versions(stack)
    required = PROBE_MODULES.get(name, [])
    if broken := {k: v for k, v in versions.items() if k in required and v.startswith("import failed")}:
        raise StackError(f"stack {name}: installed, but does not import: {broken}")
    if sampler:
        sampler["summary"] = sampler_summary(sampler, versions)
    (stack.path / COMPLETE_MARK).write_text(json.dumps(
        {"requirements": stack.pins, "versions": versions, **({"sampler": sampler} if sampler else {})}, indent=2))
    log(f"stack {name}: ready in {time.monotonic() - started:.0f} s: "
        + ", ".join(f"{k} {v}" for k, v in versions.items()))
    if sampler:
        log(f"stack {name}: sampler: {sampler['summary']}")


def sweep_older(stack: Stack, log=print) -> None:
    """Remove the stack's folders built from older pins, each under its own lock (a held one is left, said)."""
    for stale in stack.path.parent.glob(f"{stack.name}-" + "[0-9a-f]" * 12):
        if stale == stack.path or not stale.is_dir():
            continue
        with locks.held_if_free(stale, f"removing stack {stack.name} (older pins)") as free:
            if not free:
                owner = locks.read_owner(stale)
                log(f"stack {stack.name}: left {stale} (older pins): "
                    + (locks.describe(owner) if owner else "another process holds its lock"))
                continue
            shutil.rmtree(stale, ignore_errors=True)
        log(f"stack {stack.name}: removed {stale} (older pins)")


# --- PyG's wheel index (pyg-lib), and the fallback -----------------------------------------------

def pyg_wheels_url(torch: str, cuda: str) -> str:
    """GNNBENCH_PYG_WHEELS (else PyG's own index) for torch `torch` (2.13.0) built for `cuda` (cpu, cu130)."""
    template = os.environ.get(PYG_WHEELS_ENV) or PYG_WHEELS_DEFAULT
    return template.replace("{TORCH}", torch).replace("{CUDA}", cuda)


def local_wheels(location: str) -> Path | None:
    """The local folder (or page) a wheel location names, as pip's --find-links takes one; None for an http(s) index."""
    return None if location.startswith(("http://", "https://")) else Path(location.removeprefix("file://"))


def wheel_fits(name: str, torch: str | None, cuda: str | None, python: str, machine: str) -> bool:
    """Whether a wheel's file name says pyg-lib, for torch `torch`+`cuda` (its +ptXYcuda tag where it has
    one; None: any), CPython `python` (3.12) and `machine`: tags that could install."""
    parts = name.removesuffix(".whl").split("-")
    built = re.fullmatch(r"pt(\d)(\d+)(\w*)", parts[1].partition("+")[2]) if len(parts) in (5, 6) else None
    minor = int(python.split(".")[1])
    pythons = {"py3", f"py3{minor}", f"cp3{minor}", *(f"cp3{m}" for m in range(minor + 1) if parts[-2] == "abi3")}
    return (len(parts) in (5, 6) and parts[0] == "pyg_lib" and bool(pythons & set(parts[-3].split(".")))
            and ("+" not in parts[1] or not torch or bool(built) and cuda in (None, built[3])
                 and f"{built[1]}.{built[2]}" == ".".join(torch.split(".")[:2]))
            and any(p == "any" or p.endswith(f"_{machine}") for p in parts[-1].split(".")))


def check_wheels(torch: str | None = None, cuda: str | None = None, python: str = THIS_PYTHON,
                 machine: str = platform.machine()) -> None:
    """StackError where GNNBENCH_PYG_WHEELS names a local folder that cannot serve (`reachable`): the one
    check `stacks install` and `gnnbench bundle` make before acting on it (a slip never rebuilds a stack)."""
    given, url = os.environ.get(PYG_WHEELS_ENV, ""), pyg_wheels_url(torch or "", cuda or "")
    why = given and local_wheels(url) and not ("{" in given and not cuda) and reachable(url, torch, cuda, python, machine)
    if why:
        raise StackError(f"{PYG_WHEELS_ENV}={given}: {why}; point it at a folder holding pyg-lib wheels"
                         f"{f' for torch {torch}+{cuda}' if torch else ''} (pyg_lib-*.whl), or unset it for PyG's own index")


def reachable(location: str, torch: str | None = None, cuda: str | None = None, python: str = THIS_PYTHON,
              machine: str = platform.machine(), timeout: float = INDEX_TIMEOUT) -> str | None:
    """None where a wheel index answers (an http(s) page, or a local folder holding a pyg-lib wheel whose
    tags fit that torch, None: any, Python and machine), else why not."""
    if (path := local_wheels(location)) is not None:
        names = sorted(p.name for p in path.glob("pyg_lib-*.whl")) if path.is_dir() else []
        if not path.is_dir() or not names:
            return f"{path} " + ("holds no pyg-lib wheel (pyg_lib-*.whl)" if path.is_dir() else
                                 "is a file, not a folder of wheels" if path.exists() else "does not exist")
        build = f"torch {torch}" + (f"+{cuda}" if cuda else "") + ", " if torch else ""
        return None if any(wheel_fits(n, torch, cuda, python, machine) for n in names) else (
            f"{path}: none of its pyg-lib wheels ({', '.join(names[:3])}{', ...' if len(names) > 3 else ''}) installs "
            f"for {build}CPython {python} on {machine}")
    code, reason = _head(location, timeout)
    if code == 404:
        return "404 not found (no wheels for that torch and CUDA there)"
    if reason is None:
        return None
    return f"no answer in {timeout:g} s" if isinstance(reason, TimeoutError) or "timed out" in str(reason) \
        else str(reason)


def _head(url: str, timeout: float) -> tuple[int | None, object]:
    """(HTTP error code or None, why it did not answer or None) of a HEAD request, with pip's CA bundle."""
    import ssl
    import urllib.error
    import urllib.request

    context = ssl.create_default_context(cafile=os.environ.get("PIP_CERT") or None)
    try:
        urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout, context=context).close()
    except urllib.error.HTTPError as exc:
        return exc.code, None  # it answered
    except (urllib.error.URLError, OSError) as exc:
        return None, getattr(exc, "reason", exc)
    return None, None


def torch_build(python: Path | str) -> tuple[str, str]:
    """(version without its local tag, build tag: cpu or cuNNN) of the torch an interpreter imports."""
    code = ("import torch; v = torch.version; "
            "print(torch.__version__.split('+')[0], 'cu' + v.cuda.replace('.', '') if v.cuda else "
            "('rocm' + v.hip.split('-')[0].rsplit('.', 1)[0] if getattr(v, 'hip', None) else 'cpu'))")
    proc = subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise StackError(f"torch does not import in {python}: {proc.stderr.strip()[-1000:]}")
    return tuple(proc.stdout.split()[-2:])


def take_pyg_wheels(stack: Stack, pip: list[str], log=print) -> dict:
    """Install the stack's pyg-wheels pins from PyG's wheel index: the record of the source taken."""
    if not (wanted := stack.pyg_wheel_lines()):
        return {}
    torch, cuda = torch_build(stack.python)
    url = pyg_wheels_url(torch, cuda)
    record = {"index": url, "torch_build": f"{torch}+{cuda}", "wanted": wanted}
    log(f"stack {stack.name}: {', '.join(wanted)} from PyG's wheel index for torch {torch}+{cuda}: {url}")
    check_wheels(torch, cuda)  # a folder the user named: a slip to correct, not a fallback to build
    if why := reachable(url):
        why = f"{url} cannot be reached: {why}"
    else:
        try:
            # a plain-http mirror named in GNNBENCH_PYG_WHEELS is trusted as given (pip ignores one otherwise)
            trusted = ["--trusted-host", url.split("/")[2]] if url.startswith("http://") else []
            _run(pip + ["--no-index", "--no-deps", *trusted, "--find-links", url, *wanted], stack.name, log=log)
        except StackError as exc:
            last = [line for line in str(exc).splitlines() if line.strip()][-1][:200]
            why = f"{url} holds no {', '.join(wanted)} wheel for torch {torch}+{cuda} and this Python ({last})"
        else:
            if broken := import_problem(stack.python, "pyg_lib"):
                why = f"the pyg-lib wheel from {url} does not import with torch {torch}+{cuda} ({broken})"
                _run([str(stack.python), "-m", "pip", "uninstall", "-y", "pyg-lib"], stack.name, log=log)
    if why is None:
        return {**record, "source": PYG_INDEX}
    fallback = stack.fallback_lines()
    record.update(source=FALLBACK, reason=why, fallback=fallback)
    log(f"stack {stack.name}: no pyg-lib: {why}; "
        + (f"building {', '.join(fallback)} from source instead (PyG's slower sampler)" if fallback else
           f"the stack goes without it (its cells are skipped with this reason); set {PYG_WHEELS_ENV} "
           "to a mirror of PyG's wheel index and install again"))
    return record


def import_problem(python: Path | str, module: str) -> str | None:
    proc = subprocess.run([str(python), "-c", f"import {module}"], capture_output=True, text=True, timeout=300)
    return None if proc.returncode == 0 else (proc.stderr.strip().splitlines() or ["?"])[-1][:300]


def index_answers_now(stack: Stack) -> str | None:
    """Why a stack that fell back for want of PyG's wheel index is worth rebuilding now, else None."""
    sampler = recorded_sampler(stack.path)
    if sampler.get("source") != FALLBACK or "+" not in sampler.get("torch_build", ""):
        return None
    torch, cuda = sampler["torch_build"].split("+", 1)
    url = pyg_wheels_url(torch, cuda)
    if url == sampler.get("index") and " cannot be reached: " not in sampler.get("reason", ""):
        return None  # it answered then and had no pyg-lib that fits: the same now
    if reachable(url, torch, cuda) is not None:  # a folder that cannot serve here is no reason to rebuild
        return None
    return f"{url} answers now (when this stack was built: {sampler.get('reason')})"


def check_wheel_indexes(name: str, timeout: float = 20.0) -> None:
    """Each http(s) wheel index given to pip in the environment answers, or StackError names the ones
    that do not (pip only warns, then fails later, or quietly installs another build from PyPI)."""
    heads = ((variable, url, _head(url, timeout)[1]) for variable in INDEX_VARIABLES
             for url in os.environ.get(variable, "").split() if url.startswith(("http://", "https://")))
    # an index that refuses HEAD still answered (its reason is None)
    unreachable = [f"{url} ({variable}): {reason}" for variable, url, reason in heads if reason is not None]
    if unreachable:
        raise StackError(f"stack {name}: cannot reach the wheel index(es) this install needs: "
                         + "; ".join(unreachable) + ". Build where they can be reached, or give pip a "
                         "mirror of them (PIP_EXTRA_INDEX_URL / PIP_FIND_LINKS).")


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
    code = VERSIONS_CODE + "print(json.dumps(versions))\n"
    modules = PROBE_MODULES.get(stack.name, ["torch", "numpy"]) + OPTIONAL_PROBES.get(stack.name, [])
    proc = subprocess.run([str(stack.python), "-c", code, *modules], capture_output=True, text=True,
                          env=dict(os.environ, DGLBACKEND="pytorch"), timeout=300)
    if proc.returncode != 0:
        raise StackError(f"stack {stack.name}: probing versions failed: {proc.stderr[-2000:]}")
    versions = json.loads(proc.stdout.strip().splitlines()[-1])
    return {k: v for k, v in versions.items() if v != ABSENT}


def recorded_versions(stack: Stack) -> dict[str, str]:
    """The versions probed at install, with where the sampler came from (`sampler_source`) for the PyG stacks."""
    mark = stack.path / COMPLETE_MARK
    if not mark.is_file():
        return {}
    record = json.loads(mark.read_text())
    sampler = record.get("sampler")
    return {**record["versions"], **({"sampler_source": sampler_summary(sampler)} if sampler else {})}
