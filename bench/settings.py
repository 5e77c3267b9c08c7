"""One cell's settings as one typed, frozen object, on both sides of the interpreter line.

The host validates a suite (bench/run/suite.py `Settings`, whose defaults are DEFAULTS here) and
expands it into cells; each cell's values become a `CellSettings`, sent to the worker as `as_dict`
(the cell's digest is taken of it) and rebuilt there by `from_dict`, which refuses an unknown key.
Everything else reads a setting by attribute. Some settings are in a cell only where they mean
something, else None (WHEN_SET: `heads` with R-GAT, `same_layer_edges` in GraphBolt's cells with a
model, TASK_ONLY in that task's cells, TARGET with a `target_acc`, `num_workers_rule` where
`per-gpu` was resolved), so a cell keeps the digest it had before they existed. A plain module.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from bench import modes
from bench.tasks import TASKS

WORK_BUDGET = 0.005  # the default share of an epoch that counting its batches' work may take
DROPOUT = 0.5  # between the shared models' layers (both sides, the plain loops too): fixed, not a setting

TARGET = ("target_acc", "eval_every", "max_epochs")
WHEN_SET = ("heads", "same_layer_edges", *dict.fromkeys(k for t in TASKS.values() for k in t.settings), *TARGET,
            "num_workers_rule")


class SettingsError(ValueError):
    pass


@dataclass(frozen=True)
class CellSettings:
    # what each one means: the docstrings of bench/run/suite.py `Settings`, in its order (a cell id's)
    num_workers: int | str = 0
    mode: str = modes.DEFAULT
    world_size: int = 1
    store: str = "memory"
    batch_size: int = 512
    fanout: list = field(default_factory=lambda: [10, 5])
    epochs: int = 3
    warmup_epochs: int = 1
    model: str = "sage"
    heads: int | None = 4
    hidden: int = 64
    lr: float = 0.01
    weight_decay: float = 0.0  # Adam's; 0 as PyG's examples (DGL's GraphBolt node example: 5e-4)
    seed: int = 0
    timeout: float = 600.0
    stack: str | None = None
    pin_memory: bool = False
    amp: str = "off"
    gpu_cache: float = 0.0
    trim_to_layer: bool = False
    threads: int | str = "auto"
    memory_limit: str = "none"
    page_cache: str = "warm"
    neg_ratio: int | None = 1
    neg_mode: str | None = "triplet"
    exclusion: str | None = "reverse"
    decoder: str | None = "dot"
    same_layer_edges: bool | None = True
    profile: bool = True
    work_budget: float = WORK_BUDGET
    target_acc: float | None = None
    eval_every: int | None = 1
    max_epochs: int | None = None
    num_workers_rule: str | None = None  # set by the host where it resolved `per-gpu`

    @classmethod
    def from_dict(cls, values: dict) -> CellSettings:
        """The settings a cell's dict holds (as sent to the worker, or as a result file recorded
        them); a key left out takes its default, or None where it is one of WHEN_SET."""
        unknown = sorted(set(values) - set(NAMES))
        if unknown:
            raise SettingsError(f"unknown setting {', '.join(map(repr, unknown))}; known: {', '.join(NAMES)}")
        return cls(**{**{k: None for k in WHEN_SET}, **values})

    def for_cell(self, task: str) -> CellSettings:
        """These settings as a cell of `task` keeps them: heads only with R-GAT, each task's own
        settings in its cells alone, the time-to-accuracy ones only with a target (max_epochs
        resolved to warm-up + measured epochs where it is not set)."""
        none = {k: None for t in TASKS.values() for k in t.settings if k not in TASKS[task].settings}
        if self.model != "rgat":
            none["heads"] = None
        if self.target_acc is None:
            none.update(dict.fromkeys(TARGET))
        elif self.max_epochs is None:
            none["max_epochs"] = self.warmup_epochs + self.epochs
        return dataclasses.replace(self, **none)

    def as_dict(self) -> dict:
        """The dict a cell sends and records (its digest is taken of it): WHEN_SET keys only where set."""
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None or k not in WHEN_SET}

    def replace(self, **changes) -> CellSettings:
        return dataclasses.replace(self, **changes)


NAMES = tuple(f.name for f in dataclasses.fields(CellSettings))
DEFAULTS = CellSettings()


class Recorded(dict):
    """Settings as a result file recorded them, for the publishing side: read by attribute, None where
    not recorded (an older file, a cell without them); a dict, so tables iterate over what was recorded."""

    def __getattr__(self, name: str):
        if name in NAMES:
            return self.get(name)
        raise AttributeError(f"no setting {name!r}; known: {', '.join(NAMES)}")
