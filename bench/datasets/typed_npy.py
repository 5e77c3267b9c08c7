"""Your own typed (heterogeneous) graph as a folder of .npy arrays (source `typed-npy`, LAYOUT_RULE;
docs/own-graph.md), and IGBH in IGB's own processed/ layout (source `igbh`, read as IGB's
`IGBHeteroDGLDataset` reads it, with its 60/20/20 split of the papers). Each relation is given once
(the hub adds its reverse). Every problem found is one line naming the file, all of them at once
(hub.DatasetError, exit 2), so one round of fixes suffices. numpy only.
"""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from bench import datasets
from bench.datasets import baseline, graph_checks, hub, typed_hub
from bench.datasets import user_graph as ug
from bench.datasets.hub_stream import NpyArray

SHAPE = "typed"  # bench/tasks.py: serves the typed-node task
USER_FILES = True
VERSION = 1
PARAMS = {"path": ug.PARAMS["path"]}
DEFAULTS = {"path": ...}
GRAPH_FILE = "graph.json"
SPLIT_FILES = {"train_idx": "train_idx.npy", "val_idx": "val_idx.npy", "test_idx": "test_idx.npy"}
SIZES_NOTE = ("typed-npy:PATH    your own typed graph: graph.json (the target type), nodes/<type>/features.npy, "
              "the target's labels and splits, edges/<src>__<name>__<dst>.npy; docs/own-graph.md")
PLAIN_TYPE = partial(graph_checks.name_problem, what="node type")  # a node type's name: plain, else its problem
LAYOUT_RULE = ("graph.json {\"target\": TYPE}, nodes/<type>/features.npy, nodes/<target>/labels.npy, "
               "train_idx.npy, val_idx.npy, test_idx.npy, edges/<src>__<name>__<dst>.npy [2, E]")


def source_files(params: dict) -> list[Path]:
    folder = Path(params["path"])
    return sorted([*folder.rglob("*.npy"), folder / GRAPH_FILE]) if folder.is_dir() else [folder]


canonical_params, fingerprint, *_ = ug.source_hooks("typed-npy", source_files)


class Problems:
    """Every problem of a folder, one line each, raised together."""

    def __init__(self, folder: Path):
        self.folder, self.lines = folder, []

    def add(self, path: Path, message: str) -> None:
        self.lines.append(f"{path}: {message}")

    def kept(self, items, problem_of, where) -> list:
        """The items `problem_of` finds nothing wrong with; each other one's problem added at `where(item)`."""
        found = {x: problem_of(x) for x in items}
        for x, problem in found.items():
            if problem:
                self.add(where(x), problem)
        return [x for x, problem in found.items() if not problem]

    def raise_any(self) -> None:
        if self.lines:
            raise hub.DatasetError(f"typed-npy:{self.folder}: {len(self.lines)} problem(s):\n"
                                   + "\n".join(ug.fail(line).args[0] for line in self.lines))


def relation_named(stem: str, types, problems: Problems, name_path: Path, edges_path: Path,
                   types_where: str) -> tuple[str, str, str] | None:
    """(src, name, dst) from a relation's `<src>__<name>__<dst>` name, each part a plain name, or None
    with the problem added."""
    relation = tuple(stem.split(graph_checks.NAME_SEPARATOR))
    if len(relation) != 3 or any(graph_checks.name_problem(p, "") for p in relation):
        problems.add(name_path, f"{stem!r} is not <src>__<name>__<dst> (source type, relation, destination type); "
                                f"allowed: three names, each {graph_checks.NAME_RULE}")
        return None
    if unknown := [t for t in (relation[0], relation[2]) if t not in types]:
        problems.add(edges_path, f"the relation names node type(s) {', '.join(map(repr, dict.fromkeys(unknown)))} "
                                 f"that are not there ({types_where}: {', '.join(types) or 'none'})")
        return None
    return relation


def bounded_counts(counts: dict, where, folder: Path, problems: Problems) -> dict:
    """The node counts within graph_checks' bound (each, and all together); the others problems."""
    kept = {t: counts[t] for t in problems.kept(counts, lambda t: graph_checks.node_count_problem(counts[t], f"{t} nodes"),
                                                 where)}
    if problem := graph_checks.node_count_problem(sum(kept.values()), "nodes of all types together"):
        problems.add(folder, problem)
        return {}
    return kept


def _open(path: Path, problems: Problems, missing: str | None = None):
    """The .npy mapped, else None with its problem added (`missing`: what a missing file lacks)."""
    if missing is not None and not path.is_file():
        problems.add(path, f"missing: {missing}")
        return None
    try:
        return np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError) as exc:
        problems.add(path, f"not a readable .npy array ({' '.join(str(exc).split())})")
        return None


def read_folder(folder: Path) -> dict:
    """The folder checked whole: the arrays typed_hub.write takes; every problem raised together."""
    problems = Problems(folder)
    if not folder.is_dir():
        problems.add(folder, f"no such folder; allowed: a folder with {LAYOUT_RULE}")
        problems.raise_any()
    config_path = folder / GRAPH_FILE
    config, given_counts = _read_config(config_path, problems)
    nodes_dir = folder / "nodes"
    types = sorted({p.name for p in nodes_dir.iterdir() if p.is_dir()} if nodes_dir.is_dir() else set())
    types = problems.kept(sorted(set(types) | set(given_counts)), PLAIN_TYPE,
                          lambda t: config_path if t in given_counts else nodes_dir / t)
    counts, features = node_arrays(
        {t: nodes_dir / t / "features.npy" for t in types}, given_counts, config_path, problems,
        lambda t: (nodes_dir / t, f"node type {t!r} has no features.npy and no count; allowed: features.npy, or "
                                  f"\"num_nodes\": {{\"{t}\": N}} in {GRAPH_FILE}"))
    counts = bounded_counts(counts, lambda t: nodes_dir / t / "features.npy" if (nodes_dir / t / "features.npy").is_file()
                            else config_path, folder, problems)
    target = config.get("target")
    labels, splits = None, {}
    if isinstance(target, str):
        if target not in types:
            problems.add(config_path, f"target {target!r} is not a node type (nodes/: {', '.join(types) or 'none'})")
        else:
            labels, splits = _target_arrays(nodes_dir / target, target, counts.get(target), problems)
    edges_dir = folder / "edges"
    relations = read_relations([(p.stem, p, p) for p in sorted(edges_dir.glob("*.npy"))] if edges_dir.is_dir() else [],
                               edges_dir, "edges/<src>__<name>__<dst>.npy", types, counts, problems)
    problems.raise_any()
    return {"counts": counts, "features": features, "target": target, "labels": labels, "splits": splits,
            "relations": relations}


def _read_config(config_path: Path, problems: Problems) -> tuple[dict, dict]:
    """graph.json: (the whole of it, its `num_nodes` by type where they are positive counts)."""
    config: dict = {}
    try:
        config = json.loads(config_path.read_text())
        if not isinstance(config, dict) or not isinstance(config.get("target"), str):
            problems.add(config_path, "names no target type; allowed: {\"target\": \"<node type>\"}")
            config = config if isinstance(config, dict) else {}
    except FileNotFoundError:
        problems.add(config_path, "missing; allowed: {\"target\": \"<node type>\"} naming the type to classify")
    except OSError as exc:
        problems.add(config_path, f"cannot be read ({exc.strerror or exc})")
    except (ValueError, RecursionError) as exc:  # RecursionError: nested deeper than the parser goes
        problems.add(config_path, f"not JSON ({type(exc).__name__}: {' '.join(str(exc).split())[:160]})")
    given_counts = config.get("num_nodes") or {}
    if not isinstance(given_counts, dict) or not all(
            isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in given_counts.values()):
        problems.add(config_path, "num_nodes is not {\"<type>\": <positive count>, ...}")
        given_counts = {}
    return config, given_counts


def node_arrays(paths: dict[str, Path], given_counts: dict, config_path: Path, problems: Problems,
                missing) -> tuple[dict, dict]:
    """Per node type its count and features from its file in `paths` (None: none, or not usable:
    said), else its count in `given_counts`, else the problem `missing(type)` gives (where, what)."""
    counts, features = {}, {}
    for t, path in paths.items():
        x = _open(path, problems) if path.is_file() else None
        if x is not None and x.ndim != 2:
            problems.add(path, f"{path.stem} has shape {x.shape}; allowed: [N, F] (one row per {t} node)")
            x = None
        if x is not None:
            counts[t] = int(x.shape[0])  # the count, even of a wrong dtype (its relations still checked)
            if not (np.issubdtype(x.dtype, np.floating) or np.issubdtype(x.dtype, np.integer) or x.dtype == np.bool_):
                problems.add(path, f"{path.stem} has dtype {x.dtype}; allowed: {ug.FEATURE_RULE}")
                x = None
            if t in given_counts and given_counts[t] != counts[t]:
                problems.add(config_path, f"num_nodes says {given_counts[t]} {t} nodes, {path.name} has "
                                          f"{counts[t]} rows; allowed: equal, or num_nodes left out for {t}")
        elif t in given_counts:
            counts[t] = given_counts[t]
        elif not path.is_file():
            problems.add(*missing(t))
        features[t] = x
    return counts, features


def read_relations(entries: list[tuple[str, Path, Path]], where: Path, layout: str, types: list[str], counts: dict,
                   problems: Problems, igb_layout: bool = False) -> dict:
    """Each relation's (source ids, destination ids) from `entries` (its `<src>__<name>__<dst>` name,
    where that name is, its .npy), then checked together: none empty, none the reverse the hub adds,
    not all self-loops (graph_checks.edges_problem)."""
    relations, files = {}, {}
    if not entries:
        problems.add(where, f"no relations ({layout}); allowed: at least one")
    for stem, name_path, path in entries:
        relation = relation_named(stem, types, problems, name_path, path, "processed/" if igb_layout else "nodes/")
        edges = None if relation is None else read_relation(path, relation, counts, problems, igb_layout)
        if edges is not None:
            relations[relation], files[relation] = edges, path
    loops = 0
    for (src, name, dst), (s, d) in relations.items():
        if s.size == 0:
            problems.add(files[(src, name, dst)], "no edges; allowed: at least one edge in each relation (leave the "
                                                  "file out for none)")
        clash = (dst, name.removeprefix(typed_hub.REVERSE_PREFIX), src)
        if name.startswith(typed_hub.REVERSE_PREFIX) and clash in relations:
            problems.add(files[(src, name, dst)], f"is the reverse the hub adds to {files[clash].name}; allowed: each "
                                                  f"relation given once (its {typed_hub.REVERSE_PREFIX}<name> is added)")
        loops += int(np.count_nonzero(s == d)) if src == dst else 0
    problem = graph_checks.edges_problem(sum(s.size for s, _ in relations.values()), loops)
    if relations and all(s.size for s, _ in relations.values()) and problem:
        problems.add(where, problem)
    return relations


def read_relation(path: Path, relation: tuple[str, str, str], counts: dict, problems: Problems,
                  igb_layout: bool = False) -> tuple[np.ndarray, np.ndarray] | None:
    """A relation's (source ids, destination ids) from its .npy ([2, E]; IGB's: [E, 2]), in range."""
    src, _, dst = relation
    shape = "[E, 2]" if igb_layout else "[2, E]"
    e = _open(path, problems, "the relation's edges [E, 2]")
    if e is None:
        return None
    if not np.issubdtype(e.dtype, np.integer):
        problems.add(path, f"edge_index has dtype {e.dtype}; allowed: {ug.INTEGER_RULE}, shape {shape}")
        return None
    if e.ndim != 2 or e.shape[1 if igb_layout else 0] != 2:
        problems.add(path, f"edge_index has shape {e.shape}; allowed: {shape} "
                           + ("(IGB's layout: src, dst columns)" if igb_layout else "(source ids, destination ids)"))
        return None
    if src not in counts or dst not in counts:
        return None
    ids = [np.asarray(e[:, k] if igb_layout else e[k]) for k in (0, 1)]
    ok = True
    for k, t in ((0, src), (1, dst)):
        bad = (ids[k] < 0) | (ids[k] >= counts[t])
        if bad.any():
            i = int(np.argmax(bad))
            problems.add(path, f"edge_index{f'[{i}, {k}]' if igb_layout else f'[{k}, {i}]'} = {ids[k][i]} is out of "
                               f"range; allowed: {t} ids 0..{counts[t] - 1}" + ("" if igb_layout else f" ({counts[t]:,} {t} nodes)"))
            ok = False
    return (np.asarray(ids[0], dtype=np.int64), np.asarray(ids[1], dtype=np.int64)) if ok else None  # views where int64


def read_labels(path: Path, n: int | None, target: str, missing: str, problems: Problems,
                classes: int | None = None) -> np.ndarray | None:
    """The target's labels [n] (graph_checks.labels_of; `classes`: IGB's number), None where unusable
    (said; `missing`: what a missing file lacks)."""
    y = _open(path, problems, missing)
    if y is None:
        return None
    labels, i, problem = graph_checks.labels_of(np.asarray(y), n, f"{target} nodes", classes)
    if problem:
        problems.add(path, f"labels{'' if i is None else f'[{i}]'} {problem}")
    return labels


def _target_arrays(folder: Path, target: str, n: int | None, problems: Problems):
    labels = read_labels(folder / "labels.npy", n, target,
                         f"the target type {target!r} needs labels [N] (integers, -1: no label)", problems)
    splits = {}
    for split, name in SPLIT_FILES.items():
        path = folder / name
        raw = _open(path, problems, f"the {split.removesuffix('_idx')} split of {target!r} node ids")
        if raw is None or n is None:  # n None: the target's count is unknown, which is said already
            continue
        ids, i, problem = graph_checks.ids_of(np.asarray(raw), n, f"{target} nodes")
        if problem:
            problems.add(path, f"{split}{'' if i is None else f'[{i}]'} {problem}")
        else:
            splits[split] = ids
    if n is not None and labels is not None and len(splits) == len(SPLIT_FILES):
        found = graph_checks.split_problem({s.removesuffix("_idx"): ids for s, ids in splits.items()}, labels,
                                           {s.removesuffix("_idx"): name for s, name in SPLIT_FILES.items()}, "labels.npy")
        if found:
            problems.add(folder / f"{found[0]}_idx.npy", found[1])
    return labels, splits


def stats_of(g: dict, target: str, classes: int | None = None) -> dict:
    """The sizes of a checked typed graph (read_folder's, or IGBH's): edges with the hub's reverses."""
    x = g["features"].get(target)
    return hub.sizes(sum(g["counts"].values()), 2 * sum(s.size for s, _ in g["relations"].values()),
                     int(x.shape[1]) if x is not None else 0,
                     classes or (int(g["labels"].max()) + 1 if g["labels"].size else 0),
                     *(int(g["splits"][s].size) for s in typed_hub.SPLITS))


def expected_stats(params: dict) -> dict:
    g = read_folder(Path(params["path"]))
    return stats_of(g, g["target"])


def feature_blocks(path: Path):
    """A type's features.npy as float32 blocks of rows read from the file, each checked finite."""
    for start, block, _ in ug.npy_row_blocks(NpyArray(path)):
        yield ug.finite_float32(ug.Input(path, "features"), start, block)


def write_checked(spec: dict, cache: Path, read, fingerprint, feature_files, version: int) -> Path:
    """A typed user graph into the hub once (typed_hub.Writer, a piece at a time, with its baseline):
    read and checked whole, its files unchanged meanwhile."""
    params, target_dir = spec["params"], hub.dataset_dir(spec, cache)
    if (target_dir / "meta.json").is_file():
        return target_dir
    before = fingerprint(params)
    g = read()
    if fingerprint(params) != before:
        raise ug.fail(f"{params['path']}: the files changed while they were read; check again once they are written")
    files = feature_files(g)
    with typed_hub.writing(spec, cache, g["counts"]) as w:
        if w is None:
            return target_dir  # another process finished it first
        for relation, (src, dst) in g["relations"].items():
            w.relation(relation, src, dst)
        for t, path in files.items():
            w.features(t, (g["counts"][t], int(np.prod(NpyArray(path).shape[1:]))), feature_blocks(path))
        y, splits, target = g["labels"], g["splits"], g["target"]
        acc = None if target not in files else baseline.features_only_accuracy(
            ug.RowReader(w.folder / f"features-{target}.npy"), y, splits["train_idx"], splits["test_idx"])
        w.finish(target, y, splits, extra_meta={"reader": version, "source_path": params["path"],
                                                "features_only_acc": None if acc is None else round(acc, 4)})
    ug.discard_stale(spec, target_dir)
    return target_dir


def materialise(spec: dict, cache: Path, data_root: Path | None = None) -> Path:
    folder = Path(spec["params"]["path"])
    return write_checked(spec, cache, lambda: read_folder(folder), fingerprint, lambda g: {
        t: folder / "nodes" / t / "features.npy" for t, x in g["features"].items() if x is not None}, VERSION)


load = typed_hub.load_for_source  # its own `load` (hub.load_dataset)

# --- IGBH in IGB's processed/ layout --------------------------------------------------------------
IGBH_TARGET = "paper"
IGBH_LABEL_FILES = {19: "node_label_19.npy", 2983: "node_label_2K.npy"}
IGBH_TRAIN_FRAC, IGBH_VAL_FRAC = 0.6, 0.2  # IGB's own split (igb/dataloader.py)


def igbh_canonical_params(params: dict) -> dict:
    out = datasets.declared_params("igbh", params)
    if out.get("classes") not in IGBH_LABEL_FILES:
        raise ValueError(f"igbh: classes={out.get('classes')!r}; allowed: 19 or 2983 (IGB's two label sets)")
    return out


def igbh_source_files(params: dict) -> list[Path]:
    processed = Path(params["path"]) / "processed"
    return sorted(processed.rglob("*.npy")) if processed.is_dir() else [processed]


_, igbh_fingerprint, *_ = ug.source_hooks("igbh", igbh_source_files)


def igbh_read_folder(folder: Path, classes: int) -> dict:
    """IGB's processed/ folder checked whole: the arrays typed_hub.write takes; every problem one line."""
    problems = Problems(folder)
    processed = folder / "processed"
    if not processed.is_dir():
        problems.add(processed, "no such folder; allowed: the folder of one IGBH size (tiny, small, medium) "
                                "holding processed/<type>/node_feat.npy and processed/<src>__<name>__<dst>/")
        problems.raise_any()
    types = problems.kept(sorted(p.name for p in processed.iterdir() if p.is_dir() and typed_hub.NAME_SEPARATOR not in p.name),
                          PLAIN_TYPE, lambda t: processed / t)
    counts, features = node_arrays(
        {t: processed / t / "node_feat.npy" for t in types}, {}, processed, problems,
        lambda t: (processed / t / "node_feat.npy",
                   f"missing: node type {t!r} needs its features (IGB ships them for every type)"))
    counts = bounded_counts(counts, lambda t: processed / t / "node_feat.npy", folder, problems)
    labels = None
    if IGBH_TARGET not in types:
        problems.add(processed / IGBH_TARGET, "missing: IGBH's papers (the classified type)")
    elif IGBH_TARGET in counts:
        labels = read_labels(processed / IGBH_TARGET / IGBH_LABEL_FILES[classes], counts[IGBH_TARGET], "paper",
                             f"the papers' {classes} classes", problems, classes)
    relations = read_relations(
        [(d.name, d, d / "edge_index.npy") for d in sorted(processed.iterdir())
         if d.is_dir() and typed_hub.NAME_SEPARATOR in d.name],
        processed, "<src>__<name>__<dst>/edge_index.npy", types, counts, problems, igb_layout=True)
    problems.raise_any()
    n = counts[IGBH_TARGET]
    splits = igbh_splits(n)
    found = graph_checks.split_problem({s.removesuffix("_idx"): i for s, i in splits.items()}, labels, {},
                                       IGBH_LABEL_FILES[classes])
    if found:  # too few papers for IGB's 60/20/20 split
        problems.add(processed / IGBH_TARGET / "node_feat.npy", f"{n} papers: {found[1]}")
        problems.raise_any()
    return {"counts": counts, "features": features, "labels": labels, "splits": splits, "relations": relations,
            "target": IGBH_TARGET}


def igbh_splits(n: int) -> dict[str, np.ndarray]:
    """IGB's split of `n` papers: the first 60 % train, the next 20 % validation, the rest test."""
    n_train, n_val = int(n * IGBH_TRAIN_FRAC), int(n * IGBH_VAL_FRAC)
    ids = np.arange(n, dtype=np.int64)
    return {"train_idx": ids[:n_train], "val_idx": ids[n_train:n_train + n_val], "test_idx": ids[n_train + n_val:]}


def igbh_materialise(spec: dict, cache: Path, data_root: Path | None = None) -> Path:
    params = spec["params"]
    processed = Path(params["path"]) / "processed"
    return write_checked(spec, cache, lambda: igbh_read_folder(Path(params["path"]), params["classes"]), igbh_fingerprint,
                         lambda g: {t: processed / t / "node_feat.npy" for t in g["features"]}, VERSION)


# the source `igbh` (bench.datasets.SOURCES names it by attribute)
IGBH = SimpleNamespace(
    SHAPE="typed", USER_FILES=True, VERSION=VERSION,
    PARAMS={"path": ug.PARAMS["path"], "classes": (int, {"ge": 19, "le": 2983})},
    DEFAULTS={"path": ..., "classes": 19},
    SIZES_NOTE=("igbh:PATH         IGBH as IGB ships it: PATH/processed/<type>/node_feat.npy, paper/node_label_19.npy, "
                "<src>__<name>__<dst>/edge_index.npy (igbh:path=P,classes=2983 for the 2K labels)"),
    canonical_params=igbh_canonical_params,
    fingerprint=igbh_fingerprint,
    expected_stats=lambda params: stats_of(igbh_read_folder(Path(params["path"]), params["classes"]), IGBH_TARGET,
                                           params["classes"]),
    materialise=igbh_materialise,
    load=load,
)
