"""CSV and Parquet tables read in record batches through pyarrow (host only: the stacks do not
have it). A file that cannot be parsed is one DatasetError naming it and pyarrow's reason."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

from bench.datasets import hub

BATCH_ROWS = 1 << 20
# pyarrow's CSV reader holds several blocks ahead: small blocks keep reading small (a row must fit in one)
CSV_BLOCK_BYTES = 2 << 20


def is_parquet(path: Path) -> bool:
    return Path(path).suffix == ".parquet"


@contextmanager
def reading(path: Path):
    """pyarrow's errors on a bad file, as one DatasetError naming it."""
    import pyarrow as pa

    try:
        yield
    except (pa.ArrowException, OSError) as exc:
        text = " ".join(str(exc).split())[:300]
        raise hub.DatasetError(f"{path}: cannot be read as {'Parquet' if is_parquet(path) else 'CSV'} "
                               f"({type(exc).__name__}: {text})") from None


def parquet(path: Path):
    """A Parquet file read a row group at a time (no pre-buffering of the whole file)."""
    import pyarrow.parquet as pq

    return pq.ParquetFile(path, pre_buffer=False)


def schema(path: Path):
    """The table's columns and types (a CSV's inferred from its first block)."""
    import pyarrow.csv as pcsv

    with reading(path):
        if is_parquet(path):
            return parquet(path).schema_arrow
        return pcsv.open_csv(path, read_options=pcsv.ReadOptions(block_size=CSV_BLOCK_BYTES)).schema


def num_rows(path: Path) -> int | None:
    """Rows of a Parquet file from its footer; None for CSV (known once read)."""
    if not is_parquet(path):
        return None
    with reading(path):
        return parquet(path).metadata.num_rows


def batches(path: Path, columns: list[str], types: dict | None = None, names: list[str] | None = None,
            batch_rows: int = BATCH_ROWS):
    """Record batches of `columns`, `types` the pyarrow type of a column; `names`: a headerless
    CSV's columns. pyarrow's freed buffers go back to the system after each batch."""
    import pyarrow as pa
    import pyarrow.csv as pcsv

    types = types or {}
    with reading(path):
        if is_parquet(path):
            reader = parquet(path).iter_batches(batch_size=batch_rows, columns=columns)
        else:
            reader = pcsv.open_csv(
                path, read_options=pcsv.ReadOptions(block_size=CSV_BLOCK_BYTES, column_names=names or None),
                convert_options=pcsv.ConvertOptions(include_columns=columns, column_types=types,
                                                    strings_can_be_null=True))
        for batch in reader:
            table = pa.Table.from_batches([batch])
            for name, tp in types.items():  # Parquet's columns cast (a CSV's are read as `types`)
                if name in table.column_names and table.schema.field(name).type != tp:
                    table = table.set_column(table.column_names.index(name), name, table[name].cast(tp))
            yield table
            del table, batch
            pa.default_memory_pool().release_unused()
