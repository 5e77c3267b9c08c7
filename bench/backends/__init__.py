"""The systems under test, by name. A new backend is one module under bench/backends/ with a
`Pipeline` class (see bench/backends/base.py) plus one line in BACKENDS.

This registry is plain data so the host can validate suites without importing any framework;
the module itself is imported only inside its stack's interpreter.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

CUDA_MODES = ("cpu-cuda", "pinned-cuda", "cuda-cuda")


@dataclass(frozen=True)
class BackendInfo:
    module: str
    stack: str
    modes: tuple[str, ...]  # "<where sampling runs>-<where training runs>"


BACKENDS: dict[str, BackendInfo] = {
    "pyg-neighbor": BackendInfo("bench.backends.pyg_neighbor", "pyg", ("cpu-cpu", "cpu-cuda")),
    "dgl-graphbolt": BackendInfo("bench.backends.dgl_graphbolt", "dgl",
                                 ("cpu-cpu", "cpu-cuda", "pinned-cuda", "cuda-cuda")),
    "pyg-dist": BackendInfo("bench.backends.pyg_dist", "pyg-dist", ("cpu-cpu",)),
}

ALL_MODES = tuple(dict.fromkeys(m for info in BACKENDS.values() for m in info.modes))


def load_pipeline_class(name: str):
    return importlib.import_module(BACKENDS[name].module).Pipeline
