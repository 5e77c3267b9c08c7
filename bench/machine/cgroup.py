"""A memory cgroup around one cell (the `memory_limit` setting), made before its first process
runs, so every rank and DataLoader worker is inside. Swap is covered by the limit or off, so a
limit never turns silently into a slower run that swaps. Needs root (or a delegated subtree);
elsewhere `unavailable` says why and the cell is skipped with that reason.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
V1_MEMORY = ROOT / "memory"
NONE = "none"
UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(i?B)?\s*$", re.I)
MIN_LIMIT = 16 << 20  # below this not even an interpreter starts: surely a mistake


class CgroupError(RuntimeError):
    """A cgroup that could not be made, filled or read; the message names the file."""


def parse_limit(value) -> int | None:
    """Bytes of a `memory_limit` value ("none" or null: no limit; bytes, or "512MiB", "1.5G": K, M,
    G, T are 1024-based, as the kernel reads them). ValueError names the value and what is allowed."""
    if value is None or (isinstance(value, str) and value.strip().lower() == NONE):
        return None
    if isinstance(value, bool):
        raise ValueError(f"memory_limit {value!r}: expected 'none' or a size such as 512MiB, 3GiB")
    if isinstance(value, int):
        size = value
    else:
        match = _SIZE.match(str(value))
        if not match or (match.group(3) and match.group(3).lower() == "b" and match.group(2)):
            raise ValueError(f"memory_limit {value!r}: expected 'none' or a size such as 512MiB, 3GiB, 1.5G "
                             "(binary units K/KiB, M/MiB, G/GiB, T/TiB, or plain bytes; 'GB' is ambiguous)")
        size = int(float(match.group(1)) * UNITS[match.group(2).upper()])
    if size < MIN_LIMIT:
        raise ValueError(f"memory_limit {value!r}: {size} bytes is below the smallest allowed, "
                         f"{MIN_LIMIT >> 20} MiB")
    return size


def canonical(value) -> str:
    """The limit as cell ids show it: "none", else the largest binary unit that divides it."""
    size = parse_limit(value)
    if size is None:
        return NONE
    units = [unit for unit in ("T", "G", "M", "K") if size % UNITS[unit] == 0]
    return f"{size // UNITS[units[0]]}{units[0]}iB" if units else str(size)


def version() -> int | None:
    """2, 1, or None: which memory cgroup hierarchy this machine has."""
    if (ROOT / "cgroup.controllers").is_file():
        return 2 if "memory" in (ROOT / "cgroup.controllers").read_text().split() else None
    return 1 if (V1_MEMORY / "memory.limit_in_bytes").is_file() else None


def _swap_on() -> bool:
    try:
        return len(Path("/proc/swaps").read_text().splitlines()) > 1
    except OSError:
        return False


def unavailable() -> str | None:
    """Why a memory cgroup cannot be made here, or None."""
    found = version()
    if found is None:
        return (f"no memory cgroup controller on this machine (neither {ROOT}/cgroup.controllers with "
                f"'memory' nor {V1_MEMORY}/memory.limit_in_bytes)")
    parent = ROOT if found == 2 else V1_MEMORY
    if not os.access(parent, os.W_OK):
        return f"cannot create a memory cgroup: {parent} is not writable by this user (uid {os.getuid()}; needs root)"
    if found == 1 and not (V1_MEMORY / "memory.memsw.limit_in_bytes").exists() and _swap_on():
        return ("swap is on and this kernel does not account it in cgroup v1 (no memory.memsw.*: boot with "
                "swapaccount=1, or turn swap off), so a memory limit would not bound the cell")
    return None


@dataclass
class MemoryCgroup:
    """One cell's memory cgroup; `with MemoryCgroup.create(name, limit) as group: ...`."""
    path: Path
    limit: int
    version: int
    swap: str  # how swap is kept under the limit, in words

    @classmethod
    def create(cls, name: str, limit: int) -> MemoryCgroup:
        found = version()
        if reason := unavailable():
            raise CgroupError(reason)
        control = ROOT / "cgroup.subtree_control"
        if found == 2 and "memory" not in control.read_text().split():
            _write(control, "+memory")
        # per version: the limit's file, then swap's file (memory.memsw after the limit: it may not be below it)
        limit_file, swap_file, swap_value, swap_words = (
            ("memory.max", "memory.swap.max", 0, "memory.swap.max = 0 (no swap)") if found == 2 else
            ("memory.limit_in_bytes", "memory.memsw.limit_in_bytes", limit,
             "memory.memsw.limit_in_bytes = the limit (memory + swap)"))
        group = cls((ROOT if found == 2 else V1_MEMORY) / f"gnnbench-{name}", limit, found, swap_words)
        try:
            group.path.mkdir()
        except OSError as exc:
            raise CgroupError(f"cannot create the memory cgroup {group.path}: {exc.strerror or exc}") from None
        try:
            _write(group.path / limit_file, limit)
            if (group.path / swap_file).exists():
                _write(group.path / swap_file, swap_value)
            elif found == 2 and _swap_on():
                raise CgroupError(f"swap is on and {group.path} has no {swap_file}: a limit would not bound the cell")
            else:
                group.swap = "swap is off on this machine"
        except CgroupError:
            group.remove()
            raise
        return group

    def __enter__(self) -> MemoryCgroup:
        return self

    def __exit__(self, *exc) -> None:
        self.remove()

    def join_fd(self) -> int:
        """An open descriptor of the group's process list, for `join_in_child` (between fork and exec)."""
        return os.open(self.path / "cgroup.procs", os.O_WRONLY)

    def oom_kills(self) -> int:
        """Processes of the group the kernel's OOM killer ended."""
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        try:
            text = (self.path / name).read_text()
        except OSError:
            return 0
        found = re.search(r"^oom_kill (\d+)$", text, re.M)
        return int(found.group(1)) if found else 0

    def describe(self) -> str:
        return (f"memory_limit {canonical(self.limit)} ({self.limit:,} bytes) in cgroup v{self.version} "
                f"{self.path}; swap: {self.swap}")

    def remove(self) -> None:
        """Remove the group, retrying a few seconds while a process still exits."""
        deadline = time.monotonic() + 10
        while self.path.exists():
            try:
                return self.path.rmdir()
            except FileNotFoundError:
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise CgroupError(f"cannot remove {self.path}: processes "
                                      f"{(self.path / 'cgroup.procs').read_text().split()} are still in it") from None
                time.sleep(0.1)


def join_in_child(fd: int):
    """A subprocess.Popen preexec_fn writing the child's pid to the group (async-signal-safe calls only)."""
    return lambda: os.write(fd, str(os.getpid()).encode())


def _write(path: Path, value) -> None:
    try:
        path.write_text(str(value))
    except OSError as exc:
        raise CgroupError(f"cannot write {value} to {path}: {exc.strerror or exc}") from None
