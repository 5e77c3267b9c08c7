"""Each cell's own scratch folder: its result file, its stderr, and the TMPDIR of every process it
starts, so what they leave there (DataLoader workers' `pymp-*`, torchrun's) goes with the cell.

    TEMP/gnnbench-UID/cell.pidPID.XXXXXXXX/   owner.json (bench/locks.py's record), result.json,
                                             stderr.txt, and whatever the cell's processes make
The path is kept short: multiprocessing puts sockets in it, and a socket path has at most 107
bytes. Removed when the cell ends; one a SIGKILLed gnnbench left is swept at the next run (`sweep`)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path

from bench import locks

OWNER = "owner.json"
PREFIX = "cell.pid"


def root() -> Path:
    """This user's folder of cell scratch folders (the uid in its name: each user sweeps only its own)."""
    return Path(tempfile.gettempdir()) / f"gnnbench-{os.getuid()}"


@contextmanager
def cell_scratch():
    """A fresh scratch folder for one cell, removed when the block ends."""
    base = root()
    base.mkdir(exist_ok=True, mode=0o700)  # private to this user
    mine = base.stat().st_uid == os.getuid()  # else someone else owns the name: a plain temp folder
    folder = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}.", dir=base if mine else None))
    try:
        (folder / OWNER).write_text(json.dumps(locks.new_record("running a cell")))
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def environment(folder: Path) -> dict[str, str]:
    return {"TMPDIR": str(folder), "TEMP": str(folder), "TMP": str(folder)}


def sweep(say=print) -> list[Path]:
    """Remove (and name) the scratch folders of cells whose gnnbench is gone; returns them."""
    removed = []
    for cell in sorted(root().glob(f"{PREFIX}*")):  # none where the folder is not there
        record = locks.read_record(cell / OWNER)[0]
        if record is None:  # killed before it wrote its owner: the pid in its name, on this host
            pid = cell.name[len(PREFIX):].split(".", 1)[0]
            why = None if not pid.isdigit() or locks.pid_alive(int(pid)) else f"process {pid} is gone"
        else:
            why = locks.provably_dead(record)
        if why is None:
            continue
        shutil.rmtree(cell, ignore_errors=True)
        if not cell.exists():
            removed.append(cell)
            say(f"removed {cell}: the scratch folder of a cell whose gnnbench did not finish ({why})")
    return removed
