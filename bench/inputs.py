"""Checks of what a user hands gnnbench where it enters: options, environment variables, names.
One error class and one message shape for every bad input, `WHERE: what is wrong; allowed: what
would do`, WHERE naming the input (`--cache-dir /x`, `GNNBENCH_CACHE=/x`, a file and key path);
`gnnbench` prints it and exits 2 before anything runs. No dependencies: the stacks may import it.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path


class InputError(ValueError):
    """A bad input, named with what is wrong and what is allowed: nothing was run."""


# --- names and numbers ----------------------------------------------------------------------

PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
PLAIN_NAME_RULE = "1 to 100 letters, digits, '.', '_' or '-', not starting with '.', '_' or '-'"


def plain_name_problem(text: object) -> str | None:
    """Why `text` cannot be a file name of its own (a suite name, a dataset key); None if it can."""
    plain = isinstance(text, str) and PLAIN_NAME.fullmatch(text)
    return None if plain else f"{text!r} is not a plain file name; allowed: {PLAIN_NAME_RULE}"


def finite_float(low: float | None = None, high: float | None = None):
    """An argparse `type`: a finite number within [low, high] (argparse names the option)."""
    import argparse

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        bounds = f"{low if low is not None else '-inf'} .. {high if high is not None else 'inf'}"
        if not math.isfinite(value) or (low is not None and value < low) or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"{text!r} is out of range; allowed: a finite number in {bounds}")
        return value

    parse.__name__ = "number"
    return parse


# Every control character, newline and tab included (and Unicode's line separators, YAML line
# breaks): none belongs in a value written into a script or a manifest.
CONTROL_CHARACTERS = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def no_control_characters(where: str, value: object) -> str:
    """`value` as text, refused where it holds a control character (`where` names the option)."""
    text = str(value)
    if found := CONTROL_CHARACTERS.search(text):
        raise InputError(f"{where} {text!r}: holds a control character ({found.group()!r} at {found.start()}); "
                         "allowed: printable characters only (it is written into a script)")
    return text


# --- folders and files ----------------------------------------------------------------------

def folder(where: str, path: Path | str, writable: bool) -> Path:
    """A folder given by the user (`where` names the option), existing or creatable; `writable`: written into."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise InputError(f"{where}: {path} is a file, not a folder; allowed: a folder (or a path to create one)")
    if writable:
        existing = next(p for p in (path, *path.parents) if p.exists())
        if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
            what = "is read-only" if existing == path else f"cannot be created ({existing} is read-only)"
            raise InputError(f"{where}: {path} {what}; allowed: a folder gnnbench can write to")
    return path


def output_file(where: str, path: Path | str) -> Path:
    """A file gnnbench will write (`--markdown FILE`): in an existing, writable folder."""
    path = Path(path)
    if path.is_dir():
        raise InputError(f"{where}: {path} is a folder; allowed: a file name in an existing folder")
    parent = path.parent
    if not parent.is_dir():
        raise InputError(f"{where}: {path}: the folder {parent} does not exist; create it first, "
                         "or give a file in an existing folder")
    if not os.access(parent, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise InputError(f"{where}: {path} cannot be written (read-only); allowed: a writable file")
    return path


def new_output_file(where: str, path: Path | str, force: bool) -> Path:
    """A file gnnbench will write (`--out FILE`) that must not be there yet: no command writes over
    a file it did not make (docs/guarantees.md), unless `force` (the command's --force)."""
    path = output_file(where, path)
    if (path.exists() or path.is_symlink()) and not force:
        raise InputError(f"{where}: {path} is already there; give another file, or --force to replace it")
    return path


# --- terminal output ------------------------------------------------------------------------

# What a terminal obeys rather than shows: the C0 controls but newline and tab, DEL, the C1 controls,
# Unicode's line separators and the bidirectional marks, overrides and isolates ("Trojan Source")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def terminal_safe(text: str) -> str:
    """Text for a terminal: every character a terminal would obey (_CONTROL) shown escaped, never
    obeyed; newlines, tabs and a leading carriage return (a progress line redrawn) stay."""
    head = "\r" if text.startswith("\r") else ""
    return head + _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100
                               else f"\\u{ord(m.group()):04x}", text[len(head):])


class TerminalSafe:
    """A text stream whose every write goes through terminal_safe (bench/cli.py wraps stdout and
    stderr in it), so no line shows a path, name or value it was given raw."""

    def __init__(self, stream):
        self.stream = stream

    def write(self, text: str) -> int:
        self.stream.write(terminal_safe(text))
        return len(text)

    def __getattr__(self, name: str):
        return getattr(self.stream, name)


# --- environment variables ------------------------------------------------------------------

SWITCH = {"", "0", "1"}
FAULT_KINDS = ("crash", "hang", "oom")


def check_environment() -> None:
    """Every environment variable gnnbench reads from its user, checked once at the start."""
    for name in ("GNNBENCH_CACHE", "GNNBENCH_STACKS_DIR", "GNNBENCH_DATA_ROOT"):
        if os.environ.get(name):
            folder(f"{name}={os.environ[name]}", os.environ[name], writable=False)
    value = os.environ.get("GNNBENCH_LMDB_MAP_SIZE", "")
    try:
        fine = not value or 2**20 <= int(value) <= 2**50
    except ValueError:
        fine = False
    if not fine:
        raise InputError(f"GNNBENCH_LMDB_MAP_SIZE={value!r}: not a byte count; allowed: a whole number of bytes "
                         f"from {2**20:,} to {2**50:,}")
    value = os.environ.get("GNNBENCH_FAULT", "")
    for rule in filter(None, value.split(",")):  # KIND[:CELL][@RANK]: a test hook (bench/run/worker.py fault_for)
        kind, _, target = rule.partition(":")
        _, at, rank = target.partition("@")
        if not re.fullmatch(r"[A-Za-z0-9_-]+", kind) or (at and not rank.isdigit()):
            raise InputError(f"GNNBENCH_FAULT={value!r}: rule {rule!r} is not KIND[:CELL][@RANK]; allowed: KIND one of "
                             f"{', '.join(FAULT_KINDS)}, CELL a part of a cell id, RANK a whole number")
    for name in ("GNNBENCH_OFFLINE", "GNNBENCH_IN_CONTAINER"):
        if os.environ.get(name, "").strip() not in SWITCH:
            raise InputError(f"{name}={os.environ[name]!r}: not a switch; allowed: 1 (on), 0 or unset (off)")
