"""Partition values of Arrow rows under an Iceberg partition spec."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.partitioning import PartitionField, PartitionSpec, _to_partition_representation
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.transforms import DayTransform, HourTransform, IdentityTransform, MonthTransform, YearTransform
from pyiceberg.types import TimestampType, TimestamptzType

#: Table property naming the event-time column (defaults to the source of the first
#: time-based partition field over a timestamp column).
EVENT_TIME_PROPERTY = "icecommit.event-time-column"

_TIME_TRANSFORMS = (YearTransform, MonthTransform, DayTransform, HourTransform)


def column_array(table: pa.Table, schema: Schema, field_id: int) -> pa.Array:
    """The values of a (possibly nested) column, as one contiguous array."""
    name = schema.find_column_name(field_id)
    if name is None:
        raise KeyError(f"no column with field id {field_id}")
    if name in table.column_names:
        return table.column(name).combine_chunks()
    head, *rest = name.split(".")
    array: Any = table.column(head).combine_chunks()
    for part in rest:
        array = pc.struct_field(array, part)
    return array


def partition_columns(schema: Schema, spec: PartitionSpec, table: pa.Table) -> list[pa.Array]:
    """Apply each partition field's transform to its source column."""
    columns = []
    for pf in spec.fields:
        source_type = schema.find_field(pf.source_id).field_type
        values = column_array(table, schema, pf.source_id)
        columns.append(pf.transform.pyarrow_transform(source_type)(values))
    return columns


def to_partition_value(schema: Schema, partition_field: PartitionField, raw: Any) -> Any:
    """Iceberg's internal representation of one transformed partition value.

    Transformed values (day, bucket, truncate ...) already are; identity values are
    converted from their Python form (datetime to micros, date to days ...).
    """
    if raw is None or not isinstance(partition_field.transform, IdentityTransform):
        return raw
    source_type = schema.find_field(partition_field.source_id).field_type
    return _to_partition_representation(source_type, raw)


def event_time_field_id(metadata: TableMetadata) -> int | None:
    """The field id of the table's event-time column, or None when it has none."""
    schema = metadata.schema()
    configured = metadata.properties.get(EVENT_TIME_PROPERTY)
    if configured:
        return schema.find_field(configured).field_id
    for pf in metadata.spec().fields:
        source = schema.find_field(pf.source_id)
        if isinstance(pf.transform, _TIME_TRANSFORMS) and isinstance(
            source.field_type, (TimestampType, TimestamptzType)
        ):
            return source.field_id
    return None
