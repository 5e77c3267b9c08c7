"""IGBH (the Illinois Graph Benchmark's typed graph, MLPerf's R-GAT dataset) in IGB's own processed/
layout (docs/own-graph.md): `igbh:/data/igb/tiny`, or `igbh:path=/data/igb/small,classes=2983`.
processed/<type>/node_feat.npy per type, processed/paper/node_label_19.npy (or _2K), and
processed/<src>__<name>__<dst>/edge_index.npy [E, 2], read as IGB's `IGBHeteroDGLDataset` reads
them, with its splits (papers: the first 60% train, the next 20% validation); the hub adds each
relation's reverse, as IGB's loader does. Headerless arrays (IGB's large sizes) are not read.
Problems are said as typed_npy.py says them. numpy only.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bench import datasets
from bench.datasets import graph_checks, typed_hub, typed_npy
from bench.datasets import user_graph as ug

SHAPE = "typed"  # bench/tasks.py: serves the typed-node task
USER_FILES = True
VERSION = 1
TARGET = "paper"
LABEL_FILES = {19: "node_label_19.npy", 2983: "node_label_2K.npy"}
TRAIN_FRAC, VAL_FRAC = 0.6, 0.2  # IGB's own split (igb/dataloader.py)
PARAMS = {"path": ug.PARAMS["path"], "classes": (int, {"ge": 19, "le": 2983})}
DEFAULTS = {"path": ..., "classes": 19}
SIZES_NOTE = ("igbh:PATH         IGBH as IGB ships it: PATH/processed/<type>/node_feat.npy, paper/node_label_19.npy, "
              "<src>__<name>__<dst>/edge_index.npy (igbh:path=P,classes=2983 for the 2K labels)")
ESTIMATE_ORIGIN = ug.SIZES_ORIGIN


def canonical_params(params: dict) -> dict:
    out = datasets.declared_params("igbh", params)
    if out.get("classes") not in LABEL_FILES:
        raise ValueError(f"igbh: classes={out.get('classes')!r}; allowed: 19 or 2983 (IGB's two label sets)")
    return out


def source_files(params: dict) -> list[Path]:
    processed = Path(params["path"]) / "processed"
    return sorted(processed.rglob("*.npy")) if processed.is_dir() else [processed]


_, fingerprint, *_ = ug.source_hooks("igbh", source_files)


def read_folder(folder: Path, classes: int) -> dict:
    """IGB's processed/ folder checked whole: the arrays typed_hub.write takes; every problem one line."""
    problems = typed_npy.Problems(folder)
    processed = folder / "processed"
    if not processed.is_dir():
        problems.add(processed, "no such folder; allowed: the folder of one IGBH size (tiny, small, medium) "
                                "holding processed/<type>/node_feat.npy and processed/<src>__<name>__<dst>/")
        problems.raise_any()
    types = typed_npy.plain_types(sorted(p.name for p in processed.iterdir()
                                         if p.is_dir() and typed_hub.NAME_SEPARATOR not in p.name),
                                  lambda t: processed / t, problems)
    counts, features = typed_npy.node_arrays(
        {t: processed / t / "node_feat.npy" for t in types}, {}, processed, problems,
        lambda t: (processed / t / "node_feat.npy",
                   f"missing: node type {t!r} needs its features (IGB ships them for every type)"))
    counts = typed_npy.bounded_counts(counts, lambda t: processed / t / "node_feat.npy", folder, problems)
    labels = _paper_labels(processed, types, counts, classes, problems)
    relations = typed_npy.read_relations(
        [(d.name, d, d / "edge_index.npy") for d in sorted(processed.iterdir())
         if d.is_dir() and typed_hub.NAME_SEPARATOR in d.name],
        processed, "<src>__<name>__<dst>/edge_index.npy", types, counts, problems, igb_layout=True)
    problems.raise_any()
    n = counts[TARGET]
    n_train, n_val = int(n * TRAIN_FRAC), int(n * VAL_FRAC)
    ids = np.arange(n, dtype=np.int64)
    splits = {"train_idx": ids[:n_train], "val_idx": ids[n_train:n_train + n_val], "test_idx": ids[n_train + n_val:]}
    found = graph_checks.split_problem({s.removesuffix("_idx"): i for s, i in splits.items()}, labels, {},
                                       LABEL_FILES[classes])
    if found:  # too few papers for IGB's 60/20/20 split
        problems.add(processed / TARGET / "node_feat.npy", f"{n} papers: {found[1]}")
        problems.raise_any()
    return {"counts": counts, "features": features, "labels": labels, "splits": splits, "relations": relations}


def _paper_labels(processed: Path, types: list[str], counts: dict, classes: int,
                  problems: typed_npy.Problems) -> np.ndarray | None:
    """The papers' labels (processed/paper/node_label_19.npy or _2K.npy), None where unusable (said)."""
    if TARGET not in types:
        problems.add(processed / TARGET, "missing: IGBH's papers (the classified type)")
        return None
    return (typed_npy.read_labels(processed / TARGET / LABEL_FILES[classes], counts[TARGET], "paper",
                                  f"the papers' {classes} classes", problems, classes) if TARGET in counts else None)


def expected_stats(params: dict) -> dict:
    return typed_npy.stats_of(read_folder(Path(params["path"]), params["classes"]), TARGET, params["classes"])


def materialise(spec: dict, cache: Path, data_root: Path | None = None) -> Path:
    params = spec["params"]
    processed = Path(params["path"]) / "processed"
    return typed_npy.write_checked(spec, cache, lambda: {**read_folder(Path(params["path"]), params["classes"]), "target": TARGET},
                                   fingerprint, lambda g: {t: processed / t / "node_feat.npy" for t in g["features"]}, VERSION)


load = typed_hub.load_for_source  # its own `load` (hub.load_dataset)
