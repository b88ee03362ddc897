"""Partition completeness: when a time partition is closed (pure functions, no I/O).

A table partitioned by ``hour``, ``day``, ``month`` or ``year`` of its event-time column
has *time partitions*. A job's *watermark* is the largest event time it has committed.
A time partition is complete once the watermark of every writer of the table has passed
the partition's end by the allowed lateness: ``min(watermarks) >= end + lateness``. Every
partition from the first one with data on is published, empty ones with 0 records. Rows
further ahead of the committing clock than the table's ``icecommit.max-future-skew`` do not
move a watermark (a device clock in 2099 must not close every hour in between).
Records that arrive for a partition after it was published complete are still committed,
and counted as late.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from pyiceberg.table.metadata import TableMetadata
from pyiceberg.transforms import DayTransform, HourTransform, MonthTransform, YearTransform

from icecommit.core.eventtime import event_time_field_id
from icecommit.core.tableprops import LATENESS_PROPERTY
from icecommit.core.timeparse import parse_duration

_HOUR_US = 3_600_000_000
_DAY_US = 24 * _HOUR_US
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def micros(value: datetime) -> int:
    """Microseconds since the epoch (a naive datetime is taken as UTC)."""
    value = value if value.tzinfo is not None else value.replace(tzinfo=timezone.utc)
    delta = value - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_micros(value: int) -> datetime:
    """The UTC datetime of microseconds since the epoch."""
    return _EPOCH + timedelta(microseconds=value)


def _month_start_us(months: int) -> int:
    year, month = divmod(months, 12)
    return micros(datetime(1970 + year, month + 1, 1, tzinfo=timezone.utc))


@dataclass(frozen=True)
class TimePartition:
    """The table's time partition field: which spec field, and its granularity.

    Attributes:
        name: the partition field's name (``ts_day``).
        position: its index in the partition spec (and in a data file's partition tuple).
        granularity: ``hour``, ``day``, ``month`` or ``year``.
        source_column: the event-time column it is derived from.
    """

    name: str
    position: int
    granularity: str
    source_column: str

    def bounds(self, value: int) -> tuple[int, int]:
        """[start, end) of partition ``value`` in microseconds since the epoch."""
        if self.granularity == "hour":
            return value * _HOUR_US, (value + 1) * _HOUR_US
        if self.granularity == "day":
            return value * _DAY_US, (value + 1) * _DAY_US
        if self.granularity == "month":
            return _month_start_us(value), _month_start_us(value + 1)
        return _month_start_us(value * 12), _month_start_us((value + 1) * 12)

    def value_of(self, micros_: int) -> int:
        """The partition value holding the instant ``micros_``."""
        if self.granularity == "hour":
            return micros_ // _HOUR_US
        if self.granularity == "day":
            return micros_ // _DAY_US
        moment = from_micros(micros_)
        months = (moment.year - 1970) * 12 + moment.month - 1
        return months if self.granularity == "month" else moment.year - 1970

    def label(self, value: int) -> str:
        """``name=start`` in the unit of the partition, e.g. ``ts_hour=2026-05-01-03``."""
        start = from_micros(self.bounds(value)[0])
        shown = {
            "hour": start.strftime("%Y-%m-%d-%H"),
            "day": start.strftime("%Y-%m-%d"),
            "month": start.strftime("%Y-%m"),
            "year": start.strftime("%Y"),
        }[self.granularity]
        return f"{self.name}={shown}"


_GRANULARITY = {HourTransform: "hour", DayTransform: "day", MonthTransform: "month", YearTransform: "year"}


def time_partition(metadata: TableMetadata) -> TimePartition | None:
    """The first partition field that is a time transform of the event-time column."""
    event_time = event_time_field_id(metadata)
    if event_time is None:
        return None
    schema = metadata.schema()
    for position, pf in enumerate(metadata.spec().fields):
        granularity = _GRANULARITY.get(type(pf.transform))
        if granularity is not None and pf.source_id == event_time:
            return TimePartition(pf.name, position, granularity, schema.find_column_name(event_time) or "")
    return None


def lateness(metadata: TableMetadata) -> timedelta:
    """The table's allowed lateness (``icecommit.partition-lateness``; zero when unset).

    Raises:
        ValueError: the property is not a duration.
    """
    value = metadata.properties.get(LATENESS_PROPERTY)
    return parse_duration(value) if value else timedelta(0)


def records_per_partition(partitions: Iterable[tuple[tuple[object, ...], int]], field: TimePartition) -> dict[int, int]:
    """Records per time-partition value, from (partition tuple, record count) of data files.

    Files whose time partition is null (rows without an event time) belong to no time
    partition and are left out.
    """
    totals: dict[int, int] = {}
    for partition, records in partitions:
        value = partition[field.position]
        if isinstance(value, int):
            totals[value] = totals.get(value, 0) + records
    return totals


def table_watermark(watermarks: Mapping[str, int | None]) -> int | None:
    """The watermark every writer has reached: the smallest, None while one has none."""
    if not watermarks or any(w is None for w in watermarks.values()):
        return None
    return min(w for w in watermarks.values() if w is not None)


@dataclass(frozen=True)
class WriterMark:
    """One writer of a table as completeness sees it: its watermark (None: it has
    committed nothing) and when it last committed (microseconds since the epoch)."""

    watermark_us: int | None
    last_commit_us: int | None


@dataclass(frozen=True)
class Closing:
    """What closes partitions now: a partition closes once its end plus the lateness is at
    or before ``watermark_us``, and, when ``last_value`` is set, only up to that partition."""

    watermark_us: int | None
    last_value: int | None = None


def closing(
    field: TimePartition, writers: Mapping[str, WriterMark], *, now_us: int, lateness_us: int, idle_us: int | None
) -> Closing:
    """The watermark every writer that still counts has reached.

    A writer that has committed nothing holds everything back (a typo in ``writers`` must
    not release partitions). With an idle timeout, a *live* writer (its watermark was
    within idle timeout plus lateness of the clock when it last committed) that has not
    committed for longer than the timeout stops holding partitions back; a writer far
    behind the clock (a paused backfill) keeps holding them. When every writer is idle,
    each partition up to and including the one holding the largest watermark closes once
    its end plus lateness plus the idle timeout lies in the past.
    """
    if not writers or any(w.watermark_us is None or w.last_commit_us is None for w in writers.values()):
        return Closing(None)
    marks = {name: w for name, w in writers.items()}
    if idle_us is None:
        return Closing(min(w.watermark_us for w in marks.values()))  # type: ignore[type-var]

    def idle(w: WriterMark) -> bool:
        assert w.watermark_us is not None and w.last_commit_us is not None
        live = w.watermark_us >= w.last_commit_us - idle_us - lateness_us
        return live and now_us - w.last_commit_us > idle_us

    active = [w.watermark_us for w in marks.values() if not idle(w)]
    if active:
        return Closing(min(a for a in active if a is not None))
    highest = max(w.watermark_us for w in marks.values() if w.watermark_us is not None)
    return Closing(now_us - idle_us, last_value=field.value_of(highest))


def newly_complete(
    field: TimePartition,
    candidates: Iterable[int],
    *,
    watermark_us: int | None,
    lateness_us: int,
    published: Iterable[int] = (),
    last_value: int | None = None,
) -> list[int]:
    """The partitions the watermark has closed and that are not published yet: every one
    from the first partition with data (``candidates``) on, empty ones included, so that a
    scheduler waiting for each partition in turn never waits for an hour in which nothing
    arrived."""
    values = set(candidates)
    if watermark_us is None or not values:
        return []
    done = set(published)
    closed = []
    value = min(values)
    while field.bounds(value)[1] + lateness_us <= watermark_us and (last_value is None or value <= last_value):
        if value not in done:
            closed.append(value)
        value += 1
    return closed


__all__ = [
    "LATENESS_PROPERTY",
    "Closing",
    "TimePartition",
    "WriterMark",
    "closing",
    "from_micros",
    "lateness",
    "micros",
    "newly_complete",
    "parse_duration",
    "partition_value",
    "records_per_partition",
    "table_watermark",
    "time_partition",
]


_LABEL_FORMATS = {"hour": "%Y-%m-%d-%H", "day": "%Y-%m-%d", "month": "%Y-%m", "year": "%Y"}


def partition_value(field: TimePartition, label: str) -> int:
    """The partition value of a label such as ``ts_hour=2026-05-01-13`` (the form
    :meth:`TimePartition.label` gives).

    Raises:
        ValueError: the label is not one of this field's (names what is expected).
    """
    prefix = f"{field.name}="  # the field's name may itself hold '=': it is matched whole
    example = field.label(0).removeprefix(prefix).replace("1970", "YYYY")
    expected = f"{prefix}<{_LABEL_FORMATS[field.granularity]}>, e.g. {prefix}{example}"
    if not label.startswith(prefix):
        raise ValueError(f"partition label {label!r} is not one of this table's: expected {expected}")
    shown = label.removeprefix(prefix)
    try:
        start = datetime.strptime(shown, _LABEL_FORMATS[field.granularity]).replace(tzinfo=timezone.utc)
    except ValueError:
        raise ValueError(f"partition label {label!r} is not one of this table's: expected {expected}") from None
    start_us = micros(start)
    if field.granularity == "hour":
        return start_us // _HOUR_US
    if field.granularity == "day":
        return start_us // _DAY_US
    months = (start.year - 1970) * 12 + start.month - 1
    return months if field.granularity == "month" else start.year - 1970


#: The name of the marker object of a published partition.
MARKER_NAME = "_SUCCESS"


def marker_path(metadata: TableMetadata, label: str) -> str:
    """Where a published time partition's marker lives: ``<data location>/<label>/_SUCCESS``
    (``label`` as :meth:`TimePartition.label`, which is also the partition's directory
    name when the time field is the spec's first field)."""
    data = metadata.properties.get("write.data.path") or f"{metadata.location.rstrip('/')}/data"
    return f"{data.rstrip('/')}/{label}/{MARKER_NAME}"
