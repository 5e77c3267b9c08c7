"""The suite format: the pydantic model a suite file is checked against, below both halves (run/suite.py
loads and expands suites with it, publish/reference.py documents it). `Settings` is made from the
settings table (bench/settings.py), as CellSettings is; the registries give the names a value may take."""

from __future__ import annotations

import typing
from typing import Annotated, Any, Literal, Union

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, create_model, field_validator

from bench.backends import ALL_MODES, AMP_DTYPES, BACKENDS
from bench.datasets import SOURCES, parametric, parse_name
from bench.datasets.params import Strict, of_source as params_model
from bench.inputs import plain_name_problem
from bench.machine.cgroup import canonical as canonical_limit
from bench.settings import SETTINGS, Bounds, HostType
from bench.stacks import OWN, StackError, known
from bench.stores import STORES


def _known_stack(name: str | None) -> str | None:
    """A stack as a cell names it: `own` (or null) is the backend's own, None."""
    try:
        allowed = known() if name not in (None, OWN) else ()
    except StackError as exc:
        raise ValueError(str(exc)) from None
    if name not in (None, OWN, *allowed):
        raise ValueError(f"unknown stack {name!r}; allowed: {OWN}, {', '.join(allowed)} (an interpreter of your own "
                         "becomes a stack with: gnnbench stacks add NAME --python PATH)")
    return None if name == OWN else name


HOST_TYPES = {  # the types a setting's declaration names (settings.HostType), known to the host alone
    "mode": Literal[ALL_MODES],  # type: ignore[valid-type]  # what each means: bench.modes
    "store": Literal[tuple(STORES)],  # type: ignore[valid-type]
    # YAML 1.1 reads a bare `off` as false: take it as the "off" it was written as
    "amp": Annotated[Literal[("off", *AMP_DTYPES)], BeforeValidator(lambda v: "off" if v is False else v)],
    "memory_limit": Annotated[str, BeforeValidator(lambda v: canonical_limit(v))],  # "none" or e.g. "3GiB"
    "stack": Annotated[str | None, AfterValidator(_known_stack)],
}


def one_or_sweep(tp):
    """A setting: one value, or a non-empty list of them (a sweep axis)."""
    return tp | Annotated[list[tp], Field(min_length=1)]


def pydantic_type(tp):
    """A declared type as pydantic reads it: Bounds become Field constraints, a HostType the host's type."""
    if isinstance(tp, HostType):
        return HOST_TYPES[tp]
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is Annotated:
        meta = [Field(**dict(m)) if isinstance(m, Bounds) else m for m in tp.__metadata__]
        return Annotated[(pydantic_type(args[0]), *meta)]
    if origin in (Union, type(int | None)):
        return Union[tuple(pydantic_type(a) for a in args)]
    return list[pydantic_type(args[0])] if origin is list else tp


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


Settings = create_model("Settings", __base__=Strict, **{  # each one value or a list (a sweep), as settings.py declares
    s.name: (one_or_sweep(pydantic_type(s.one)) if s.sweep else pydantic_type(s.one),
             Field(s.default, description=" ".join(s.doc.split()))) for s in SETTINGS if s.suite})


def axes_of(settings: BaseModel) -> dict[str, list]:
    return {name: values_of(name, getattr(settings, name)) for name in type(settings).model_fields}


def values_of(key: str, value) -> list:
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
    """The band (±within, symmetric in log space): "same" where a pair's 95 % interval lies inside it."""
    launches: Annotated[int, Field(ge=3, le=1000)] = 6
    """Launches (fresh processes) each pair is measured in, its first turn's side alternating; the interval
    is taken over launches, so what differs from one launch to the next is in it (at least 3; a difference
    near the band's edge needs hundreds to settle: the interval narrows as one over the root of launches)."""
    rounds: Annotated[int, Field(ge=2, le=1000)] | None = None
    """Rounds (one measured epoch of each cell) per launch; default: the cells' `epochs`, so each launch
    trains as the suite says and the accuracy stays a same-epoch figure."""

    @field_validator("by")
    @classmethod
    def _axes(cls, value: list[str]) -> list[str]:
        if unknown := [axis for axis in value if axis not in pair_axes()]:
            raise ValueError(f"{unknown[0]!r} is not an axis of a cell; allowed: {', '.join(pair_axes())}")
        return list(dict.fromkeys(value))


def pair_axes() -> tuple[str, ...]:
    """`runner`: each cell against its twin that no memory sampler watches (bench/run/paired.py)."""
    return ("backend", "dataset", "runner", *Settings.model_fields)


def _plain_names(what: str):
    """A check that a name (or each key) is a plain file name: the suite's names its result file,
    a dataset key is a part of each cell id, and so of test and file names."""
    def check(value):
        for name in value if isinstance(value, dict) else [value]:
            if problem := plain_name_problem(name):
                raise ValueError(f"{what}{problem}")
        return value
    return check


def _known_backends(value: list[str]) -> list[str]:
    if unknown := [b for b in value if b not in BACKENDS]:
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


