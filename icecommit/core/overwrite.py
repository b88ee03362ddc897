"""The rules of a partition overwrite (pure, on Iceberg metadata).

``mode="overwrite-partitions"``: the checkpoint's rows replace every partition they touch,
under the table's current partition spec, in one ``overwrite`` snapshot; partitions they
do not touch are untouched, an unpartitioned table is replaced whole, and an empty
checkpoint replaces nothing.

Which partition of the current spec a data file belongs to: its own partition tuple when
it was written under the current spec; otherwise, field by field, the value of the field of
its own spec with the same source column and transform, else the transform applied to the
file's lower and upper bounds of the source column when both give one value (an ``hour``
file inside a ``day`` partition). A file of an older spec whose rows all fall inside a
touched partition is replaced with it; one whose rows may lie both inside and outside
(a ``month`` file when the current spec is ``day``) cannot be replaced whole, and the
overwrite is refused rather than dropping or keeping part of a touched partition.

Conflicts follow Iceberg's ``ReplacePartitions`` (no conflicting data, no conflicting
deletes): a data or delete file added to a touched partition after the table the
checkpoint's writers were given (its sequence number is recorded at prepare) conflicts, so
that an overwrite never removes rows it did not see.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pyiceberg.conversions import from_bytes
from pyiceberg.manifest import DataFile
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.transforms import (
    DayTransform,
    HourTransform,
    IdentityTransform,
    MonthTransform,
    TruncateTransform,
    VoidTransform,
    YearTransform,
)
from pyiceberg.types import PrimitiveType

OVERWRITE_PARTITIONS = "overwrite-partitions"
#: The summary key of an overwrite snapshot (beside ``icecommit.write-mode``): how many
#: partitions of the current spec it replaced.
REPLACED_PARTITIONS = "icecommit.replaced-partitions"
#: The feature a prepared checkpoint records when its commit overwrites partitions.
FEATURE_OVERWRITE_PARTITIONS = "overwrite-partitions"

#: Transforms that keep the order of their source values (a range of values maps to a range).
_ORDERED = (IdentityTransform, YearTransform, MonthTransform, DayTransform, HourTransform, TruncateTransform)


def sequence_number(metadata: TableMetadata) -> int:
    """The table's last sequence number (0 for a format version 1 table, which has none)."""
    return int(getattr(metadata, "last_sequence_number", 0) or 0)


Values = tuple[Any, ...]


@dataclass(frozen=True)
class _Exact:
    value: Any


@dataclass(frozen=True)
class _Range:
    low: Any
    high: Any


_ANY = None  # a field whose value the file cannot tell


def _partition_values(data_file: DataFile) -> Values:
    partition = data_file.partition
    return tuple(partition[i] for i in range(len(partition)))


def _possible(
    data_file: DataFile, own: PartitionSpec, values: Values, field: PartitionField, schema: Schema
) -> _Exact | _Range | None:
    """What the file's rows may hold for ``field`` of another spec."""
    for position, own_field in enumerate(own.fields):
        if own_field.source_id == field.source_id and str(own_field.transform) == str(field.transform):
            return _Exact(values[position])
    if isinstance(field.transform, VoidTransform):
        return _Exact(None)
    try:
        source_type = schema.find_field(field.source_id).field_type
    except ValueError:  # the source column was dropped
        return _ANY
    if not isinstance(source_type, PrimitiveType):
        return _ANY
    nulls = (data_file.null_value_counts or {}).get(field.source_id)
    count = (data_file.value_counts or {}).get(field.source_id)
    if nulls and count is not None and nulls >= count:
        return _Exact(None)  # every row holds null there
    if nulls or (data_file.nan_value_counts or {}).get(field.source_id):
        return _ANY  # nulls or NaNs beside values (outside the bounds): two partitions at least
    if nulls is None and count is None:
        return _ANY  # no counts: nulls cannot be ruled out
    lower = (data_file.lower_bounds or {}).get(field.source_id)
    upper = (data_file.upper_bounds or {}).get(field.source_id)
    if lower is None or upper is None:
        return _ANY
    apply = field.transform.transform(source_type)
    low, high = from_bytes(source_type, lower), from_bytes(source_type, upper)
    if low == high:
        return _Exact(apply(low))
    if not isinstance(field.transform, _ORDERED):
        return _ANY  # bucket: a range of values maps anywhere
    first, last = apply(low), apply(high)
    return _Exact(first) if first == last else _Range(first, last)


def partition_under(
    data_file: DataFile, specs: Mapping[int, PartitionSpec], schema: Schema, target: PartitionSpec
) -> Values | None:
    """The partition of ``target`` that holds every row of ``data_file``; None when its
    rows may lie in several (see the module)."""
    own = specs[data_file.spec_id]
    values = _partition_values(data_file)
    if own.spec_id == target.spec_id:
        return values
    found = []
    for field in target.fields:
        possible = _possible(data_file, own, values, field, schema)
        if not isinstance(possible, _Exact):
            return None
        found.append(possible.value)
    return tuple(found)


def may_hold(
    data_file: DataFile,
    specs: Mapping[int, PartitionSpec],
    schema: Schema,
    target: PartitionSpec,
    partitions: Iterable[Values],
) -> Values | None:
    """One of ``partitions`` of ``target`` that some rows of ``data_file`` may lie in (the
    first in their order), or None."""
    own = specs[data_file.spec_id]
    values = _partition_values(data_file)
    if own.spec_id == target.spec_id:
        return values if values in set(partitions) else None
    possible = [_possible(data_file, own, values, field, schema) for field in target.fields]

    def holds(partition: Values) -> bool:
        for value, can in zip(partition, possible, strict=True):
            if isinstance(can, _Exact) and can.value != value:
                return False
            if isinstance(can, _Range) and (value is None or not can.low <= value <= can.high):
                return False
        return True

    return next((p for p in sorted(partitions, key=repr) if holds(p)), None)


def partition_label(spec: PartitionSpec, schema: Schema, values: Values) -> str:
    """A partition as a path (``day=2026-11-24/page=home``), or ``the whole table``."""
    if not spec.fields:
        return "the whole table"
    shown = []
    for field, value in zip(spec.fields, values, strict=True):
        source_type = schema.find_field(field.source_id).field_type
        shown.append(f"{field.name}={field.transform.to_human_string(source_type, value)}")
    return "/".join(shown)


__all__ = [
    "FEATURE_OVERWRITE_PARTITIONS",
    "OVERWRITE_PARTITIONS",
    "REPLACED_PARTITIONS",
    "may_hold",
    "partition_label",
    "partition_under",
]
