"""Where things live: the repository, the cache (datasets, stacks) and the results; and what a
stack's install records and probes, which bench/stacks/ writes and the worker reads inside the
stack. platformdirs (host only) is imported only where GNNBENCH_CACHE is unset, which a stack
never sees (bench/run/runner.py worker_env), and by stacks_dir, which only the host calls.
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
from pathlib import Path


def repo_root() -> Path:
    return Path(__file__).resolve().parents[1]


def write_atomic(path: Path, text: str) -> None:
    """Write `path` whole (its folder made if need be): aside, then renamed over it, so a reader
    never sees half of it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}-{threading.get_ident()}")
    try:
        partial.write_text(text)
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)


def _user_cache() -> Path:
    from platformdirs import user_cache_dir  # host side only; stacks get GNNBENCH_CACHE set

    return Path(user_cache_dir("gnnbench"))


def cache_root() -> Path:
    """GNNBENCH_CACHE, else the user's cache dir (~/.cache/gnnbench on Linux)."""
    return Path(os.environ.get("GNNBENCH_CACHE") or _user_cache())


def stacks_dir() -> Path:
    """GNNBENCH_STACKS_DIR, else the user's cache dir's stacks/; independent of the dataset cache, so
    a run with a private dataset cache still finds the installed stacks (pinned and external)."""
    return Path(os.environ.get("GNNBENCH_STACKS_DIR") or _user_cache() / "stacks")


# A stack's install record (bench/stacks/ writes it; the backends read it in their stack)
COMPLETE_MARK = ".gnnbench-complete.json"
PYG_WHEELS_ENV = "GNNBENCH_PYG_WHEELS"  # where pyg-lib's wheels come from (bench/stacks/)


# What `stacks list` imports in each stack to report the versions that load; an install fails without one.
PROBE_MODULES = {
    "pyg": ["torch", "torch_geometric", "ogb", "numpy"],
    "pyg-dist": ["torch", "torch_geometric", "pymetis", "numpy"],
    "dgl": ["torch", "dgl", "torchdata", "numpy", "pandas"],
    "cugraph-pyg": ["torch", "torch_geometric", "cugraph_pyg", "pylibwholegraph", "numpy"],
}
# Reported where present: which sampling ops a PyG stack has differs between machine and image.
OPTIONAL_PROBES = {"pyg": ["torch_sparse", "torch_scatter", "pyg_lib"], "pyg-dist": ["pyg_lib"]}
PYG_INDEX, FALLBACK = "pyg-wheels", "fallback"  # the two sources a stack's sampler can come from
ABSENT = "absent"  # a probed module that is not installed
# Run in a stack's interpreter: the version of each module named on its command line (`versions`).
VERSIONS_CODE = r"""
import importlib, importlib.metadata, json, sys
versions = {}
for m in sys.argv[1:]:
    try:
        mod = importlib.import_module(m)
        versions[m] = str(getattr(mod, "__version__", None) or importlib.metadata.version(m))
    except ModuleNotFoundError as e:
        versions[m] = "absent" if e.name == m else "import failed: " + str(e)
    except Exception as e:
        versions[m] = "import failed: " + type(e).__name__ + ": " + str(e)[:200]
"""


def recorded_sampler(folder: Path) -> dict:
    """What the install of the pinned stack in `folder` recorded about its sampler's source ({}: nothing)."""
    try:
        return json.loads((Path(folder) / COMPLETE_MARK).read_text()).get("sampler") or {}
    except (OSError, ValueError):
        return {}


def running_stack_no_pyg_lib() -> str:
    """In a stack's own interpreter: why its install took no pyg-lib, or ''."""
    return recorded_sampler(Path(sys.prefix)).get("reason", "")


def sampler_summary(sampler: dict, versions: dict | None = None) -> str:
    """One line: which source a stack's sampler came from, and why."""
    if not sampler:
        return ""
    if versions is None and sampler.get("summary"):
        return sampler["summary"]  # as written at install, with the versions then
    versions = versions or {}
    if sampler.get("source") == PYG_INDEX:
        return f"pyg-lib {versions.get('pyg_lib', '')} from {sampler['index']}".replace("  ", " ")
    taken = ", ".join(f"{n} {versions.get(n.replace('-', '_'), '')}".strip()
                      for n in (re.split(r"[=<>!~ ;\[]", line, maxsplit=1)[0] for line in sampler.get("fallback", [])))
    return (f"{taken} built from source, as PyG's wheel index gave no pyg-lib: {sampler.get('reason')}" if taken
            else f"no pyg-lib: {sampler.get('reason')}")


def running_stack_sampler() -> str:
    """In a stack's own interpreter (a worker): where its sampler came from, as its install recorded, or ''."""
    return sampler_summary(recorded_sampler(Path(sys.prefix)))


def cache_dir(given: Path | str | None, writable: bool) -> Path:
    """The dataset hub folder: `--cache-dir` where given, else cache_root(), checked as the input it
    came from; `writable`: the command writes there."""
    from bench.inputs import folder  # inputs imports this module (the layers' lowest): a cycle at the top

    if given:
        return folder(f"--cache-dir {given}", given, writable)
    if os.environ.get("GNNBENCH_CACHE"):
        return folder(f"GNNBENCH_CACHE={os.environ['GNNBENCH_CACHE']}", cache_root(), writable)
    return folder("the cache folder (set GNNBENCH_CACHE or --cache-dir to move it)", cache_root(), writable)


def default_results_dir() -> Path:
    return repo_root() / "results" / "runs"


def suites_dir() -> Path:
    return repo_root() / "suites"
