"""Event-time versions of a table: the table as of an event time, read-only.

:func:`snapshot_at_event_time` with ``complete=True`` is the table's data-time version: the
earliest snapshot of the branch at which the recorded completeness policy deemed event
time up to T complete (the time partition holding T was published, by watermark or by the
idle rule). Rows for T that arrived after that (late rows) are not in it; how many is part
of the answer. ``complete=False`` is the rollback selector: the newest snapshot with no
data after T (a checkpoint that straddles T is left out entirely).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

from pyiceberg.catalog import Catalog
from pyiceberg.table import DataScan, Table

from icecommit.catalog.tables import resolve_table
from icecommit.core import ancestry
from icecommit.core.ancestry import MAIN_BRANCH
from icecommit.core.completeness import micros, time_partition
from icecommit.core.errors import CompletenessNotReachedError, InvalidArgumentError, SnapshotNotFoundError
from icecommit.core.eventtime import event_time_column
from icecommit.core.identifiers import checked_instant, table_name
from icecommit.state.database import state_engine, state_uri
from icecommit.state.partitions import PartitionStatusStore


@dataclass(frozen=True)
class EventTimeVersion:
    """The table as of an event time.

    Attributes:
        table / event_time: what was asked.
        complete: True for the data-time version (everything up to ``event_time`` had
            arrived by the completeness policy), False for the rollback selector.
        snapshot_id / committed_at: the snapshot.
        partition: the time partition holding ``event_time`` (complete versions).
        late_records: rows of the partitions up to it that arrived after their publication,
            so are not in this version (complete versions; 0 otherwise).
    """

    table: str
    event_time: datetime
    complete: bool
    snapshot_id: int
    committed_at: datetime
    partition: str | None = None
    late_records: int = 0


def snapshot_at_event_time(
    catalog: Catalog, table: Table | str, event_time: datetime, *, complete: bool = True, branch: str = MAIN_BRANCH
) -> EventTimeVersion:
    """The snapshot that holds the table as of ``event_time`` (see the module).

    Raises:
        CompletenessNotReachedError: ``complete`` and the partition holding
            ``event_time`` has not been published complete yet.
        SnapshotNotFoundError: the snapshot has been expired, or (``complete=False``) no
            snapshot has only data at or before ``event_time``.
        InvalidArgumentError: ``complete`` and the table has no time partition.
    """
    checked_instant(event_time, "event_time")
    loaded = resolve_table(catalog, table)
    name = table_name(table)
    when = event_time if event_time.tzinfo is not None else event_time.replace(tzinfo=timezone.utc)
    if not complete:
        snapshot = ancestry.newest_without_data_after(loaded.metadata, name, when, branch)
        return EventTimeVersion(name, when, False, snapshot.snapshot_id, _at(snapshot.timestamp_ms))
    field = time_partition(loaded.metadata)
    if field is None:
        raise InvalidArgumentError("complete", True, "False: the table has no time partition to be complete")
    value = field.value_of(micros(when))
    statuses = [
        s for s in PartitionStatusStore(state_engine(state_uri(catalog))).statuses(name) if s.field == field.name
    ]
    status = next((s for s in statuses if s.value == value), None)
    if status is None:
        raise CompletenessNotReachedError(name, when, field.label(value))
    published_ms = int(status.completed_at.timestamp() * 1000)
    lineage = list(ancestry.branch_ancestry(loaded.metadata, branch))  # newest first
    current = next((s for s in lineage if s.timestamp_ms <= published_ms), None)
    if current is None:
        raise SnapshotNotFoundError(name, f"current when {status.label} was published ({status.completed_at}): expired")
    late = sum(s.late_records for s in statuses if s.value <= value)
    return EventTimeVersion(
        name, when, True, current.snapshot_id, _at(current.timestamp_ms), partition=status.label, late_records=late
    )


def scan_at_event_time(
    catalog: Catalog, table: Table | str, event_time: datetime, *, complete: bool = True, branch: str = MAIN_BRANCH
) -> tuple[DataScan, EventTimeVersion]:
    """A pyiceberg scan of the table as of ``event_time``: pinned to
    :func:`snapshot_at_event_time`'s snapshot and filtered to event time at or before it.

    Raises:
        as :func:`snapshot_at_event_time`; InvalidArgumentError when the table has no
        event-time column.
    """
    version = snapshot_at_event_time(catalog, table, event_time, complete=complete, branch=branch)
    loaded = resolve_table(catalog, table)
    column = event_time_column(loaded.metadata)
    if column is None:
        raise InvalidArgumentError("table", version.table, "a table with an event-time column")
    up_to = f"{column} <= '{version.event_time.isoformat()}'"
    scan = loaded.scan(snapshot_id=version.snapshot_id, row_filter=up_to)
    return scan, version


def _at(timestamp_ms: int) -> datetime:
    return datetime.fromtimestamp(timestamp_ms / 1000, timezone.utc)


__all__ = ["EventTimeVersion", "scan_at_event_time", "snapshot_at_event_time"]
