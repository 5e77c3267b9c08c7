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


def default_results_dir() -> Path:
    return repo_root() / "results" / "runs"


def suites_dir() -> Path:
    return repo_root() / "suites"
