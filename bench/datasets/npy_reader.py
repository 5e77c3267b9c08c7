"""A .npy file read a block of rows at a time: its header parsed once, each block read with
np.fromfile at its offset (never memory-mapped, so what was read is not kept as this process's
pages). numpy only; an object array (a pickle) is refused, never loaded."""

from __future__ import annotations

from pathlib import Path

import numpy as np


class NpyError(ValueError):
    pass


class NpyArray:
    def __init__(self, path: Path):
        self.path = Path(path)
        try:
            with open(self.path, "rb") as f:
                version = np.lib.format.read_magic(f)
                if version == (1, 0):
                    shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
                else:
                    shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
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
        count = 1
        for d in self.shape:  # Python integers: a hostile shape cannot wrap around int64
            count *= d
        size = self.offset + count * self.dtype.itemsize
        actual = self.path.stat().st_size
        if actual < size:
            raise NpyError(f"is truncated: its header says {self.shape} {self.dtype} ({size:,} bytes), "
                           f"the file has {actual:,} bytes")

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __len__(self) -> int:
        return self.shape[0] if self.shape else 1

    def _read(self, f, start_item: int, count: int) -> np.ndarray:
        f.seek(self.offset + start_item * self.dtype.itemsize)
        return np.fromfile(f, dtype=self.dtype, count=count)

    def rows(self, start: int, stop: int) -> np.ndarray:
        """array[start:stop] (along the first axis), read from the file, C-ordered."""
        stop = min(stop, self.shape[0])
        count = max(0, stop - start)
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
        stop = min(stop, self.shape[1])
        count = max(0, stop - start)
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
