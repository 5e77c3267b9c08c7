"""Text formatting shared by every publish output: one definition each, so a figure reads the same
wherever it appears; a missing value is a dash. Beside them, `group_by`, which the outputs group with."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable

DASH = "–"


def group_by(items: Iterable, key: Callable) -> dict:
    """The items in lists by `key`, keys and items in the order they come."""
    groups: dict = {}
    for item in items:
        groups.setdefault(key(item), []).append(item)
    return groups


def num(value, pattern: str = "{:.3g}") -> str:
    return DASH if value is None else pattern.format(value)


def seconds(value, unit: str = "") -> str:
    """Seconds in the tables: three decimals (unit appended only to a real value)."""
    return DASH if value is None else f"{value:.3f}{unit}"


def ratio(value) -> str:
    return num(value, "{:.2f}×")


def rate(value) -> str:
    return num(value, "{:,.0f}")


def accuracy(value) -> str:
    return num(value, "{:.3f}")


def mib(value, unit: str = "") -> str:
    """Bytes as whole MiB; zero or unknown as a dash (a recorded zero means "not measured")."""
    return DASH if not value else f"{value / 2**20:,.0f}{unit}"


def byte_rate(value) -> str:
    """Bytes per second in decimal units: byte_rate(2.5e9) == "2.50 GB/s"."""
    if value is None:
        return DASH
    for unit, scale in (("GB/s", 1e9), ("MB/s", 1e6), ("kB/s", 1e3)):
        if value >= scale:
            return f"{value / scale:.3g} {unit}" if value / scale < 100 else f"{value / scale:.0f} {unit}"
    return f"{value:.0f} B/s"


def per_hop(values, per_seed: bool = False) -> str:
    """Figures per hop or layer, '12 / 340 / 5,600' (per seed: '1.00 / 9.52 / 81.3'), or a dash."""
    digits = (lambda v: ",.2f" if v < 10 else ",.1f") if per_seed else (lambda v: ",.0f")
    return " / ".join(format(v, digits(v)) for v in values) if values else DASH


def pct(value, digits: int = 1) -> str:
    """A fraction as a percentage: pct(0.125) == "12.5 %"."""
    return DASH if value is None else f"{100 * value:.{digits}f} %"


def setting_text(value) -> str:
    """A setting as a short label: lists as 10,5, None as a dash."""
    if isinstance(value, (list, tuple)):
        return ",".join(setting_text(v) for v in value)
    return DASH if value is None else str(value)


def first_line(text, limit: int = 120) -> str:
    """The first non-blank line of an error text, shortened to `limit` characters."""
    line = next((line.strip() for line in str(text or "").splitlines() if line.strip()), "")
    return line if len(line) <= limit else line[:limit - 1] + "…"


def when(text, seconds: bool = False) -> str:
    """An ISO timestamp as 'YYYY-MM-DD HH:MM UTC' (the text itself when it is not one)."""
    try:
        moment = dt.datetime.fromisoformat(str(text))
    except ValueError:
        return str(text)
    if moment.tzinfo:
        moment = moment.astimezone(dt.timezone.utc)
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC" if seconds else "%Y-%m-%d %H:%M UTC")


def machine_summary(machine) -> str:
    """What the machine is (a results.Machine): CPU, cores, memory, GPUs. For pages."""
    parts = [machine.cpu_name + (f" at {machine.cpu_clock}" if getattr(machine, "cpu_clock", None) else "")]
    if machine.cpu_count_logical:
        parts.append(f"{machine.cpu_count_logical} logical cores")
    if machine.memory_total_bytes:
        parts.append(f"{machine.memory_total_bytes / 2**30:.0f} GiB")
    gpus = [g.name for g in machine.gpus]
    parts.append(f"{len(gpus)}× {gpus[0]}" if gpus and len(set(gpus)) == 1 else
                 ("GPUs: " + "; ".join(gpus) if gpus else "no GPU"))
    return ", ".join(parts)


def host_label(machine) -> str | None:
    """Which machine it was, as in `box (Test CPU x8)`; None when the file names neither."""
    if machine.node is None and machine.cpu_brand is None:
        return None
    cpu = (f"{machine.cpu_brand or 'unknown CPU'}" + (f" {machine.cpu_clock}" if getattr(machine, "cpu_clock", None) else "")
           + (f" x{machine.cpu_count}" if machine.cpu_count else ""))
    return f"{machine.node or '?'} ({cpu})"
