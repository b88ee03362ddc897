"""A data file's rows, read by column: what a checkpoint's checks read of its staged files."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.io import FileIO


def read_columns(io: FileIO, path: str, columns: tuple[str, ...] | None) -> Iterator[pa.RecordBatch]:
    """The rows of the Parquet data file at ``path``, batch by batch, with only these
    top-level ``columns`` (None: every column; none: batches without columns that still
    count the rows). A column the file lacks is left out of its batches."""
    with io.new_input(path).open() as stream:
        parquet = pq.ParquetFile(stream)
        present = None if columns is None else [c for c in columns if c in parquet.schema_arrow.names]
        yield from parquet.iter_batches(columns=present)


__all__ = ["read_columns"]
