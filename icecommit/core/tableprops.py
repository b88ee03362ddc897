"""Every table property icecommit reads, checked before anything runs: a value it cannot
use is an :class:`InvalidArgumentError` naming the property, the value and what is accepted,
raised before any Spark job, file or state row."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta

from pyiceberg.schema import Schema
from pyiceberg.table import TableProperties
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.types import TimestampType, TimestamptzType

from icecommit.core.errors import InvalidArgumentError
from icecommit.core.eventtime import EVENT_TIME_PROPERTY
from icecommit.core.evolution import checked_mode
from icecommit.core.timeparse import parse_duration
from icecommit.core.write_modes import checked_write_mode

LATENESS_PROPERTY = "icecommit.partition-lateness"
#: Rows further ahead of the committing clock than this do not move the watermark.
FUTURE_SKEW_PROPERTY = "icecommit.max-future-skew"
DEFAULT_FUTURE_SKEW = timedelta(hours=1)
#: A writer that has committed nothing for this long stops holding partitions back.
IDLE_TIMEOUT_PROPERTY = "icecommit.writer-idle-timeout"
_DURATIONS = (LATENESS_PROPERTY, FUTURE_SKEW_PROPERTY, IDLE_TIMEOUT_PROPERTY)
#: ``true``: a ``_SUCCESS`` marker is written under a time partition's location when it is
#: published complete (for schedulers that wait on a marker object).
PARTITION_MARKER_PROPERTY = "icecommit.partition-marker"
#: An upsert's keys are looked up by Spark tasks once its candidate data files hold at
#: least this many bytes (below it, on the driver: a Spark job would cost more).
CLUSTER_LOOKUP_PROPERTY = "icecommit.upsert.cluster-lookup-min-bytes"
DEFAULT_CLUSTER_LOOKUP_BYTES = 256 * 1024**2
#: A checkpoint's checks read its rows in Spark tasks once its staged data files hold at
#: least this many bytes (below it, on the driver).
CLUSTER_CHECKS_PROPERTY = "icecommit.checks.cluster-min-bytes"
DEFAULT_CLUSTER_CHECKS_BYTES = 256 * 1024**2
#: Whole-number properties: name -> smallest value accepted.
_NUMBERS = {
    CLUSTER_LOOKUP_PROPERTY: 0,
    CLUSTER_CHECKS_PROPERTY: 0,
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


def duration(properties: dict[str, str], key: str, default: timedelta) -> timedelta:
    """A duration table property (``default`` when unset).

    Raises:
        InvalidArgumentError: not a duration.
    """
    value = properties.get(key)
    if value is None:
        return default
    try:
        return parse_duration(value)
    except ValueError:
        raise InvalidArgumentError(f"table property {key}", value, "a duration such as 0s, 15m, 2h or 1d") from None


def future_skew(properties: dict[str, str]) -> timedelta:
    """How far ahead of the committing clock an event time may lie and still move the
    watermark (``icecommit.max-future-skew``; one hour when unset)."""
    return duration(properties, FUTURE_SKEW_PROPERTY, DEFAULT_FUTURE_SKEW)


def idle_timeout(properties: dict[str, str]) -> timedelta | None:
    """The table's writer idle timeout (``icecommit.writer-idle-timeout``; None when unset:
    every listed writer holds partitions back until its watermark passes them)."""
    value = properties.get(IDLE_TIMEOUT_PROPERTY)
    return duration(properties, IDLE_TIMEOUT_PROPERTY, timedelta(0)) if value is not None else None


#: How rows reach the writer tasks (Iceberg's name; ``bin-pack`` is icecommit's, ``range``
#: is taken as ``hash``); see :mod:`icecommit.writers.distribution`.
DISTRIBUTION_PROPERTY = "write.distribution-mode"
DISTRIBUTION_VALUES = ("none", "hash", "range", "bin-pack")


def distribution_property(properties: dict[str, str]) -> str | None:
    """The table's ``write.distribution-mode``, lower-cased; None when unset.

    Raises:
        InvalidArgumentError: a value that is not one of :data:`DISTRIBUTION_VALUES`.
    """
    value = properties.get(DISTRIBUTION_PROPERTY)
    if value is None:
        return None
    mode = value.strip().lower()
    if mode not in DISTRIBUTION_VALUES:
        raise InvalidArgumentError(f"table property {DISTRIBUTION_PROPERTY}", value, "none, hash, range or bin-pack")
    return mode


def partition_marker(properties: dict[str, str]) -> bool:
    """Whether published partitions get a ``_SUCCESS`` marker (``icecommit.partition-marker``,
    ``true`` or ``false``; false when unset)."""
    value = properties.get(PARTITION_MARKER_PROPERTY)
    if value is None:
        return False
    if value.strip().lower() not in ("true", "false"):
        raise InvalidArgumentError(f"table property {PARTITION_MARKER_PROPERTY}", value, "true or false")
    return value.strip().lower() == "true"


def check_table_properties(metadata: TableMetadata, *, write_modes: Sequence[str]) -> None:
    """Check every property icecommit reads from this table (``write_modes``: the names
    ``icecommit.write-mode`` may take).

    Raises:
        InvalidArgumentError: the first property whose value cannot be used.
    """
    check_properties(metadata.properties, metadata.schema(), write_modes=write_modes)


def check_properties(given: Mapping[str, str], schema: Schema, *, write_modes: Sequence[str]) -> None:
    """Check every property icecommit reads, for a table of ``schema`` (before a table is
    created with them, too).

    Raises:
        InvalidArgumentError: the first property whose value cannot be used.
    """
    properties = dict(given)
    for key in _NUMBERS:
        whole_number(properties, key, 0)
    for key in _DURATIONS:
        duration(properties, key, timedelta(0))
    partition_marker(properties)
    distribution_property(properties)
    checked_mode(None, properties)
    checked_write_mode(None, properties, write_modes)
    column = properties.get(EVENT_TIME_PROPERTY)
    if column is not None:
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
