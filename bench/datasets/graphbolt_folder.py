"""Your own graph as a GraphBolt OnDiskDataset folder (source `graphbolt`; what it takes: docs/own-graph.md):
its metadata.yaml and the files it names, read directly (numpy and PyYAML, no DGL). Other features are
ignored, with a note; torch-format files and heterogeneous graphs are refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np

from bench.datasets import graph_checks, tables
from bench.datasets import user_graph as ug
from bench.datasets.hub_stream import NpyArray

USER_FILES = True
PARAMS, DEFAULTS = ug.params_of({"feature": (str, {"min_length": 1}), "task": (str | None, {})},
                                {"feature": "feat", "task": None})
SEED_NAMES = ("seeds", "seed_nodes")  # DGL 2.2+, DGL 2.1
SETS = {"train": "train_set", "val": "validation_set", "test": "test_set"}
SIZES_NOTE = ("graphbolt:PATH    your own graph: a GraphBolt OnDiskDataset folder (metadata.yaml, node "
              "classification); docs/own-graph.md")


def _metadata_file(params: dict) -> Path:
    path = Path(params["path"])
    return path if path.name == "metadata.yaml" else path / "metadata.yaml"


def _read_metadata(meta_file: Path) -> dict:
    """metadata.yaml, read strictly (bench/strict_yaml.py), a bad one named."""
    import yaml

    from bench import strict_yaml  # host only (yaml): a stack imports this module, never this function

    if not meta_file.is_file():
        raise ug.fail(f"{meta_file}: no such file; allowed: a GraphBolt OnDiskDataset folder with its metadata.yaml")
    try:
        meta = strict_yaml.load_text(meta_file.read_text(encoding="utf-8"), str(meta_file))
    except strict_yaml.StrictYamlError as exc:
        raise ug.fail(str(exc)) from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ug.fail(f"{meta_file}: not readable YAML ({type(exc).__name__}: {' '.join(str(exc).split())[:200]})") from None
    if not isinstance(meta, dict):
        raise ug.fail(f"{meta_file}: a {type(meta).__name__}, not a mapping; allowed: GraphBolt's metadata.yaml")
    return meta


def _files_named(node) -> list[str]:
    """Every `path:` in the metadata (the files the dataset is made of)."""
    if isinstance(node, dict):
        own = [node["path"]] if isinstance(node.get("path"), str) else []
        return own + [p for value in node.values() for p in _files_named(value)]
    return [p for value in node for p in _files_named(value)] if isinstance(node, list) else []


def source_files(params: dict) -> list[Path]:
    meta_file = _metadata_file(params)
    try:
        meta = _read_metadata(meta_file)
    except Exception:  # noqa: BLE001 - a bad file is named when it is read; here only its stat counts
        return [meta_file]
    return [meta_file, *(meta_file.parent / p for p in _files_named(meta))]


def _key(meta_file: Path, where: str, node: dict, key: str, allowed: str):
    if not isinstance(node, dict) or key not in node:
        raise ug.fail(f"{meta_file}: {where} has no `{key}`; allowed: {allowed}")
    return node[key]


def _numpy_file(meta_file: Path, where: str, entry: dict) -> NpyArray:
    fmt = entry.get("format")
    if fmt != "numpy":
        raise ug.fail(f"{meta_file}: {where} has format {fmt!r}; allowed: numpy (save torch tensors with "
                      "np.save(path, tensor.numpy()))")
    path = meta_file.parent / str(_key(meta_file, where, entry, "path", "a path relative to the folder"))
    if not path.is_file():
        raise ug.fail(f"{path}: no such file (named by {where} in {meta_file.name}); allowed: an existing .npy file")
    return ug.open_npy(path)


def open_graph(label: str, params: dict) -> ug.UserGraph:
    meta_file = _metadata_file(params)
    meta = _read_metadata(meta_file)
    graph, n = _graph_section(meta_file, meta)
    edges = EdgeFile.of(meta_file, graph["edges"][0])
    notes = [f"graph feature {feature.get('name')!r} ({feature.get('domain')}) ignored: gnnbench trains on "
             "the structure" for feature in graph.get("feature_data") or []]
    features, label_feature, feature_notes = _node_features(meta_file, meta, params["feature"])
    task, task_name, task_notes = _task(meta_file, meta, params["task"])
    notes += feature_notes + task_notes
    sets = _sets(meta_file, task, task_name, bool(label_feature))
    num_classes = task.get("num_classes")
    extra = {"graphbolt_seed_name": sets["train"][0]}
    if params.get("num_classes") is None and num_classes is not None:
        extra["num_classes_given"] = num_classes
    return ug.UserGraph(
        label=label, num_nodes=n, nodes_from=f"graph.nodes[0].num in {meta_file.name}",
        edges=ug.Input(edges.path, f"edges ({edges.format})"), edge_dtype=edges.dtype, num_input_edges=edges.count,
        edge_chunks=edges.chunks,
        features=ug.Input(features.path, f"node feature {params['feature']!r}"), feature_shape=features.shape,
        feature_dtype=features.dtype, feature_blocks=partial(ug.npy_row_blocks, features),
        labels=(ug.Input(meta_file, "node feature 'label'") if label_feature
                else ug.Input(sets["train"][2].path, "the sets' labels, by node")),
        read_labels=partial(_read_labels, meta_file, label_feature, sets, n, params.get("num_classes") or num_classes),
        splits={s: ug.Input(v[1].path, f"{SETS[s]} {v[0]}") for s, v in sets.items()},
        read_split=partial(_read_split, sets), notes=notes, extra_meta=extra)


def _graph_section(meta_file: Path, meta: dict) -> tuple[dict, int]:
    """metadata.yaml's `graph` (a homogeneous one: one untyped node and edge entry) and its number of nodes."""
    if "graph" not in meta:
        extra = (" (it has only a preprocessed graph_topology: give the folder whose metadata.yaml describes "
                 "the graph's edges)") if "graph_topology" in meta else ""
        raise ug.fail(f"{meta_file}: no `graph`{extra}; allowed: graph: {{nodes: [{{num: N}}], edges: "
                      "[{format: numpy, path: ...}]}")
    graph = meta["graph"]
    nodes = _key(meta_file, "graph", graph, "nodes", "nodes: [{num: N}]")
    edges = _key(meta_file, "graph", graph, "edges", "edges: [{format: numpy, path: ...}]")
    if (not isinstance(nodes, list) or not isinstance(edges, list) or len(nodes) != 1 or len(edges) != 1
            or any(isinstance(x, dict) and x.get("type") for x in (*nodes, *edges))):
        raise ug.fail(f"{meta_file}: graph.nodes and graph.edges are not one untyped entry each (a heterogeneous "
                      "graph); allowed: a homogeneous graph, nodes: [{num: N}], edges: [{format, path}]")
    n = _key(meta_file, "graph.nodes[0]", nodes[0], "num", "num: the number of nodes")
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ug.fail(f"{meta_file}: graph.nodes[0].num is {n!r}; allowed: a whole number of nodes >= 1")
    return graph, n


@dataclass
class EdgeFile:
    """graph.edges[0]: a [2, E] .npy file, or a CSV file of src,dst lines (its length known once read)."""
    path: Path
    format: str
    array: NpyArray | None  # None: CSV
    count: int | None
    dtype: np.dtype

    @classmethod
    def of(cls, meta_file: Path, entry: dict) -> "EdgeFile":
        fmt = entry.get("format")
        path = meta_file.parent / str(_key(meta_file, "graph.edges[0]", entry, "path", "a path"))
        if fmt == "numpy":
            array = _numpy_file(meta_file, "graph.edges[0]", entry)
            if array.ndim != 2 or array.shape[0] != 2:
                raise ug.fail(f"{array.path}: the edges have shape {array.shape}; allowed: [2, E] (GraphBolt's "
                              "layout: sources, then destinations)")
            return cls(path, fmt, array, array.shape[1], array.dtype)
        if fmt == "csv":
            if not path.is_file():
                raise ug.fail(f"{path}: no such file (graph.edges[0] in {meta_file.name}); allowed: an existing CSV file")
            return cls(path, fmt, None, None, np.dtype(np.int64))
        raise ug.fail(f"{meta_file}: graph.edges[0] has format {fmt!r}; allowed: numpy or csv")

    def chunks(self):
        if self.array is not None:
            for start in range(0, self.count, ug.EDGE_CHUNK):
                src, dst = (self.array.row_of_column(k, start, start + ug.EDGE_CHUNK) for k in (0, 1))
                yield ug.EdgeChunk(src, dst, start, lambda i, end: f"[{end}, {i}]")
            return
        import pyarrow as pa

        offset = 0
        for table in tables.batches(self.path, ["src", "dst"], {"src": pa.int64(), "dst": pa.int64()},
                                    names=["src", "dst"]):
            src, dst = (table[c].to_numpy() for c in ("src", "dst"))
            yield ug.EdgeChunk(src, dst, offset, lambda i, end: f" line {i + 1}, column {end + 1}")
            offset += table.num_rows


def _node_features(meta_file: Path, meta: dict, name: str) -> tuple[NpyArray, list[dict], list[str]]:
    """The node feature `name`, the node feature `label` (a list of one, or empty), notes on the rest."""
    node_features = [f for f in meta.get("feature_data") or [] if isinstance(f, dict) and f.get("domain") == "node"]
    for f in meta.get("feature_data") or []:
        if isinstance(f, dict) and f.get("type"):
            raise ug.fail(f"{meta_file}: feature_data {f.get('name')!r} has type {f.get('type')!r} (a heterogeneous "
                          "graph); allowed: untyped node features")
    chosen = [f for f in node_features if f.get("name") == name]
    if not chosen:
        names = ", ".join(repr(f.get("name")) for f in node_features) or "none"
        raise ug.fail(f"{meta_file}: no node feature named {name!r} in feature_data (node features: "
                      f"{names}); allowed: a node feature of that name, or `feature` naming one (graphbolt:path=...,"
                      "feature=NAME)")
    features = _numpy_file(meta_file, f"feature_data {name!r}", chosen[0])
    label_feature = [f for f in node_features if f.get("name") == "label"]
    notes = [f"node feature {f.get('name')!r} ignored (the features are {name!r})"
             for f in node_features if f is not chosen[0] and f.get("name") != "label"]
    notes += [f"edge feature {f.get('name')!r} ignored: gnnbench trains on the structure"
              for f in meta.get("feature_data") or [] if isinstance(f, dict) and f.get("domain") == "edge"]
    return features, label_feature, notes


def _task(meta_file: Path, meta: dict, name: str | None) -> tuple[dict, str, list[str]]:
    """The task named `name` (None: the first), its name in messages, and a note when there are several."""
    tasks = meta.get("tasks") or []
    if not tasks:
        raise ug.fail(f"{meta_file}: no `tasks`; allowed: a node classification task with train_set, "
                      "validation_set and test_set")
    task = tasks[0] if name is None else next((t for t in tasks if isinstance(t, dict) and t.get("name") == name), None)
    if task is None:
        raise ug.fail(f"{meta_file}: no task named {name!r} (tasks: "
                      f"{', '.join(repr(t.get('name')) for t in tasks if isinstance(t, dict))})")
    task_name = f"tasks[{tasks.index(task)}]" + (f" ({task.get('name')})" if task.get("name") else "")
    return task, task_name, [f"{len(tasks)} tasks in metadata.yaml: {task_name} used"] if len(tasks) > 1 else []


def _sets(meta_file: Path, task: dict, task_name: str, label_feature: bool) -> dict[str, tuple]:
    """For each split: (the name of its ids, the ids file, the labels file or None: `label_feature` gives them)."""
    sets = {}
    for split, key in SETS.items():
        where = f"{task_name}.{key}"
        entries = _key(meta_file, task_name, task, key, f"{key}: [{{data: [{{name: seeds, ...}}, {{name: labels, ...}}]}}]")
        if not isinstance(entries, list) or len(entries) != 1 or not isinstance(entries[0], dict) or entries[0].get("type"):
            raise ug.fail(f"{meta_file}: {where} is not one untyped set; allowed: one set of node ids (and labels)")
        data = {d.get("name"): d for d in entries[0].get("data") or [] if isinstance(d, dict)}
        seed_name = next((s for s in SEED_NAMES if s in data), None)
        if seed_name is None:
            raise ug.fail(f"{meta_file}: {where} has no node ids (data named {' or '.join(SEED_NAMES)}; it has "
                          f"{', '.join(map(repr, data)) or 'none'}); allowed: seeds (DGL 2.2+) or seed_nodes (DGL 2.1)")
        seeds = _numpy_file(meta_file, f"{where} {seed_name}", data[seed_name])
        if "labels" not in data and not label_feature:
            raise ug.fail(f"{meta_file}: {where} has no labels and there is no node feature 'label'; allowed: "
                          "data named labels in each set, or a node feature named label")
        labels = _numpy_file(meta_file, f"{where} labels", data["labels"]) if "labels" in data else None
        sets[split] = (seed_name, seeds, labels)
    return sets


def _read_split(sets: dict[str, tuple], split: str) -> np.ndarray:
    _, seeds, _ = sets[split]
    ids = seeds.read_all()
    return ids if ids.ndim == 1 or ids.dtype == np.bool_ else ids.reshape(-1) if ids.ndim == 2 and 1 in ids.shape else ids


def _read_labels(meta_file: Path, label_feature: list[dict], sets: dict[str, tuple], n: int,
                 top: int | None) -> np.ndarray:
    """The node feature `label`, or the sets' labels by node (-1: in no set); `top` the number of classes, if given."""
    if label_feature:
        return _numpy_file(meta_file, "feature_data 'label'", label_feature[0]).read_all()
    out = np.full(n, -1, dtype=np.int64)
    for split, (seed_name, seeds, labels_file) in sets.items():
        ids = _read_split(sets, split)
        values, i, problem = graph_checks.labels_of(labels_file.read_all(), ids.shape[0], f"the set's {seed_name}",
                                                    top, "num_classes in metadata.yaml", whole_graph=False)
        if problem:
            where = ug.Input(labels_file.path, f"{SETS[split]} labels")
            raise ug.fail(f"{where.at('' if i is None else f'[{i}]')} {problem}")
        ok = (ids >= 0) & (ids < n)
        out[ids[ok]] = values[ok]  # ids out of range are named by the split's own check
    return out


canonical_params, fingerprint, expected_stats, materialise = ug.source_hooks("graphbolt", source_files, open_graph)
