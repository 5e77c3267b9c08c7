from __future__ import annotations

import os
from pathlib import Path

import pytest

from bench import stacks

REPO = Path(__file__).resolve().parents[1]


def require_stacks(*names: str) -> None:
    """Stack tests need the installed stacks. Under CI they are installed by .ci/run, so a
    missing stack there is a failure, not a skip."""
    missing = [n for n in names if not stacks.get(n).installed]
    if missing:
        message = f"stacks not installed: {', '.join(missing)} (gnnbench stacks install {' '.join(missing)})"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture
def write_suite(tmp_path):
    def write(text: str, name: str = "suite.yaml") -> Path:
        path = tmp_path / name
        path.write_text(text)
        return path
    return write


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory) -> Path:
    """A dataset hub private to this test session (the stacks stay in the shared stacks dir)."""
    return tmp_path_factory.mktemp("hub")
