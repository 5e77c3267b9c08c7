"""`gnnbench recover JOURNAL`: the result file of a run that could not write its own (SIGKILL, a full
disk), made from its journal without running anything (`gnnbench report JOURNAL` reads one too).
Given the suite, the cells the journal lacks are listed in `gnnbench.cells` and read as "not run"."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from bench.run import record, suite as suite_mod
from bench.run.session import (JOURNAL_SUFFIX, Finished, Journal, SessionError, journal_selection, read_journal,
                               result_of_journal)


def document(journal: Path, suite: str | Path | None = None) -> dict:
    """The result file's content from a journal (SessionError names the FILE:LINE that does not fit)."""
    journal = Path(journal)
    if suite is not None:
        loaded, suite_path = suite_mod.load(suite)
        expanded = suite_mod.expand(loaded)
        cells = [c.id for c in expanded]
        if selection := journal_selection(journal):  # the cells the run selected (-k), not the whole suite's
            cells = [c for c in cells if c in selection[0]]
        finished = Journal(journal, loaded.name).read(expanded)
        meta = {"suite": loaded.name, "suite_file": str(suite_path), "description": loaded.description,
                "baseline": loaded.baseline or (cells[0] if cells else None), "cells": cells}
    else:
        finished, name = _alone(journal)
        cells = list(finished)
        baseline = next((d.cell_id for d in finished.values()
                         if d.measured and d.entry.get("extra_info", {}).get("is_baseline")), None)
        meta = {"suite": name, "suite_file": None, "description": None, "baseline": baseline, "cells": cells}
    done = [finished[c] for c in cells if c in finished]
    doc = record.document(done, {**meta, "recovered_from": str(journal)})
    # the run finished (as far as it got) when it journalled its last cell, not now
    doc["datetime"] = dt.datetime.fromtimestamp(journal.stat().st_mtime, dt.timezone.utc).isoformat()
    return doc


def _alone(journal: Path) -> tuple[dict[str, Finished], str]:
    """The journal's cells without their suite: every line must be of one suite."""
    lines = read_journal(journal)[0]
    if not lines:
        raise SessionError(f"{journal}: no finished cell in this journal; give --suite to list the "
                           "suite's cells as not run")
    name = lines[0][1]
    for where, suite, _, _ in lines:
        if suite != name:
            raise SessionError(f"{where}: a cell of suite {suite!r}, not {name!r} as the first line; "
                               "one journal is one run of one suite")
    return {done.cell_id: done for _, _, done, _ in lines}, name


def default_output(journal: Path) -> Path:
    """SUITE-STAMP.json beside SUITE-STAMP.cells.jsonl, the name the run would have written."""
    return result_of_journal(journal, str(journal), f"not named like a run's journal (*{JOURNAL_SUFFIX}); "
                             "give --out FILE for the result file")


def is_journal(path: Path) -> bool:
    return Path(path).name.endswith(JOURNAL_SUFFIX)
