"""Every setting declared once, in SETTINGS (name, type, default, where it applies, how it shows in a cell id);
made from it: the host's suite model (bench/suite_format.py `Settings`) and `CellSettings`, a cell's settings as
a frozen object, sent to the worker as `as_dict` (its digest taken of it), rebuilt by `from_dict` (an unknown key
refused), read by attribute. A setting with `only`, or a task's own (bench/tasks.py), is in a cell only where it
applies, else None and out of its dict (WHEN_SET): other cells keep their ids and digests. A plain module (no
pydantic): types are plain `typing`, bounds `Bounds`, the host's own types named by `HostType`."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from bench import modes
from bench.tasks import TASKS

WORK_BUDGET = 0.005  # the default share of an epoch that counting its batches' work may take
DROPOUT = 0.5  # between the shared models' layers (both sides, the plain loops too): fixed, not a setting
PER_GPU = "per-gpu"  # num_workers: the usable cores shared out among this node's ranks, resolved per run


class SettingsError(ValueError):
    pass


class Bounds(tuple):
    """Constraints on a value: (keyword, value) pairs of pydantic's Field (ge, le, min_length, ...)."""


def bounded(tp, **limits):
    return Annotated[tp, Bounds(limits.items())]


class HostType(str):
    """A type the host declares by this name (bench/suite_format.py HOST_TYPES: a registry's names, a size)."""


@dataclass(frozen=True)
class Only:
    """Where a cell has a setting: with a model ("trained": any but none), a backend whose options name it, a target."""
    model: str | None = None
    option: bool = False
    target: bool = False


@dataclass(frozen=True)
class InId:
    """A setting in a cell id, `when`: "always"; "swept" (by the suite); "swept or changed" (or not the default);
    "changed" (only not the default, last: adding it keeps a suite's ids). `rank`: its place among "always" and
    "changed" (ids as they were); `short`: its name there; `shows`: a value's text."""
    when: str = "swept"
    short: str | None = None
    rank: int = 0
    shows: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Setting:
    name: str
    one: Any  # the type of one value
    default: Any
    doc: str  # the suite reference's description (docs/reference/suite-keys.md)
    sweep: bool = True  # a list of values is a sweep axis
    only: Only | None = None
    option: bool = False  # honoured only where a BACKENDS line's `options` name it: else not-default makes no cell
    in_id: InId = InId()
    suite: bool = True  # False: the host sets it (no suite key)


def _int(low, high, **more):
    return bounded(int, ge=low, le=high, **more)


SETTINGS: tuple[Setting, ...] = (
    Setting("num_workers", _int(0, 256) | Literal[PER_GPU], 0, """DataLoader worker processes per rank; `per-gpu`: the
        usable cores divided among the node's ranks (the advice GPU users are given), resolved when the cell runs and
        recorded.""", in_id=InId("always", "workers", rank=1)),
    Setting("mode", HostType("mode"), modes.DEFAULT, """Where sampling, feature storage and training run
        (sampling-training, bench/modes.py); a backend makes cells only of the modes it has.""", in_id=InId("always", rank=0)),
    Setting("world_size", _int(1, 1024), 1, "Ranks; over 1 runs DDP (torch.distributed.run).", in_id=InId("always", "ws", rank=2)),
    Setting("store", HostType("store"), "memory", "Where features (or graphs) live: in memory or a disk-backed store."),
    Setting("batch_size", _int(1, 2**24), 512, "Training seeds per batch (per rank).", in_id=InId(short="batch")),
    Setting("fanout", bounded(list[_int(1, 10_000)], min_length=1, max_length=5), [10, 5],
            "Neighbours sampled per hop, first hop first; a list of lists sweeps it."),
    Setting("epochs", _int(1, 10_000), 3, "Measured epochs (the statistics' rounds)."),
    Setting("warmup_epochs", _int(0, 1_000), 1, "Epochs run before the measured ones, not counted.", in_id=InId(short="warmup")),
    Setting("model", Literal["sage", "rgcn", "rgat", "none"], "sage", """`sage`: a GraphSAGE model trained on each
        batch (untyped graphs); `rgcn` or `rgat`: R-GCN (per relation the neighbours' mean through the relation's
        weight, summed, plus one self-loop weight) or R-GAT (a GAT layer per relation, `heads` heads) on a typed
        graph; `none`: the loader alone (no training). A backend makes cells only of the models it trains
        (bench/backends/__init__.py).""", in_id=InId("swept or changed")),
    Setting("heads", _int(1, 64), 4, """R-GAT's attention heads per layer (hidden layers concatenate them: `hidden`
        must be a multiple); in a cell's settings only with `model: rgat`.""", only=Only(model="rgat")),
    Setting("hidden", _int(1, 65_536), 64, "The model's hidden width."),
    Setting("lr", bounded(float, gt=0, le=10), 0.01, "The optimizer's learning rate (Adam)."),
    Setting("weight_decay", bounded(float, ge=0, le=1), 0.0, """Adam's weight decay (L2), on every backend and plain
        loop alike. The default 0 is PyG's examples' (`examples/reddit.py`); DGL's GraphBolt node example uses 5e-4."""),
    Setting("seed", _int(0, 2**32 - 1), 0, "Seed of every random generator the cell uses (numpy's seed range)."),
    Setting("timeout", bounded(float, gt=0, le=7 * 24 * 3600), 600.0, """Seconds per cell, launch to exit (at most a
        week); a cell past it is recorded as `timeout`.""", sweep=False),
    Setting("stack", HostType("stack"), None, """Run a backend in another stack of its framework: a pinned one (e.g.
        pyg-dist's backend on current PyG) or an interpreter registered with `gnnbench stacks add`; `own` (or null):
        the backend's own. A stack without a backend's framework makes no cell of that backend.""", in_id=InId("never")),
    # the GPU settings make cells only where they mean something (suite `_meaningful`; without CUDA: skipped)
    Setting("pin_memory", bool, False, """The loader pins each batch, copied to the GPU with non_blocking=True (GPU
        cells only).""", option=True, in_id=InId("swept or changed")),
    Setting("amp", HostType("amp"), "off", "Mixed precision: autocast in bf16, or fp16 with a GradScaler (CUDA only).",
            option=True, in_id=InId("swept or changed")),
    Setting("gpu_cache", bounded(float, ge=0, le=1), 0.0, "GraphBolt's GPUCachedFeature: the share of feature rows "
            "cached on the GPU.", option=True, in_id=InId("swept or changed")),
    Setting("trim_to_layer", bool, False, """PyG's hierarchical neighbourhood sampling: each layer runs on the hops it
        still needs (torch_geometric.utils.trim_to_layer), not the whole sampled subgraph. A cell only where the
        backend has it and there is a model; in cell ids only when true.""", option=True, in_id=InId("changed", rank=2)),
    Setting("threads", _int(1, 1024) | Literal["auto"], "auto", """torch intra-op threads per rank: `auto` is the core
        budget's share (bench/machine/core_budget.py: the node's usable cores ÷ ranks, less the rank's loader
        workers); N sets exactly N, even beyond the budget (the cell records it oversubscribed). In cell ids only when
        set: `/threads=1`.""", in_id=InId("changed", rank=3)),
    Setting("memory_limit", HostType("memory_limit"), "none", """Memory budget: the cell's whole process tree runs in
        a memory cgroup with this limit (`none`, or a size: 512MiB, 3GiB); killed for memory it is recorded as `oom`.""", in_id=InId("changed", rank=0)),
    Setting("page_cache", Literal["warm", "cold"], "warm", """Disk-backed stores only: `cold` evicts the store's files
        from the page cache before every epoch; `warm` leaves them as the previous epoch left them.""", in_id=InId("changed", rank=1)),
    # the link task's own (bench/tasks.py: in its cells alone)
    Setting("neg_ratio", _int(1, 1000), 1, "Link task: negatives drawn per positive seed edge in training (uniform, "
            "not filtered)."),
    Setting("neg_mode", Literal["triplet", "binary"], "triplet", """Link task: `triplet` keeps each positive's source
        and draws destinations (GraphBolt's sample_uniform_negative, PyG's triplet mode); `binary` (PyG's own default,
        PyG only) draws both ends.""", option=True),
    Setting("exclusion", Literal["none", "reverse"], "reverse", """Link task: `reverse` drops each batch's seed edges
        and their reverses from its sampled graph (after sampling, on both sides); `none` keeps them, and the result
        says the accuracy includes the leak."""),
    Setting("decoder", Literal["dot", "mlp"], "dot",
            "Link task: the edge scorer on the encoder's embeddings, a dot product or a two-layer MLP."),
    Setting("same_layer_edges", bool, True, """GraphBolt's backends (a cell only of those, with a model): `true`, each
        layer computes over the edges PyG's would (a node's in-edges from the hop that first sampled around it: the
        same GNN on both sides); `false`, over GraphBolt's `minibatch.blocks` as its own examples train (every hop
        sampled again for all nodes reached before it: a seed's input layer averages the last fanout's fresh
        neighbours). In cell ids only when false: `/same_layer_edges=false`.""", only=Only(model="trained", option=True),
            in_id=InId("changed", rank=4, shows={False: "false"})),
    Setting("replay_batch", bool, False, """The model alone: the training loader's first batch, sampled once before the
        first epoch, is trained on again for each of an epoch's batches, so an epoch times the stack's torch and its
        framework's layers with no sampling or loading (the control that tells a framework pair's pipelines from their
        torch builds). A cell only with a model; in cell ids only when true: `/replay_batch=on`.""",
            only=Only(model="trained"), in_id=InId("changed", rank=6, shows={True: "on"})),
    Setting("profile", bool, True, """Time each epoch's stages and count each batch's work; false runs the plain loop
        (for measuring what looking costs). In cell ids only when false: `/profile=off`.""", in_id=InId(
            "changed", rank=5, shows={False: "off"})),
    Setting("work_budget", bounded(float, gt=0, le=1), WORK_BUDGET, """With profile: the share of each epoch that
        counting batches' work may take; where counting is dear a sample of the batches is counted; 1 counts every
        batch. Not in cell ids.""", sweep=False),
    # Time to accuracy (MLPerf's score for GNN training): one value each, not in cell ids (a stopping rule, not a
    # configuration: to compare two targets, use two suites); a cell without a target has none of these keys.
    Setting("target_acc", bounded(float, gt=0, le=1) | None, None, """Train to this validation accuracy: evaluated
        every `eval_every` training epochs (warm-up epochs train too and count; evaluation is timed apart), training
        goes on past the measured epochs until the target is reached or `max_epochs` have run; the result records the
        training time and epochs to it, or `not reached` with the best value.""", sweep=False, only=Only(target=True)),
    Setting("eval_every", _int(1, 10_000), 1, "With `target_acc`: evaluate the validation accuracy every this many "
            "training epochs.", sweep=False, only=Only(target=True)),
    Setting("max_epochs", _int(1, 100_000) | None, None, """With `target_acc`: the most epochs to train, warm-up
        included (default: warmup_epochs + epochs).""", sweep=False, only=Only(target=True)),
    Setting("num_workers_rule", str | None, None, "Set by the host where it resolved `per-gpu`.", only=Only(), suite=False),
)
NAMES = tuple(s.name for s in SETTINGS)
WHEN_SET = tuple(s.name for s in SETTINGS if s.only or any(s.name in t.settings for t in TASKS.values()))
TARGET = tuple(s.name for s in SETTINGS if s.only and s.only.target)


def applies(setting: Setting, values, task: str, options: tuple[str, ...]) -> bool:
    """Whether a cell of `task`, by a backend with these `options`, with these values, has the setting."""
    owners, only = [t.name for t in TASKS.values() if setting.name in t.settings], setting.only or Only()
    model = only.model is None or values.model == only.model or (only.model == "trained" and values.model != "none")
    return ((not owners or task in owners) and model and (not only.option or setting.name in options)
            and (not only.target or values.target_acc is not None))


class _Values:
    """CellSettings' methods."""

    @classmethod
    def from_dict(cls, values: dict):
        """A cell's settings from its dict (sent, or recorded): a key left out its default (None in WHEN_SET)."""
        if unknown := sorted(set(values) - set(NAMES)):
            raise SettingsError(f"unknown setting {', '.join(map(repr, unknown))}; known: {', '.join(NAMES)}")
        return cls(**{**{k: None for k in WHEN_SET}, **values})

    def for_cell(self, task: str, options: tuple[str, ...] = ()):
        """As a cell of `task` by a backend with `options` keeps them (`applies`); max_epochs resolved to warm-up + epochs."""
        none = {s.name: None for s in SETTINGS if not applies(s, self, task, options)}
        if self.target_acc is not None and self.max_epochs is None:
            none["max_epochs"] = self.warmup_epochs + self.epochs
        return dataclasses.replace(self, **none)

    def as_dict(self) -> dict:
        """The dict a cell sends and records (its digest is taken of it): WHEN_SET keys only where set."""
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None or k not in WHEN_SET}

    def replace(self, **changes):
        return dataclasses.replace(self, **changes)


CellSettings = dataclasses.make_dataclass("CellSettings", [(s.name, Any, field(default_factory=lambda d=s.default: list(
    d)) if isinstance(s.default, list) else field(default=s.default)) for s in SETTINGS], bases=(_Values,), frozen=True)
CellSettings.__module__ = __name__  # (make_dataclass names no module before Python 3.12)
DEFAULTS = CellSettings()


class Recorded(dict):
    """Settings as a result file recorded them (publish): by attribute, None where not recorded; a dict to iterate."""

    def __getattr__(self, name: str):
        if name in NAMES:
            return self.get(name)
        raise AttributeError(f"no setting {name!r}; known: {', '.join(NAMES)}")
