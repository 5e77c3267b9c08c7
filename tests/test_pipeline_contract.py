"""The pipeline contract (bench/backends/base.py) is abstract base classes: a backend lacking a
method the worker calls (or, for a typed or link backend, a hook its task calls) cannot be built,
and every registered backend fulfils its task's contract in its stack."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from bench.backends import BACKENDS, base, link
from bench.settings import CellSettings
from bench import stacks

ROOT = Path(__file__).resolve().parents[1]


SETTINGS = CellSettings()


def test_a_backend_lacking_a_contract_method_is_refused():
    class NoCount(base.Pipeline):
        def work(self, batch):
            return ()

    with pytest.raises(TypeError, match="count"):
        NoCount({}, SETTINGS)

    class NoForward(base.TrainingPipeline):
        count = staticmethod(lambda batch: (0, 0))

        def work(self, batch):
            return ()

        def _loader(self, split, shuffle, num_workers=0):
            return []

        def make_model(self, data):
            return None

    with pytest.raises(TypeError, match="forward"):
        NoForward({}, SETTINGS)


class NodeBackend(base.TrainingPipeline):
    count = work = _loader = make_model = forward = staticmethod(lambda *args: None)


def test_a_typed_backend_lacking_its_relation_layer_is_refused():
    class Typed(base.TypedHooks, NodeBackend):
        pass

    with pytest.raises(TypeError, match="hetero_layer"):
        Typed({}, SETTINGS)
    assert Typed.unused_parameters and Typed.make_model is base.TypedHooks.make_model  # not the node model


@pytest.mark.parametrize("hook", sorted(base.LinkHooks.__abstractmethods__))
def test_a_link_backend_lacking_one_hook_is_refused_by_its_name(hook):
    assert len(base.LinkHooks.__abstractmethods__) == 6
    given = {name: staticmethod(lambda *args: None) for name in base.LinkHooks.__abstractmethods__ if name != hook}
    Link = type("Link", (link.LinkPipeline, NodeBackend), given)
    with pytest.raises(TypeError, match=hook):
        Link({}, SETTINGS)


CHECK = """
import importlib, inspect, sys
from bench.backends import base
cls = importlib.import_module(sys.argv[1]).Pipeline
hooks = base.hooks_of(sys.argv[2])  # a typed or link backend subclasses its task's hooks (bench/tasks.py)
assert issubclass(cls, hooks), f"{cls} is not a bench.backends.base.{hooks.__name__}"
assert not inspect.isabstract(cls), f"{cls} lacks {sorted(cls.__abstractmethods__)}"
print("ok")
"""


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_every_backend_fulfils_the_contract_in_its_stack(backend):
    info = BACKENDS[backend]
    stack = stacks.get(info.stack)
    if stack.container_only and not stack.installed:
        # a stack the GPU images alone build (cugraph-pyg): its module imports its RAPIDS libraries
        # inside its functions only, so its contract is checked in a stack of the same framework
        stack = stacks.get(next(n for n, s in stacks.available().items()
                                if s.frameworks == stack.frameworks and not s.container_only))
    if not stack.installed:
        pytest.fail(f"stack {info.stack} is not installed (make stacks)")
    done = subprocess.run([str(stack.python), "-c", CHECK, info.module, info.task], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=600)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
