"""What a mode means is declared once (bench/modes.py): no other module of gnnbench parses a mode's
name, by its suffix or prefix or by comparing it with a mode name. Mode names may still appear
as declarations (a backend's registry line says which modes it has; a setting's default)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from bench import modes

BENCH = Path(__file__).resolve().parents[1] / "bench"
NAMES = "|".join(re.escape(m) for m in modes.MODES)
PARTS = "|".join(sorted({p for m in modes.MODES for p in m.split("-")}))
# a mode's name parsed: a suffix or prefix test on a mode's part, or a comparison with a mode name
PARSING = [
    re.compile(rf"\.(?:endswith|startswith)\(\s*['\"]-?(?:{PARTS})-?['\"]"),
    re.compile(rf"[!=]=\s*['\"](?:{NAMES})['\"]|['\"](?:{NAMES})['\"]\s*[!=]="),
    re.compile(rf"\bin\s*[\(\[{{]\s*['\"](?:{NAMES})['\"]"),
    re.compile(r"\.split\(\s*['\"]-['\"]\s*\)\s*\[\s*-?[01]\s*\]"),  # "pinned-cuda".split("-")[1]
]


def parsing_lines() -> list[str]:
    found = []
    for path in sorted(BENCH.rglob("*.py")):
        if path.name == "modes.py" and path.parent == BENCH:
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if any(p.search(line) for p in PARSING) and "mode" in line.lower():
                found.append(f"{path.relative_to(BENCH.parent)}:{number}: {line.strip()}")
    return found


def test_no_module_parses_a_mode_name():
    assert parsing_lines() == [], "ask bench.modes (mode(name).trains_on_gpu, ...) instead"


def test_the_check_finds_what_it_looks_for(tmp_path, monkeypatch):
    package = tmp_path / "bench"
    package.mkdir()
    (package / "worker.py").write_text('gpu = mode.endswith("-cuda")\nif settings["mode"] != "cpu-cpu": pass\n'
                                       'pinned = mode in ("pinned-cuda", "cuda-cuda")\n')
    monkeypatch.setattr(sys.modules[__name__], "BENCH", package)
    assert len(parsing_lines()) == 3


def test_every_registered_mode_is_declared():
    from bench.backends import BACKENDS

    for name, info in BACKENDS.items():
        assert set(info.modes) <= set(modes.MODES), name
