"""Your own graph as an edge list and a node table, CSV or Parquet (source `edge-list`; the layout:
docs/own-graph.md): edges.* with columns src, dst; nodes.* with id, label, split and the features
(every other column, or one list column). Node ids are integers or strings in any order: hub node
i is the node with the i-th smallest id (node_ids.npy keeps them, unless they are 0..N-1). Both
tables are read in record batches, never whole. Checks and conversion: user_graph.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np

from bench.datasets import tables
from bench.datasets import user_graph as ug

USER_FILES = True
PARAMS, DEFAULTS = ug.params_of()
EDGE_FILES = ("edges.parquet", "edges.csv", "edges.csv.gz")
NODE_FILES = ("nodes.parquet", "nodes.csv", "nodes.csv.gz")
DENSE_SPAN = 8  # integer ids spanning less than 8 N are looked up in a table (sparse ones searched)
SPLIT_WORDS = {"train": "train", "val": "val", "valid": "val", "validation": "val", "test": "test"}
SIZES_NOTE = ("edge-list:PATH    your own graph: edges.csv|parquet (src, dst) and nodes.csv|parquet (id, label, "
              "split, features); docs/own-graph.md")


def _pick(folder: Path, names: tuple[str, ...], what: str) -> Path:
    found = [folder / n for n in names if (folder / n).is_file()]
    if not found:
        raise ug.fail(f"{folder}: no {what} ({' or '.join(names)}); allowed: a folder with edges.csv or "
                      "edges.parquet (src, dst) and nodes.csv or nodes.parquet (id, label, split, features)")
    if len(found) > 1:
        raise ug.fail(f"{folder}: both {found[0].name} and {found[1].name} are there; allowed: one {what}")
    return found[0]


def source_files(params: dict) -> list[Path]:
    folder = Path(params["path"])
    return [folder / n for n in EDGE_FILES + NODE_FILES if (folder / n).is_file()] or [folder]


def _row(path: Path, row: int) -> str:
    """A table row as the user finds it: CSV line numbers count the header."""
    return f"row {row}" + ("" if tables.is_parquet(path) else f" (line {row + 2})")


def open_graph(label: str, params: dict) -> ug.UserGraph:
    folder = Path(params["path"])
    edges_path, nodes_path, node_schema, edge_schema = _find_tables(folder)
    ignored = [c for c in edge_schema.names if c not in ("src", "dst")]
    notes = [f"{edges_path.name}: column(s) {', '.join(ignored)} ignored: gnnbench trains on the graph's structure, "
             "not its edge attributes"] if ignored else []
    ids, labels, split = _read_node_columns(nodes_path, node_schema)
    nodes = NodeIds.of(nodes_path, ids)
    labels_by_node = _labels_by_node(nodes_path, labels, nodes.order)
    masks = _split_masks(nodes_path, split, nodes.order)
    features = FeatureColumns.of(nodes_path, node_schema)
    extra_arrays, extra_meta = _node_ids_record(nodes_path, nodes)
    return ug.UserGraph(
        label=label, num_nodes=nodes.n, nodes_from=f"the rows of {nodes_path.name}",
        edges=ug.Input(edges_path, "src, dst"), edge_dtype=np.dtype(np.int64),
        num_input_edges=tables.num_rows(edges_path), edge_chunks=partial(_edge_chunks, edges_path, nodes_path, nodes),
        features=ug.Input(nodes_path, features.name), feature_shape=(nodes.n, features.width),
        feature_dtype=np.dtype(features.dtype), feature_blocks=partial(features.blocks, nodes),
        labels=ug.Input(nodes_path, "column label"), read_labels=lambda: labels_by_node,
        splits={s: ug.Input(nodes_path, f"column split ({s})") for s in ug.SPLITS},
        read_split=lambda s: masks[s], notes=notes, extra_arrays=extra_arrays, extra_meta=extra_meta,
        node_position=lambda i: f", {_row(nodes_path, int(nodes.order[i]))}")


def _find_tables(folder: Path) -> tuple:
    """The edge list and the node table in the folder, and their schemas (with the columns needed)."""
    if not folder.is_dir():
        raise ug.fail(f"{folder}: no such folder; allowed: a folder with edges.csv or edges.parquet and "
                      "nodes.csv or nodes.parquet")
    edges_path, nodes_path = _pick(folder, EDGE_FILES, "edge list"), _pick(folder, NODE_FILES, "node table")
    node_schema, edge_schema = tables.schema(nodes_path), tables.schema(edges_path)
    for path, schema, needed in ((nodes_path, node_schema, ("id", "label", "split")), (edges_path, edge_schema, ("src", "dst"))):
        if missing := [c for c in needed if c not in schema.names]:
            raise ug.fail(f"{path}: no column {', '.join(missing)} (it has {', '.join(schema.names) or 'none'}); "
                          f"allowed: columns {', '.join(needed)}" + (" and the features" if "id" in needed else ""))
    return edges_path, nodes_path, node_schema, edge_schema


def _read_node_columns(nodes_path: Path, node_schema) -> tuple:
    """The node table's ids, labels and splits (N values each), in its row order."""
    import pyarrow as pa

    id_type = node_schema.field("id").type
    if pa.types.is_integer(id_type):
        id_type = pa.int64()
    elif pa.types.is_string(id_type) or pa.types.is_large_string(id_type):
        id_type = pa.string()
    else:
        raise ug.fail(f"{nodes_path}: column id has type {id_type}; allowed: integers or strings")
    label_type = node_schema.field("label").type
    read = list(tables.batches(nodes_path, ["id", "label", "split"],
                               {"id": id_type, "split": pa.string(),
                                **({"label": label_type} if not tables.is_parquet(nodes_path) else {})}))
    ids, labels, split = ([table[c] for table in read] for c in ("id", "label", "split"))
    return pa.chunked_array(ids, type=id_type).combine_chunks(), labels, split


@dataclass
class NodeIds:
    """The node ids, sorted (hub node i has the i-th smallest), and how an edge end's id finds its node."""
    numeric: bool
    n: int
    sorted_ids: object  # a pyarrow array
    ids_np: np.ndarray  # sorted
    order: np.ndarray  # the row of hub node i
    node_of_row: np.ndarray
    identity: bool  # ids 0..N-1: the id is the node
    in_order: bool  # the rows are in id order
    id_table: np.ndarray | None
    low: int

    @classmethod
    def of(cls, nodes_path: Path, ids) -> "NodeIds":
        import pyarrow as pa
        import pyarrow.compute as pc

        numeric = pa.types.is_integer(ids.type)
        n = len(ids)
        if n == 0:
            raise ug.fail(f"{nodes_path}: the node table has no rows; allowed: one row per node")
        if ids.null_count:
            row = int(np.flatnonzero(ids.is_null().to_numpy(zero_copy_only=False))[0])
            raise ug.fail(f"{nodes_path}: {_row(nodes_path, row)}, column id is empty; allowed: an id on every row")
        order = pc.sort_indices(ids).to_numpy()
        sorted_ids = ids.take(pa.array(order))
        ids_np = sorted_ids.to_numpy(zero_copy_only=False)
        same = np.flatnonzero(ids_np[1:] == ids_np[:-1])
        if same.size:
            a, b = sorted((int(order[same[0]]), int(order[same[0] + 1])))
            raise ug.fail(f"{nodes_path}: column id holds {ids_np[same[0]]!r} twice ({_row(nodes_path, a)} and "
                          f"{_row(nodes_path, b)}); allowed: each id once")
        node_of_row = np.empty(n, dtype=np.int64)
        node_of_row[order] = np.arange(n, dtype=np.int64)
        identity = numeric and ids_np[0] == 0 and ids_np[-1] == n - 1
        id_table, low = None, 0
        if numeric and not identity and int(ids_np[-1]) - int(ids_np[0]) < DENSE_SPAN * n:
            low = int(ids_np[0])
            id_table = np.full(int(ids_np[-1]) - low + 1, -1, dtype=np.int64)
            id_table[ids_np - low] = np.arange(n, dtype=np.int64)
        return cls(numeric, n, sorted_ids, ids_np, order, node_of_row, identity,
                   bool(np.all(order == np.arange(n))), id_table, low)

    def nodes_of(self, values) -> tuple[np.ndarray, np.ndarray]:
        """The nodes of a column of ids, and where an id is empty or not a node's."""
        if not self.numeric:
            import pyarrow.compute as pc

            found = pc.index_in(values, value_set=self.sorted_ids)
            missing = found.is_null().to_numpy(zero_copy_only=False)
            return pc.fill_null(found, 0).to_numpy(zero_copy_only=False).astype(np.int64), missing
        raw = values.to_numpy(zero_copy_only=False)
        missing = np.zeros(len(values), dtype=bool)
        if values.null_count:
            missing[np.flatnonzero(values.is_null().to_numpy(zero_copy_only=False))] = True
            raw = np.where(missing, 0, raw).astype(np.int64)
        if self.identity:
            missing |= (raw < 0) | (raw >= self.n)
            node = np.where(missing, 0, raw)
        elif self.id_table is not None:
            inside = (raw >= self.low) & (raw < self.low + self.id_table.size)
            node = self.id_table[np.where(inside, raw - self.low, 0)]
            missing |= ~inside | (node < 0)
        else:
            node = np.minimum(np.searchsorted(self.ids_np, raw), self.n - 1)
            missing |= self.ids_np[node] != raw
        return node, missing


def _labels_by_node(nodes_path: Path, labels: list, order: np.ndarray) -> np.ndarray:
    """Column label, by hub node (-1: none; `order`: the row of each hub node)."""
    import pyarrow as pa

    label_col = pa.chunked_array(labels).combine_chunks()
    if not (pa.types.is_integer(label_col.type) or pa.types.is_floating(label_col.type) or pa.types.is_null(label_col.type)):
        raise ug.fail(f"{nodes_path}: column label has type {label_col.type}; allowed: integers (empty: no label)")
    if len(label_col) and label_col.null_count == len(label_col):  # a column of empty cells reads as type null
        raise ug.fail(f"{nodes_path}: column label is empty in every row: no labels; allowed: an integer class per "
                      "node (empty for a node without one), the nodes of each split labelled")
    label_rows = label_col.to_numpy(zero_copy_only=False)
    if label_col.null_count:
        label_rows = np.where(label_col.is_null().to_numpy(zero_copy_only=False), -1, np.nan_to_num(label_rows, nan=-1))
    return label_rows[order]


def _split_masks(nodes_path: Path, split: list, order: np.ndarray) -> dict[str, np.ndarray]:
    """Column split as a mask by hub node for each split (`order`: the row of each hub node)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    words = pa.chunked_array(split, type=pa.string()).combine_chunks()
    words = pc.fill_null(pc.utf8_lower(pc.utf8_trim_whitespace(words)), "")
    known = pa.array(["", *SPLIT_WORDS])
    unknown = pc.invert(pc.is_in(words, value_set=known)).to_numpy(zero_copy_only=False)
    if unknown.any():
        row = int(np.flatnonzero(unknown)[0])
        raise ug.fail(f"{nodes_path}: {_row(nodes_path, row)}, column split is {words[row].as_py()!r}; allowed: "
                      "train, val (or valid), test, or empty for none")
    return {s: pc.is_in(words, value_set=pa.array([w for w, to in SPLIT_WORDS.items() if to == s]))
            .to_numpy(zero_copy_only=False)[order] for s in ug.SPLITS}


@dataclass
class FeatureColumns:
    """The features: every column but id, label and split, or one list column."""
    path: Path  # the node table
    columns: list[str]
    as_list: bool
    width: int
    dtype: np.dtype
    name: str  # as messages name them

    @classmethod
    def of(cls, nodes_path: Path, node_schema) -> "FeatureColumns":
        import pyarrow as pa

        feature_cols = [c for c in node_schema.names if c not in ("id", "label", "split")]
        if not feature_cols:
            raise ug.fail(f"{nodes_path}: no feature columns (it has {', '.join(node_schema.names)}); allowed: "
                          "number columns besides id, label and split, or one list column")
        first = node_schema.field(feature_cols[0]).type
        as_list = len(feature_cols) == 1 and (pa.types.is_list(first) or pa.types.is_large_list(first)
                                              or pa.types.is_fixed_size_list(first) or pa.types.is_string(first))
        if as_list:
            width, dtype = _list_width(nodes_path, feature_cols[0], first)
        else:
            for c in feature_cols:
                t = node_schema.field(c).type
                if not (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t) or pa.types.is_null(t)):
                    raise ug.fail(f"{nodes_path}: column {c} has type {t}; allowed: feature columns of numbers, or one "
                                  "list column")
            width = len(feature_cols)
            dtype = np.result_type(*[_np_type(node_schema.field(c).type) for c in feature_cols])
        name = (f"column {feature_cols[0]} (a list)" if as_list
                else f"columns {feature_cols[0]}..{feature_cols[-1]}" if width > 1 else f"column {feature_cols[0]}")
        return cls(nodes_path, feature_cols, as_list, width, dtype, name)

    def blocks(self, nodes: NodeIds):
        """(hub rows, [rows, width] block, first row as given), a record batch at a time."""
        start = 0
        for table in tables.batches(self.path, self.columns, batch_rows=ug.rows_per_block(self.width, 8)):
            rows = table.num_rows
            block = (_list_block(table[self.columns[0]], self.width, self.path, start, self.columns[0]) if self.as_list
                     else np.column_stack([table[c].to_numpy(zero_copy_only=False) for c in self.columns]))
            hub_rows = nodes.node_of_row[start:start + rows]
            yield (start if nodes.in_order else hub_rows), block.reshape(rows, self.width), start
            start += rows


def _edge_chunks(edges_path: Path, nodes_path: Path, nodes: NodeIds):
    """The edges a record batch at a time, their ends mapped to hub nodes (an unknown one named)."""
    import pyarrow as pa

    id_type = pa.int64() if nodes.numeric else pa.string()
    offset = 0
    for table in tables.batches(edges_path, ["src", "dst"], {"src": id_type, "dst": id_type}):
        ends = []
        for column in ("src", "dst"):
            values = table[column].combine_chunks() if hasattr(table[column], "combine_chunks") else table[column]
            node, missing = nodes.nodes_of(values)
            if missing.any():
                i = int(np.flatnonzero(missing)[0])
                given = values[i].as_py()
                what = "is empty" if given is None else f"is {given!r}, not an id of {nodes_path.name}"
                raise ug.fail(f"{edges_path}: {_row(edges_path, offset + i)}, column {column} {what}; "
                              f"allowed: the ids in {nodes_path.name}'s id column")
            ends.append(node.astype(np.int64, copy=False))
        yield ug.EdgeChunk(ends[0], ends[1], offset,
                           lambda i, end: f"{_row(edges_path, i)}, column {('src', 'dst')[end]}")
        offset += table.num_rows


def _node_ids_record(nodes_path: Path, nodes: NodeIds) -> tuple[dict, dict]:
    """The ids kept beside the hub arrays (node_ids.npy), unless they are 0..N-1."""
    if nodes.identity:
        return {}, {"node_ids": f"the ids 0..{nodes.n - 1} of {nodes_path.name}, kept as they are"}
    ids = nodes.ids_np.astype(np.int64) if nodes.numeric else np.asarray(nodes.ids_np.astype(str))
    return {"node_ids": ids}, {"node_ids": f"node_ids.npy in the hub folder: hub node i is the node of {nodes_path.name} "
                                           "whose id is node_ids[i] (its ids, sorted)"}


def _np_type(t) -> np.dtype:
    import pyarrow as pa

    if pa.types.is_null(t) or pa.types.is_integer(t) or pa.types.is_boolean(t):
        return np.dtype(np.float32)  # read with nulls as NaN, converted to float32 anyway
    return np.dtype(t.to_pandas_dtype())


def _list_width(path: Path, column: str, t) -> tuple[int, np.dtype]:
    """The length and dtype of a list column's rows, from its type or its first row."""
    import pyarrow as pa

    if pa.types.is_fixed_size_list(t):
        return t.list_size, _np_type(t.value_type)
    for table in tables.batches(path, [column]):
        if table.num_rows:
            first = _list_block(table[column].slice(0, 1), None, path, 0, column)
            value = t.value_type if not pa.types.is_string(t) else pa.float64()
            return first.shape[1], _np_type(value)
    return 0, np.dtype(np.float32)


def _list_block(column, width: int | None, path: Path, start: int, name: str) -> np.ndarray:
    """A list column's rows as a [rows, width] array (a row of another length named)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    column = column.combine_chunks() if hasattr(column, "combine_chunks") else column
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        text = pc.utf8_trim(pc.replace_substring_regex(column, r"[\[\]]", ""), " \t")
        try:
            column = pc.split_pattern_regex(text, r"[,;\s]+").cast(pa.list_(pa.float64()))
        except pa.ArrowInvalid as exc:
            raise ug.fail(f"{path}: column {name} (rows from {start}) holds a value that is not a number "
                          f"({' '.join(str(exc).split())[:120]}); allowed: numbers separated by spaces or commas") from None
    lengths = pc.list_value_length(column).to_numpy(zero_copy_only=False)
    nulls = column.is_null().to_numpy(zero_copy_only=False)
    expected = width if width is not None else (int(lengths[0]) if len(lengths) else 0)
    bad = nulls | (np.nan_to_num(lengths, nan=-1) != expected)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        got = "empty" if nulls[i] else f"{int(lengths[i])} numbers"
        raise ug.fail(f"{path}: {_row(path, start + i)}, column {name} holds {got}; allowed: {expected} numbers on "
                      "every row (the first row's length)")
    return pc.list_flatten(column).to_numpy(zero_copy_only=False).reshape(len(column), expected)


canonical_params, fingerprint, expected_stats, materialise = ug.source_hooks("edge-list", source_files, open_graph)
