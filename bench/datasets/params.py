"""A source's `params` as a suite states them: the pydantic schema built from the source's plain
declaration (of_source: PARAMS {name: (type, bounds)}, DEFAULTS, optional check_params; `name` for
a source of KNOWN_STATS; else none), and a dataset named on the command line checked against it
(check_spec). Host only (the stacks have no pydantic).
"""

from __future__ import annotations

import functools
import typing
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, create_model, model_validator

from bench.datasets import parametric, source_module


class Strict(BaseModel):
    """Unknown keys, non-finite numbers and values of another type are errors (an int serves as a float)."""
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)


NoParams = dict[str, None]  # a source that takes no parameters: `params: {}` or nothing


@functools.cache
def named(source: str, names: tuple[str, ...]) -> type[Strict]:
    """The params of a source of named datasets: `name`, one of `names`."""
    return create_model(f"{source.title()}Params", __base__=Strict, name=(Literal[names], ...))


def _bounded(tp, bounds: dict):
    options = typing.get_args(tp)
    if type(None) in options:  # optional: the bounds apply to the value when there is one
        (inner,) = [t for t in options if t is not type(None)]
        return Annotated[inner, Field(**bounds)] | None
    return Annotated[tp, Field(**bounds)]


def declared(source: str, module) -> type[Strict]:
    """The params of a source that declares them (PARAMS, DEFAULTS, optional check_params)."""
    validators = {}
    check = getattr(module, "check_params", None)
    if check is not None:
        def _fits(self):
            check(self.model_dump())
            return self
        validators["_fits"] = model_validator(mode="after")(_fits)
    fields = {name: (_bounded(tp, bounds), module.DEFAULTS[name]) for name, (tp, bounds) in module.PARAMS.items()}
    return create_model(f"{source.title()}Params", __base__=Strict, __validators__=validators, **fields)


def of_source(source: str):
    """The pydantic schema of a source's `params` in a suite."""
    module = source_module(source)
    if parametric(source):
        return declared(source, module)
    return named(source, tuple(module.KNOWN_STATS)) if hasattr(module, "KNOWN_STATS") else NoParams


def check_spec(spec: dict) -> None:
    """A dataset named on the command line obeys its `params` schema, else ValueError naming it."""
    try:
        TypeAdapter(of_source(spec["source"])).validate_python(spec["params"])
    except ValidationError as exc:
        problems = [f"{'.'.join(map(str, e['loc'])) or 'parameters'}: {e['msg'].removeprefix('Value error, ')}"
                    + (f" (got {e['input']!r})" if e["loc"] else "") for e in exc.errors()]
        raise ValueError(f"dataset {spec['name']!r}: " + "; ".join(problems)) from None
