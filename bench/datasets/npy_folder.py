"""Your own graph as a folder of .npy arrays (source `npy`; the layout: docs/own-graph.md):
edge_index.npy ([2, E] or [E, 2]), features.npy ([N, D]: N is its rows), labels.npy, train/val/test
ids or masks (NAMES), and optionally the link task's given split, all five files or none (LINK_POS,
LINK_NEG). Each array is read a block at a time (hub_stream.NpyArray); checks and conversion: user_graph.py.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

from bench.datasets import link_split
from bench.datasets import user_graph as ug

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
LINK_POS = {"train_pos": "link_train.npy", "val_pos": "link_val.npy", "test_pos": "link_test.npy"}
LINK_NEG = {"per-positive": {"val_neg": "link_val_neg.npy", "test_neg": "link_test_neg.npy"},
            "shared": {"val_neg": "link_val_neg_edges.npy", "test_neg": "link_test_neg_edges.npy"}}
LINK_PROTOCOL = {"per-positive": "mrr+hits", "shared": "hits@50"}
LINK_RULE = ("the link split's files, all or none: link_train.npy, link_val.npy, link_test.npy and either "
             "link_val_neg.npy, link_test_neg.npy ([V, K] destinations per positive) or link_val_neg_edges.npy, "
             "link_test_neg_edges.npy ([M, 2] shared pairs)")
LAYOUT_RULE = "the folder's arrays: " + "; ".join(f"{k}: {' or '.join(v)}" for k, v in NAMES.items())


def source_files(params: dict) -> list[Path]:
    folder = Path(params["path"])
    return sorted(folder.glob("*.npy")) if folder.is_dir() else [folder]


def _find(folder: Path, kind: str) -> Path:
    found = [folder / name for name in NAMES[kind] if (folder / name).is_file()]
    if not found:
        raise ug.fail(f"{folder}: no {kind} array ({' or '.join(NAMES[kind])}); allowed: {LAYOUT_RULE}")
    if len(found) > 1:
        raise ug.fail(f"{folder}: both {found[0].name} and {found[1].name} are there for the {kind}; allowed: one")
    return found[0]


def open_graph(label: str, params: dict) -> ug.UserGraph:
    folder = Path(params["path"])
    if not folder.is_dir():
        raise ug.fail(f"{folder}: no such folder; allowed: a folder of .npy arrays ({LAYOUT_RULE})")
    edges = ug.open_npy(_find(folder, "edges"))
    features = ug.open_npy(_find(folder, "features"))
    labels = ug.open_npy(_find(folder, "labels"))
    splits = {s: ug.open_npy(_find(folder, s)) for s in ug.SPLITS}
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
            stop = start + ug.EDGE_CHUNK  # the reads stop at the last edge
            if layout == "2 x E":
                src, dst = (edges.row_of_column(k, start, stop) for k in (0, 1))
                yield ug.EdgeChunk(src, dst, start, lambda i, end: f"[{end}, {i}]")
            else:
                pairs = edges.rows(start, stop)
                yield ug.EdgeChunk(pairs[:, 0], pairs[:, 1], start, lambda i, end: f"[{i}, {end}]")

    return ug.UserGraph(
        label=label, num_nodes=n, nodes_from=f"the rows of {features.path.name}",
        edges=ug.Input(edges.path, "edge_index"), edge_dtype=edges.dtype, num_input_edges=num_edges,
        edge_chunks=edge_chunks,
        features=ug.Input(features.path, "features"), feature_shape=features.shape, feature_dtype=features.dtype,
        feature_blocks=partial(ug.npy_row_blocks, features),
        labels=ug.Input(labels.path, "labels"), read_labels=labels.read_all,
        splits={s: ug.Input(a.path, a.path.stem) for s, a in splits.items()},
        read_split=lambda s: splits[s].read_all(), notes=notes, extra_meta={"edge_layout": layout})


def link_files(folder: Path) -> tuple[dict[str, Path], str] | None:
    """The given link split's files and the form of its negatives, None without (part of one: an error)."""
    names = {*LINK_POS.values(), *(n for kind in LINK_NEG.values() for n in kind.values())}
    present = {n for n in names if (folder / n).is_file()}
    if not present:
        return None
    kinds = [kind for kind, files in LINK_NEG.items() if set(files.values()) & present]
    if len(kinds) != 1:
        problem = "both forms of negatives are there" if kinds else "no negatives"
        raise ug.fail(f"{folder}: {problem} for the given link split; allowed: {LINK_RULE}")
    wanted = {**LINK_POS, **LINK_NEG[kinds[0]]}
    if missing := [n for n in wanted.values() if n not in present]:
        raise ug.fail(f"{folder}: the given link split lacks {', '.join(missing)}; allowed: {LINK_RULE}")
    return {key: folder / name for key, name in wanted.items()}, kinds[0]


def read_link_split(folder: Path, num_nodes: int) -> tuple[dict, dict, str] | None:
    """The given link split's arrays checked (link_split.check_given), before anything is converted."""
    found = link_files(folder)
    if found is None:
        return None
    files, kind = found
    where = {key: str(path) for key, path in files.items()}
    given = link_split.check_given({key: ug.open_npy(path).read_all() for key, path in files.items()}, where, num_nodes,
                                   kind)
    link_split.check_disjoint(given, where)
    return given, where, kind


def open_with_link(label: str, params: dict) -> ug.UserGraph:
    graph = open_graph(label, params)
    if link_files(Path(params["path"])) is not None:
        graph.extra_meta["link_split_given"] = True  # link cells read it, never a made one
    return graph


def materialise(spec: dict, cache: Path, data_root: Path | None = None) -> Path:
    folder = Path(spec["params"]["path"])
    link = read_link_split(folder, open_graph(spec["name"], spec["params"]).num_nodes) if folder.is_dir() else None
    path = ug.materialise(spec, cache, open_with_link, source_files)
    if link is not None:
        given, where, kind = link
        link_split.write_given(path, given, where, LINK_PROTOCOL[kind], kind, origin=f"the files in {folder}")
    return path


canonical_params, fingerprint, expected_stats, _ = ug.source_hooks("npy", source_files, open_graph)
