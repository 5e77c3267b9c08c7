"""Reading and writing .npy files in pieces, never mapped, so that converting a user's graph or a
typed one takes a small part of the hub's size in memory: EdgeSorter (an external sort of the edges),
ArrayFile (a .npy written a block of rows at a time) and NpyArray (read a block of rows at a time).
numpy only: the stacks import it too.
"""

from __future__ import annotations

import math
import os
import shutil
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from bench.datasets.hub import graphbolt_dtype

RUN_KEYS = 1 << 24   # keys sorted in memory at a time (128 MiB), then spilled as one sorted run
MERGE_KEYS = 1 << 23  # keys of all runs read per merge step together (64 MiB)
MAX_NODES = (1 << 31) - 1  # a tagged key, (dst * N + src) * 2 + 1, must fit in an int64
BUCKET_BYTES = 64 << 20  # rows ArrayFile places at once when they came out of order


@dataclass
class EdgeCounts:
    """What the edge stream held and what became of it (recorded in meta.json, shown by `datasets info`)."""
    edges_in: int = 0          # edges as given (one direction each)
    self_loops: int = 0        # of them, edges from a node to itself
    duplicates: int = 0        # of them, repeats of an edge given before (self-loops aside when removed)
    reverse_added: int = 0     # edges added to make the graph undirected (0: it was undirected as given)
    num_edges: int = 0         # edges in the hub (both directions)

    def as_meta(self) -> dict:
        return {**asdict(self), "directed_input": self.reverse_added > 0}


class EdgeSorter:
    """Edges in, the hub's edge_index.npy and csc_indptr.npy out: undirected, sorted by
    (destination, source). Duplicates kept: an edge given k times one way and j the other is there
    max(k, j) times each way; removed: once. A self-loop is its own reverse."""

    def __init__(self, num_nodes: int, scratch: Path, self_loops: str = "remove", duplicates: str = "remove",
                 run_keys: int = RUN_KEYS, merge_keys: int = MERGE_KEYS):
        if not 0 < num_nodes <= MAX_NODES:
            raise ValueError(f"{num_nodes} nodes: this converter takes 1 to {MAX_NODES:,}")
        self.n = int(num_nodes)
        self.scratch = Path(scratch)
        self.keep_loops, self.keep_duplicates = self_loops == "keep", duplicates == "keep"
        self.run_keys, self.merge_keys = run_keys, merge_keys
        self.counts = EdgeCounts()
        self._pending: list[np.ndarray] = []
        self._pending_keys = 0
        self._runs: list[tuple[Path, int]] = []
        self._forward = 0  # forward keys made (input edges that stay, self-loops removed or kept)

    def add(self, src: np.ndarray, dst: np.ndarray) -> None:
        """A chunk of edges (int64 node ids, already checked to be in 0..N-1)."""
        src, dst = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
        self.counts.edges_in += src.size
        loops = src == dst
        n_loops = int(np.count_nonzero(loops))
        self.counts.self_loops += n_loops
        if n_loops and not self.keep_loops:
            keep = ~loops
            src, dst, loops = src[keep], dst[keep], loops[keep]
        self._forward += src.size
        # a key is ((dst * N + src) << 1) | tag: tag 0 as given, 1 the reverse made here; sorting
        # the keys sorts the edges by (dst, src) with the given copy of an edge before its reverse
        forward = dst * self.n
        forward += src
        forward <<= 1
        if n_loops and self.keep_loops:
            src, dst = src[~loops], dst[~loops]  # a self-loop is its own reverse
        reverse = src * self.n
        reverse += dst
        reverse <<= 1
        reverse |= 1
        self._push(forward)
        self._push(reverse)

    def _push(self, keys: np.ndarray) -> None:
        while keys.size:
            take = min(keys.size, self.run_keys - self._pending_keys)
            self._pending.append(keys[:take])
            self._pending_keys += take
            keys = keys[take:]
            if self._pending_keys >= self.run_keys:
                self._spill()

    def _gather(self) -> np.ndarray:
        if not self._pending:
            return np.empty(0, dtype=np.int64)
        keys = np.concatenate(self._pending) if len(self._pending) != 1 else self._pending[0].copy()
        self._pending, self._pending_keys = [], 0
        keys.sort()
        return keys

    def _spill(self) -> None:
        keys = self._gather()
        path = self.scratch / f"edges.run{len(self._runs)}.bin"
        keys.tofile(path)
        self._runs.append((path, keys.size))

    def _merged(self):
        """Sorted blocks of keys, an edge's keys never split between two blocks."""
        if not self._runs:
            keys = self._gather()
            if keys.size:
                yield keys
            return
        if self._pending_keys:
            self._spill()
        readers = [_RunReader(path, count, max(1 << 16, self.merge_keys // len(self._runs)))
                   for path, count in self._runs]
        carry = np.empty(0, dtype=np.int64)
        while readers:
            bound = min((r.block[-1] for r in readers if r.left), default=None)  # of runs with more keys
            parts = [carry]
            for reader in readers:
                k = reader.block.size if bound is None else int(np.searchsorted(reader.block, bound, "right"))
                parts.append(reader.block[:k])
                reader.consume(k)
            readers = [r for r in readers if not r.done]
            block = np.concatenate(parts)
            block.sort(kind="stable")  # runs of sorted pieces: a merge
            if readers and block.size:
                # the last edge's keys may go on in a run's next block: held back for the next step
                cut = int(np.searchsorted(block, (block[-1] >> 1) << 1, "left"))
                carry, block = block[cut:].copy(), block[:cut]
            else:
                carry = np.empty(0, dtype=np.int64)
            if block.size:
                yield block
        for path, _ in self._runs:
            path.unlink(missing_ok=True)

    def write(self, folder: Path) -> EdgeCounts:
        """edge_index.npy, csc_indptr.npy and GraphBolt's copies of them in `folder`; the counts."""
        folder = Path(folder)
        n = self.n
        indptr_counts = np.zeros(n, dtype=np.int64)
        groups = forward_groups = 0
        dst_spool = self.scratch / "edges.dst.bin"
        with open(folder / "edge_index.npy", "wb") as out, open(dst_spool, "wb") as dst_file:
            header = _npy_header(np.int64, (2, 2 * self._forward + 1))  # an upper bound, rewritten below
            out.write(header)
            for block in self._merged():
                pair = block >> 1
                fresh = np.empty(pair.size, dtype=bool)
                fresh[0] = True
                np.not_equal(pair[1:], pair[:-1], out=fresh[1:])
                starts = np.flatnonzero(fresh)
                del fresh
                given_first = (block[starts] & 1) == 0  # the group holds the edge as given
                groups += starts.size
                forward_groups += int(np.count_nonzero(given_first))
                if self.keep_duplicates:
                    given = np.cumsum((block & 1) == 0)
                    ends = np.append(starts[1:], pair.size) - 1
                    given_count = given[ends] - np.where(starts > 0, given[starts - 1], 0)
                    made_count = (ends + 1 - starts) - given_count
                    keys = np.repeat(pair[starts], np.maximum(given_count, made_count))
                    del given, ends, given_count, made_count
                else:
                    keys = pair[starts]
                del pair, starts, given_first, block
                dst, src = np.divmod(keys, n)
                del keys
                write_bytes(out, src)
                write_bytes(dst_file, dst)
                first, last = int(dst[0]), int(dst[-1])
                indptr_counts[first:last + 1] += np.bincount(dst - first, minlength=last - first + 1)
                del src, dst
            total = int(indptr_counts.sum())
        # the destinations follow the sources (row 1 of the [2, E] array), then the true header
        with open(folder / "edge_index.npy", "r+b") as out:
            final = _npy_header(np.int64, (2, total))
            if len(final) != len(header):  # never for E below 10^40; kept honest anyway
                raise RuntimeError("npy header length changed")
            out.seek(len(header) + 8 * total)
            with open(dst_spool, "rb") as spool:
                shutil.copyfileobj(spool, out, 16 << 20)
            out.truncate()
            out.seek(0)
            out.write(final)
        dst_spool.unlink()
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(indptr_counts, out=indptr[1:])
        del indptr_counts
        np.save(folder / "csc_indptr.npy", indptr)
        del indptr
        write_graphbolt_arrays(folder, n)
        c = self.counts
        c.num_edges = total
        c.duplicates = self._forward - forward_groups  # repeats of an edge as given
        # edges that are there only because their reverse was given
        c.reverse_added = total - self._forward if self.keep_duplicates else groups - forward_groups
        return c


def write_graphbolt_arrays(folder: Path, num_nodes: int, chunk: int = 1 << 22) -> None:
    """GraphBolt's copies (hub.graphbolt_arrays) of a folder's CSC, the edges read a chunk at a time."""
    edges = NpyArray(Path(folder) / "edge_index.npy")
    num_edges = edges.shape[1]
    with ArrayFile(Path(folder) / "graphbolt_indices.npy", graphbolt_dtype(num_nodes), (num_edges,)) as out:
        for start in range(0, num_edges, chunk):
            out.append(edges.row_of_column(0, start, start + chunk))
    indptr = np.load(Path(folder) / "csc_indptr.npy")
    np.save(Path(folder) / "graphbolt_indptr.npy", indptr.astype(graphbolt_dtype(num_edges)))


class _RunReader:
    """One sorted run file, read a block at a time (never mapped)."""

    def __init__(self, path: Path, count: int, block_keys: int):
        self.file = open(path, "rb")
        self.left, self.block_keys, self.done = count, block_keys, False
        self._read()  # the first block

    def _read(self) -> None:
        take = min(self.left, self.block_keys)
        self.block = np.fromfile(self.file, dtype=np.int64, count=take)
        self.left -= take
        if self.block.size == 0:
            self.done = True
            self.file.close()

    def consume(self, k: int) -> None:
        self.block = self.block[k:]
        if self.block.size == 0:
            self._read()  # nothing left: an empty read, which closes the file


def write_bytes(file, array: np.ndarray) -> None:
    """The array's bytes (C order) written to an open file. Not ndarray.tofile(file): interrupted by Ctrl-C at
    the wrong moment, its path-or-file check raised a TypeError instead of KeyboardInterrupt."""
    file.write(np.ascontiguousarray(array).reshape(-1).view(np.uint8))


def _npy_header(dtype, shape: tuple) -> bytes:
    import io

    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(buffer, {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)),
                                                  "fortran_order": False, "shape": tuple(int(s) for s in shape)})
    return buffer.getvalue()


class ArrayFile(AbstractContextManager):
    """A .npy of known shape and dtype written a block of rows at a time, never mapped: in order
    (`append`), or at given rows (`put`: spilled per range of rows, placed when closed)."""

    def __init__(self, path: Path, dtype, shape: tuple):
        self.path = Path(path)
        self.dtype, self.shape = np.dtype(dtype), tuple(int(s) for s in shape)
        self.row_bytes = int(np.prod(self.shape[1:], dtype=np.int64)) * self.dtype.itemsize
        header = _npy_header(self.dtype, self.shape)
        self.offset = len(header)
        self.file = open(self.path, "w+b")
        self.file.write(header)
        self.file.truncate(self.offset + self.shape[0] * self.row_bytes)
        self.rows_written = 0  # rows appended in order so far
        self.bucket_rows = max(1, BUCKET_BYTES // max(1, self.row_bytes))
        self._buckets: dict[int, tuple] = {}  # bucket -> (row file, data file)

    def append(self, block: np.ndarray) -> None:
        self._write_at(self.rows_written, block)
        self.rows_written += block.shape[0]

    def _write_at(self, row: int, block: np.ndarray) -> None:
        self.file.seek(self.offset + int(row) * self.row_bytes)
        write_bytes(self.file, np.asarray(block, dtype=self.dtype))

    def put(self, rows: np.ndarray, block: np.ndarray) -> None:
        """Rows of `block` at the row numbers `rows` (each row put once)."""
        rows = np.asarray(rows, dtype=np.int64)
        if not rows.size:
            return
        if rows[-1] - rows[0] == rows.size - 1 and np.all(np.diff(rows) == 1):
            self._write_at(rows[0], block)  # consecutive rows: written where they go
            return
        block = np.ascontiguousarray(block, dtype=self.dtype)
        bucket = rows // self.bucket_rows
        order = np.argsort(bucket, kind="stable")
        bucket, rows, block = bucket[order], rows[order], block[order]
        edges = np.flatnonzero(np.diff(bucket)) + 1
        for lo, hi in zip(np.r_[0, edges], np.r_[edges, bucket.size]):
            files = self._buckets.get(int(bucket[lo]))
            if files is None:
                stem = self.path.parent / f".{self.path.stem}.bucket{int(bucket[lo])}"
                files = self._buckets[int(bucket[lo])] = (open(f"{stem}.rows", "w+b"), open(f"{stem}.data", "w+b"))
            write_bytes(files[0], rows[lo:hi])
            write_bytes(files[1], block[lo:hi])

    def _place_buckets(self) -> None:
        for b in sorted(self._buckets):
            row_file, data_file = self._buckets.pop(b)
            start = b * self.bucket_rows
            stop = min(self.shape[0], start + self.bucket_rows)
            for f in (row_file, data_file):
                f.flush()
                f.seek(0)
            rows = np.fromfile(row_file, dtype=np.int64)
            data = np.fromfile(data_file, dtype=self.dtype).reshape((rows.size, *self.shape[1:]))
            self.file.seek(self.offset + start * self.row_bytes)
            out = np.frombuffer(self.file.read((stop - start) * self.row_bytes), dtype=self.dtype)
            out = out.reshape((stop - start, *self.shape[1:])).copy()  # rows written in order stay
            out[rows - start] = data
            del rows, data
            self._write_at(start, out)
            _remove(row_file, data_file)

    def close(self) -> None:
        try:
            self._place_buckets()
        finally:
            for files in self._buckets.values():
                _remove(*files)
            self._buckets.clear()
            self.file.close()

    def __exit__(self, *exc):
        self.close()


def _remove(*files) -> None:
    for f in files:
        f.close()
        os.unlink(f.name)


class NpyError(ValueError):
    pass


class NpyArray:
    def __init__(self, path: Path):
        self.path = Path(path)
        try:
            with open(self.path, "rb") as f:
                fmt = np.lib.format
                read_header = fmt.read_array_header_1_0 if fmt.read_magic(f) == (1, 0) else fmt.read_array_header_2_0
                shape, fortran, dtype = read_header(f)
                self.offset = f.tell()
        except OSError as exc:
            raise NpyError(f"cannot be read ({exc.strerror or exc})") from None
        except Exception as exc:  # noqa: BLE001 - numpy parses the header's text with tokenize and ast:
            # a cut-off or edited header raises ValueError, SyntaxError, tokenize.TokenError...
            raise NpyError(f"its .npy header is cut off or malformed ({type(exc).__name__}: "
                           f"{' '.join(str(exc).split())[:160]}); allowed: a whole file written by np.save") from None
        if dtype.hasobject:
            raise NpyError("holds Python objects (a pickle), which is never loaded; allowed: numeric arrays")
        if not all(isinstance(d, int) and d >= 0 for d in shape):
            raise NpyError(f"its .npy header gives the shape {tuple(shape)}; allowed: sizes of 0 or more")
        self.shape, self.fortran, self.dtype = tuple(shape), bool(fortran), np.dtype(dtype)
        self.ndim = len(self.shape)
        # Python integers: a hostile shape cannot wrap around int64
        size = self.offset + math.prod(self.shape) * self.dtype.itemsize
        actual = self.path.stat().st_size
        if actual < size:
            raise NpyError(f"is truncated: its header says {self.shape} {self.dtype} ({size:,} bytes), "
                           f"the file has {actual:,} bytes")

    def _read(self, f, start_item: int, count: int) -> np.ndarray:
        f.seek(self.offset + start_item * self.dtype.itemsize)
        return np.fromfile(f, dtype=self.dtype, count=count)

    def rows(self, start: int, stop: int) -> np.ndarray:
        """array[start:stop] (along the first axis), read from the file, C-ordered."""
        count = max(0, min(stop, self.shape[0]) - start)
        inner = self.shape[1:]
        width = int(np.prod(inner, dtype=np.int64))
        with open(self.path, "rb") as f:
            if not self.fortran or self.ndim <= 1:
                return self._read(f, start * width, count * width).reshape((count, *inner))
            if self.ndim != 2:
                raise NpyError(f"a Fortran-ordered {self.ndim}-D array; allowed: C order, or 2-D Fortran")
            # Fortran order: column j's rows are contiguous
            out = np.empty((count, width), dtype=self.dtype)
            for j in range(width):
                out[:, j] = self._read(f, j * self.shape[0] + start, count)
            return out

    def row_of_column(self, row: int, start: int, stop: int) -> np.ndarray:
        """array[row, start:stop] of a 2-D array (an edge index given as [2, E])."""
        count = max(0, min(stop, self.shape[1]) - start)
        with open(self.path, "rb") as f:
            if not self.fortran:
                return self._read(f, row * self.shape[1] + start, count)
            # Fortran [2, E]: the two rows interleaved; read the pairs, keep one
            pairs = self._read(f, start * self.shape[0], count * self.shape[0]).reshape(count, self.shape[0])
            return np.ascontiguousarray(pairs[:, row])

    def read_all(self) -> np.ndarray:
        if not self.ndim:
            with open(self.path, "rb") as f:
                return self._read(f, 0, 1).reshape(())
        return self.rows(0, self.shape[0])
