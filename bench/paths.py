"""Where things live: the repository, the cache (datasets, stacks) and the results."""

from __future__ import annotations

import os
from pathlib import Path


def repo_root() -> Path:
    return Path(__file__).resolve().parents[1]


def cache_root() -> Path:
    """GNNBENCH_CACHE, else the user's cache dir (~/.cache/gnnbench on Linux)."""
    if os.environ.get("GNNBENCH_CACHE"):
        return Path(os.environ["GNNBENCH_CACHE"])
    from platformdirs import user_cache_dir  # host side only; stacks get GNNBENCH_CACHE set

    return Path(user_cache_dir("gnnbench"))


def stacks_dir() -> Path:
    """GNNBENCH_STACKS_DIR, else the user's cache dir; independent of the dataset cache, so a
    run with a private dataset cache still finds the installed stacks (pinned and external)."""
    if os.environ.get("GNNBENCH_STACKS_DIR"):
        return Path(os.environ["GNNBENCH_STACKS_DIR"])
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("gnnbench")) / "stacks"


def cache_dir(given: Path | str | None, writable: bool) -> Path:
    """The dataset hub folder: `--cache-dir` where given, else cache_root(); checked as the
    input it came from (InputError names the option or the variable). `writable`: the command
    writes there (prepare, run), not only reads (list, info)."""
    from bench.inputs import folder

    if given:
        return folder(f"--cache-dir {given}", given, writable)
    if os.environ.get("GNNBENCH_CACHE"):
        return folder(f"GNNBENCH_CACHE={os.environ['GNNBENCH_CACHE']}", cache_root(), writable)
    return folder("the cache folder (set GNNBENCH_CACHE or --cache-dir to move it)", cache_root(), writable)


def default_results_dir() -> Path:
    return repo_root() / "results" / "runs"


def suites_dir() -> Path:
    return repo_root() / "suites"
