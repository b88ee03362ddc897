"""Partition values of Arrow rows under an Iceberg partition spec."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform

from icecommit.core.pyiceberg_internals import partition_representation


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
    return partition_representation(source_type, raw)
