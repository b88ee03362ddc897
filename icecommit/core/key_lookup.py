"""Finding an upsert's keys in data files: which rows of a file hold one of the keys.

The committer picks the candidate files (those whose partition and key column bounds can
hold a key) and the positions earlier delete files removed; the look-up itself, one file
at a time, is :func:`match_keys`, a pure function of the file and the keys that runs
wherever the caller runs it: in the committer's process (:func:`look_up_here`), or in Spark
tasks (:class:`icecommit.writers.key_lookup.SparkKeyLookup`), which the committer cannot
import. Both are a :class:`KeyLookup`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any, Protocol

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
    """The :class:`KeyLookup` that reads the files in this process, one after the other."""
    found = {}
    for data_file in files:
        path = data_file.file_path
        match = match_keys(table.metadata, table.io, path, keys, deleted.get(path, ()))
        if match is not None:
            found[path] = match
    return found


def match_keys(
    metadata: TableMetadata, io: FileIO, path: str, keys: pa.Table, deleted: Collection[int]
) -> Match | None:
    """The rows of the data file ``path`` that hold one of ``keys`` (named as the table's
    columns) and are not among the ``deleted`` positions; None when no live row does.

    Raises:
        ValidationError: as :func:`key_rows`.
    """
    names = keys.column_names
    schema = metadata.schema()
    fields = [schema.find_field(name) for name in names]
    rows = key_rows(metadata, io, path, fields, schema_to_pyarrow(schema.select(*names)))
    if rows is None:
        return None
    matched = rows.join(keys, keys=names, join_type="left semi")
    if deleted:
        gone = pa.array(sorted(deleted), pa.int64())
        matched = matched.filter(pc.invert(pc.is_in(matched.column("__pos"), gone)))
    if not len(matched):
        return None
    return sorted(matched.column("__pos").to_pylist()), matched.select(names)


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
    return pa.table([*columns, pa.array(range(read.num_rows), pa.int64())], names=[*names, "__pos"])


__all__ = ["KeyLookup", "Match", "key_rows", "look_up_here", "match_keys"]
