"""An upsert's key columns read from data files, in this process.

:func:`look_up_here` is the :class:`~icecommit.core.key_lookup.KeyLookup` that reads the
candidate files on the committer's side; :func:`match_files` is the same reading for any
process that holds the table's metadata and file IO (the Spark tasks of
:class:`icecommit.writers.spark_key_lookup.SparkKeyLookup` call it). The join of what is
read with the keys is :func:`icecommit.core.key_lookup.rows_holding_keys`.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.io import FileIO
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyiceberg.manifest import DataFile
from pyiceberg.table import Table
from pyiceberg.table.metadata import TableMetadata

from icecommit.core.errors import ValidationError
from icecommit.core.key_lookup import POSITION_COLUMN, Match, rows_holding_keys

_FIELD_ID = b"PARQUET:field_id"


def look_up_here(
    table: Table, files: Sequence[DataFile], keys: pa.Table, deleted: Mapping[str, Collection[int]]
) -> dict[str, Match]:
    """The :class:`~icecommit.core.key_lookup.KeyLookup` that reads the files in this
    process (a few at a time)."""
    return match_files(table.metadata, table.io, [f.file_path for f in files], keys, deleted)


def match_files(
    metadata: TableMetadata,
    io: FileIO,
    paths: Sequence[str],
    keys: pa.Table,
    deleted: Mapping[str, Collection[int]],
) -> dict[str, Match]:
    """The rows of the data files ``paths`` that hold one of ``keys`` (named as the table's
    columns) and are not among their ``deleted`` positions, by path (a file with none is
    left out): the files' key columns (read a few at a time, kept in a bounded cache:
    data files never change) joined with the keys at once.

    Raises:
        ValidationError: as :func:`key_rows`.
    """
    names = keys.column_names
    schema = metadata.schema()
    fields = [schema.find_field(name) for name in names]
    types = schema_to_pyarrow(schema.select(*names))
    with ThreadPoolExecutor(max_workers=4) as pool:
        read = list(pool.map(lambda path: _cached_key_rows(metadata, io, path, fields, types), paths))
    return rows_holding_keys(read, paths, keys, deleted)


#: Key columns of data files recently read (data files never change), by path and the key
#: columns' field ids, names and types: a change stream's commits find most of them here.
#: Bounded by bytes.
_CACHE: OrderedDict[tuple[str, tuple[tuple[int, str, str], ...]], pa.Table | None] = OrderedDict()
_CACHE_LOCK = threading.Lock()
CACHE_BYTES = 256 * 1024**2
_CACHED_BYTES = 0


def _cached_key_rows(
    metadata: TableMetadata, io: FileIO, path: str, fields: Sequence[Any], types: pa.Schema
) -> pa.Table | None:
    key = (
        path,
        tuple((field.field_id, types.field(i).name, str(types.field(i).type)) for i, field in enumerate(fields)),
    )
    with _CACHE_LOCK:
        if key in _CACHE:
            _CACHE.move_to_end(key)
            return _CACHE[key]
    rows = key_rows(metadata, io, path, fields, types)
    global _CACHED_BYTES
    with _CACHE_LOCK:
        if key not in _CACHE:  # a running total: summing every entry on each insert grew with the cache
            _CACHED_BYTES += rows.nbytes if rows is not None else 0
        _CACHE[key] = rows
        while _CACHED_BYTES > CACHE_BYTES and len(_CACHE) > 1:
            _, dropped = _CACHE.popitem(last=False)
            _CACHED_BYTES -= dropped.nbytes if dropped is not None else 0
    return rows


def key_rows(
    metadata: TableMetadata, io: FileIO, path: str, fields: Sequence[Any], types: pa.Schema
) -> pa.Table | None:
    """The data file's key columns (matched by field id, in the table's types) and each
    row's position (``__pos``); None when the file lacks a key column (written before it
    existed: it holds no non-null key). A file without field ids (added with ``add_files``,
    or migrated) is read through the table's name mapping, else by the columns' names.

    Raises:
        ValidationError: a file without field ids whose key column cannot be found by name.
    """
    with io.new_input(path).open() as stream:
        parquet = pq.ParquetFile(pa.BufferReader(stream.read()))
    by_id = {int(f.metadata[_FIELD_ID]): f.name for f in parquet.schema_arrow if f.metadata and _FIELD_ID in f.metadata}
    if not by_id:  # no field ids at all: the name mapping says which names hold which ids
        mapping = metadata.name_mapping()
        present = set(parquet.schema_arrow.names)
        for field in fields:
            names = [n for m in (mapping or []) if m.field_id == field.field_id for n in m.names] or [field.name]
            found = next((n for n in names if n in present), None)
            if found is None:
                raise ValidationError(
                    f"data file {path} has no Parquet field ids and no column named {' or '.join(map(repr, names))} "
                    f"(key column {field.name!r}): an upsert cannot tell which of its rows hold a key; set the "
                    "table's schema.name-mapping.default",
                )
            by_id[field.field_id] = found
    if any(field.field_id not in by_id for field in fields):
        return None
    read = parquet.read(columns=[by_id[field.field_id] for field in fields])
    columns = [read.column(i).cast(types.field(i).type) for i in range(len(fields))]
    names = [types.field(i).name for i in range(len(fields))]
    return pa.table([*columns, pa.array(np.arange(read.num_rows, dtype=np.int64))], names=[*names, POSITION_COLUMN])


__all__ = ["key_rows", "look_up_here", "match_files"]
