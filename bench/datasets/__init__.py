"""Dataset sources. A new dataset source is one module with `materialise(spec, cache, data_root)`
plus one line here: (module, the stack whose interpreter must run it, or None for any)."""

from __future__ import annotations

import importlib

SOURCES: dict[str, tuple[str, str | None]] = {
    "synthetic": ("bench.datasets.synthetic", None),
    "planetoid": ("bench.datasets.planetoid", "pyg"),
}


def materialiser(source: str):
    return importlib.import_module(SOURCES[source][0]).materialise
