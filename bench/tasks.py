"""What a cell trains, each task declared once: a backend declares one task (bench/backends/__init__.py), a
dataset serves the tasks of its shape (the hub's form: plain, one graph, the link task adding an edge split;
typed; collection, many small graphs), and a suite pairs only a backend and a dataset that agree. What differs by
task is read from its `Task`; no other module compares a task's name (tests/test_tasks.py). A plain module."""

from __future__ import annotations

from typing import NamedTuple


class Task(NamedTuple):
    name: str
    what: str  # one line a user reads
    shape: str  # the hub form it reads: "plain", "typed" or "collection"
    metric: str = "accuracy"  # its quality figure on the pages, as a sentence names it ("accuracy", "MRR")
    figure: str = "test_acc"  # the result field (ExtraInfo) that holds that figure on the test split
    higher_is_better: bool = True  # the figure's direction (the advisor's best is the highest)
    judged_over: str = "test nodes"  # what the figure averages over (the advisor's standard errors)
    # the pipeline method whose dict the worker records for the accuracies (None: `evaluate(split)`) and its fields
    evaluation: str | None = None
    records: tuple[str, ...] = ()
    settings: tuple[str, ...] = ()  # the settings only its cells have (bench/settings.py SETTINGS)
    hooks: str | None = None  # "module:Class": the abstract hooks a backend of it adds to base.Pipeline's
    edge_split: bool = False  # it trains and scores on an edge split, made beside the dataset (datasets/ready.py)


TASKS: dict[str, Task] = {t.name: t for t in (
    Task("node", "node classification on a graph without types", "plain"),
    Task("typed-node", "node classification on a typed (heterogeneous) graph, on its target type", "typed",
         hooks="bench.backends.base:TypedHooks"),
    Task("link", "link prediction: training edges as seeds, negatives per positive, MRR and Hits@K", "plain",
         metric="MRR", figure="test_mrr", judged_over="test edges", evaluation="link_metrics",
         records=("val_mrr", "test_mrr", "val_hits", "test_hits", "link_split", "link_notes", "leaks"),
         settings=("neg_ratio", "neg_mode", "exclusion", "decoder"), hooks="bench.backends.base:LinkHooks",
         edge_split=True),
    Task("graph", "graph classification over a collection of small graphs", "collection"),
)}
DEFAULT = "node"  # the task of a backend that declares none (and of a result whose backend is gone)
SHAPES = ("plain", "typed", "collection")


def tasks_of_shape(shape: str) -> tuple[str, ...]:
    """The tasks a dataset of this shape serves (a source narrows it where its data lack what a
    task needs: a link dataset without node labels serves "link" only)."""
    if shape not in SHAPES:
        raise ValueError(f"unknown dataset shape {shape!r}; known: {', '.join(SHAPES)}")
    return tuple(name for name, task in TASKS.items() if task.shape == shape)
