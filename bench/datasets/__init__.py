"""Dataset sources: one module each (or an attribute of one serving several) plus one line in
SOURCES (the module, and the stack whose interpreter must run it; None: any). What a source
declares: docs/ADDING.md. Names on the command line: `synthetic[:scale=14,edge_factor=16]`,
`planetoid:Cora`, `ogb:ogbn-arxiv`, `ogb-link:ogbl-collab`, `reddit`, `molecules[:count=20000]`,
`npy:/data/g` (a user's own graph).
"""

from __future__ import annotations

import importlib
import os
import re
from typing import NamedTuple

from bench.tasks import tasks_of_shape


class Source(NamedTuple):
    module: str
    stack: str | None  # the stack whose interpreter materialises it; None: any, the host too
    part: str | None = None  # where one module serves several sources: the attribute that is this one


SOURCES: dict[str, Source] = {
    "synthetic": Source("bench.datasets.synthetic", None),
    "planetoid": Source("bench.datasets.planetoid", "pyg"),
    "ogb": Source("bench.datasets.ogb", "pyg"),
    "reddit": Source("bench.datasets.planetoid", "pyg", "REDDIT"),
    "molecules": Source("bench.datasets.molecules", None),
    "typed-synthetic": Source("bench.datasets.typed_synthetic", None),  # IGBH-shaped typed graph (shape "typed")
    "ogb-typed": Source("bench.datasets.ogb", "pyg", "TYPED"),  # ogbn-mag through ogb's own loader (shape "typed")
    "ogb-link": Source("bench.datasets.ogb", "pyg", "LINK"),  # ogbl-collab, ogbl-citation2 with their split (task "link")
    # your own graph (user_graph.py): one source per format, rather than one that guesses it from the files
    "npy": Source("bench.datasets.npy_folder", None),
    "pyg-file": Source("bench.datasets.pyg_file", "pyg"),  # torch.load needs torch
    "graphbolt": Source("bench.datasets.graphbolt_folder", None),  # its .npy files and metadata.yaml, read directly
    "edge-list": Source("bench.datasets.edge_list", None),  # pyarrow reads CSV and Parquet on the host
    "typed-npy": Source("bench.datasets.typed_npy", None),  # your own typed graph: .npy per node type and relation
    "igbh": Source("bench.datasets.typed_npy", None, "IGBH"),  # IGBH in IGB's own processed/ layout, where the user has it
}


def stack_of(source: str) -> str | None:
    """The stack a dataset of this source is materialised in (None: any interpreter)."""
    return SOURCES[source].stack


def user_files(source: str) -> bool:
    """Whether the source reads a user's own files (a path, its hub folder keyed on the files)."""
    return getattr(source_module(source), "USER_FILES", False)


def files_fingerprint(spec: dict) -> str | None:
    """A digest of a user's source files (part of its hub folder's name), None for other sources."""
    try:
        module = source_module(spec["source"])
    except (KeyError, ImportError):
        return None
    return module.fingerprint(spec.get("params", {})) if hasattr(module, "fingerprint") else None


def parametric(source: str) -> bool:
    """Whether the source's names take `key=value,...` parameters rather than a dataset name."""
    return hasattr(source_module(source), "PARAMS")


def source_module(source: str):
    """The module (or, for a module of several sources, its attribute) that declares the source."""
    module, _, part = SOURCES[source]
    return getattr(importlib.import_module(module), part) if part else importlib.import_module(module)


def materialiser(source: str):
    return source_module(source).materialise


def tasks(spec_or_source) -> tuple[str, ...]:
    """The tasks a dataset spec (or a source, its defaults) serves: its source's `tasks(params)`,
    else those of its SHAPE ("plain" where it says none)."""
    spec = {"source": spec_or_source} if isinstance(spec_or_source, str) else spec_or_source
    module = source_module(spec["source"])
    if hasattr(module, "tasks"):
        return tuple(module.tasks(spec.get("params") or {}))
    return tasks_of_shape(getattr(module, "SHAPE", "plain"))


def known_names() -> list[str]:
    """The named datasets of every source, as `source:name` (the catalogue `datasets list` shows)."""
    names = []
    for source in (s for s in SOURCES if not user_files(s)):  # a user's path: not a dataset gnnbench knows
        module = source_module(source)
        names += [f"{source}:{n}" for n in module.KNOWN_STATS] if hasattr(module, "KNOWN_STATS") else [source]
    return names


def parse_name(text: str) -> dict:
    """`planetoid:Cora` -> {"name": "planetoid:Cora", "source": "planetoid", "params": {"name": "Cora"}}."""
    source, _, rest = text.partition(":")
    if source not in SOURCES:
        raise ValueError(f"unknown dataset source {source!r} in {text!r}; sources: {', '.join(SOURCES)}")
    if parametric(source):
        params = _parse_params(text, source, rest, source_module(source).PARAMS)
    else:
        known = getattr(source_module(source), "KNOWN_STATS", None)
        if known is not None and rest not in known:
            raise ValueError(f"unknown {source} dataset {rest!r} in {text!r}; known: {', '.join(known)}")
        params = {"name": rest} if rest else {}
    return {"name": text, "source": source, "params": canonical_params(source, params)}


def _parse_params(text: str, source: str, rest: str, declared: dict) -> dict:
    """`key=value,...` after `SOURCE:`, each value read as its declared type (unknown keys kept, for
    canonical_params to name); a user's source also takes a bare path (`npy:/data/g`)."""
    if "path" in declared and not re.match(r"[a-z_]+=", rest):
        return {"path": rest} if rest else {}
    params: dict = {}
    for item in filter(None, rest.split(",")):
        key, sep, value = (part.strip() for part in item.partition("="))
        if not sep or not value:
            raise ValueError(f"{text!r}: {item!r} is not key=value; e.g. {source}:key=1,other=2")
        tp = declared.get(key, (str,))[0]
        if tp is bool:
            if value.lower() not in ("true", "false", "1", "0", "yes", "no"):
                raise ValueError(f"{text!r}: {key}={value!r} is not true or false")
            params[key] = value.lower() in ("true", "1", "yes")
        elif tp in (int, float, int | None, float | None):
            try:
                params[key] = (None if value.lower() == "none" and tp not in (int, float)
                               else int(value) if value.lstrip("-").isdigit() else float(value))
            except ValueError:
                raise ValueError(f"{text!r}: {key}={value!r} is not a number") from None
        else:
            params[key] = value
    return params


def declared_params(source: str, params: dict) -> dict:
    """A source's PARAMS with its DEFAULTS filled in, unknown ones refused, a user's path made absolute."""
    module = source_module(source)
    if unknown := set(params) - set(module.PARAMS):
        raise ValueError(f"unknown {source} parameter(s) {', '.join(sorted(unknown))}; "
                         f"allowed: {', '.join(module.PARAMS)}")
    out = {k: params.get(k, module.DEFAULTS[k]) for k in module.PARAMS if k in params or module.DEFAULTS[k] is not ...}
    if isinstance(out.get("path"), str) and out["path"]:
        out["path"] = os.path.abspath(os.path.expanduser(out["path"]))
    return out


def canonical_params(source: str, params: dict) -> dict:
    """Parameters with the source's defaults filled in, so equal data gets one hub folder."""
    module = source_module(source)
    if hasattr(module, "canonical_params"):
        return module.canonical_params(params)
    return declared_params(source, params) if hasattr(module, "PARAMS") else dict(params)
