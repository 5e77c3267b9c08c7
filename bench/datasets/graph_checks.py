"""The checks every reader of a user's graph makes, whatever its layout (user_graph.py's plain
sources, typed_npy.py (typed-npy and igbh), a given link split): each returns the problem as one phrase
ending in what is allowed (None: fine), and its reader puts the file in front of it, so a reader
that stops at the first problem and one that collects them all word them alike. numpy only.
"""

from __future__ import annotations

import re

import numpy as np

from bench.datasets.hub_stream import MAX_NODES

NAME_SEPARATOR = "__"  # between the source type, the relation and the destination type in a file name
# a node type's or relation's name becomes part of file names and of GraphBolt's `src:name:dst`
NAME = re.compile(r"[A-Za-z0-9]+(?:[_.-][A-Za-z0-9]+)*")
NAME_RULE = "letters and digits, single '_', '-' or '.' between them (no '__', no ':'), at most 100 characters"
INTEGER_RULE = "an integer dtype (int8 .. int64, uint8 .. uint64)"
EDGES_RULE = "allowed: a graph with at least one edge between two different nodes (without one, message passing has nothing to pass)"


def name_problem(name: str, what: str) -> str | None:
    plain = len(name) <= 100 and NAME.fullmatch(name)
    return None if plain else f"the {what} name {name!r} is not plain; allowed: {NAME_RULE}"


def node_count_problem(count: int, what: str) -> str | None:
    """A node count bounded before anything of its size is allocated."""
    return f"{count:,} {what}; allowed: at most {MAX_NODES:,}" if count > MAX_NODES else None


def classes_problem(labels: np.ndarray) -> str | None:
    """At least two classes among the labelled nodes (-1: no label): with one, every prediction is right."""
    present = np.unique(labels[labels >= 0])
    if present.size >= 2:
        return None
    held = "no labels" if present.size == 0 else f"1 class only ({int(present[0])})"
    return f"holds {held}; allowed: labels of at least 2 classes"


def labels_of(raw: np.ndarray, n: int | None, nodes_from: str,
              classes: int | None, classes_from: str | None = None,
              whole_graph: bool = True) -> tuple[np.ndarray | None, int | None, str | None]:
    """(labels as int64, None, None): [n] integers or whole floats (-1 or NaN: no label) below `classes`
    (said by `classes_from`), of a `whole_graph`: at least two classes; else (None, the position of the
    first bad label or None, the problem)."""
    if raw.ndim == 2 and raw.shape[1] == 1:
        raw = raw[:, 0]
    if raw.ndim != 1:
        return None, None, (f"has shape {tuple(raw.shape)}; allowed: [N], one class per node (multi-label targets "
                            "are not supported)")
    if n is not None and raw.shape[0] != n:
        return None, None, (f"has {raw.shape[0]:,} labels for {n:,} nodes ({nodes_from}); allowed: one label per "
                            "node (-1 for none)")
    if np.issubdtype(raw.dtype, np.integer):
        if raw.dtype.kind == "u" and raw.size and raw.max() > np.iinfo(np.int64).max:
            return None, None, f"holds {raw.max()}; allowed: labels 0..C-1, or -1 for none"
        labels = raw.astype(np.int64)
    elif np.issubdtype(raw.dtype, np.floating):  # OGB's and IGB's float labels, NaN for none
        whole = np.isnan(raw) | (np.mod(raw, 1) == 0)
        if not whole.all():
            i = int(np.argmax(~whole))
            return None, i, f"is {raw[i]}; allowed: whole numbers 0..C-1 (dtype {raw.dtype}: NaN or -1 for none)"
        labels = np.where(np.isnan(raw), -1, raw).astype(np.int64)
    else:
        return None, None, f"has dtype {raw.dtype}; allowed: {INTEGER_RULE} (or whole floats)"
    bad = (labels < -1) | (labels >= classes if classes else False)
    if bad.any():
        i = int(np.argmax(bad))
        allowed = f"0..{classes - 1} ({classes_from or f'num_classes {classes}'})" if classes else "0..C-1"
        return None, i, f"is {labels[i]}; allowed: labels {allowed}, or -1 for a node without one"
    problem = classes_problem(labels) if whole_graph else None
    return (None, None, problem) if problem else (labels, None, None)


def ids_of(raw: np.ndarray, n: int, nodes_from: str) -> tuple[np.ndarray | None, int | None, str | None]:
    """(node ids as int64, None, None) from ids [K] in 0..n-1 or a boolean mask [n]; else (None, the
    position of the first bad id or None, the problem)."""
    if raw.dtype == np.bool_:
        if raw.shape != (n,):
            return None, None, (f"is a mask of shape {tuple(raw.shape)} for {n:,} nodes ({nodes_from}); allowed: "
                                f"a boolean mask of shape [{n}], or node ids")
        return np.flatnonzero(raw).astype(np.int64), None, None
    if not np.issubdtype(raw.dtype, np.integer):
        return None, None, f"has dtype {raw.dtype}; allowed: a boolean mask, or node ids of {INTEGER_RULE}"
    if raw.ndim != 1:
        return None, None, f"has shape {tuple(raw.shape)}; allowed: node ids [K], or a boolean mask [N]"
    bad = (raw < 0) | (raw >= n)  # compared as given: a uint64 id past int64 too
    if bad.any():
        i = int(np.argmax(bad))
        return None, i, f"= {raw[i]} is out of range; allowed: node ids 0..{n - 1} ({n:,} nodes: {nodes_from})"
    return raw.astype(np.int64), None, None


def edges_problem(edges: int, self_loops: int) -> str | None:
    """At least one edge between two different nodes (else epoch times mean nothing for a sampler)."""
    if edges == 0:
        return f"no edges; {EDGES_RULE}"
    if edges == self_loops:
        return f"all {edges:,} edges are self-loops (a node to itself); {EDGES_RULE}"
    return None


def split_problem(splits: dict[str, np.ndarray], labels: np.ndarray, where: dict[str, str],
                  labels_where: str) -> tuple[str, str] | None:
    """(split, problem) for the first split that is empty, names a node twice, shares one with an
    earlier split or names an unlabelled node; `where`, `labels_where`: files for the message."""
    names = list(splits)
    for k, name in enumerate(names):
        ids = np.asarray(splits[name], dtype=np.int64)
        if ids.size == 0:
            return name, f"the {name} split is empty; allowed: at least one node in each of {', '.join(names)}"
        order = np.argsort(ids, kind="stable")
        repeat = np.flatnonzero(ids[order][1:] == ids[order][:-1])
        if repeat.size:
            first, second = sorted((int(order[repeat[0]]), int(order[repeat[0] + 1])))
            return name, f"names node {ids[first]} twice (at [{first}] and [{second}]); allowed: each node once"
        for other in names[:k]:
            common = np.intersect1d(ids, splits[other])
            if common.size:
                return name, (f"node {int(common[0])} is in the {name} split and in the {other} split "
                              f"({where[other]}); allowed: each node in one split at most")
        unlabelled = labels[ids] < 0
        if unlabelled.any():
            return name, (f"node {int(ids[np.argmax(unlabelled)])} of the {name} split has no label (-1 in "
                          f"{labels_where}); allowed: labelled nodes only")
    return None


def shared_pair(pairs: dict[str, np.ndarray]) -> tuple[str, str, tuple[int, int]] | None:
    """(split, earlier split, pair) for the first pair of one link split ([K, 2]) an earlier one holds too."""
    keys = {name: p[:, 0].astype(np.int64) * (1 << 32) + p[:, 1] for name, p in pairs.items()}  # ids < 2**31
    names = list(pairs)
    for k, name in enumerate(names):
        for other in names[:k]:
            common = np.intersect1d(keys[name], keys[other])
            if common.size:
                return name, other, (int(common[0] >> 32), int(common[0] & 0xFFFFFFFF))
    return None
