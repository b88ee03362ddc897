"""The partition-status table: time partitions published complete, once, and late records.

A checkpoint's records per time partition are stored with its prepared row. After each
commit the committer asks :meth:`PartitionStatusStore.publish` which partitions the
writers' watermarks have now closed; each is inserted once (a unique key guards against
concurrent committers) with the committed record count at that moment. Records committed
into a partition after that are late: the difference is reported, never dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import ColumnElement, Engine, and_, case, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from icecommit.core.completeness import TimePartition, WriterMark, closing, from_micros, micros, newly_complete
from icecommit.state.checkpoints import COMMITTED
from icecommit.state.database import retried
from icecommit.state.models import (
    CheckpointPartitionRow,
    CheckpointRow,
    CompletenessPolicyRow,
    PartitionStatusRow,
    as_utc,
    utc_now,
)


@dataclass(frozen=True)
class PartitionStatus:
    """A time partition published complete.

    Attributes:
        table: the table; field / value / label: the time partition (``ts_day``, its
            ordinal, ``ts_day=2026-05-01``); start / end: the event times it covers.
        watermark: the writers' common watermark when it was published.
        lateness: the allowed lateness it waited for after ``end``.
        writers: the jobs whose watermarks had all passed it.
        records_at_completion: committed records when it was published.
        records: committed records now; ``late_records`` is the difference.
        completed_at / completed_by: when, and by which job's committer.
        notified_at: when the completion callback returned (None: not delivered yet).
    """

    table: str
    field: str
    value: int
    label: str
    start: datetime
    end: datetime
    watermark: datetime
    lateness: timedelta
    writers: tuple[str, ...]
    records_at_completion: int
    records: int
    completed_at: datetime
    completed_by: str
    notified_at: datetime | None

    @property
    def late_records(self) -> int:
        """Records committed into the partition after it was published complete."""
        return self.records - self.records_at_completion


#: what a checkpoint lets the watermark reach: rows of schema 5 and before have only the
#: maximum; a checkpoint all of whose rows lay in the future has none
_WATERMARK = case(
    (CheckpointRow.future_records > 0, CheckpointRow.watermark_us),
    else_=func.coalesce(CheckpointRow.watermark_us, CheckpointRow.max_event_time_us),
)


def _committed_partitions(table_name: str, field: str) -> ColumnElement[bool]:
    return and_(
        CheckpointRow.job_id == CheckpointPartitionRow.job_id,
        CheckpointRow.table_name == CheckpointPartitionRow.table_name,
        CheckpointRow.checkpoint_id == CheckpointPartitionRow.checkpoint_id,
        CheckpointRow.status == COMMITTED,
        CheckpointPartitionRow.table_name == table_name,
        CheckpointPartitionRow.partition_field == field,
    )


class PartitionStatusStore:
    """Reads and publishes time-partition completeness in icecommit's state database."""

    def __init__(self, engine: Engine, *, clock: Callable[[], datetime] = utc_now) -> None:
        self._engine = engine
        self._clock = clock

    def watermark_through(self, job_id: str, table_name: str, checkpoint_id: int) -> int | None:
        """The job's watermark once ``checkpoint_id`` is committed: the largest event time
        of its checkpoints up to that one (checkpoints commit in order)."""
        query = select(func.max(_WATERMARK)).where(
            CheckpointRow.job_id == job_id,
            CheckpointRow.table_name == table_name,
            CheckpointRow.checkpoint_id <= checkpoint_id,
        )
        with Session(self._engine) as session:
            value = session.execute(query).scalar_one_or_none()
        return int(value) if value is not None else None

    watermark_through = retried(watermark_through)

    def late_records_in(self, job_id: str, table_name: str, checkpoint_id: int) -> int:
        """Records of a checkpoint that fall into partitions already published complete."""
        query = (
            select(func.coalesce(func.sum(CheckpointPartitionRow.records), 0))
            .join(
                PartitionStatusRow,
                and_(
                    PartitionStatusRow.table_name == CheckpointPartitionRow.table_name,
                    PartitionStatusRow.partition_field == CheckpointPartitionRow.partition_field,
                    PartitionStatusRow.partition_value == CheckpointPartitionRow.partition_value,
                ),
            )
            .where(
                CheckpointPartitionRow.job_id == job_id,
                CheckpointPartitionRow.table_name == table_name,
                CheckpointPartitionRow.checkpoint_id == checkpoint_id,
            )
        )
        with Session(self._engine) as session:
            return int(session.execute(query).scalar_one())

    late_records_in = retried(late_records_in)

    def _watermarks(self, session: Session, table_name: str, writers: Sequence[str]) -> dict[str, WriterMark]:
        marks: dict[str, WriterMark] = {}
        for job in writers:
            value, last = session.execute(
                select(func.max(_WATERMARK), func.max(CheckpointRow.committed_at)).where(
                    CheckpointRow.job_id == job,
                    CheckpointRow.table_name == table_name,
                    CheckpointRow.status == COMMITTED,
                )
            ).one()
            marks[job] = WriterMark(
                int(value) if value is not None else None, micros(as_utc(last)) if last is not None else None
            )
        return marks

    def record_policy(
        self,
        table_name: str,
        *,
        writers: Sequence[str],
        lateness: timedelta,
        idle_timeout: timedelta | None,
        recorded_by: str,
    ) -> None:
        """Record the completeness policy a committer uses, for publication without a commit."""
        values = {
            "writers": ",".join(sorted(writers)),
            "lateness_s": int(lateness.total_seconds()),
            "idle_timeout_s": int(idle_timeout.total_seconds()) if idle_timeout is not None else None,
        }
        with Session(self._engine) as session, session.begin():
            row = session.get(CompletenessPolicyRow, table_name)
            if row is None:
                session.add(
                    CompletenessPolicyRow(
                        table_name=table_name, recorded_by=recorded_by, recorded_at=self._clock(), **values
                    )
                )
            elif (row.writers, row.lateness_s, row.idle_timeout_s) != tuple(values.values()):
                row.writers, row.lateness_s, row.idle_timeout_s = values.values()  # type: ignore[assignment]
                row.recorded_by, row.recorded_at = recorded_by, self._clock()

    record_policy = retried(record_policy)

    def policy(self, table_name: str) -> tuple[tuple[str, ...], timedelta, timedelta | None] | None:
        """The recorded policy (writers, lateness, idle timeout), None when no committer
        with a completeness policy has committed to the table yet."""
        with Session(self._engine) as session:
            row = session.get(CompletenessPolicyRow, table_name)
            if row is None:
                return None
            idle = timedelta(seconds=row.idle_timeout_s) if row.idle_timeout_s is not None else None
            return tuple(row.writers.split(",")), timedelta(seconds=row.lateness_s), idle

    policy = retried(policy)

    def _totals(self, session: Session, table_name: str, field: str) -> dict[int, int]:
        query = (
            select(CheckpointPartitionRow.partition_value, func.sum(CheckpointPartitionRow.records))
            .join(CheckpointRow, _committed_partitions(table_name, field))
            .group_by(CheckpointPartitionRow.partition_value)
        )
        return {int(v): int(n) for v, n in session.execute(query)}

    def publish(
        self,
        table_name: str,
        field: TimePartition,
        *,
        writers: Sequence[str],
        lateness: timedelta,
        completed_by: str,
        idle_timeout: timedelta | None = None,
    ) -> list[PartitionStatus]:
        """Insert a status row for every partition with committed data that the writers'
        watermarks have closed and that is not published yet; returns the new ones.

        Safe to call any number of times, from any number of committers: a partition is
        published once.
        """
        lateness_us = int(lateness.total_seconds() * 1_000_000)
        for attempt in range(3):
            try:
                with Session(self._engine) as session, session.begin():
                    now = self._clock()
                    closes = closing(
                        field,
                        self._watermarks(session, table_name, writers),
                        now_us=micros(now),
                        lateness_us=lateness_us,
                        idle_us=int(idle_timeout.total_seconds() * 1_000_000) if idle_timeout is not None else None,
                    )
                    watermark = closes.watermark_us
                    totals = self._totals(session, table_name, field.name)
                    published = session.execute(
                        select(PartitionStatusRow.partition_value).where(
                            PartitionStatusRow.table_name == table_name,
                            PartitionStatusRow.partition_field == field.name,
                        )
                    ).scalars()
                    values = newly_complete(
                        field,
                        totals,
                        watermark_us=watermark,
                        lateness_us=lateness_us,
                        published=published,
                        last_value=closes.last_value,
                    )
                    if watermark is None or not values:
                        return []
                    rows = [
                        PartitionStatusRow(
                            table_name=table_name,
                            partition_field=field.name,
                            partition_value=value,
                            label=field.label(value),
                            start=from_micros(field.bounds(value)[0]),
                            end=from_micros(field.bounds(value)[1]),
                            watermark=from_micros(watermark),
                            lateness_s=int(lateness.total_seconds()),
                            writers=",".join(sorted(writers)),
                            records_at_completion=totals.get(value, 0),
                            completed_at=now,
                            completed_by=completed_by,
                        )
                        for value in values
                    ]
                    session.add_all(rows)
                    session.flush()
                    return [self._status(row, totals.get(row.partition_value, 0)) for row in rows]
            except IntegrityError:
                # another committer published one of them first; look again
                if attempt == 2:
                    raise
        return []

    publish = retried(publish)

    def undelivered(self, table_name: str) -> list[PartitionStatus]:
        """Published partitions whose completion callback has not returned yet."""
        return [s for s in self.statuses(table_name) if s.notified_at is None]

    def mark_notified(self, status: PartitionStatus) -> None:
        """Record that the completion callback for ``status`` returned."""
        with Session(self._engine) as session, session.begin():
            row = session.execute(
                select(PartitionStatusRow).where(
                    PartitionStatusRow.table_name == status.table,
                    PartitionStatusRow.partition_field == status.field,
                    PartitionStatusRow.partition_value == status.value,
                )
            ).scalar_one()
            row.notified_at = self._clock()

    mark_notified = retried(mark_notified)

    def statuses(self, table_name: str) -> list[PartitionStatus]:
        """Every published partition of the table, oldest partition first, with its
        committed and late record counts as of now."""
        with Session(self._engine) as session:
            rows = list(
                session.execute(
                    select(PartitionStatusRow)
                    .where(PartitionStatusRow.table_name == table_name)
                    .order_by(PartitionStatusRow.partition_field, PartitionStatusRow.partition_value)
                ).scalars()
            )
            totals: dict[str, dict[int, int]] = {}
            for field in {r.partition_field for r in rows}:
                totals[field] = self._totals(session, table_name, field)
            return [self._status(r, totals[r.partition_field].get(r.partition_value, 0)) for r in rows]

    statuses = retried(statuses)

    @staticmethod
    def _status(row: PartitionStatusRow, records: int) -> PartitionStatus:
        return PartitionStatus(
            table=row.table_name,
            field=row.partition_field,
            value=row.partition_value,
            label=row.label,
            start=as_utc(row.start),
            end=as_utc(row.end),
            watermark=as_utc(row.watermark),
            lateness=timedelta(seconds=row.lateness_s),
            writers=tuple(row.writers.split(",")) if row.writers else (),
            records_at_completion=row.records_at_completion,
            records=records,
            completed_at=as_utc(row.completed_at),
            completed_by=row.completed_by,
            notified_at=as_utc(row.notified_at) if row.notified_at is not None else None,
        )


__all__ = ["PartitionStatus", "PartitionStatusStore"]
