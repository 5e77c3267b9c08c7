"""Molecules: a deterministic generator of many small molecule- or crystal-like graphs for graph-level
tasks, e.g. `molecules:count=20000,max_nodes=30`. A graph is a backbone chain whose atoms branch off
an earlier one with a class-dependent probability, plus a class-dependent number of 5- or 6-rings;
node features are a weak class centroid plus noise (a mean-pooled GNN learns the task, one node
says little). Its own form (meta.json {"kind": "graphs"}) holds the graphs concatenated: x.npy,
edge_index.npy (ids local to each graph), node_ptr.npy and edge_ptr.npy ([G + 1] offsets), y.npy,
and train/val/test graph ids. Generated in fixed chunks of graphs (the data never depends on the
machine).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench import datasets
from bench.datasets import hub

SHAPE = "collection"  # bench/tasks.py: a collection of small graphs, its own `load`
FORMAT_VERSION = 1
KIND = "graphs"
DEFAULTS = {"count": 10000, "min_nodes": 10, "max_nodes": 40, "feature_dim": 16, "num_classes": 4,
            "seed": 0}
# Types and bounds of the parameters (suite validation builds its schema from them).
PARAMS = {"count": (int, {"ge": 1, "le": 50_000_000}), "min_nodes": (int, {"ge": 2, "le": 10_000}),
          "max_nodes": (int, {"ge": 2, "le": 10_000}), "feature_dim": (int, {"ge": 1}),
          "num_classes": (int, {"ge": 2}), "seed": (int, {})}
FEATURE_SIGNAL = 0.3  # centroid weight against unit noise, per node
TRAIN_FRAC, VAL_FRAC = 0.8, 0.1
CHUNK_GRAPHS = 65536  # a constant, so the data never depends on how it was chunked
RING_SIZES = (5, 6)
ARRAYS = ("x", "edge_index", "node_ptr", "edge_ptr", "y", "train_idx", "val_idx", "test_idx")
SIZES_NOTE = ("molecules sizes follow its parameters: molecules:count=G,min_nodes=A,max_nodes=B,feature_dim=D,"
              "num_classes=C,seed=N (G small graphs; split over graphs)")
ESTIMATE_ORIGIN = "before generation: exact counts, edges an upper bound"


def check_params(params: dict) -> None:
    if params["max_nodes"] < params["min_nodes"]:
        raise ValueError(f"molecules: max_nodes {params['max_nodes']} is below min_nodes {params['min_nodes']}")


def canonical_params(params: dict) -> dict:
    p = {k: int(v) for k, v in datasets.declared_params("molecules", params).items()}
    check_params(p)  # the bounds of each: params.py's schema (suites, the command line)
    return p


def sizes_and_labels(p: dict) -> tuple[np.ndarray, np.ndarray]:
    """Every graph's node count and class, from their own stream (cheap: expected_stats uses it)."""
    rng = np.random.default_rng([p["seed"], 0])
    sizes = rng.integers(p["min_nodes"], p["max_nodes"] + 1, size=p["count"]).astype(np.int64)
    labels = rng.integers(0, p["num_classes"], size=p["count"]).astype(np.int64)
    return sizes, labels


def _chunk(sizes: np.ndarray, labels: np.ndarray, centroids: np.ndarray, p: dict,
           rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Graphs of one chunk: (x, local edge_index sorted by graph then source, edges per graph)."""
    g = sizes.size
    starts = np.zeros(g, dtype=np.int64)
    np.cumsum(sizes[:-1], out=starts[1:])
    total = int(sizes.sum())
    graph_of = np.repeat(np.arange(g), sizes)
    local = np.arange(total) - starts[graph_of]
    share = labels / max(p["num_classes"] - 1, 1)  # 0..1 across classes

    # chains + branches: atom i > 0 bonds to i-1, or (branching) to a random earlier atom
    child = np.flatnonzero(local > 0)
    branch = rng.random(child.size) < (0.05 + 0.4 * share[graph_of[child]])
    parent_local = np.where(branch, np.floor(rng.random(child.size) * local[child]).astype(np.int64),
                            local[child] - 1)
    tree = (child, starts[graph_of[child]] + parent_local)

    # rings: closures between atom a and a - size + 1 (a cycle through the backbone)
    rings_per_graph = (labels % 3) + rng.integers(0, 2, size=g)
    ring_graph = np.repeat(np.arange(g), rings_per_graph)
    ring_size = np.asarray(RING_SIZES)[rng.integers(0, len(RING_SIZES), size=ring_graph.size)]
    fits = sizes[ring_graph] >= ring_size
    ring_graph, ring_size = ring_graph[fits], ring_size[fits]
    span = sizes[ring_graph] - ring_size + 1
    closer = ring_size - 1 + np.floor(rng.random(ring_graph.size) * span).astype(np.int64)
    rings = (starts[ring_graph] + closer, starts[ring_graph] + closer - ring_size + 1)

    a = np.concatenate([tree[0], rings[0]])
    b = np.concatenate([tree[1], rings[1]])
    # both directions, duplicates dropped; sorting the key keeps each graph's edges together
    key = np.unique(np.concatenate([a * total + b, b * total + a]))
    src, dst = np.divmod(key, total)
    edge_graph = graph_of[src]
    edge_index = np.stack([src - starts[edge_graph], dst - starts[edge_graph]])
    x = (FEATURE_SIGNAL * centroids[labels[graph_of]]
         + rng.standard_normal((total, p["feature_dim"]))).astype(np.float32)
    return x, edge_index, np.bincount(edge_graph, minlength=g)


def _generate(p: dict, x_out):
    """Yields (array name, array) but x, which goes chunk by chunk into `x_out` (a memmap)."""
    sizes, labels = sizes_and_labels(p)
    centroids = np.random.default_rng([p["seed"], 1]).standard_normal((p["num_classes"], p["feature_dim"]))
    node_ptr = np.zeros(p["count"] + 1, dtype=np.int64)
    np.cumsum(sizes, out=node_ptr[1:])
    edges, edge_counts = [], []
    for i, start in enumerate(range(0, p["count"], CHUNK_GRAPHS)):
        end = min(start + CHUNK_GRAPHS, p["count"])
        x, edge_index, counts = _chunk(sizes[start:end], labels[start:end], centroids, p,
                                       np.random.default_rng([p["seed"], 2, i]))
        x_out[node_ptr[start]:node_ptr[end]] = x
        edges.append(edge_index)
        edge_counts.append(counts)
    edge_ptr = np.zeros(p["count"] + 1, dtype=np.int64)
    np.cumsum(np.concatenate(edge_counts), out=edge_ptr[1:])
    order = np.random.default_rng([p["seed"], 3]).permutation(p["count"]).astype(np.int64)
    n_train, n_val = int(TRAIN_FRAC * p["count"]), int(VAL_FRAC * p["count"])
    yield from {"edge_index": np.concatenate(edges, axis=1).astype(np.int64), "node_ptr": node_ptr,
                "edge_ptr": edge_ptr, "y": labels, "train_idx": np.sort(order[:n_train]),
                "val_idx": np.sort(order[n_train:n_train + n_val]),
                "test_idx": np.sort(order[n_train + n_val:])}.items()


def expected_stats(params: dict) -> dict:
    """Exact counts of graphs, nodes and splits; edges an upper bound."""
    p = canonical_params(params)
    sizes, labels = sizes_and_labels(p)
    n_train, n_val = int(TRAIN_FRAC * p["count"]), int(VAL_FRAC * p["count"])
    return {"num_graphs": p["count"], "num_nodes": int(sizes.sum()),
            "num_edges": int(2 * (sizes.sum() - p["count"] + 3 * p["count"])),
            "feature_dim": p["feature_dim"], "num_classes": p["num_classes"], "num_train": n_train,
            "num_val": n_val, "num_test": p["count"] - n_train - n_val}


def materialise(spec: dict, cache: Path, data_root: Path | None = None) -> Path:
    p = canonical_params(spec.get("params", {}))
    target = hub.dataset_dir({**spec, "params": p}, cache)
    with hub.atomic_dir(target) as tmp:
        if tmp is None:
            return target  # another process finished it first
        sizes, _ = sizes_and_labels(p)
        x_out = np.lib.format.open_memmap(tmp / "x.npy", mode="w+", dtype=np.float32,
                                          shape=(int(sizes.sum()), p["feature_dim"]))
        for name, array in _generate(p, x_out):
            np.save(tmp / f"{name}.npy", array)
        x_out.flush()
        del x_out
        edges = np.load(tmp / "edge_index.npy", mmap_mode="r").shape[1]  # expected_stats' is a bound
        meta = {"kind": KIND, "format": FORMAT_VERSION, "name": spec["name"], "source": spec["source"],
                "params": p, **expected_stats(p), "num_edges": int(edges)}
        hub.record_checksums(tmp)
        (tmp / "meta.json").write_text(json.dumps(meta, indent=2))  # written last
    return target


@dataclass
class GraphCollection(hub.Materialised):
    """A materialised graph-level dataset (num_nodes and num_edges in its card: totals)."""
    x: np.ndarray
    edge_index: np.ndarray
    node_ptr: np.ndarray
    edge_ptr: np.ndarray
    y: np.ndarray
    train_idx: np.ndarray
    val_idx: np.ndarray
    test_idx: np.ndarray

    CARD = ("name", "source", "num_graphs", *hub.STAT_FIELDS)
    num_graphs = property(lambda self: int(self.meta["num_graphs"]))

    def graph(self, g: int) -> tuple[np.ndarray, np.ndarray, int]:
        """Graph g as (x [n, F], edge_index [2, e] local ids, label): views, no copy."""
        return (self.x[self.node_ptr[g]:self.node_ptr[g + 1]],
                self.edge_index[:, self.edge_ptr[g]:self.edge_ptr[g + 1]], int(self.y[g]))


def load(path, mmap: bool = False, check: bool = True) -> GraphCollection:
    """A materialised collection, as hub.load reads a plain dataset."""
    path = Path(path)
    meta, read = hub.opened(path, check, lambda meta: (meta.get("kind"), meta.get("format")) != (KIND, FORMAT_VERSION) and
                            f"holds kind {meta.get('kind')!r} format {meta.get('format')}, "
                            f"not {KIND!r} format {FORMAT_VERSION}")
    return GraphCollection(path=path, meta=meta, **{name: read(name, mmap) for name in ARRAYS})


@dataclass
class GraphColumns:
    """A batch of graphs as columns, as every graph store delivers it."""
    x: np.ndarray            # float32 [total nodes, F]
    edge_index: np.ndarray   # int64 [2, total edges], ids local to each graph
    node_counts: np.ndarray  # int64 [graphs]
    edge_counts: np.ndarray  # int64 [graphs]
    y: np.ndarray            # int64 [graphs]

    @classmethod
    def of(cls, graphs: list[tuple[np.ndarray, np.ndarray, int]]) -> "GraphColumns":
        """From per-graph (x, local edge_index, label)."""
        return cls(np.concatenate([x for x, _, _ in graphs]),
                   np.concatenate([e for _, e, _ in graphs], axis=1).astype(np.int64, copy=False),
                   np.fromiter((len(x) for x, _, _ in graphs), dtype=np.int64, count=len(graphs)),
                   np.fromiter((e.shape[1] for _, e, _ in graphs), dtype=np.int64, count=len(graphs)),
                   np.fromiter((y for _, _, y in graphs), dtype=np.int64, count=len(graphs)))


def ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The concatenation of arange(start, start + count) for each pair, without a Python loop."""
    counts = np.asarray(counts, dtype=np.int64)
    ends = np.cumsum(counts)
    return np.arange(ends[-1] if len(ends) else 0, dtype=np.int64) + np.repeat(np.asarray(starts, dtype=np.int64) - (ends - counts), counts)


def take(x, edge_index, node_ptr, edge_ptr, y, ids) -> GraphColumns:
    """Graphs `ids` of concatenated in-memory arrays (PyG's collated layout) as columns."""
    ids = np.asarray(ids, dtype=np.int64)
    node_counts = node_ptr[ids + 1] - node_ptr[ids]
    edge_counts = edge_ptr[ids + 1] - edge_ptr[ids]
    return GraphColumns(x[ranges(node_ptr[ids], node_counts)], edge_index[:, ranges(edge_ptr[ids], edge_counts)],
                        node_counts, edge_counts, y[ids].astype(np.int64))


def collate(batch: GraphColumns) -> dict[str, np.ndarray]:
    """Columns laid out as PyG's `Batch.from_data_list` lays them out (x, edge_index, y, batch, ptr)."""
    ptr = np.zeros(len(batch.node_counts) + 1, dtype=np.int64)
    np.cumsum(batch.node_counts, out=ptr[1:])
    edge_index = batch.edge_index + np.repeat(ptr[:-1], batch.edge_counts)
    return {"x": np.ascontiguousarray(batch.x, dtype=np.float32), "edge_index": edge_index, "y": batch.y,
            "batch": np.repeat(np.arange(len(batch.node_counts), dtype=np.int64), batch.node_counts), "ptr": ptr}
