"""Suites: YAML files of datasets x backends x settings, validated strictly, expanded to cells.

A setting given as a list is a sweep axis (fanout, itself a list, is swept by a list of lists).
`exclude` drops every cell that matches all keys of one rule; `include` adds a sub-matrix (its
keys override the suite's). Modes a backend does not have are not cells of that backend."""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from bench.backends import BACKENDS
import bench.datasets as datasets_module
from bench.datasets import SOURCES, canonical_params
from bench import modes, strict_yaml
from bench.paths import suites_dir
from bench.stores import cold_files
from bench.tasks import TASKS
from bench.settings import PER_GPU, SETTINGS, CellSettings, Only
from bench.suite_format import DATASET_MODELS, Paired, Rule, Settings, Suite, axes_of, values_of
from bench.machine import core_budget
from bench.stacks import framework_of, get

__all__ = ["PER_GPU", "Paired", "Rule", "Settings", "Suite"]  # the suite format's, for the run's callers


class SuiteError(ValueError):
    pass


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
        return hashlib.sha256(json.dumps(shape, sort_keys=True).encode()).hexdigest()[:16]


# A cell id's parts, by each setting's declaration (bench/settings.py InId); gnnbench run -k reads the short names
ID_ALWAYS = {s.name: s.in_id.short or s.name for s in SETTINGS if s.in_id.when == "always"}
ID_SHORT = {s.name: s.in_id.short for s in SETTINGS if s.in_id.short and s.in_id.when != "always"}


def load(path_or_name: str | Path) -> tuple[Suite, Path]:
    path = resolve_path(path_or_name)
    try:
        with open(path, "rb") as file:  # read no more than the limit allows: a 100 MB file is refused unread
            data = file.read(strict_yaml.MAX_BYTES + 1)
        if len(data) > strict_yaml.MAX_BYTES:
            raise SuiteError(f"{path}: {path.stat().st_size:,} bytes; allowed: at most {strict_yaml.MAX_BYTES:,}")
        raw = strict_yaml.load_text(data.decode("utf-8"), str(path))
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
    if problems := _check_rules(suite):
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
    return dataclasses.replace(cell, settings=cell.settings.replace(
        num_workers=core_budget.per_gpu_workers(usable_cores, local_ranks), num_workers_rule=PER_GPU))


def resolve_path(path_or_name: str | Path) -> Path:
    for candidate in (Path(path_or_name), suites_dir() / f"{path_or_name}.yaml"):
        if candidate.is_file():
            return candidate
    known = ", ".join(sorted(p.stem for p in suites_dir().glob("*.yaml")))
    raise SuiteError(f"suite {str(path_or_name)!r} not found: not a file, and not a name in "
                     f"{suites_dir()} (known: {known})")


STRICT_TYPE_ERRORS = {"int_type", "float_type"}
TYPE_MISMATCH = {"int_type", "int_parsing", "float_type", "float_parsing", "bool_type", "bool_parsing", "list_type",
                 "string_type", "literal_error", "model_type", "dict_type"}


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
    if err["type"] == "bool_type" and str(err.get("input")).lower() in ("true", "false"):
        message += " (a quoted value is a string: write true or false without quotes)"
    if err["type"] in STRICT_TYPE_ERRORS and (isinstance(err.get("input"), bool) or _numeric_text(err.get("input"))):
        # strict mode: YAML's true/false and quoted numbers are not numbers
        message += (" (true and false are not numbers)" if isinstance(err["input"], bool)
                    else " (a quoted value is a string: write the number without quotes)")
    if (expected := err.get("ctx", {}).get("expected")) and expected not in message:
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
    return next((found for arg in typing.get_args(tp) if (found := _first_model(arg)) is not None), None)


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
    problems += _check_tasks(suite) + _check_target(suite)
    if problems:
        return problems
    cells = expand(suite)
    problems += _unmatched_excludes(suite) + _unused_settings(suite, cells)
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
    unmatched = [(i, rule.model_dump(exclude_none=True)) for i, rule in enumerate(suite.exclude)
                 if not any(_matches(rule, c.backend, c.dataset, c.settings) for c in candidates)]
    return [f"exclude.{i}: {{{', '.join(f'{k}: {v}' for k, v in rule.items())}}} matches no cell of the "
            "suite; allowed: a rule that matches at least one cell (correct its values, or remove it)"
            for i, rule in unmatched]


def _unused_settings(suite: Suite, cells: list[Cell]) -> list[str]:
    """Each setting given that no cell has (a task's own, or with `only`): same_layer_edges with no GraphBolt cell."""
    given = {k: f"include.{i}" for i, rule in reversed(list(enumerate(suite.include))) for k in rule.model_extra or {}}
    given, kept, problems = {**given, **dict.fromkeys(suite.settings.model_fields_set, "settings")}, set(), []
    kept.update(*(c.settings.as_dict() for c in cells))
    for s in (s for s in SETTINGS if s.name in given and s.name not in kept):
        only, owners = s.only or Only(), [t.name for t in TASKS.values() if s.name in t.settings]
        where = [f"only in {' and '.join(owners)} cells" if owners else "",
                 "to backends " + ", ".join(b for b, i in BACKENDS.items() if s.name in i.options) if only.option else "",
                 {None: "", "trained": "with a model (not none)"}.get(only.model, f"with model: {only.model}"),
                 "beside target_acc" if only.target else ""]
        problems.append(f"{given[s.name]}.{s.name}: no cell of this suite has it (it applies "
                        f"{', '.join(w for w in where if w)}); allowed: leave it out, or add a cell it applies to")
    return problems


def _check_tasks(suite: Suite) -> list[str]:
    """A backend or dataset with no partner of its task at all (expansion skips the pairs that disagree)."""
    served = {name: tasks_of(spec) for name, spec in suite.datasets.items()}
    backend_tasks = {BACKENDS[b].task for b in named_backends(suite) if b in BACKENDS}
    by_task = "; ".join(f"{task}: {', '.join(b for b, i in BACKENDS.items() if i.task == task)}"
                        for task in TASKS if any(i.task == task for i in BACKENDS.values()))
    listed = "; ".join(n + ": " + ", ".join(t) for n, t in served.items())
    unserved = [f"backends: {b!r} trains the {BACKENDS[b].task!r} task and no dataset of this suite serves "
                f"it ({listed}); add one, or remove the backend (backends by task: {by_task})"
                for b in suite.backends if not any(BACKENDS[b].task in t for t in served.values())]
    return unserved + [f"datasets.{name}: serves {', '.join(tasks)}, and no backend of this suite trains "
                       f"{'it' if len(tasks) == 1 else 'any of them'} (backends by task: {by_task})"
                       for name, tasks in served.items() if not backend_tasks.intersection(tasks)]


def _check_target(suite: Suite) -> list[str]:
    """max_epochs and eval_every only beside target_acc, and max_epochs leaves room for the warm-up
    and measured epochs (they always run); checked in each matrix (settings, each include rule)."""
    problems, defaults = [], Settings()
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
    base_axes = axes_of(suite.settings)
    swept = {k for k, v in base_axes.items() if len(v) > 1}
    matrices = [(suite.backends, list(suite.datasets), base_axes, set(), "settings")]
    for i, rule in enumerate(suite.include):
        overrides = axes_of(Settings.model_validate(rule.model_extra or {}))
        given = set(rule.model_extra or {})
        axes = {k: (overrides[k] if k in given else v) for k, v in base_axes.items()}
        swept |= {k for k in given if len(axes[k]) > 1}
        # a setting shown in ids only where swept (fanout, batch_size...) that this rule sets to another value
        # than the suite's: shown in this rule's cells, else they would take the suite's cells' ids
        shown = {k for k in given if axes[k] != base_axes[k] and _IN_ID[k].when == "swept"}
        matrices.append((_as_list(rule.backend) or suite.backends,
                         _as_list(rule.dataset) or list(suite.datasets), axes, shown, f"include.{i}"))

    cells: dict[str, Cell] = {}
    made_by: dict[str, str] = {}
    for backends, datasets, axes, shown, where in matrices:
        names, made = list(axes), []
        for backend, dataset, values in itertools.product(backends, datasets, itertools.product(*axes.values())):
            info = BACKENDS[backend]
            settings = CellSettings(**dict(zip(names, values))).for_cell(info.task, info.options)
            if (not _meaningful(backend, settings)
                    or info.task not in tasks_of(suite.datasets[dataset])  # the dataset serves the backend's task
                    or any(_matches(rule, backend, dataset, settings) for rule in suite.exclude)):
                continue
            made.append((backend, dataset, settings))

        def ids(show: set[str]) -> list[str]:
            return [_cell_id(b, d, s, show) + (f"/stack={s.stack}" if s.stack and s.stack != BACKENDS[b].stack else "")
                    for b, d, s in made]
        named = ids(swept)
        if any(n in cells and cells[n].settings != s for n, (_, _, s) in zip(named, made)):
            named = ids(swept | shown)  # this rule's cells would take others' ids: its changed settings shown too
        for cell_id, (backend, dataset, settings) in zip(named, made):
            source_spec = suite.datasets[dataset].model_dump()
            spec = {"name": dataset, "source": source_spec["source"],
                    "params": canonical_params(source_spec["source"], source_spec["params"])}
            cell = cells.setdefault(cell_id, Cell(cell_id, backend, settings.stack or BACKENDS[backend].stack,
                                                  dataset, spec, settings))
            made_by.setdefault(cell_id, where)
            if cell.settings != settings:  # one id, two configurations: one of them would be lost unseen
                differ = [k for k, v in settings.as_dict().items() if cell.settings.as_dict().get(k) != v]
                raise SuiteError(f"{where}: makes cell {cell_id} with {', '.join(f'{k}: {getattr(settings, k)}' for k in differ)}, "
                                 f"and {made_by[cell_id]} makes it with {', '.join(f'{k}: {getattr(cell.settings, k)}' for k in differ)}; "
                                 "allowed: cells that differ in a setting their ids show (sweep it in both, or drop one)")
    return list(cells.values())


_IN_ID = {s.name: s.in_id for s in SETTINGS}


def _meaningful(backend: str, settings: CellSettings) -> bool:
    """Whether a backend has what these settings ask for (its modes, stores, framework, models and
    BackendInfo.options, each setting's `option` in bench/settings.py); the GPU settings only in a
    mode that trains on the GPU (bf16 autocast runs on the CPU too)."""
    info = BACKENDS[backend]
    if settings.mode not in info.modes or settings.store not in info.stores:
        return False  # like modes, a store a backend does not have is not a cell of it
    if settings.stack is not None and framework_of(info.stack) not in get(settings.stack).frameworks:
        return False
    if settings.model != "none" and settings.model not in info.models:
        return False  # a model the backend does not train (GraphSAGE on untyped graphs, R-GCN/R-GAT on typed)
    if any(s.option and s.name not in info.options and getattr(settings, s.name) not in (None, s.default) for s in SETTINGS):
        return False  # a setting the backend does not honour (BackendInfo.options) set to other than its default
    mode = modes.mode(settings.mode)
    return not ((settings.pin_memory and not mode.trains_on_gpu)
                or (settings.amp != "off" and settings.model == "none")
                or (settings.amp == "fp16" and not mode.trains_on_gpu)
                # GraphBolt looks its GPU cache up with ids on the GPU: the mode moving the seeds there first
                or (settings.gpu_cache and not mode.pinned)
                or (settings.trim_to_layer and settings.model == "none")
                # a cold page cache means something only for a store read from files (not an in-memory copy)
                or (settings.page_cache == "cold" and not cold_files(settings.store, info.task)))


def tasks_of(dataset_spec) -> tuple[str, ...]:
    """The tasks a dataset of the suite serves (bench/tasks.py), by its source and parameters."""
    return datasets_module.tasks(dataset_spec.model_dump())


def _matches(rule: Rule, backend: str, dataset: str, settings: CellSettings) -> bool:
    checks = {"backend": rule.backend, "dataset": rule.dataset, **(rule.model_extra or {})}
    actual = {"backend": backend, "dataset": dataset, **settings.as_dict()}
    for key, wanted in checks.items():
        if wanted is None:
            continue
        options = values_of(key, wanted)
        if key == "stack":  # "own" is how a rule names each backend's own stack (None in a cell)
            options = [None if o == "own" else o for o in options]
        if actual.get(key) not in options:  # .get: a cell without a target has no target keys
            return False
    return True


def _cell_id(backend: str, dataset: str, settings: CellSettings, swept: set[str]) -> str:
    """backend/dataset/mode=.../workers=.../ws=..., then each setting as its declaration's InId says:
    the swept ones, those changed from their default, then the "changed"-only ones in their rank order."""
    given = settings.as_dict()

    def part(s) -> str:
        value = given[s.name]
        text = "-".join(map(str, value)) if isinstance(value, list) else s.in_id.shows.get(value, value)
        return f"{s.in_id.short or s.name}={text}"
    ranked = sorted(SETTINGS, key=lambda s: s.in_id.rank)
    changed = [s for s in SETTINGS if s.name in given and given[s.name] != s.default]
    return "/".join([backend, dataset, *(part(s) for s in ranked if s.in_id.when == "always"),
                     *(part(s) for s in SETTINGS if s.name in swept and s.name in given
                       and s.in_id.when in ("swept", "swept or changed")),
                     *(part(s) for s in changed if s.in_id.when == "swept or changed" and s.name not in swept),
                     *(part(s) for s in ranked if s in changed and s.in_id.when == "changed")])
