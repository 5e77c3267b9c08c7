"""Your own graph: what the sources of a user's files share (npy, pyg-file, graphbolt, edge-list).
Each reads its format into a UserGraph (sizes from the headers, edges in chunks, features in row
blocks); this module checks it, each problem one error naming the file, the array, what is wrong
and what is allowed (hub.DatasetError, exit 2), and converts it in pieces (hub_stream.py), so a
graph far larger than memory can be named. The hub folder's name holds a fingerprint of the files.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Callable, Iterator, Literal

import numpy as np

from bench import datasets
from bench.datasets import baseline, graph_checks, hub, hub_stream
from bench.datasets.graph_checks import INTEGER_RULE
from bench.datasets.hub_stream import NpyArray, NpyError

EDGE_CHUNK = 1 << 22   # edges read at a time
FEATURE_BLOCK_BYTES = 64 << 20  # feature rows read at a time
SPLITS = ("train", "val", "test")

# The parameters every source of a user's files takes (each module adds its own).
PARAMS = {
    "path": (str, {"min_length": 1}),  # the folder or file: absolute, or relative to the current folder
    "self_loops": (Literal["remove", "keep"], {}),  # edges from a node to itself
    "duplicates": (Literal["remove", "keep"], {}),  # an edge given more than once
    "num_classes": (int | None, {"ge": 2, "le": 1 << 20}),  # None: the largest label + 1
}
DEFAULTS = {"path": ..., "self_loops": "remove", "duplicates": "remove", "num_classes": None}
SIZES_ORIGIN = "read from the files' headers (not converted yet)"  # a user source's sizes unless it sets ESTIMATE_ORIGIN


def params_of(extra_params: dict | None = None, extra_defaults: dict | None = None) -> tuple[dict, dict]:
    """A source module's PARAMS and DEFAULTS: the common ones and its own."""
    return {**PARAMS, **(extra_params or {})}, {**DEFAULTS, **(extra_defaults or {})}


def source_hooks(source: str, source_files: Callable[[dict], list[Path]],
                 opener: Callable[[str, dict], "UserGraph"] | None = None):
    """A user source's canonical_params, fingerprint, expected_stats and materialise."""
    return (partial(datasets.declared_params, source), lambda params: fingerprint(source_files(params)),
            lambda params: expected_stats(opener("?", params), params),
            lambda spec, cache, data_root=None: materialise(spec, cache, opener, source_files))


def fingerprint(files: list[Path]) -> str:
    """A digest of each file's path, size and mtime: any edit gives another hub folder."""
    entries = []
    for path in sorted(set(map(Path, files))):
        try:
            st = path.stat()
            entries.append([str(path), st.st_size, st.st_mtime_ns])
        except OSError:
            entries.append([str(path), None, None])
    return hashlib.sha256(json.dumps(entries).encode()).hexdigest()[:16]


@dataclass
class Input:
    """One array as the user gave it: the file it is in and its name there (for messages)."""
    file: Path
    array: str

    def at(self, position: str) -> str:
        return f"{self.file}: {self.array}{position}"


@dataclass
class EdgeChunk:
    src: np.ndarray  # any integer dtype
    dst: np.ndarray
    offset: int  # of the chunk's first edge in the input
    position: Callable[[int, int], str]  # edge i's end 0 or 1 as the user finds it: `[1, 17]`, ` row 18, column dst`


@dataclass
class UserGraph:
    """A user's graph as a source reads it: sizes first, arrays as they are asked for."""
    label: str
    num_nodes: int
    nodes_from: str  # what says how many nodes there are: "the rows of features.npy"
    edges: Input
    edge_dtype: np.dtype
    num_input_edges: int | None  # None: known once read (CSV)
    edge_chunks: Callable[[], Iterator[EdgeChunk]]
    features: Input
    feature_shape: tuple
    feature_dtype: np.dtype
    # (rows, block, given_row): rows the hub row numbers (an int: the first of consecutive rows),
    # given_row the row of the block's first row as given (for messages)
    feature_blocks: Callable[[], Iterator[tuple[int | np.ndarray, np.ndarray, int]]]
    labels: Input
    read_labels: Callable[[], np.ndarray]
    splits: dict[str, Input]  # train, val, test
    read_split: Callable[[str], np.ndarray]  # a boolean mask or node ids, as given
    notes: list[str] = field(default_factory=list)
    extra_arrays: dict[str, np.ndarray] = field(default_factory=dict)  # saved beside the hub arrays
    extra_meta: dict = field(default_factory=dict)
    # node i's place in the per-node arrays as given (labels), where it is not `[i]`
    node_position: Callable[[int], str] | None = None

    def at_node(self, where: Input, i: int) -> str:
        return where.at(self.node_position(i) if self.node_position else f"[{i}]")


def fail(message: str) -> hub.DatasetError:
    return hub.DatasetError(" ".join(message.split("\n")))


def open_npy(path: Path) -> NpyArray:
    """A user's .npy file opened for reading a block at a time; a bad one is one line naming it."""
    try:
        return NpyArray(path)
    except NpyError as exc:
        raise fail(f"{path}: {exc}") from None


FEATURE_RULE = "a float dtype (float16, float32, float64), or integers or booleans (converted to float32)"


def check_ids(chunk: EdgeChunk, graph: UserGraph) -> tuple[np.ndarray, np.ndarray]:
    """The chunk's ids as int64, each in 0..N-1 (else the first that is not, and where)."""
    n = graph.num_nodes
    out = []
    for end, values in enumerate((chunk.src, chunk.dst)):
        bad = (values < 0) | (values >= n)  # compared as given: a uint64 id past int64 too
        if bad.any():
            i = int(np.argmax(bad))
            raise fail(f"{graph.edges.at(chunk.position(chunk.offset + i, end))} = {values[i]} is out of range; "
                       f"allowed: node ids 0..{n - 1} ({n:,} nodes: {graph.nodes_from})")
        out.append(values.astype(np.int64, copy=False))
    return out[0], out[1]


def check_feature_shape(graph: UserGraph) -> None:
    """The features' dtype and shape, and the node count bounded (before anything of its size is allocated)."""
    shape, dtype = graph.feature_shape, graph.feature_dtype
    if problem := graph_checks.node_count_problem(graph.num_nodes, f"nodes ({graph.nodes_from})"):
        raise fail(f"{graph.features.file}: {problem}")
    if not (np.issubdtype(dtype, np.floating) or np.issubdtype(dtype, np.integer) or dtype == np.bool_):
        raise fail(f"{graph.features.file}: {graph.features.array} has dtype {dtype}; allowed: {FEATURE_RULE}")
    if len(shape) != 2 or shape[1] < 1:
        raise fail(f"{graph.features.file}: {graph.features.array} has shape {tuple(shape)}; "
                   "allowed: [N, D], a row of D >= 1 numbers per node")
    if shape[0] != graph.num_nodes:
        raise fail(f"{graph.features.file}: {graph.features.array} has {shape[0]:,} rows for {graph.num_nodes:,} "
                   f"nodes ({graph.nodes_from}); allowed: one row per node")


def finite_float32(where: Input, given_row: int, block: np.ndarray) -> np.ndarray:
    """A block of feature rows as float32; NaN or inf in it, or a value beyond float32's range, refused."""
    with np.errstate(over="ignore", invalid="ignore"):
        converted = block.astype(np.float32, copy=False)  # a float64 too large for float32 becomes inf: said
    if not np.issubdtype(block.dtype, np.floating):
        return converted
    for values, what in ((block, "; allowed: finite numbers (no NaN or inf)"),
                         (converted, ", beyond float32's range; allowed: finite numbers within ±3.4e38")):
        finite = np.isfinite(values)
        if not finite.all():
            r, c = np.argwhere(~finite)[0]
            raise fail(f"{where.at(f'[{given_row + int(r)}, {c}]')} is {block[r, c]}{what}")
    return converted


def check_labels(graph: UserGraph, num_classes: int | None) -> tuple[np.ndarray, int]:
    """Labels as int64 (-1: no label), and the number of classes (graph_checks.labels_of)."""
    where = graph.labels
    labels, i, problem = graph_checks.labels_of(graph.read_labels(), graph.num_nodes, graph.nodes_from, num_classes)
    if problem:
        raise fail(f"{where.file}: {where.array} {problem}" if i is None else f"{graph.at_node(where, i)} {problem}")
    return labels, num_classes if num_classes is not None else int(labels.max()) + 1


def check_baseline_fits(graph: UserGraph, splits: dict[str, np.ndarray], classes: int) -> None:
    """The features-only baseline fits in the memory there is now, said before a feature is read."""
    dim = int(graph.feature_shape[1])
    if found := baseline.refusal(int(splits["train"].size), int(splits["test"].size), dim, classes):
        needed, available = found
        raise fail(f"{graph.features.file}: {graph.features.array} {list(graph.feature_shape)}: the features-only "
                   f"baseline (a linear classifier on the features, fitted at conversion) needs about "
                   f"{needed / 2**30:,.1f} GiB of memory with {dim:,} feature columns, and {available / 2**30:,.1f} GiB "
                   "is available; allowed: features that fit (fewer columns, e.g. reduced with PCA), or a machine "
                   "with more memory")


def check_nodes(graph: UserGraph, params: dict) -> tuple[np.ndarray, int, dict[str, np.ndarray]]:
    """The features' shape, the labels and the number of classes (`num_classes`, else the format's
    own, else the largest label + 1) and the splits, checked."""
    check_feature_shape(graph)
    labels, classes = check_labels(graph, params.get("num_classes") or graph.extra_meta.get("num_classes_given"))
    return labels, classes, check_splits(graph, labels)


def check_splits(graph: UserGraph, labels: np.ndarray) -> dict[str, np.ndarray]:
    """train/val/test node ids (int64, sorted), checked as graph_checks.ids_of and split_problem say."""
    out = {}
    for name in SPLITS:
        where = graph.splits[name]
        out[name], i, problem = graph_checks.ids_of(graph.read_split(name), graph.num_nodes, graph.nodes_from)
        if problem:
            raise fail(f"{where.file}: {where.array} {problem}" if i is None else f"{where.at(f'[{i}]')} {problem}")
    if found := graph_checks.split_problem(
            out, labels, {s: f"{w.file.name}: {w.array}" for s, w in graph.splits.items()},
            f"{graph.labels.file.name}: {graph.labels.array}"):
        name, problem = found
        raise fail(f"{graph.splits[name].file}: {graph.splits[name].array}: {problem}")
    return {name: np.sort(ids) for name, ids in out.items()}


def materialise(spec: dict, cache: Path, opener: Callable[[str, dict], UserGraph],
                files: Callable[[dict], list[Path]]) -> Path:
    """Check a user's graph and convert it into the hub (written aside, renamed when whole)."""
    params, target = spec["params"], hub.dataset_dir(spec, cache)
    if (target / "meta.json").is_file():
        return target
    before = fingerprint(files(params))
    started = time.perf_counter()
    phases = Phases()
    graph = opener(spec["name"], params)
    if not np.issubdtype(graph.edge_dtype, np.integer):
        raise fail(f"{graph.edges.file}: {graph.edges.array} has dtype {graph.edge_dtype}; allowed: {INTEGER_RULE}")
    labels, classes, splits = check_nodes(graph, params)
    check_baseline_fits(graph, splits, classes)
    phases.done("open; check labels, splits")
    with hub.atomic_dir(target) as tmp:
        if tmp is None:
            return target
        sorter = hub_stream.EdgeSorter(graph.num_nodes, tmp, params["self_loops"], params["duplicates"])
        for chunk in graph.edge_chunks():
            sorter.add(*check_ids(chunk, graph))
        counts = sorter.write(tmp)
        if problem := graph_checks.edges_problem(counts.edges_in, counts.self_loops):
            raise fail(f"{graph.edges.file}: {graph.edges.array}: {problem}")
        phases.done("edges: check, sort, write")
        convert_features(graph, tmp)
        phases.done("features: check, write")
        arrays = {"labels": labels, **{f"{s}_idx": ids for s, ids in splits.items()}, **graph.extra_arrays}
        for name, array in arrays.items():
            np.save(tmp / f"{name}.npy", array)
        acc = baseline.features_only_accuracy(RowReader(tmp / "features.npy"), labels, splits["train"],
                                               splits["test"])
        phases.done("labels, splits, baselines")
        if fingerprint(files(params)) != before:
            raise fail(f"{params['path']}: the files changed while they were converted; convert again once "
                       "they are written (nothing was kept)")
        meta = {
            "format": hub.FORMAT_VERSION, "name": spec["name"], "source": spec["source"], "params": params,
            "source_path": params["path"], **hub.sizes(graph.num_nodes, counts.num_edges, int(graph.feature_shape[1]),
                                                       classes, *(int(splits[s].size) for s in SPLITS)),
            "features_only_acc": None if acc is None else round(acc, 4),
            "edge_homophily": edge_homophily(tmp, labels),
            "input": {
                "edges": {"file": str(graph.edges.file), "array": graph.edges.array, "dtype": str(graph.edge_dtype)},
                "features": {"file": str(graph.features.file), "array": graph.features.array,
                             "dtype": str(graph.feature_dtype), "shape": list(graph.feature_shape)},
                "labels": {"file": str(graph.labels.file), "array": graph.labels.array},
                "splits": {s: {"file": str(w.file), "array": w.array} for s, w in graph.splits.items()},
                "nodes_from": graph.nodes_from,
            },
            "edges": {**counts.as_meta(), "self_loops_kept": params["self_loops"] == "keep",
                      "duplicates_kept": params["duplicates"] == "keep"},
            "labelled_nodes": int(np.count_nonzero(labels >= 0)),
            "notes": graph.notes, "convert_s": round(time.perf_counter() - started, 2), "convert_phases": phases.seen,
            **{k: v for k, v in graph.extra_meta.items() if not callable(v)},
        }
        hub.record_checksums(tmp)
        (tmp / "meta.json").write_text(json.dumps(meta, indent=2))
    discard_stale(spec, target)
    return target


def discard_stale(spec: dict, current: Path) -> None:
    """Remove the conversions of earlier versions of the same files (another fingerprint)."""
    prefix = current.name.rsplit("-", 1)[0] + "-"
    for folder in current.parent.glob(prefix + "*"):
        if folder == current or not (folder / "meta.json").is_file():
            continue
        try:
            meta = json.loads((folder / "meta.json").read_text())
        except (OSError, ValueError):
            continue
        if meta.get("source") == spec["source"] and meta.get("params") == spec["params"]:
            hub.discard(folder)


class Phases:
    """Each phase's seconds and memory high-water mark (VmHWM): meta.json's `convert_phases`."""

    def __init__(self):
        self.seen: list[dict] = []
        self._at = time.perf_counter()

    def done(self, name: str) -> None:
        now = time.perf_counter()
        entry = {"phase": name, "s": round(now - self._at, 2)}
        with contextlib.suppress(OSError, StopIteration, ValueError), open("/proc/self/status") as status:
            entry["vm_hwm_bytes"] = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmHWM:"))
        self.seen.append(entry)
        self._at = now


def convert_features(graph: UserGraph, folder: Path) -> None:
    with hub_stream.ArrayFile(folder / "features.npy", np.float32, graph.feature_shape) as out:
        for rows, block, given_row in graph.feature_blocks():
            converted = finite_float32(graph.features, given_row, block)
            if isinstance(rows, (int, np.integer)):  # consecutive rows: put writes them where they go
                rows = np.arange(rows, rows + block.shape[0])
            out.put(rows, converted)


class RowReader:
    """`rows[ids]` of a .npy read a block at a time, never mapped."""

    def __init__(self, path: Path):
        self.array = NpyArray(path)

    def __getitem__(self, ids) -> np.ndarray:
        ids = np.asarray(ids, dtype=np.int64)
        order = np.argsort(ids, kind="stable")
        wanted = ids[order]
        shape = self.array.shape
        out = np.empty((ids.size, *shape[1:]), dtype=self.array.dtype)
        step = rows_per_block(int(np.prod(shape[1:], dtype=np.int64)), self.array.dtype.itemsize)
        for start in range(0, shape[0], step):
            lo, hi = np.searchsorted(wanted, [start, start + step])
            if lo < hi:
                out[order[lo:hi]] = self.array.rows(start, start + step)[wanted[lo:hi] - start]
        return out


def edge_homophily(folder: Path, labels: np.ndarray) -> float | None:
    """Share of edges (between labelled nodes) whose ends share a label, read in blocks."""
    edge_index = NpyArray(folder / "edge_index.npy")
    same = total = 0
    step = 1 << 22
    for start in range(0, edge_index.shape[1], step):
        a = labels[edge_index.row_of_column(0, start, start + step)]
        b = labels[edge_index.row_of_column(1, start, start + step)]
        both = (a >= 0) & (b >= 0)
        same += int(np.count_nonzero(both & (a == b)))
        total += int(np.count_nonzero(both))
    return round(same / total, 4) if total else None


def rows_per_block(width: int, itemsize: int) -> int:
    return max(1, FEATURE_BLOCK_BYTES // max(1, width * itemsize))


def npy_row_blocks(features: NpyArray):
    """A features .npy read a block of rows at a time, as UserGraph.feature_blocks yields them."""
    step = rows_per_block(int(features.shape[1]) if features.ndim == 2 else 1, features.dtype.itemsize)
    for start in range(0, features.shape[0], step):
        yield start, features.rows(start, start + step), start


def report_lines(meta: dict) -> list[str]:
    """The lines about a converted user graph: where it came from, dtypes, directedness, counts."""
    if "input" not in meta:
        return []
    i, e, f = meta["input"], meta["edges"], meta["input"]["features"]
    kept = {True: "kept", False: "removed"}
    return [f"  source: {meta['source']} at {meta['source_path']}",
            f"  edges: {i['edges']['file']} ({i['edges']['array']}, {i['edges']['dtype']}), "
            f"{e['edges_in']:,} as given",
            f"    self-loops {e['self_loops']:,} ({kept[e['self_loops_kept']]}), duplicate edges "
            f"{e['duplicates']:,} ({kept[e['duplicates_kept']]})",
            f"    directed as given: made undirected, {e['reverse_added']:,} reverse edges added "
            f"({e['num_edges']:,} in the hub, both directions)" if e["directed_input"] else
            f"    undirected as given (every edge's reverse is there): {e['num_edges']:,} in the hub",
            f"  features: {f['file']} ({f['array']}, {f['dtype']} {tuple(f['shape'])}) -> float32",
            f"  labels: {i['labels']['file']} ({i['labels']['array']}), {meta['num_classes']} classes, "
            f"{meta['labelled_nodes']:,} of {meta['num_nodes']:,} nodes labelled",
            "  splits: " + ", ".join(f"{s} {meta[f'num_{s}']:,} ({w['array']})"
                                     for s, w in i["splits"].items()),
            f"  nodes: {meta['num_nodes']:,} ({i['nodes_from']})",
            *([f"  node ids: {meta['node_ids']}"] if meta.get("node_ids") else []),
            *(f"  note: {note}" for note in meta.get("notes", [])),
            *([f"  converted in {meta['convert_s']} s"] if meta.get("convert_s") is not None else [])]


def expected_stats(graph: UserGraph, params: dict) -> dict:
    """Sizes before conversion, from the headers, labels and splits (edges an upper bound, 0 for CSV)."""
    _, classes, splits = check_nodes(graph, params)
    return hub.sizes(graph.num_nodes, 2 * (graph.num_input_edges or 0), int(graph.feature_shape[1]), classes,
                     *(int(splits[s].size) for s in SPLITS))
