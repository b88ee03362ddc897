"""Upserts by key (``mode="upsert"``): pure rules of the key and of change types.

Each row of an upsert checkpoint replaces the live rows of its key (the ``key=`` columns,
else the table's Iceberg identifier fields) or is inserted; with ``change_column=`` (a
change stream such as Debezium's ``op``), a ``d`` row deletes its key instead. Keys must be
non-null, and one checkpoint holds one row per key (``order_by=`` picks the last).

The commit resolves the checkpoint's keys to the positions of the live rows that hold them,
on the branch head each attempt runs on, and commits position delete files (one per data
file) with the checkpoint's new data files in one snapshot (merge-on-read). The keys are
staged durably at prepare, so a recovery, a retry after a conflict or a compaction finds
the positions again on the table as it is then.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
from pyiceberg.schema import Schema
from pyiceberg.types import DoubleType, FloatType, PrimitiveType, UUIDType

from icecommit.core.errors import InvalidArgumentError, SchemaMismatchError

#: The mode (``mode="upsert"``).
UPSERT = "upsert"
#: The feature a prepared checkpoint records when its commit deletes by key.
FEATURE_UPSERT = "upsert"
#: Change types of a change column: these replace their key's row (create, read/snapshot,
#: update); ``d`` deletes it.
UPSERT_TYPES = ("c", "r", "u")
DELETE_TYPES = ("d",)
#: Summary keys of an upsert snapshot: rows its position deletes remove; keys it inserted
#: (no live row had them), updated (it replaced their live rows) and deleted.
DELETED_ROWS = "icecommit.deleted-rows"
INSERTED_KEYS, UPDATED_KEYS, DELETED_KEYS = (
    "icecommit.inserted-keys",
    "icecommit.updated-keys",
    "icecommit.deleted-keys",
)
#: Summary keys of an upsert snapshot that account for the rows the checkpoint received:
#: how many (absent where a caller staged keys of its own), how many keys they held, and how
#: many of those keys it deleted (by a change type; a key none of its rows holds any more).
#: Every received row is written, deletes its key, or is superseded in the checkpoint by a
#: later row of its key: received = written + deleted keys + (received - keys).
RECEIVED_ROWS, CHECKPOINT_KEYS, DELETE_CHANGES = (
    "icecommit.received-rows",
    "icecommit.checkpoint-keys",
    "icecommit.delete-changes",
)
#: Where the rows received travel with the keys from the writers to the commit (Arrow and
#: Parquet schema metadata of the staged keys).
_RECEIVED_METADATA = RECEIVED_ROWS.encode()
#: The column of an upsert's staged keys that marks the keys it deletes (no row of its own).
DELETED_FLAG = "__icecommit_deleted"
#: The field ids of a position delete file's columns (Iceberg's reserved ids).
DELETE_FILE_PATH_ID, DELETE_POS_ID = 2147483546, 2147483545


def with_received_rows(keys: pa.Table, received: int) -> pa.Table:
    """``keys`` carrying the number of rows the upsert received (kept when they are staged)."""
    return keys.replace_schema_metadata({**(keys.schema.metadata or {}), _RECEIVED_METADATA: str(received).encode()})


def received_rows(keys: pa.Table | None) -> int | None:
    """The rows received that :func:`with_received_rows` put on ``keys``; None if absent."""
    value = (keys.schema.metadata or {}).get(_RECEIVED_METADATA) if keys is not None else None
    return int(value) if value is not None else None


def key_columns(key: Sequence[str] | None, schema: Schema, table: str) -> tuple[str, ...]:
    """The key of an upsert into ``table``: ``key``, else the schema's identifier fields.

    Raises:
        InvalidArgumentError: neither names a key.
        SchemaMismatchError: a key column the table lacks, or one that is not a primitive.
    """
    names = tuple(key) if key else tuple(schema.identifier_field_names())
    if not names:
        raise InvalidArgumentError(
            "key", key, f"the key columns of the upsert: key=[...], or identifier fields of {table} "
            "(ic.create_table(..., identifier_fields=[...]))",
        )  # fmt: skip
    if len(set(names)) != len(names):
        raise InvalidArgumentError("key", list(names), "distinct column names")
    top = {field.name: field for field in schema.fields}
    for name in names:
        field = top.get(name)
        if field is None:
            raise SchemaMismatchError(name, "is a key column of the upsert, but not a column of the table",
                                      table=table)  # fmt: skip
        kind = field.field_type
        if not isinstance(kind, PrimitiveType) or isinstance(kind, (FloatType, DoubleType, UUIDType)):
            raise SchemaMismatchError(name, f"is a key column, but of type {kind} (an upsert key is a primitive "
                                      "column other than float, double or uuid)", table=table)  # fmt: skip
    return names


__all__ = [
    "CHECKPOINT_KEYS",
    "DELETED_FLAG",
    "DELETED_KEYS",
    "DELETED_ROWS",
    "DELETE_CHANGES",
    "DELETE_FILE_PATH_ID",
    "DELETE_POS_ID",
    "DELETE_TYPES",
    "FEATURE_UPSERT",
    "INSERTED_KEYS",
    "RECEIVED_ROWS",
    "UPDATED_KEYS",
    "UPSERT",
    "UPSERT_TYPES",
    "key_columns",
    "received_rows",
    "with_received_rows",
]
