"""Each task is declared once (bench/tasks.py): no other module of bench/ compares a task's name, and
a new task is its `Task` line, its hooks and a backend of it (docs/ADDING.md "A task"), which the
suite's expansion, the contract, the worker's evaluation, the stores and the advisor then follow."""

from __future__ import annotations

import abc
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from bench import stores
from bench.backends import BACKENDS, BackendInfo, base
from bench.publish import advisor
from bench.run import suite, worker
from bench.tasks import TASKS, Task, tasks_of_shape

BENCH = Path(__file__).resolve().parents[1] / "bench"
# a task's name compared: `task == "link"`, `"graph" in served`, `hasattr(pipe, "link_...")`
NAMED = "|".join(re.escape(name) for name in TASKS)
COMPARED = re.compile(rf"""(==|!=)\s*["']({NAMED})["']|["']({NAMED})["']\s*(==|!=|in\s|not in\s)|hasattr\([^)]*["']link""")
# where a compared name is not a task's, or is left for the module's owner (each says which)
NOT_A_TASK = {"bench/datasets/graphbolt_folder.py": "GraphBolt's metadata.yaml keys (`graph`, domain `node`)"}
LEFT: dict[str, str] = {}


def test_no_module_but_the_declarations_compares_a_task_name():
    found = [f"{path.relative_to(BENCH.parent)}:{n}: {line.strip()}"
             for path in sorted(BENCH.rglob("*.py")) if path.name != "tasks.py"
             and str(path.relative_to(BENCH.parent)) not in {*NOT_A_TASK, *LEFT}
             for n, line in enumerate(path.read_text().splitlines(), 1) if COMPARED.search(line)]
    assert not found, "read the task's declaration (bench/tasks.py TASKS) instead:\n" + "\n".join(found)
    for path in LEFT:  # a module cleared leaves this list
        assert COMPARED.search((BENCH.parent / path).read_text()), f"{path} compares no task name: drop it from LEFT"


class ToyHooks(abc.ABC):
    """The toy task's hook: what a backend of it adds to the pipeline contract."""

    @abc.abstractmethod
    def toy_score(self, batch):
        """The batch's toy score."""


class Pipeline(ToyHooks, base.TrainingPipeline):  # the toy backend's module is this one
    count = work = _loader = make_model = forward = toy_score = staticmethod(lambda *args: None)

    def toy_metrics(self) -> dict:
        return {"test_toy": 0.75, "toy_notes": "toy"}


TOY = Task("toy", "a toy task: one score per node", "plain", metric="toy score", figure="test_toy",
           judged_over="toy nodes", evaluation="toy_metrics", records=("test_toy", "toy_notes"),
           settings=("decoder",), hooks=f"{__name__}:ToyHooks")


@pytest.fixture
def toy(monkeypatch):
    """The toy task's line and a backend of it, as docs/ADDING.md says."""
    monkeypatch.setitem(TASKS, "toy", TOY)
    monkeypatch.setitem(BACKENDS, "toy-backend", BackendInfo(__name__, "pyg", ("cpu-cpu",), task="toy"))


def test_a_registered_task_reaches_the_suite_the_contract_the_worker_the_stores_and_the_advisor(toy, write_suite):
    assert "toy" in tasks_of_shape("plain") and "toy" in stores.STORES["lmdb"].tasks  # a plain graph serves it
    assert stores.cold_files("lmdb", "toy") == stores.cold_files("lmdb", "node")
    s, _ = suite.load(write_suite("""
name: toy
datasets:
  g: {source: synthetic, params: {scale: 8}}
backends: [toy-backend, pyg-neighbor]
settings: {decoder: mlp}
"""))
    cells = {c.backend: c for c in suite.expand(s)}
    assert cells["toy-backend"].settings.decoder == "mlp"  # its own setting in its cells
    assert cells["pyg-neighbor"].settings.decoder is None and "decoder" not in cells["pyg-neighbor"].settings.as_dict()

    assert base.hooks_of("toy") is ToyHooks and issubclass(Pipeline, ToyHooks)
    with pytest.raises(TypeError, match="toy_score"):  # a backend of it lacking its hook is refused by name
        type("NoScore", (ToyHooks, base.TrainingPipeline), {})({}, cells["toy-backend"].settings)

    recorded = worker.evaluate(Pipeline.__new__(Pipeline), None, TOY, full=True)
    assert recorded == {"val_acc": None, "test_acc": None, "test_acc_full": None, "test_toy": 0.75, "toy_notes": "toy"}

    cell = SimpleNamespace(backend="toy-backend", metrics=SimpleNamespace(test_toy=0.75, test_hits=None), card=None)
    assert advisor.accuracy(cell) == 0.75 and advisor.quality(cell) == "test toy score 0.750"
    assert advisor.judged_over(cell) == (None, "toy nodes")
