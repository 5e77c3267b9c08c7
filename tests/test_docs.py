"""The docs site: it builds with `mkdocs build --strict` (broken links, missing pages and bad
references fail it), its reference pages are generated from the code, and every suite key and
column has a description there."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.publish import columns, reference

ROOT = Path(__file__).resolve().parents[1]
QUIET = {"NO_MKDOCS_2_WARNING": "1", "DISABLE_MKDOCS_2_WARNING": "true"}


def test_mkdocs_builds_strict(tmp_path):
    out = tmp_path / "docs"
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
                          cwd=ROOT, capture_output=True, text=True, env={**os.environ, **QUIET}, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    keys = (out / "reference" / "suite-keys.html").read_text()
    cols = (out / "reference" / "columns.html").read_text()
    # generated from the code: every setting and every column header is on its page
    from bench.run.suite import Settings
    for name in Settings.model_fields:
        assert f"<code>{name}</code>" in keys, name
    for col in columns.CELL_COLUMNS:
        assert col.doc.split(" ")[0] in cols, col.header
    assert "bench.backends.base" in (out / "reference" / "api.html").read_text()  # mkdocstrings rendered it


def test_every_suite_key_and_column_has_a_description():
    assert reference.missing_descriptions() == []


def test_a_column_without_a_description_is_found(monkeypatch):
    bare = columns.Column("new metric", columns.metric("new_metric"))
    monkeypatch.setattr(columns, "CELL_COLUMNS", [*columns.CELL_COLUMNS, bare])
    monkeypatch.setitem(reference.COLUMN_LISTS, "The per-cell table", columns.CELL_COLUMNS)
    assert reference.missing_descriptions() == ["column 'new metric' (The per-cell table)"]


def test_a_suite_key_without_a_description_is_found(monkeypatch):
    from pydantic import create_model

    from bench import suite_format
    bare = create_model("Settings", __base__=suite_format.Settings, new_key=(int, 0))
    monkeypatch.setattr(suite_format, "Settings", bare)
    assert reference.missing_descriptions() == ["suite key Settings.new_key"]


def test_readme_is_short_and_links_the_docs():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    for page in ("docs/getting-started.md", "docs/reading-results.md", "docs/ADDING.md"):
        assert page in readme and (ROOT / page).exists(), page
