"""Suites: YAML files of datasets x backends x settings, validated strictly, expanded to cells.

A setting given as a list is a sweep axis (fanout, itself a list, is swept by a list of lists).
`exclude` drops every cell that matches all keys of one rule; `include` adds a sub-matrix (its
keys override the suite's). Modes a backend does not have are not cells of that backend.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, Union

import yaml
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, create_model, field_validator

from bench.backends import ALL_MODES, AMP_DTYPES, BACKENDS
import bench.datasets as datasets_module
from bench.datasets import SOURCES, canonical_params, parametric, parse_name
from bench.datasets.params import Strict, of_source as params_model
from bench import modes, strict_yaml
from bench.inputs import plain_name_problem
from bench.paths import suites_dir
from bench.machine.cgroup import canonical as canonical_limit
from bench.stores import STORES, cold_files
from bench.tasks import TASKS, describe
from bench.settings import DEFAULTS as D, CellSettings
from bench.machine import core_budget
from bench.stacks import OWN, StackError, framework_of, get, known

ModeName = Literal[ALL_MODES]  # type: ignore[valid-type]  # what each means: bench.modes
PER_GPU = "per-gpu"  # num_workers: the usable cores shared out among this node's ranks, resolved per run
Store = Literal[tuple(STORES)]  # type: ignore[valid-type]
Model = Literal["sage", "rgcn", "rgat", "none"]
# YAML 1.1 reads a bare `off` as false: take it as the "off" it was written as
Amp = Annotated[Literal[("off", *AMP_DTYPES)], BeforeValidator(lambda v: "off" if v is False else v)]
MemoryLimit = Annotated[str, BeforeValidator(lambda v: canonical_limit(v))]  # "none" or e.g. "3GiB"
Fanout = Annotated[list[Annotated[int, Field(ge=1, le=10_000)]], Field(min_length=1, max_length=5)]


def bounded(tp, **bounds):
    return Annotated[tp, Field(**bounds)]


def one_or_sweep(tp):
    """A setting: one value, or a non-empty list of them (a sweep axis)."""
    return tp | Annotated[list[tp], Field(min_length=1)]


class SuiteError(ValueError):
    pass


def dataset_model(source: str) -> type[BaseModel]:
    """`{source: <source>, params: <its schema>}`, the schema from the source itself; params may
    be left out where every parameter has a default."""
    params = params_model(source)
    try:
        default = params()  # every field has a default (a dict type: no parameters, `{}`)
    except ValidationError:
        default = ...  # required
    return create_model(f"{source.title()}Dataset", __base__=Strict, __doc__=f"A dataset of source {source!r}.",
                        source=(Literal[source], ...), params=(params, default))


def _shorthand(value: Any) -> Any:
    """`cora: planetoid:Cora` stands for `{source: planetoid, params: {name: Cora}}`."""
    if isinstance(value, str):
        source, _, rest = value.partition(":")
        if source in SOURCES and parametric(source):
            return {"source": source, "params": parse_name(value)["params"]}
        return {"source": source, "params": {"name": rest} if rest else {}}
    return value


# One member per registered source, told apart by `source` (bench.datasets.SOURCES).
DATASET_MODELS: dict[str, type[BaseModel]] = {source: dataset_model(source) for source in SOURCES}
DatasetSpec = Annotated[Union[tuple(DATASET_MODELS.values())],  # type: ignore[valid-type]
                        Field(discriminator="source"), BeforeValidator(_shorthand)]


class Settings(Strict):
    """Each setting is one value or a list of values (a sweep). The string under each field is its
    description: the docs' suite reference is generated from them (bench/publish/reference.py)."""
    model_config = ConfigDict(use_attribute_docstrings=True)

    num_workers: one_or_sweep(bounded(int, ge=0, le=256) | Literal[PER_GPU]) = D.num_workers
    """DataLoader worker processes per rank; `per-gpu`: the usable cores divided among the node's
    ranks (the advice GPU users are given), resolved when the cell runs and recorded."""
    mode: one_or_sweep(ModeName) = D.mode
    """Where sampling, feature storage and training run (sampling-training, bench/modes.py); a backend makes
    cells only of the modes it has."""
    world_size: one_or_sweep(bounded(int, ge=1, le=1024)) = D.world_size
    """Ranks; more than 1 runs DDP under torch.distributed.run."""
    store: one_or_sweep(Store) = D.store
    """Where features (or graphs) live: in memory or a disk-backed store (bench/stores)."""
    batch_size: one_or_sweep(bounded(int, ge=1, le=2**24)) = D.batch_size
    """Training seeds per batch (per rank)."""
    fanout: one_or_sweep(Fanout) = D.fanout
    """Neighbours sampled per hop, first hop first; a list of lists sweeps it."""
    epochs: one_or_sweep(bounded(int, ge=1, le=10_000)) = D.epochs
    """Measured epochs (the statistics' rounds)."""
    warmup_epochs: one_or_sweep(bounded(int, ge=0, le=1_000)) = D.warmup_epochs
    """Epochs run before the measured ones and not counted."""
    model: one_or_sweep(Model) = D.model
    """`sage`: a GraphSAGE model trained on each batch (untyped graphs); `rgcn` or `rgat`: R-GCN
    (per relation the neighbours' mean through the relation's weight, summed, plus one self-loop
    weight) or R-GAT (a GAT layer per relation, `heads` heads) on a typed graph; `none`: the loader
    alone (no training). A backend makes cells only of the models it trains (bench/backends/__init__.py)."""
    heads: one_or_sweep(bounded(int, ge=1, le=64)) = D.heads
    """R-GAT's attention heads per layer (hidden layers concatenate them: `hidden` must be a multiple);
    in a cell's settings only with `model: rgat`."""
    hidden: one_or_sweep(bounded(int, ge=1, le=65_536)) = D.hidden
    """The model's hidden width."""
    lr: one_or_sweep(bounded(float, gt=0, le=10)) = D.lr
    """The optimizer's learning rate (Adam)."""
    weight_decay: one_or_sweep(bounded(float, ge=0, le=1)) = D.weight_decay
    """Adam's weight decay (L2), on every backend and plain loop alike. The default 0 is PyG's
    examples' (`examples/reddit.py`); DGL's GraphBolt node example uses 5e-4."""
    seed: one_or_sweep(bounded(int, ge=0, le=2**32 - 1)) = D.seed
    """Seed of every random generator the cell uses (numpy takes seeds in this range)."""
    timeout: bounded(float, gt=0, le=7 * 24 * 3600) = D.timeout
    """Seconds per cell, launch to exit (at most a week); a cell past it is recorded as `timeout`."""
    stack: one_or_sweep(str | None) = D.stack
    """Run a backend in another stack of its framework: a pinned one (e.g. pyg-dist's backend on
    current PyG) or an interpreter registered with `gnnbench stacks add`; `own` (or null): the
    backend's own. A stack without a backend's framework makes no cell of that backend."""
    # GPU settings, each a cell only where it means something (see `_meaningful`); on a machine
    # without CUDA those cells are skipped with the reason, like the CUDA modes.
    pin_memory: one_or_sweep(bool) = D.pin_memory
    """The loader pins each batch, copied to the GPU with non_blocking=True (GPU cells only)."""
    amp: one_or_sweep(Amp) = D.amp
    """Mixed precision: autocast in bf16, or fp16 with a GradScaler (CUDA only)."""
    gpu_cache: one_or_sweep(bounded(float, ge=0, le=1)) = D.gpu_cache
    """GraphBolt's GPUCachedFeature: the share of feature rows cached on the GPU."""
    trim_to_layer: one_or_sweep(bool) = D.trim_to_layer
    """PyG's hierarchical neighbourhood sampling: each layer runs on the hops it still needs
    (torch_geometric.utils.trim_to_layer), not the whole sampled subgraph. A cell only where the
    backend has it and there is a model; in cell ids only when true."""
    threads: one_or_sweep(bounded(int, ge=1, le=1024) | Literal["auto"]) = D.threads
    """torch intra-op threads per rank: `auto` is the core budget's share (bench/machine/core_budget.py:
    the node's usable cores ÷ ranks, less the rank's loader workers); N sets exactly N, even beyond
    the budget (the cell records it oversubscribed). In cell ids only when set: `/threads=1`."""
    memory_limit: one_or_sweep(MemoryLimit) = D.memory_limit
    """Memory budget: the cell's whole process tree runs in a memory cgroup with this limit
    (`none`, or a size: 512MiB, 3GiB); killed for memory it is recorded as `oom`."""
    page_cache: one_or_sweep(Literal["warm", "cold"]) = D.page_cache
    """Disk-backed stores only: `cold` evicts the store's files from the page cache before every
    epoch; `warm` leaves them as the previous epoch left them."""
    neg_ratio: one_or_sweep(bounded(int, ge=1, le=1000)) = D.neg_ratio
    """Link task: negatives drawn per positive seed edge in training (uniform, not filtered)."""
    neg_mode: one_or_sweep(Literal["triplet", "binary"]) = D.neg_mode
    """Link task: `triplet` keeps each positive's source and draws destinations (GraphBolt's
    sample_uniform_negative, PyG's triplet mode); `binary` (PyG's own default, PyG only) draws both ends."""
    exclusion: one_or_sweep(Literal["none", "reverse"]) = D.exclusion
    """Link task: `reverse` drops each batch's seed edges and their reverses from its sampled graph
    (after sampling, on both sides); `none` keeps them, and the result says the accuracy includes the leak."""
    decoder: one_or_sweep(Literal["dot", "mlp"]) = D.decoder
    """Link task: the edge scorer on the encoder's embeddings, a dot product or a two-layer MLP."""
    same_layer_edges: one_or_sweep(bool) = D.same_layer_edges
    """GraphBolt's backends (a cell only of those, with a model): `true`, each layer computes over the
    edges PyG's would (a node's in-edges from the hop that first sampled around it: the same GNN
    on both sides); `false`, over GraphBolt's `minibatch.blocks` as its own examples train (every
    hop sampled again for all nodes reached before it: a seed's input layer averages the last
    fanout's fresh neighbours). In cell ids only when false: `/same_layer_edges=false`."""
    profile: one_or_sweep(bool) = D.profile
    """Time each epoch's stages and count each batch's work; false runs the plain loop (for
    measuring what looking costs). In cell ids only when false: `/profile=off`."""
    work_budget: bounded(float, gt=0, le=1) = D.work_budget
    """With profile: the share of each epoch that counting batches' work may take; where counting
    is dear a sample of the batches is counted; 1 counts every batch. Not in cell ids."""
    # Time to accuracy (MLPerf's score for GNN training). One value each, not in cell ids (a
    # stopping rule, not a configuration: to compare two targets, use two suites); a cell without a
    # target has none of these keys and runs as before.
    target_acc: bounded(float, gt=0, le=1) | None = D.target_acc
    """Train to this validation accuracy: evaluated every `eval_every` training epochs (warm-up
    epochs train too and count; evaluation is timed apart), training goes on past the measured
    epochs until the target is reached or `max_epochs` have run; the result records the training
    time and epochs to it, or `not reached` with the best value."""
    eval_every: bounded(int, ge=1, le=10_000) = D.eval_every
    """With `target_acc`: evaluate the validation accuracy every this many training epochs."""
    max_epochs: bounded(int, ge=1, le=100_000) | None = D.max_epochs
    """With `target_acc`: the most epochs to train, warm-up included (default: warmup_epochs + epochs)."""

    @field_validator("stack")
    @classmethod
    def _known_stack(cls, value):
        try:
            allowed = known()
        except StackError as exc:
            raise ValueError(str(exc)) from None
        names = value if isinstance(value, list) else [value]
        for name in names:
            if name is not None and name != OWN and name not in allowed:
                raise ValueError(f"unknown stack {name!r}; allowed: {OWN}, {', '.join(allowed)} (an interpreter of "
                                 "your own becomes a stack with: gnnbench stacks add NAME --python PATH)")
        normal = [None if n == OWN else n for n in names]
        return normal if isinstance(value, list) else normal[0]

    def axes(self) -> dict[str, list]:
        return {name: _values(name, getattr(self, name)) for name in type(self).model_fields}


def _values(key: str, value) -> list:
    """A setting's values: a list is a sweep (fanout, itself a list, is swept by a list of lists)."""
    return list(value) if isinstance(value, list) and (key != "fanout" or isinstance(value[0], list)) else [value]


class Rule(Strict):
    """A match (exclude) or a sub-matrix (include): backend, dataset and any setting."""
    model_config = ConfigDict(extra="allow", use_attribute_docstrings=True)
    backend: str | list[str] | None = None
    """A backend name or a list of them; left out: every backend."""
    dataset: str | list[str] | None = None
    """A dataset key of the suite or a list of them; left out: every dataset."""


class Paired(Strict):
    """Cells that take turns, epoch by epoch, so a slow stretch of the machine falls on both
    (bench/run/paired.py)."""
    model_config = ConfigDict(use_attribute_docstrings=True)

    by: Annotated[list[str], Field(min_length=1)]
    """Axes (`backend`, `dataset` or a setting): every two cells that differ in one of them alone take turns."""
    within: Annotated[float, Field(gt=0, lt=1)] = 0.03
    """A pair settles when its ratio's 95 % interval lies inside ±within, or wholly outside it."""
    launches: Annotated[int, Field(ge=3, le=100)] = 6
    """Launches (fresh processes) each pair is measured in, its first turn's side alternating; the interval
    is taken over launches, so what differs from one launch to the next is in it (at least 3)."""
    rounds: Annotated[int, Field(ge=2, le=1000)] | None = None
    """Rounds (one measured epoch of each cell) per launch; default: the cells' `epochs`, so each launch
    trains as the suite says and the accuracy stays a same-epoch figure."""

    @field_validator("by")
    @classmethod
    def _axes(cls, value: list[str]) -> list[str]:
        for axis in value:
            if axis not in pair_axes():
                raise ValueError(f"{axis!r} is not an axis of a cell; allowed: {', '.join(pair_axes())}")
        return list(dict.fromkeys(value))


def pair_axes() -> tuple[str, ...]:
    """`runner`: each cell against its twin that no memory sampler watches (bench/run/paired.py)."""
    return ("backend", "dataset", "runner", *Settings.model_fields)


def _plain_names(what: str):
    """A check that a name (or each key) is a plain file name: the suite's names its result file,
    a dataset key is a part of each cell id, and so of test and file names."""
    def check(value):
        for name in value if isinstance(value, dict) else [value]:
            problem = plain_name_problem(name)
            if problem:
                raise ValueError(f"{what}{problem}")
        return value
    return check


def _known_backends(value: list[str]) -> list[str]:
    unknown = [b for b in value if b not in BACKENDS]
    if unknown:
        raise ValueError(f"unknown backend {unknown[0]!r}; allowed: {', '.join(BACKENDS)}")
    return value


class Suite(Strict):
    model_config = ConfigDict(use_attribute_docstrings=True)

    name: Annotated[str, AfterValidator(_plain_names(""))]
    """The suite's name: it names its result file, so a plain file name."""
    description: str = ""
    """One line on what the suite asks; shown on its result page."""
    requires: Literal["gpu"] | None = None
    """`gpu`: the suite asks GPU questions; on a machine that shows no GPU every cell (its CPU
    baselines too) is recorded as skipped with the reason, before any stack, dataset or store step."""
    baseline: str | None = None
    """The cell id speedups are taken against; default: the first cell."""
    datasets: Annotated[dict[str, DatasetSpec], Field(min_length=1), AfterValidator(_plain_names("dataset key "))]
    """Dataset keys (a part of each cell id) to `{source: S, params: {...}}`, or the shorthand
    `source:name` (e.g. `planetoid:Cora`); the sources and their params are listed below."""
    backends: Annotated[list[str], Field(min_length=1), AfterValidator(_known_backends)]
    """The systems under test, by their registry names."""
    settings: Settings = Settings()
    """The settings below; each one value or a list of values (a sweep axis)."""
    include: list[Rule] = []
    """Sub-matrices added to the cells: each rule's keys override the suite's."""
    exclude: list[Rule] = []
    """Rules dropping every cell that matches all keys of one rule."""
    paired: Paired | None = None
    """Cells compared in turns (`{by: [stack]}`): live workers alternating epochs, each pair's ratio with
    its interval in the tables; `gnnbench run --paired AXIS` adds an axis."""



@dataclass(frozen=True)
class Cell:
    """One concrete configuration: hashable, with a readable id."""
    id: str
    backend: str
    stack: str
    dataset: str
    dataset_spec: dict = field(hash=False, compare=False)
    settings: CellSettings = field(hash=False, compare=False)

    def to_json(self) -> str:
        return json.dumps({"id": self.id, "backend": self.backend, "stack": self.stack,
                           "dataset": self.dataset_spec, "settings": self.settings.as_dict()})

    @property
    def digest(self) -> str:
        """Of everything the cell runs with (every setting, the dataset and its parameters): a
        journal line whose digest differs was measured in another configuration."""
        shape = json.loads(self.to_json())
        if datasets_module.user_files(self.dataset_spec["source"]):  # a user's files: their edits too
            shape["dataset_files"] = datasets_module.files_fingerprint(self.dataset_spec)
        text = json.dumps(shape, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


# A cell id: these settings always, by their short names; the others where the suite sweeps them
ID_ALWAYS = {"mode": "mode", "num_workers": "workers", "world_size": "ws"}
ID_SHORT = {"batch_size": "batch", "warmup_epochs": "warmup"}
# ... and these exactly where they differ from their default, swept or not (adding them to a suite
# leaves the ids of its other cells as they were)
ID_WHEN_SET = {"memory_limit": "none", "page_cache": "warm", "trim_to_layer": False, "threads": "auto"}
# ... and the model and GPU settings where the suite sweeps them or a cell differs from the default
ID_WHEN_NOT_DEFAULT = {"model": "sage", "pin_memory": False, "amp": "off", "gpu_cache": 0.0}


def load(path_or_name: str | Path) -> tuple[Suite, Path]:
    path = resolve_path(path_or_name)
    try:
        raw = strict_yaml.load_text(path.read_bytes().decode("utf-8"), str(path))
    except strict_yaml.StrictYamlError as exc:
        raise SuiteError(str(exc)) from None
    except UnicodeDecodeError as exc:
        raise SuiteError(f"{path}: not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset {exc.start}); "
                         "allowed: a YAML file saved as UTF-8") from None
    except OSError as exc:
        raise SuiteError(f"{path}: cannot read the suite file ({exc.strerror or exc})") from None
    except yaml.YAMLError as exc:
        raise SuiteError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(raw, dict):
        raise SuiteError(f"{path}: a suite is a mapping with keys {', '.join(Suite.model_fields)}")
    try:
        suite = Suite.model_validate(raw)
    except ValidationError as exc:
        lines = [f"{path}: {_describe_at(err)}" for err in _most_specific(exc.errors())]
        raise SuiteError("\n".join(dict.fromkeys(lines))) from None  # once each (X | list[X] fails twice)
    problems = _check_rules(suite)
    if problems:
        raise SuiteError("\n".join(dict.fromkeys(f"{path}: {p}" for p in problems)))
    return suite, path


def named_backends(suite: Suite) -> list[str]:
    """The backends a suite names, in its backends list and its include rules, once each in order."""
    return list(dict.fromkeys([*suite.backends, *(b for rule in suite.include for b in _as_list(rule.backend))]))


def with_stacks(suite: Suite, names: list[str]) -> tuple[Suite, list[str]]:
    """The suite with its `stack` axis replaced (`--stack`; include rules that name a stack keep it),
    and a line for each backend of the suite that none of these stacks can run."""
    changed = _with_axis(suite, "stack", names, rules=False)
    in_stacks = {c.backend for c in expand(changed)}
    return changed, _not_run(changed, "stack", names, {
        b: f"runs in none of these stacks (it needs {framework_of(BACKENDS[b].stack)})"
        for b in named_backends(suite) if b not in in_stacks})


def with_mode(suite: Suite, names: list[str]) -> tuple[Suite, list[str]]:
    """The suite with its `mode` axis replaced (`--mode`), include rules' modes too; and a line
    for each backend of the suite that has none of these modes (its cells are not run)."""
    changed = _with_axis(suite, "mode", names)
    return changed, _not_run(changed, "mode", names, {
        b: f"has no such mode (its modes: {', '.join(BACKENDS[b].modes)})"
        for b in named_backends(suite) if not set(names) & set(BACKENDS[b].modes)})


def _not_run(changed: Suite, key: str, values: list, why: dict[str, str]) -> list[str]:
    """A line for each backend an option (--KEY per value) leaves without a cell; an error where no cell is left."""
    notes = [f"--{key} {', '.join(values)}: {backend} {reason}: its cells are not run" for backend, reason in why.items()]
    if not expand(changed):
        raise SuiteError(" ".join(f"--{key} {v}" for v in values) + f": no backend of suite {changed.name!r} runs in "
                         + (f"these {key}s" if len(values) > 1 else f"this {key}") + "".join(f"\n  {n}" for n in notes))
    return notes


def with_seeds(suite: Suite, seeds: list[int]) -> Suite:
    """The suite with its `seed` axis replaced (`--seed`), include rules' seeds too: every cell once
    per seed, so that a gap between two pipelines can be held against the spread over seeds."""
    return _with_axis(suite, "seed", seeds)


def _with_axis(suite: Suite, key: str, values: list, rules: bool = True) -> Suite:
    """The suite with setting `key` swept over `values` (an option given as --KEY per value),
    in its settings and (`rules`) in the include rules that name it; values validated as the suite's are."""
    try:
        value = getattr(Settings.model_validate({key: list(values)}), key)
    except ValidationError as exc:
        raise SuiteError(" ".join(f"--{key} {v}" for v in values) + ": "
                         + "; ".join(_describe_at(e) for e in _most_specific(exc.errors()))) from None
    include = [Rule.model_validate({**rule.model_dump(exclude_none=True), key: value})
               if rules and key in (rule.model_extra or {}) else rule for rule in suite.include]
    return suite.model_copy(update={"settings": suite.settings.model_copy(update={key: value}), "include": include})


def resolve_workers(cell: Cell, usable_cores: int, nnodes: int = 1) -> Cell:
    """A cell with `num_workers: per-gpu` as it runs on this machine (bench/machine/core_budget.py);
    the rule stays in `num_workers_rule`, the id unchanged."""
    if cell.settings.num_workers != PER_GPU:
        return cell
    local_ranks = max(1, cell.settings.world_size // max(1, nnodes))
    settings = cell.settings.replace(num_workers=core_budget.per_gpu_workers(usable_cores, local_ranks),
                                     num_workers_rule=PER_GPU)
    return dataclasses.replace(cell, settings=settings)


def resolve_path(path_or_name: str | Path) -> Path:
    candidate = Path(path_or_name)
    if candidate.is_file():
        return candidate
    named = suites_dir() / f"{path_or_name}.yaml"
    if named.is_file():
        return named
    known = ", ".join(sorted(p.stem for p in suites_dir().glob("*.yaml")))
    raise SuiteError(f"suite {str(path_or_name)!r} not found: not a file, and not a name in "
                     f"{suites_dir()} (known: {known})")


STRICT_TYPE_ERRORS = {"int_type", "float_type"}
TYPE_MISMATCH = {"int_type", "int_parsing", "float_type", "float_parsing", "list_type", "string_type",
                 "literal_error", "model_type", "dict_type"}


def _clean_loc(err: dict) -> tuple:
    return tuple(p for p in err["loc"] if not _is_union_tag(p))


def _most_specific(errors: list[dict]) -> list[dict]:
    """A value that may be `X | list[X]` fails both ways; keep the error that says most: drop a
    type mismatch where a deeper error exists, and a list/dict mismatch beside a value error."""
    locs = [_clean_loc(e) for e in errors]
    kept = []
    for err, loc in zip(errors, locs):
        deeper = any(other[:len(loc)] == loc and len(other) > len(loc) for other in locs)
        beside = [e2["type"] for e2, o in zip(errors, locs) if o == loc and e2 is not err]
        # a scalar that fails as X also fails as list[X] (a sweep): the list's error says nothing new
        says_less = (any(t not in TYPE_MISMATCH for t in beside) or (err["type"] == "list_type" and beside)
                     or (err["type"] == "dict_type" and "literal_error" in beside))
        if err["type"] in TYPE_MISMATCH and (deeper or says_less):
            continue
        kept.append(err)
    return kept or errors


def _describe_at(err: dict) -> str:
    loc = ".".join(str(p) for p in _clean_loc(err))
    if err["type"] == "extra_forbidden":
        parent = _model_at(err["loc"][:-1])
        allowed = ", ".join(parent.model_fields) if parent else "none"
        return f"{loc}: unknown key; allowed keys here: {allowed}"
    if err["type"] == "missing":
        return f"{loc}: required key is missing"
    message = err["msg"].removeprefix("Value error, ")
    if err["type"] in STRICT_TYPE_ERRORS and (isinstance(err.get("input"), bool) or _numeric_text(err.get("input"))):
        # strict mode: YAML's true/false and quoted numbers are not numbers
        message += (" (true and false are not numbers)" if isinstance(err["input"], bool)
                    else " (a quoted value is a string: write the number without quotes)")
    expected = err.get("ctx", {}).get("expected")
    if expected and expected not in message:
        message += f" (allowed: {expected})"
    return f"{loc}: {message} (got {err.get('input')!r})"


def _numeric_text(value: Any) -> bool:
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return isinstance(value, str)


def _is_union_tag(part: Any) -> bool:
    # pydantic adds the union member ("list[...]", "int", "synthetic") to error locations
    return isinstance(part, str) and ("[" in part or part in {"int", "float", "str", "bool", "none", *SOURCES}
                                      or part.startswith(("literal", "constrained-")))


def _model_at(loc: tuple) -> type[BaseModel] | None:
    """The pydantic model that an error location points into, for listing its allowed keys."""
    current: Any = Suite
    for part in loc:
        if part in DATASET_MODELS:  # pydantic names the member of the dataset union it tried
            current = DATASET_MODELS[part]
            continue
        if isinstance(part, int) or _is_union_tag(part):
            continue
        model = _first_model(current)
        if model is None:
            return None
        if part in model.model_fields:
            current = model.model_fields[part].annotation
        else:  # a free key such as a dataset name: step into the mapping's value type
            args = typing.get_args(current) or typing.get_args(model)
            current = args[-1] if args else None
    return _first_model(current)


def _first_model(tp: Any) -> type[BaseModel] | None:
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return tp
    for arg in typing.get_args(tp):
        found = _first_model(arg)
        if found is not None:
            return found
    return None


def _check_rules(suite: Suite) -> list[str]:
    problems = []
    allowed = {"backend", "dataset", *Settings.model_fields}
    for kind in ("include", "exclude"):
        for i, rule in enumerate(getattr(suite, kind)):
            given = rule.model_extra or {}
            problems += [f"{kind}.{i}.{key}: unknown key; allowed keys here: {', '.join(sorted(allowed))}"
                         for key in given if key not in allowed]
            problems += [f"{kind}.{i}.{key}: unknown {key} {value!r}; allowed: {', '.join(names)}"
                         for key, names in (("backend", BACKENDS), ("dataset", suite.datasets))
                         for value in _as_list(getattr(rule, key)) if value not in names]
            try:  # a rule's values are checked as settings are
                Settings.model_validate({k: v for k, v in given.items() if k in allowed})
            except ValidationError as exc:
                problems += [_describe_at({**e, "loc": (kind, i, *e["loc"])})
                             for e in _most_specific(exc.errors())]
    problems += _check_tasks(suite)
    problems += _check_target(suite)
    if problems:
        return problems
    cells = expand(suite)
    problems += _unmatched_excludes(suite)
    if not cells:
        problems.append("the matrix expands to zero cells: no backend has the modes, stores and options this "
                        "suite sets (see each backend's modes, stores, models and options in bench/backends/__init__.py; "
                        "pin_memory, fp16 amp and gpu_cache need a mode that trains on CUDA), no stack it "
                        "names has a backend's framework, or `exclude` drops every cell")
    problems += [f"settings.hidden: {c.settings.hidden} is not a multiple of heads ({c.settings.heads}) in "
                 f"cell {c.id}: R-GAT's hidden layers concatenate their heads"
                 for c in cells if c.settings.model == "rgat" and c.settings.hidden % c.settings.heads][:1]
    if suite.baseline is not None and suite.baseline not in {c.id for c in cells}:
        problems.append(f"baseline: {suite.baseline!r} is not a cell id of this suite")
    return problems


def _unmatched_excludes(suite: Suite) -> list[str]:
    """Each `exclude` rule that matches no cell of the matrix (a typo in a value: it drops nothing, silently)."""
    if not suite.exclude:
        return []
    candidates = expand(suite.model_copy(update={"exclude": []}))
    problems = []
    for i, rule in enumerate(suite.exclude):
        if not any(_matches(rule, c.backend, c.dataset, c.settings) for c in candidates):
            written = ", ".join(f"{k}: {v}" for k, v in rule.model_dump(exclude_none=True).items())
            problems.append(f"exclude.{i}: {{{written}}} matches no cell of the suite; allowed: a rule that matches "
                            "at least one cell (correct its values, or remove it)")
    return problems


def _check_tasks(suite: Suite) -> list[str]:
    """A backend or dataset with no partner of its task at all (expansion skips the pairs that disagree)."""
    served = {name: tasks_of(spec) for name, spec in suite.datasets.items()}
    problems = []
    for backend in suite.backends:
        task = BACKENDS[backend].task
        if not any(task in t for t in served.values()):
            problems.append(
                f"backends: {backend!r} trains the {task!r} task and no dataset of this suite serves it "
                f"({'; '.join(f'{n}: {describe(t)}' for n, t in served.items())}); add one, or remove the "
                f"backend (backends by task: {_backends_by_task()})")
    backend_tasks = {BACKENDS[b].task for b in named_backends(suite) if b in BACKENDS}
    for name, tasks in served.items():
        if not backend_tasks.intersection(tasks):
            problems.append(
                f"datasets.{name}: serves {describe(tasks)}, and no backend of this suite trains "
                f"{'it' if len(tasks) == 1 else 'any of them'} (backends by task: {_backends_by_task()})")
    return problems


def _backends_by_task() -> str:
    return "; ".join(f"{task}: {', '.join(b for b, i in BACKENDS.items() if i.task == task)}"
                     for task in TASKS if any(i.task == task for i in BACKENDS.values()))


def _check_target(suite: Suite) -> list[str]:
    """max_epochs and eval_every only beside target_acc, and max_epochs leaves room for the warm-up
    and measured epochs (they always run); checked in each matrix (settings, each include rule)."""
    problems = []
    defaults = Settings()
    matrices = [("settings", {k: getattr(suite.settings, k) for k in suite.settings.model_fields_set})]
    matrices += [(f"include.{i}", rule.model_extra or {}) for i, rule in enumerate(suite.include)]
    for where, given in matrices:
        def value(key):
            return given[key] if key in given else getattr(suite.settings, key)

        if value("target_acc") is None:
            problems += [f"{where}.{key}: set without target_acc; allowed only beside target_acc (a validation "
                         "accuracy in (0, 1] to train to)"
                         for key in ("eval_every", "max_epochs") if key in given and given[key] != getattr(defaults, key)]
            continue
        most = value("max_epochs")
        runs = max(_as_list(value("warmup_epochs"))) + max(_as_list(value("epochs")))
        if most is not None and most < runs:
            problems.append(f"{where if 'max_epochs' in given else 'settings'}.max_epochs: {most} is fewer than the "
                            f"warm-up and measured epochs ({value('warmup_epochs')} + {value('epochs')}), which always "
                            f"run; allowed: an integer >= {runs}, or leave it out ({runs})")
    return problems


def _as_list(value) -> list:
    return [] if value is None else value if isinstance(value, list) else [value]


def expand(suite: Suite) -> list[Cell]:
    base_axes = suite.settings.axes()
    swept = {k for k, v in base_axes.items() if len(v) > 1}
    matrices = [(suite.backends, list(suite.datasets), base_axes)]
    for rule in suite.include:
        overrides = Settings.model_validate(rule.model_extra or {}).axes()
        given = set(rule.model_extra or {})
        axes = {k: (overrides[k] if k in given else v) for k, v in base_axes.items()}
        swept |= {k for k in given if len(axes[k]) > 1}
        matrices.append((_as_list(rule.backend) or suite.backends,
                         _as_list(rule.dataset) or list(suite.datasets), axes))

    cells: dict[str, Cell] = {}
    for backends, datasets, axes in matrices:
        names = list(axes)
        for backend, dataset, values in itertools.product(backends, datasets, itertools.product(*axes.values())):
            info = BACKENDS[backend]
            settings = CellSettings(**dict(zip(names, values))).for_cell(info.task)
            if settings.model == "none" or "same_layer_edges" not in info.options:
                settings = settings.replace(same_layer_edges=None)  # GraphBolt's layers alone: other cells keep their digest
            if (not _meaningful(backend, settings)
                    or info.task not in tasks_of(suite.datasets[dataset])  # the dataset serves the backend's task
                    or any(_matches(rule, backend, dataset, settings) for rule in suite.exclude)):
                continue
            stack = settings.stack or info.stack
            cell_id = _cell_id(backend, dataset, settings, swept) + (f"/stack={stack}" if stack != info.stack else "")
            source_spec = suite.datasets[dataset].model_dump()
            spec = {"name": dataset, "source": source_spec["source"],
                    "params": canonical_params(source_spec["source"], source_spec["params"])}
            cells.setdefault(cell_id, Cell(cell_id, backend, stack, dataset, spec, settings))
    return list(cells.values())


def _meaningful(backend: str, settings: CellSettings) -> bool:
    """Whether a backend has what these settings ask for (its modes, stores, framework, models and
    BackendInfo.options); the GPU settings only in a mode that trains on the GPU (bf16 autocast
    runs on the CPU too)."""
    info = BACKENDS[backend]
    if settings.mode not in info.modes or settings.store not in info.stores:
        return False  # like modes, a store a backend does not have is not a cell of it
    if settings.stack is not None and framework_of(info.stack) not in get(settings.stack).frameworks:
        return False
    if settings.model != "none" and settings.model not in info.models:
        return False  # a model the backend does not train (GraphSAGE on untyped graphs, R-GCN/R-GAT on typed)
    mode = modes.mode(settings.mode)
    on_gpu = mode.trains_on_gpu
    if settings.pin_memory and not (on_gpu and "pin_memory" in info.options):
        return False
    if settings.amp != "off" and (settings.model == "none" or "amp" not in info.options
                                  or (settings.amp == "fp16" and not on_gpu)):
        return False
    # GraphBolt looks its GPU cache up with ids on the GPU: the mode that moves the seeds there first
    if settings.gpu_cache and not (mode.pinned and "gpu_cache" in info.options):
        return False
    if settings.trim_to_layer and not (settings.model == "sage" and "trim_to_layer" in info.options):
        return False
    if settings.neg_mode not in (None, "triplet") and "neg_mode" not in info.options:
        return False
    # a cold page cache means something only for a store read from files (not an in-memory copy)
    return not (settings.page_cache == "cold" and not cold_files(settings.store, info.task))


def tasks_of(dataset_spec) -> tuple[str, ...]:
    """The tasks a dataset of the suite serves (bench/tasks.py), by its source and parameters."""
    return datasets_module.tasks(dataset_spec.model_dump())


def _matches(rule: Rule, backend: str, dataset: str, settings: CellSettings) -> bool:
    checks = {"backend": rule.backend, "dataset": rule.dataset, **(rule.model_extra or {})}
    actual = {"backend": backend, "dataset": dataset, **settings.as_dict()}
    for key, wanted in checks.items():
        if wanted is None:
            continue
        options = _values(key, wanted)
        if key == "stack":  # "own" is how a rule names each backend's own stack (None in a cell)
            options = [None if o == "own" else o for o in options]
        if actual.get(key) not in options:  # .get: a cell without a target has no target keys
            return False
    return True


def _cell_id(backend: str, dataset: str, settings: CellSettings, swept: set[str]) -> str:
    given = settings.as_dict()
    parts = [backend, dataset]
    parts += [f"{short}={given[key]}" for key, short in ID_ALWAYS.items()]
    for key, value in given.items():
        if key in swept and key not in {*ID_ALWAYS, *ID_WHEN_SET, "stack", "profile", "same_layer_edges"}:
            value = "-".join(map(str, value)) if isinstance(value, list) else value
            parts.append(f"{ID_SHORT.get(key, key)}={value}")
    parts += [f"{key}={given[key]}" for key, default in ID_WHEN_NOT_DEFAULT.items()
              if key not in swept and given[key] != default]
    parts += [f"{key}={given[key]}" for key, default in ID_WHEN_SET.items() if given[key] != default]
    if settings.same_layer_edges is False:  # the default (PyG's edges) keeps the id it had
        parts.append("same_layer_edges=false")
    if not settings.profile:  # the default (instrumented) cell keeps the id it always had
        parts.append("profile=off")
    return "/".join(parts)
