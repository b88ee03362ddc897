"""Which column of a table holds the event time (no Spark, no I/O)."""

from __future__ import annotations

from pyiceberg.table.metadata import TableMetadata
from pyiceberg.transforms import DayTransform, HourTransform, MonthTransform, YearTransform
from pyiceberg.types import TimestampType, TimestamptzType

#: Table property naming the event-time column (defaults to the source of the first
#: time-based partition field over a timestamp column).
EVENT_TIME_PROPERTY = "icecommit.event-time-column"

_TIME_TRANSFORMS = (YearTransform, MonthTransform, DayTransform, HourTransform)


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


def event_time_column(metadata: TableMetadata) -> str | None:
    """The name of the table's event-time column, or None."""
    field_id = event_time_field_id(metadata)
    return metadata.schema().find_column_name(field_id) if field_id is not None else None
