"""The docs' reference pages, generated from the code they describe (the suite model, dataset sources'
params, bench/publish/columns.py) by docs/gen_reference.py; tests/test_docs.py fails where a key or
a column has no description (`missing_descriptions`).
"""

from __future__ import annotations

import json

from pydantic import BaseModel, TypeAdapter

from bench import datasets
from bench.datasets import params
from bench.publish import columns
from bench.settings import SETTINGS
from bench import suite_format as suite


def _allowed(schema: dict) -> str:
    """A JSON-schema fragment as a short phrase: `integer 0..256`, `"cpu-cpu" | "cpu-cuda"`."""
    if "anyOf" in schema:
        return " or ".join(_allowed(s) for s in schema["anyOf"])
    if "const" in schema:
        return f"`{json.dumps(schema['const'])}`"
    if "enum" in schema:
        return " \\| ".join(f"`{json.dumps(v)}`" for v in schema["enum"])
    kind = schema.get("type")
    if kind == "array":
        sizes = [schema.get("minItems"), schema.get("maxItems")]
        size = "" if sizes == [None, None] else f" of {sizes[0] or 0}..{sizes[1] or 'n'}"
        return f"list{size} of ({_allowed(schema.get('items', {}))})"
    if kind in ("integer", "number"):
        low = schema.get("minimum", schema.get("exclusiveMinimum"))
        high = schema.get("maximum", schema.get("exclusiveMaximum"))
        bounds = "" if low is None and high is None else f" {'>' if 'exclusiveMinimum' in schema else ''}{low if low is not None else ''}..{high if high is not None else ''}"
        return f"{kind}{bounds}"
    return kind or "see below"


def _one_value(name: str) -> tuple[dict, bool]:
    """(a setting's one-value schema, whether a list of them sweeps it), from its declaration (bench/settings.py)."""
    setting = next(s for s in SETTINGS if s.name == name)
    return TypeAdapter(suite.pydantic_type(setting.one)).json_schema(ref_template="{model}"), setting.sweep


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|") if text else ""


def _default(field) -> str:
    if field.is_required():
        return "required"
    return "each its default" if isinstance(field.default, BaseModel) else f"`{json.dumps(field.default)}`"


def _table(head: list[str], rows) -> list[str]:
    """A Markdown table's lines: the header, its rule, a line per row of cells."""
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)] + ["| " + " | ".join(r) + " |" for r in rows]


def _fields_table(model: type[BaseModel], sweeps: bool) -> list[str]:
    props = model.model_json_schema(ref_template="{model}").get("properties", {})
    rows = []
    for name, field in model.model_fields.items():
        schema, sweepable = _one_value(name) if sweeps else (props.get(name, {}), False)
        allowed = "see below" if "$ref" in json.dumps(schema) else _allowed(schema)
        sweep = ["a list" if sweepable else "no"] if sweeps else []
        rows.append([f"`{name}`", allowed, _default(field), *sweep, _cell(field.description or "")])
    head = ["key", "one value", "default", "sweep"] if sweeps else ["key", "allowed", "default"]
    return _table(head + ["description"], rows)


def _source_params(source: str) -> list[str]:
    model = params.of_source(source)
    fields = getattr(model, "model_fields", None)
    about = (datasets.source_module(source).__doc__ or "").strip().split("\n\n")[0]
    lines = [f"### `{source}`", "", _cell(about), ""]
    if not fields:
        return lines + ["No parameters."]
    props = model.model_json_schema().get("properties", {})
    return lines + _table(["param", "allowed", "default"],
                          [[f"`{name}`", _allowed(props.get(name, {})), _default(field)] for name, field in fields.items()])


def suite_keys_markdown() -> str:
    """The suite-file reference: top-level keys, settings, rules, dataset sources."""
    out = ["# Suite keys", "",
           "Generated from the suite model (`bench/suite_format.py`, its settings from `bench/settings.py`) by `docs/gen_reference.py`: "
           "what a suite file may hold. Unknown keys, values of another type (`\"4\"` for 4, "
           "`true` for 1) and duplicate keys are errors that name the file and the key path.", "",
           "## Top level", "", *_fields_table(suite.Suite, sweeps=False), "",
           "## `settings`", "",
           "Each setting is one value, or a list of values: a sweep axis (the cells are the "
           "product of all axes).", "", *_fields_table(suite.Settings, sweeps=True), "",
           "## `include` and `exclude` rules", "",
           "A rule names `backend`, `dataset` and any setting, each a value or a list; `exclude` "
           "drops the cells matching every key of a rule, `include` adds the rule's sub-matrix.", "",
           *_fields_table(suite.Rule, sweeps=False), "",
           "## Dataset sources", "",
           "A dataset is `{source: S, params: {...}}`; a source of named datasets also takes "
           "`S:Name`. `gnnbench datasets list` shows the named ones and their sizes.", ""]
    for source in datasets.SOURCES:
        out += _source_params(source) + [""]
    return "\n".join(out)


def _column_rows(cols: list[columns.Column]) -> list[str]:
    rows = []
    for col in cols:
        html = "HTML" if col.brief else "HTML (under the table's \"more columns\")"
        md = "Markdown" if col.brief else "Markdown (`--columns`)"
        where = " and ".join(w for w, on in ((md, col.markdown), (html, col.html)) if on)
        name = col.header if col.markdown else f"{col.html_title} ({col.unit})" if col.unit else col.html_title
        rows.append([_cell(name), where, _cell(col.doc)])
    return _table(["column", "where", "description"], rows)


COLUMN_LISTS = {
    "The per-cell table": columns.CELL_COLUMNS,
    "The scaling table": columns.SCALING_COLUMNS,
    "Where the time goes (stages)": columns.STAGE_COLUMNS,
}


def columns_markdown() -> str:
    out = ["# Result columns", "",
           "Generated from the column list (`bench/publish/columns.py`) by `docs/gen_reference.py`: "
           "every column of the Markdown report and the HTML result pages. A dash is a figure "
           "that was not recorded (a skipped or failed cell, an older result file, a CPU cell's "
           "GPU column).", ""]
    for title, cols in COLUMN_LISTS.items():
        out += [f"## {title}", "", *_column_rows(cols), ""]
    return "\n".join(out)


def missing_descriptions() -> list[str]:
    """Every suite key and column without a description (the docs test fails on any)."""
    missing = [f"suite key {model.__name__}.{name}" for model in (suite.Suite, suite.Settings, suite.Rule)
               for name, field in model.model_fields.items() if not (field.description or "").strip()]
    missing += [f"column {col.header!r} ({title})" for title, cols in COLUMN_LISTS.items()
                for col in cols if not col.doc.strip()]
    return missing
