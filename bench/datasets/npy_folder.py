"""Your own graph as a folder of .npy arrays (source `npy`):

    edge_index.npy (or edges.npy)       integers, [2, E] or [E, 2] (source, destination)
    features.npy (or x.npy)             [N, D] floats (integers and booleans are converted)
    labels.npy (or y.npy)               [N] integers (-1: no label), or whole floats (NaN: none)
    train_*.npy, val_*.npy, test_*.npy  node ids [K] (`train_idx.npy`) or boolean masks [N]
                                        (`train_mask.npy`); `valid_` stands for `val_`
    edge_weight.npy, edge_attr.npy      ignored, with a note (gnnbench trains on the structure)

N is the number of feature rows. Each array is read a block at a time (bench/datasets/npy_reader.py),
so the folder may be far larger than memory. Checks and conversion: bench/datasets/user_graph.py.
"""

from __future__ import annotations

from pathlib import Path

from bench.datasets import user_graph as ug
from bench.datasets.npy_reader import NpyArray, NpyError

USER_FILES = True
PARAMS, DEFAULTS = ug.params_of()
NAMES = {
    "edges": ("edge_index.npy", "edges.npy"),
    "features": ("features.npy", "x.npy", "node_feat.npy"),
    "labels": ("labels.npy", "y.npy", "node_label.npy"),
    **{split: tuple(f"{prefix}_{kind}.npy" for prefix in ((split, "valid") if split == "val" else (split,))
                    for kind in ("idx", "mask")) for split in ug.SPLITS},
}
IGNORED = ("edge_weight.npy", "edge_weights.npy", "edge_attr.npy")
SIZES_NOTE = ("npy:PATH          your own graph: a folder of .npy arrays (edge_index, features, labels, "
              "train/val/test ids or masks); docs/own-graph.md")
ESTIMATE_ORIGIN = ug.SIZES_ORIGIN
LAYOUT_RULE = "the folder's arrays: " + "; ".join(f"{k}: {' or '.join(v)}" for k, v in NAMES.items())


def canonical_params(params: dict) -> dict:
    return ug.canonical(params, PARAMS, DEFAULTS, "npy")


def parse_rest(rest: str) -> dict:
    return ug.parse_rest(rest, PARAMS, "npy")


def source_files(params: dict) -> list[Path]:
    folder = Path(params["path"])
    return sorted(folder.glob("*.npy")) if folder.is_dir() else [folder]


def fingerprint(params: dict) -> str:
    return ug.fingerprint(source_files(params))


def _find(folder: Path, kind: str) -> Path:
    found = [folder / name for name in NAMES[kind] if (folder / name).is_file()]
    if not found:
        raise ug.fail(f"{folder}: no {kind} array ({' or '.join(NAMES[kind])}); allowed: {LAYOUT_RULE}")
    if len(found) > 1:
        raise ug.fail(f"{folder}: both {found[0].name} and {found[1].name} are there for the {kind}; allowed: one")
    return found[0]


def _open(path: Path) -> NpyArray:
    try:
        return NpyArray(path)
    except NpyError as exc:
        raise ug.fail(f"{path}: {exc}") from None


def open_graph(label: str, params: dict) -> ug.UserGraph:
    folder = Path(params["path"])
    if not folder.is_dir():
        raise ug.fail(f"{folder}: no such folder; allowed: a folder of .npy arrays ({LAYOUT_RULE})")
    edges = _open(_find(folder, "edges"))
    features = _open(_find(folder, "features"))
    labels = _open(_find(folder, "labels"))
    splits = {s: _open(_find(folder, s)) for s in ug.SPLITS}
    if edges.ndim == 2 and edges.shape[0] == 2:
        layout, num_edges = "2 x E", edges.shape[1]
    elif edges.ndim == 2 and edges.shape[1] == 2:
        layout, num_edges = "E x 2", edges.shape[0]
    else:
        raise ug.fail(f"{edges.path}: edge_index has shape {edges.shape}; allowed: [2, E] or [E, 2] "
                      "(source and destination node ids)")
    notes = [f"{name} ignored: gnnbench trains on the graph's structure, not its edge weights"
             for name in IGNORED if (folder / name).is_file()]
    if features.ndim < 1:
        raise ug.fail(f"{features.path}: features has shape {features.shape}; allowed: [N, D]")
    n = features.shape[0]

    def edge_chunks():
        for start in range(0, num_edges, ug.EDGE_CHUNK):
            stop = min(num_edges, start + ug.EDGE_CHUNK)
            if layout == "2 x E":
                src, dst = edges.row_of_column(0, start, stop), edges.row_of_column(1, start, stop)
            else:
                pairs = edges.rows(start, stop)
                src, dst = pairs[:, 0], pairs[:, 1]
            yield ug.EdgeChunk(src, dst, start, (lambda i, end: f"[{end}, {i}]") if layout == "2 x E"
                               else (lambda i, end: f"[{i}, {end}]"))

    def feature_blocks():
        step = ug.rows_per_block(int(features.shape[1]) if features.ndim == 2 else 1, features.dtype.itemsize)
        for start in range(0, n, step):
            yield start, features.rows(start, start + step), start

    return ug.UserGraph(
        label=label, num_nodes=n, nodes_from=f"the rows of {features.path.name}",
        edges=ug.Input(edges.path, "edge_index"), edge_dtype=edges.dtype, num_input_edges=num_edges,
        edge_chunks=edge_chunks,
        features=ug.Input(features.path, "features"), feature_shape=features.shape, feature_dtype=features.dtype,
        feature_blocks=feature_blocks,
        labels=ug.Input(labels.path, "labels"), read_labels=labels.read_all,
        splits={s: ug.Input(a.path, a.path.stem) for s, a in splits.items()},
        read_split=lambda s: splits[s].read_all(), notes=notes, extra_meta={"edge_layout": layout})


def expected_stats(params: dict) -> dict:
    return ug.expected_stats(open_graph("?", params), params)


def materialise(spec: dict, cache: Path, data_root: Path | None = None) -> Path:
    return ug.materialise(spec, cache, open_graph, source_files)
