"""Finding an upsert's keys in data files: which rows of a file hold one of the keys.

The committer picks the candidate files (those whose partition and key column bounds can
hold a key) and the positions earlier delete files removed; the look-up itself, one file
at a time, is :func:`match_files`, a function of the files and the keys that runs
wherever the caller runs it: in the committer's process (:func:`look_up_here`), or in Spark
tasks (:class:`icecommit.writers.key_lookup.SparkKeyLookup`), which the committer cannot
import. Both are a :class:`KeyLookup`.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.io import FileIO
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyiceberg.manifest import DataFile
from pyiceberg.table import Table
from pyiceberg.table.metadata import TableMetadata

from icecommit.core.errors import ValidationError

_FIELD_ID = b"PARQUET:field_id"
_POS = "__pos"
_FILE = "__file"

#: A file's rows that hold a key: their positions (sorted) and their keys.
Match = tuple[list[int], pa.Table]


class KeyLookup(Protocol):
    """Looks ``keys`` (a table of the key columns) up in each of the data ``files`` of
    ``table``, leaving out the positions in ``deleted`` (by path); returns the files that
    hold a key, by path."""

    def __call__(
        self, table: Table, files: Sequence[DataFile], keys: pa.Table, deleted: Mapping[str, Collection[int]]
    ) -> dict[str, Match]: ...


def look_up_here(
    table: Table, files: Sequence[DataFile], keys: pa.Table, deleted: Mapping[str, Collection[int]]
) -> dict[str, Match]:
    """The :class:`KeyLookup` that reads the files in this process (a few at a time)."""
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
    parts = [
        rows.append_column(_FILE, pa.array(np.full(len(rows), i, dtype=np.int32)))
        for i, rows in enumerate(read)
        if rows is not None and len(rows)
    ]
    if not parts:
        return {}
    matched = pa.concat_tables(parts).join(keys, keys=names, join_type="left semi")
    found: dict[str, Match] = {}
    for i in np.unique(matched.column(_FILE).to_numpy()):
        rows = matched.filter(pc.equal(matched.column(_FILE), i))
        gone = deleted.get(paths[i])
        if gone:
            rows = rows.filter(pc.invert(pc.is_in(rows.column(_POS), pa.array(sorted(gone), pa.int64()))))
        if len(rows):
            found[paths[i]] = (sorted(rows.column(_POS).to_pylist()), rows.select(names))
    return found


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
    return pa.table([*columns, pa.array(np.arange(read.num_rows, dtype=np.int64))], names=[*names, _POS])


__all__ = ["KeyLookup", "Match", "key_rows", "look_up_here", "match_files"]
