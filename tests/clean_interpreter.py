"""Imports modules in an interpreter where the host-only packages cannot be imported, as inside a
framework stack (tests/test_interpreter_line.py runs it with the host's and each stack's python).

    python tests/clean_interpreter.py BLOCKED_JSON MODULES_JSON

BLOCKED_JSON: names of packages and gnnbench modules the stack side may not import (a name blocks its
submodules too). Prints {module: error} for every module that did not import, the error saying
whether a gnnbench module asked for a blocked name ("blocked"; the frameworks' own imports are
not blocked: DGL imports yaml itself) or something this interpreter lacks ("missing").
"""

from __future__ import annotations

import importlib
import importlib.abc
import json
import sys
import traceback


class HostOnly(importlib.abc.MetaPathFinder):
    def __init__(self, blocked: list[str]):
        self.blocked = blocked

    def find_spec(self, name, path=None, target=None):
        if not _asked_by_gnnbench():
            return None  # a framework's own imports are its business (DGL imports yaml itself)
        for b in self.blocked:
            if name == b or name.startswith(b + "."):
                raise ModuleNotFoundError(f"blocked: {name} is host-only", name=name)
        return None


def _asked_by_gnnbench() -> bool:
    """Whether the import statement being run is in a gnnbench module (the first frame outside
    the import machinery)."""
    frame = sys._getframe(2)
    while frame is not None and (frame.f_code.co_filename.startswith("<frozen")
                                 or "importlib" in frame.f_code.co_filename):
        frame = frame.f_back
    return frame is not None and str(frame.f_globals.get("__name__", "")).startswith("bench")


def main(blocked: list[str], modules: list[str]) -> dict[str, str]:
    sys.meta_path.insert(0, HostOnly(blocked))
    problems = {}
    for module in modules:
        try:
            importlib.import_module(module)
        except Exception as exc:  # noqa: BLE001 - every failure is reported, by kind
            kind = "blocked" if str(exc).startswith("blocked:") else "missing"
            frames = [f for f in traceback.extract_tb(exc.__traceback__)
                      if not f.filename.startswith("<frozen") and "importlib" not in f.filename
                      and f.filename != __file__]
            where = frames[-1] if frames else traceback.extract_tb(exc.__traceback__)[-1]
            problems[module] = f"{kind}: {type(exc).__name__}: {exc} (at {where.filename}:{where.lineno})"
    return problems


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]), json.loads(sys.argv[2]))))
