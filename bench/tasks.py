"""What a cell trains, in one table: a backend declares one task (bench/backends/__init__.py), a
dataset serves the tasks of its shape, and a suite pairs only a backend and a dataset that agree.
The shape is the form the hub keeps a dataset in: plain (one graph; the link task adds an edge
split), typed (node types and relations) or collection (many small graphs). A plain module.
"""

from __future__ import annotations

from typing import NamedTuple


class Task(NamedTuple):
    name: str
    what: str  # one line a user reads
    shape: str  # the hub form it reads: "plain", "typed" or "collection"
    metric: str  # its quality figure on the pages: "accuracy" (node, graph) or "mrr" (link)


TASKS: dict[str, Task] = {
    "node": Task("node", "node classification on a graph without types", "plain", "accuracy"),
    "typed-node": Task("typed-node", "node classification on a typed (heterogeneous) graph, on its target type",
                       "typed", "accuracy"),
    "link": Task("link", "link prediction: training edges as seeds, negatives per positive, MRR and Hits@K",
                 "plain", "mrr"),
    "graph": Task("graph", "graph classification over a collection of small graphs", "collection", "accuracy"),
}
SHAPES = ("plain", "typed", "collection")
# The settings only one task has: bench/settings.py TASK_ONLY


def tasks_of_shape(shape: str) -> tuple[str, ...]:
    """The tasks a dataset of this shape serves (a source narrows it where its data lack what a
    task needs: a link dataset without node labels serves "link" only)."""
    if shape not in SHAPES:
        raise ValueError(f"unknown dataset shape {shape!r}; known: {', '.join(SHAPES)}")
    return tuple(name for name, task in TASKS.items() if task.shape == shape)


def describe(tasks: tuple[str, ...] | list[str]) -> str:
    return ", ".join(tasks)
