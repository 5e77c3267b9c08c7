"""External stacks: an interpreter the user already has (a conda env, an NGC container's python, a
cluster module), registered with `gnnbench stacks add NAME --python PATH` after a probe of what
imports there; nothing is installed into it. Results record it with its probed versions and a hash
of its installed distributions, so two runs can tell whether the environment changed.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from bench.inputs import plain_name_problem
from bench.paths import ABSENT, VERSIONS_CODE, stacks_dir, write_atomic

# What an interpreter must import to run a backend of each framework, and what more is reported.
FRAMEWORK_NEEDS = {"pyg": ("torch", "torch_geometric", "numpy"), "dgl": ("torch", "dgl", "torchdata", "numpy")}
REPORTED = ("pyg_lib", "torch_sparse", "torch_scatter", "lmdb", "ogb", "pymetis", "psutil")
PROBE = tuple(dict.fromkeys(m for needs in FRAMEWORK_NEEDS.values() for m in needs)) + REPORTED

# Run in the interpreter being registered: only the standard library and what it probes.
PROBE_CODE = VERSIONS_CODE + r"""
import hashlib, platform
out = {"python": platform.python_version(), "executable": sys.executable, "versions": versions}
try:
    import torch
    out["torch_cuda"] = torch.version.cuda
    out["cuda_available"] = torch.cuda.is_available()
except Exception:
    pass
freeze = sorted({f"{d.metadata['Name']}=={d.version}".lower() for d in importlib.metadata.distributions()
                 if d.metadata["Name"]})
out["distributions"] = len(freeze)
out["freeze_sha256"] = hashlib.sha256("\n".join(freeze).encode()).hexdigest()
print(json.dumps(out))
"""
# The keys of a recorded external stack that describe it rather than name a package version
DESCRIPTION_KEYS = ("external", "interpreter", "added", "freeze_sha256")
PROBE_TIMEOUT_S = 300.0


class ExternalStackError(ValueError):
    pass


@dataclass(frozen=True)
class ExternalStack:
    """A registered interpreter. Shares the interface the runner uses with a pinned `Stack`."""
    name: str
    python: Path
    probe: dict  # what PROBE_CODE printed when it was added
    added: str = ""

    external = True

    @property
    def installed(self) -> bool:
        return self.python.exists()

    @property
    def versions(self) -> dict[str, str]:
        return {k: v for k, v in self.probe.get("versions", {}).items() if v != ABSENT}

    @property
    def frameworks(self) -> tuple[str, ...]:
        """The frameworks whose backends this interpreter can run."""
        return tuple(f for f, needs in FRAMEWORK_NEEDS.items() if not any(self.lacks(m) for m in needs))

    def lacks(self, module: str) -> bool:
        return self.versions.get(module, "import failed").startswith("import failed")  # absent: lacking

    def record(self) -> dict:
        """How results describe it (beside the pinned stacks' versions)."""
        return {"external": True, "interpreter": str(self.python), "added": self.added,
                "freeze_sha256": self.probe.get("freeze_sha256"),
                "python": self.probe.get("python"), "torch_cuda": self.probe.get("torch_cuda"), **self.versions}


def registry_dir() -> Path:
    return stacks_dir() / "external"


def registered() -> dict[str, ExternalStack]:
    found = {}
    folder = registry_dir()
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            raw = json.loads(path.read_text())
            found[path.stem] = ExternalStack(path.stem, Path(raw["python"]), raw["probe"], raw.get("added", ""))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ExternalStackError(f"{path}: not a registered stack ({type(exc).__name__}: {exc}); "
                                     f"remove it, or register again with gnnbench stacks add {path.stem} "
                                     "--python PATH") from None
    return found


def probe(python: Path, timeout: float = 300) -> dict:
    """What imports in that interpreter, from a clean environment (no PYTHONPATH of ours)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["DGLBACKEND"] = "pytorch"
    try:
        proc = subprocess.run([str(python), "-c", PROBE_CODE, *PROBE], capture_output=True, text=True,
                              env=env, timeout=timeout)
    except OSError as exc:
        raise ExternalStackError(f"--python {python}: cannot start it ({exc.strerror or exc})") from None
    except subprocess.TimeoutExpired:
        raise ExternalStackError(f"--python {python}: probing its packages took over {timeout:g} s") from None
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or [f"exit code {proc.returncode}"])[-1]
        raise ExternalStackError(f"--python {python}: probing it failed: {tail}")
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise ExternalStackError(f"--python {python}: its probe printed no result "
                                 f"(is it a Python 3 interpreter?): {proc.stdout[-300:]!r}") from None


def add(name: str, python: str | Path, pinned: Iterable[str], log=print,
        timeout: float = PROBE_TIMEOUT_S) -> ExternalStack:
    """Register `python` as stack `name`; `pinned`: the pinned stacks' names (not to be taken)."""
    if problem := plain_name_problem(name):
        raise ExternalStackError(f"stack name {problem}")
    if name in set(pinned) or name == "own":
        raise ExternalStackError(f"stack name {name!r} is taken by a pinned stack (or means each backend's "
                                 "own); choose another name")
    path = Path(python).expanduser()
    if not path.exists():
        raise ExternalStackError(f"--python {python}: no such file")
    if not os.access(path, os.X_OK) or path.is_dir():
        raise ExternalStackError(f"--python {python}: not an executable file")
    path = path.absolute()  # not resolved: a venv's bin/python is a link whose folder matters
    log(f"stack {name}: probing {path}: importing {', '.join(PROBE)} there (waiting at most {timeout:g} s; "
        "--timeout S to change it) ...")
    found = probe(path, timeout=timeout)
    log(f"stack {name}: probed: {', '.join(f'{k} {v}' for k, v in found.get('versions', {}).items()) or 'nothing found'}")
    stack = ExternalStack(name, path, found, dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"))
    if not stack.frameworks:
        missing = {f: [m for m in needs if stack.lacks(m)] for f, needs in FRAMEWORK_NEEDS.items()}
        raise ExternalStackError(
            f"--python {python}: can run no backend: "
            + "; ".join(f"{f} needs {', '.join(m)}" for f, m in missing.items())
            + f" (found: {', '.join(f'{k} {v}' for k, v in found.get('versions', {}).items() if v != ABSENT) or 'none of them'})")
    write_atomic(registry_dir() / f"{name}.json",
                 json.dumps({"python": str(path), "probe": found, "added": stack.added}, indent=2))
    log(f"stack {name}: {path} registered as an external stack for {', '.join(stack.frameworks)} backends: "
        + ", ".join(f"{k} {v}" for k, v in stack.versions.items()))
    if "pyg" in stack.frameworks and stack.lacks("pyg_lib"):
        log(f"stack {name}: note: no pyg-lib here, so PyG's NeighborLoader samples with "
            + ("torch-sparse" if not stack.lacks("torch_sparse") else "no compiled sampler at all (it fails)"))
    return stack


def remove(name: str) -> None:
    target = registry_dir() / f"{name}.json"
    if not target.is_file():
        raise ExternalStackError(f"no external stack named {name!r} "
                                 f"(registered: {', '.join(registered()) or 'none'})")
    target.unlink()
