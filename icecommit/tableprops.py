"""Every table property icecommit reads, checked before anything runs: a value it cannot
use is an :class:`InvalidArgumentError` naming the property, the value and what is accepted,
raised before any Spark job, file or state row."""

from __future__ import annotations

from pyiceberg.table import TableProperties
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.types import TimestampType, TimestamptzType

from icecommit.errors import InvalidArgumentError
from icecommit.eventtime import EVENT_TIME_PROPERTY
from icecommit.timeparse import parse_duration

LATENESS_PROPERTY = "icecommit.partition-lateness"
#: Whole-number properties: name -> smallest value accepted.
_NUMBERS = {
    TableProperties.WRITE_TARGET_FILE_SIZE_BYTES: 1,
    TableProperties.COMMIT_NUM_RETRIES: 0,
    TableProperties.COMMIT_MIN_RETRY_WAIT_MS: 0,
    TableProperties.COMMIT_MAX_RETRY_WAIT_MS: 0,
    TableProperties.COMMIT_TOTAL_RETRY_TIME_MS: 0,
}


def whole_number(properties: dict[str, str], key: str, default: int) -> int:
    """A whole-number table property (``default`` when unset).

    Raises:
        InvalidArgumentError: not a whole number at or above the property's minimum.
    """
    value = properties.get(key)
    if value is None:
        return default
    least = _NUMBERS.get(key, 0)
    text = value.strip()
    if not (text.isascii() and text.isdigit()) or int(text) < least:
        accepted = "a positive whole number (bytes)" if least == 1 else "a non-negative whole number"
        raise InvalidArgumentError(f"table property {key}", value, accepted)
    return int(text)


def check_table_properties(metadata: TableMetadata) -> None:
    """Check every property icecommit reads from this table.

    Raises:
        InvalidArgumentError: the first property whose value cannot be used.
    """
    properties = dict(metadata.properties)
    for key in _NUMBERS:
        whole_number(properties, key, 0)
    lateness = properties.get(LATENESS_PROPERTY)
    if lateness is not None:
        try:
            parse_duration(lateness)
        except ValueError:
            raise InvalidArgumentError(
                f"table property {LATENESS_PROPERTY}", lateness, "a duration such as 0s, 15m, 2h or 1d"
            ) from None
    column = properties.get(EVENT_TIME_PROPERTY)
    if column is not None:
        schema = metadata.schema()
        try:
            field = schema.find_field(column)
        except ValueError:
            field = None
        if field is None or not isinstance(field.field_type, (TimestampType, TimestamptzType)):
            columns = sorted(
                schema.find_column_name(f.field_id) or f.name
                for f in schema.fields
                if isinstance(f.field_type, (TimestampType, TimestamptzType))
            )
            raise InvalidArgumentError(
                f"table property {EVENT_TIME_PROPERTY}",
                column,
                f"a timestamp column of the table ({', '.join(columns) or 'it has none'})",
            )
