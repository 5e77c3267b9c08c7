"""The hub form of a typed (heterogeneous) graph (shape "typed", bench/tasks.py), sharing hub.py's
folder rules. Per node type `features-<type>.npy` (absent: featureless, a learnable embedding in the
model); the target's labels.npy and splits; per relation `edge_index-<src>__<name>__<dst>.npy` and
`csc_indptr-...`; GraphBolt's fused CSC over every relation, ids grouped by node type and edge types
numbered in name order, as DGL 2.1's OnDiskDataset does. A source gives each relation once; the
Writer adds its reverse `rev_<name>`. numpy only.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from bench.datasets import hub, hub_stream
from bench.datasets.graph_checks import NAME_SEPARATOR
from bench.datasets.hub import DatasetError
from bench.datasets.user_graph import Phases

SHAPE = "typed"
TYPED_FORMAT = 1
SPLITS = ("train_idx", "val_idx", "test_idx")
REVERSE_PREFIX = "rev_"


def relation_key(relation: tuple[str, str, str]) -> str:
    """A relation (src, name, dst) as GraphBolt names edge types: `src:name:dst`."""
    return ":".join(relation)


def relation_of(key: str) -> tuple[str, str, str]:
    src, name, dst = key.split(":")
    return src, name, dst


FEATURE_BLOCK_BYTES = 32 << 20  # features written this much at a time


def row_blocks(x: np.ndarray):
    """A [N, F] array's rows as float32 blocks of about FEATURE_BLOCK_BYTES."""
    step = max(1, FEATURE_BLOCK_BYTES // max(1, 4 * int(np.prod(x.shape[1:], dtype=np.int64))))
    for start in range(0, x.shape[0], step):
        yield np.asarray(x[start:start + step], dtype=np.float32)


class Writer:
    """A typed dataset written a piece at a time into a folder (hub.atomic_dir's temporary one),
    never the whole graph at once (`writing` opens one; `write` is it over whole arrays):

        w.features(type, shape, blocks)   float32 row blocks in order (a type without: no call)
        w.relation(relation, src, dst)    a relation's edges and its reverse
        w.finish(target, labels, splits)  GraphBolt's fused arrays from the relations' files, meta.json
    """

    def __init__(self, spec: dict, folder: Path, counts: dict[str, int]):
        self.spec, self.folder, self.counts = spec, Path(folder), {t: int(n) for t, n in counts.items()}
        self.widths: dict[str, int] = {}
        self.num_edges: dict[tuple, int] = {}
        self.reverse_of: dict[tuple, tuple] = {}
        self.phases = Phases()  # each step's seconds and high-water mark: meta.json's convert_phases

    def features(self, node_type: str, shape: tuple, blocks) -> None:
        if node_type not in self.counts or len(shape) != 2 or shape[0] != self.counts[node_type]:
            raise DatasetError(f"dataset {self.spec['name']!r}: features of {node_type!r} have shape {tuple(shape)}, "
                               f"expected [{self.counts.get(node_type, 'N')}, F]")
        with hub_stream.ArrayFile(self.folder / f"features-{node_type}.npy", np.float32, shape) as out:
            for block in blocks:
                out.append(block)
        self.widths[node_type] = int(shape[1])
        self.phases.done(f"features {node_type}")

    def relation(self, relation: tuple[str, str, str], src: np.ndarray, dst: np.ndarray) -> None:
        """A relation's edges (any order) and its reverse `rev_<name>`."""
        src_type, name, dst_type = relation
        counts = self.counts
        if src_type not in counts or dst_type not in counts or np.shape(src) != np.shape(dst) or np.size(src) and (
                min(src.min(), dst.min()) < 0 or src.max() >= counts[src_type] or dst.max() >= counts[dst_type]):
            raise DatasetError(f"dataset {self.spec['name']!r}: relation {relation_key(relation)} names a node type "
                               "that is not there, or node ids outside its types' ranges")
        if relation in self.num_edges:
            forward = self.reverse_of.get(relation)
            raise DatasetError(f"relation {relation_key(relation)} is given and would also be the reverse of "
                               f"{relation_key(forward)}" if forward else f"relation {relation_key(relation)} is given twice")
        self._save(relation, src, dst)
        rev = (dst_type, REVERSE_PREFIX + name, src_type)
        if rev in self.num_edges:
            raise DatasetError(f"relation {relation_key(rev)} is given and would also be the reverse of "
                               f"{relation_key(relation)}")
        self._save(rev, dst, src)
        self.reverse_of[rev] = relation
        self.phases.done(f"relation {relation_key(relation)}")

    def _save(self, relation: tuple, src: np.ndarray, dst: np.ndarray) -> None:
        edge_index, indptr = hub.csc_from_coo(src, dst, self.counts[relation[0]], self.counts[relation[2]])
        np.save(self.folder / f"edge_index-{NAME_SEPARATOR.join(relation)}.npy", edge_index)
        np.save(self.folder / f"csc_indptr-{NAME_SEPARATOR.join(relation)}.npy", indptr)
        self.num_edges[relation] = int(edge_index.shape[1])

    def finish(self, target: str, labels: np.ndarray, splits: dict[str, np.ndarray], extra_meta: dict | None = None) -> None:
        counts, problems = self.counts, []
        if target not in counts:
            problems.append(f"target type {target!r} is not a node type ({', '.join(counts)})")
        elif labels.shape != (counts[target],):
            problems.append(f"labels have shape {labels.shape}, expected ({counts[target]},) for {target!r}")
        for split, idx in splits.items():
            idx = np.asarray(idx)
            if idx.size and target in counts and (idx.min() < 0 or idx.max() >= counts[target]):
                problems.append(f"{split} refers to {target!r} nodes outside 0..{counts[target] - 1}")
        if problems:
            raise DatasetError(f"dataset {self.spec['name']!r}: " + "; ".join(problems))
        np.save(self.folder / "labels.npy", np.asarray(labels, dtype=np.int64))
        for split in SPLITS:
            np.save(self.folder / f"{split}.npy", np.asarray(splits[split], dtype=np.int64))
        self.phases.done("labels and splits (and the caller's baseline)")
        node_type_to_id, edge_type_to_id = self._write_graphbolt()
        self.phases.done("graphbolt")
        widths = {t: self.widths.get(t, 0) for t in self.counts}
        meta = {
            "format": hub.FORMAT_VERSION, "shape": SHAPE, "typed_format": TYPED_FORMAT, "name": self.spec["name"],
            "source": self.spec["source"], "params": self.spec.get("params", {}), "target": target,
            "node_types": {t: {"count": self.counts[t], "feature_dim": widths[t]} for t in sorted(self.counts)},
            "relations": {relation_key(r): {"num_edges": n,
                                            "reverse_of": relation_key(self.reverse_of[r]) if r in self.reverse_of else None}
                          for r, n in sorted(self.num_edges.items())},
            "graphbolt": {"node_type_to_id": node_type_to_id, "edge_type_to_id": edge_type_to_id},
            "num_nodes": int(sum(self.counts.values())), "num_edges": int(sum(self.num_edges.values())),
            "feature_dim": widths[target], "num_classes": int(labels.max()) + 1 if labels.size else 0,
            **{f"num_{s.removesuffix('_idx')}": int(np.asarray(splits[s]).size) for s in SPLITS},
            **(extra_meta or {}),
        }
        hub.record_checksums(self.folder)
        self.phases.done("checksums")
        meta["convert_phases"] = self.phases.seen
        (self.folder / "meta.json").write_text(json.dumps(meta, indent=2))

    def _write_graphbolt(self) -> tuple[dict, dict]:
        """GraphBolt's fused arrays from the relations' files, one destination type at a time: a
        stable sort by destination of its relations in type-id order groups a node's edges by type."""
        node_types = sorted(self.counts)
        node_type_to_id = {t: i for i, t in enumerate(node_types)}
        offset = np.zeros(len(node_types) + 1, dtype=np.int64)
        np.cumsum([self.counts[t] for t in node_types], out=offset[1:])
        keys = sorted(relation_key(r) for r in self.num_edges)
        edge_type_to_id = {k: i for i, k in enumerate(keys)}
        if len(keys) > 256:
            raise DatasetError(f"{len(keys)} edge types: GraphBolt's uint8 type_per_edge holds 256")
        total_nodes, total_edges = int(offset[-1]), int(sum(self.num_edges.values()))
        index_dtype = hub.graphbolt_dtype(total_nodes)
        indptr = np.zeros(total_nodes + 1, dtype=np.int64)
        with hub_stream.ArrayFile(self.folder / "graphbolt_indices.npy", index_dtype, (total_edges,)) as indices, \
                hub_stream.ArrayFile(self.folder / "graphbolt_type_per_edge.npy", np.uint8, (total_edges,)) as types:
            for dst_type in node_types:
                into = [k for k in keys if relation_of(k)[2] == dst_type]
                if not into:
                    continue
                sources, destinations, type_ids = [], [], []
                for key in into:
                    edge_index = np.load(self.folder / f"edge_index-{key.replace(':', NAME_SEPARATOR)}.npy")
                    sources.append((edge_index[0] + offset[node_type_to_id[relation_of(key)[0]]]).astype(index_dtype))
                    destinations.append(edge_index[1])
                    type_ids.append(np.full(edge_index.shape[1], edge_type_to_id[key], dtype=np.uint8))
                    del edge_index
                local = np.concatenate(destinations)
                del destinations
                order = np.argsort(local, kind="stable")
                indices.append(np.concatenate(sources)[order])
                types.append(np.concatenate(type_ids)[order])
                del sources, type_ids, order
                start = int(offset[node_type_to_id[dst_type]])
                indptr[start + 1:start + 1 + self.counts[dst_type]] = np.bincount(local, minlength=self.counts[dst_type])
                del local
        np.cumsum(indptr, out=indptr)
        np.save(self.folder / "graphbolt_node_type_offset.npy", offset.astype(index_dtype))
        np.save(self.folder / "graphbolt_indptr.npy", indptr.astype(hub.graphbolt_dtype(total_edges)))
        return node_type_to_id, edge_type_to_id


@contextmanager
def writing(spec: dict, cache: Path, counts: dict[str, int]):
    """A Writer into the dataset's folder (hub.atomic_dir), None where another process finished it."""
    with hub.atomic_dir(hub.dataset_dir(spec, cache)) as tmp:
        yield None if tmp is None else Writer(spec, tmp, counts)


def write(spec: dict, cache: Path, counts: dict[str, int], features: dict[str, np.ndarray | None], target: str,
          labels: np.ndarray, splits: dict[str, np.ndarray], relations: dict[tuple, tuple[np.ndarray, np.ndarray]],
          extra_meta: dict | None = None) -> Path:
    """Write a typed dataset from whole arrays: `relations` (src, name, dst) -> (source ids,
    destination ids), `splits` over the target type."""
    with writing(spec, cache, counts) as w:
        if w is not None:
            for t, x in features.items():
                if x is not None:
                    w.features(t, x.shape, row_blocks(x))
            for r, (s, d) in relations.items():
                w.relation(r, s, d)
            w.finish(target, labels, splits, extra_meta)
    return hub.dataset_dir(spec, cache)


@dataclass
class TypedHubDataset(hub.Materialised):
    """A typed dataset as the stacks read it (arrays memory-mapped unless asked otherwise)."""
    counts: dict[str, int] = field(default_factory=dict)
    features: dict[str, np.ndarray | None] = field(default_factory=dict)
    edge_index: dict[tuple, np.ndarray] = field(default_factory=dict)
    csc_indptr: dict[tuple, np.ndarray] = field(default_factory=dict)
    labels: np.ndarray | None = None
    train_idx: np.ndarray | None = None
    val_idx: np.ndarray | None = None
    test_idx: np.ndarray | None = None
    graphbolt: dict[str, np.ndarray] = field(default_factory=dict)

    OPTIONAL_CARD = (*hub.Materialised.OPTIONAL_CARD, "target", "node_types", "relations")
    target = property(lambda self: self.meta["target"])
    relations = property(lambda self: [relation_of(k) for k in self.meta["relations"]])

    def feature_file(self, node_type: str) -> Path:
        return self.path / f"features-{node_type}.npy"


def load(path: Path, mmap: bool = True, features_mmap: bool | None = None, check: bool = True) -> TypedHubDataset:
    """A typed dataset folder, as hub.load reads a plain one."""
    path = Path(path)
    meta, read_array = hub.opened(path, check, lambda meta: (meta.get("shape"), meta.get("typed_format")) != (
        SHAPE, TYPED_FORMAT) and f"is not a typed dataset of format {TYPED_FORMAT} (shape {meta.get('shape')!r}, "
        f"format {meta.get('typed_format')})")
    read = lambda name, mapped=mmap: read_array(name, mapped)  # noqa: E731 - the graph's arrays mapped as `mmap` says
    features_mapped = mmap if features_mmap is None else features_mmap
    counts = {t: int(info["count"]) for t, info in meta["node_types"].items()}
    features = {t: read(f"features-{t}", features_mapped) if info["feature_dim"] else None
                for t, info in meta["node_types"].items()}
    relations = [relation_of(k) for k in meta["relations"]]
    return TypedHubDataset(
        path=path, meta=meta, counts=counts, features=features,
        edge_index={r: read(f"edge_index-{NAME_SEPARATOR.join(r)}") for r in relations},
        csc_indptr={r: read(f"csc_indptr-{NAME_SEPARATOR.join(r)}") for r in relations},
        labels=read("labels"), **{s: read(s) for s in SPLITS},
        graphbolt={n: read(f"graphbolt_{n}") for n in ("node_type_offset", "indptr", "indices", "type_per_edge")})


def load_for_source(path, mmap: bool = False, check: bool = True) -> TypedHubDataset:
    """A typed source's `load` (hub.load_dataset): the features mapped only with `mmap`."""
    return load(path, mmap=True, features_mmap=mmap, check=check)


def info_lines(meta: dict) -> list[str]:
    """What `gnnbench datasets info` says of a typed dataset's types and relations."""
    lines = [f"  target type {meta['target']}; node types:"]
    for t, info in meta["node_types"].items():
        width = f"features {info['feature_dim']} wide" if info["feature_dim"] else "no features (learnable embedding)"
        lines.append(f"    {t:<12}{info['count']:>13,} nodes, {width}")
    lines.append("  relations (src:name:dst):")
    for key, info in meta["relations"].items():
        rev = f" (reverse of {info['reverse_of']})" if info.get("reverse_of") else ""
        lines.append(f"    {key:<34}{info['num_edges']:>13,} edges{rev}")
    return lines
