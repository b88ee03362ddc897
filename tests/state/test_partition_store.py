"""The partition-status store publishes a time partition from committed checkpoints of its
own table and field only, exactly at the boundary its writers' watermarks and the lateness
set, once, and again after a concurrent committer's insert; its policy row follows the last
committer that changed it."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from random import Random
from typing import Any

import pytest
from pyiceberg.catalog.sql import SqlCatalog
from sqlalchemy import create_engine, event
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session
from sqlalchemy.pool import NullPool

import icecommit.state.partitions as partitions_module
from icecommit.core.completeness import TimePartition, from_micros, micros
from icecommit.core.errors import StateDatabaseError, StateDatabaseUnavailableError
from icecommit.state import CheckpointStore, state_engine, state_uri
from icecommit.state.checkpoints import PublishCounters
from icecommit.state.models import CompletenessPolicyRow, PartitionStatusRow
from icecommit.state.partitions import PartitionStatusStore
from tests.conftest import pg_uri, unique_table

FIELD = TimePartition("ts_hour", 0, "hour", "ts")
NINE = datetime(2026, 11, 20, 9, tzinfo=timezone.utc)
H9 = FIELD.value_of(micros(NINE))
LATENESS = timedelta(minutes=5)
#: the first instant at which hour 9 may close: its end plus the lateness
CLOSES = NINE + timedelta(hours=1) + LATENESS


class Stores:
    def __init__(self, catalog: SqlCatalog) -> None:
        self.now = NINE
        engine = state_engine(state_uri(catalog))
        self.checkpoints = CheckpointStore(engine, clock=lambda: self.now)
        self.partitions = PartitionStatusStore(engine, clock=lambda: self.now)
        self.engine = engine

    def checkpoint(
        self, job: str, table: str, checkpoint_id: int, watermark: datetime, partitions: list[tuple[str, int, int]],
        *, commit: bool = True,
    ) -> None:  # fmt: skip
        self.checkpoints.insert_prepared(
            job_id=job, table_name=table, checkpoint_id=checkpoint_id, manifest_path=None, files_digest="d",
            source_records=0, records=sum(n for _, _, n in partitions), files=1, bytes_=1,
            max_event_time_us=micros(watermark), partitions=partitions,
        )  # fmt: skip
        if commit:
            self.checkpoints.mark_committed(
                job, table, checkpoint_id, snapshot_id=checkpoint_id, attempts=1, retries=0, counters=PublishCounters()
            )  # fmt: skip


@pytest.fixture
def stores(catalog: SqlCatalog) -> Stores:
    return Stores(catalog)


def _publish(stores: Stores, table: str, writers: list[str], **kwargs: Any) -> list[Any]:
    return stores.partitions.publish(table, FIELD, writers=writers, lateness=LATENESS, completed_by="c", **kwargs)


def test_a_partition_closes_exactly_at_its_end_plus_the_lateness_from_its_own_committed_rows(stores: Stores) -> None:
    T, U = unique_table(), unique_table()
    just_before = CLOSES - timedelta(microseconds=1)
    stores.checkpoint("w", T, 1, just_before, [("ts_hour", H9, 5), ("ts_hour", H9 + 1, 3), ("ts_day", H9, 50)])
    # neither a prepared checkpoint nor another table's may move the watermark or the counts
    stores.checkpoint("w", T, 2, NINE + timedelta(days=1), [("ts_hour", H9, 100)], commit=False)
    stores.checkpoint("w", U, 1, NINE + timedelta(days=1), [("ts_hour", H9, 1000), ("ts_hour", H9 + 1, 1000)])
    # a status of another field with the same value does not make hour 9 published
    with Session(stores.engine) as session, session.begin():
        session.add(
            PartitionStatusRow(
                table_name=T, partition_field="ts_day", partition_value=H9, label="ts_day=x", start=NINE, end=NINE,
                watermark=NINE, lateness_s=0, writers="w", records_at_completion=0, completed_at=NINE,
                completed_by="other",
            )
        )  # fmt: skip
    assert _publish(stores, T, ["w"]) == []  # one microsecond short

    stores.checkpoint("w", T, 3, CLOSES, [])
    stores.now = NINE + timedelta(hours=3)
    [status] = _publish(stores, T, ["w"])
    assert (status.table, status.field, status.value, status.label) == (T, "ts_hour", H9, "ts_hour=2026-11-20-09")
    assert (status.start, status.end) == (NINE, NINE + timedelta(hours=1))
    assert (status.watermark, status.lateness, status.writers) == (CLOSES, LATENESS, ("w",))
    assert (status.records_at_completion, status.records, status.late_records) == (5, 5, 0)
    assert (status.completed_at, status.completed_by, status.notified_at) == (stores.now, "c", None)
    assert stores.partitions.statuses(T)[1:] == [status]  # after the ts_day row, field first
    assert _publish(stores, T, ["w"]) == []  # published once

    stores.checkpoint("late", T, 1, NINE, [("ts_hour", H9, 2)])  # a late row into a published hour
    [again] = [s for s in stores.partitions.statuses(T) if s.field == "ts_hour"]
    assert (again.records_at_completion, again.records, again.late_records) == (5, 7, 2)


def test_an_idle_writer_stops_holding_partitions_back_one_microsecond_after_its_timeout(stores: Stores) -> None:
    T = unique_table()
    idle = timedelta(minutes=1)
    stores.now = NINE + timedelta(minutes=30)
    stores.checkpoint("quiet", T, 1, NINE + timedelta(minutes=29), [("ts_hour", H9, 2)])  # live, then silent
    quiet_committed = stores.now
    stores.now = quiet_committed + idle
    stores.checkpoint("busy", T, 1, CLOSES, [("ts_hour", H9, 5)])
    assert _publish(stores, T, ["busy", "quiet"], idle_timeout=idle) == []  # quiet for exactly the timeout
    stores.now = quiet_committed + idle + timedelta(microseconds=1)
    [status] = _publish(stores, T, ["busy", "quiet"], idle_timeout=idle)
    assert (status.value, status.records_at_completion, status.writers, status.watermark) == (
        H9, 7, ("busy", "quiet"), CLOSES
    )  # fmt: skip


class _ConflictingSession(Session):
    """A session whose flush fails as if another committer had inserted the same status."""

    conflicts = 0

    def flush(self, objects: Any = None) -> None:
        if _ConflictingSession.conflicts > 0 and self.new:
            _ConflictingSession.conflicts -= 1
            raise IntegrityError("INSERT INTO icecommit_partition_status ...", {}, Exception("unique violation"))
        super().flush(objects)


@pytest.mark.parametrize("conflicts", [1, 2, 3])
def test_a_concurrent_insert_is_looked_at_again_twice_then_raised(
    stores: Stores, monkeypatch: pytest.MonkeyPatch, conflicts: int
) -> None:
    T = unique_table()
    stores.checkpoint("w", T, 1, CLOSES, [("ts_hour", H9, 5)])
    monkeypatch.setattr(partitions_module, "Session", _ConflictingSession)
    monkeypatch.setattr(_ConflictingSession, "conflicts", conflicts)
    if conflicts == 3:
        with pytest.raises(StateDatabaseError) as raised:
            _publish(stores, T, ["w"])
        assert isinstance(raised.value.__cause__, IntegrityError)  # a refused statement, not an outage
        assert not isinstance(raised.value, StateDatabaseUnavailableError)
        assert stores.partitions.statuses(T) == []
    else:
        assert [s.value for s in _publish(stores, T, ["w"])] == [H9]
        assert [s.value for s in stores.partitions.statuses(T)] == [H9]


def test_the_policy_row_follows_the_last_committer_that_changed_it(stores: Stores) -> None:
    T, U = unique_table(), unique_table()

    def row(table: str) -> tuple[Any, ...]:
        with Session(stores.engine) as session:
            policy = session.get(CompletenessPolicyRow, table)
            assert policy is not None
            return policy.recorded_by, from_micros(micros(policy.recorded_at))

    stores.partitions.record_policy(T, writers=["b", "a"], lateness=LATENESS, idle_timeout=None, recorded_by="one")
    stores.partitions.record_policy(U, writers=["z"], lateness=LATENESS, idle_timeout=None, recorded_by="u")
    assert stores.partitions.policy(T) == (("a", "b"), LATENESS, None)
    assert row(T) == ("one", NINE)
    stores.now = NINE + timedelta(hours=1)
    stores.partitions.record_policy(T, writers=["a", "b"], lateness=LATENESS, idle_timeout=None, recorded_by="two")
    assert row(T) == ("one", NINE)  # the same policy: left as it was
    stores.partitions.record_policy(
        T, writers=["a"], lateness=timedelta(minutes=9), idle_timeout=timedelta(minutes=2), recorded_by="three"
    )
    assert stores.partitions.policy(T) == (("a",), timedelta(minutes=9), timedelta(minutes=2))
    assert row(T) == ("three", NINE + timedelta(hours=1))
    assert stores.partitions.policy(U) == (("z",), LATENESS, None) and row(U) == ("u", NINE)


def test_a_jobs_watermark_and_late_records_count_its_own_rows_of_its_own_table(stores: Stores) -> None:
    T, U = unique_table(), unique_table()
    stores.checkpoint("w", T, 1, NINE, [("ts_hour", H9, 5)])
    stores.checkpoint("w", T, 2, CLOSES, [("ts_hour", H9 + 1, 3)])
    stores.checkpoint("w", T, 3, NINE + timedelta(days=2), [("ts_hour", H9, 50)], commit=False)  # later
    stores.checkpoint("other", T, 2, NINE + timedelta(days=1), [("ts_hour", H9, 100)])  # another job
    stores.checkpoint("w", U, 2, NINE + timedelta(days=1), [("ts_hour", H9, 1000)])  # another table
    assert stores.partitions.watermark_through("w", T, 2) == micros(CLOSES)
    assert stores.partitions.watermark_through("w", T, 1) == micros(NINE)
    assert _publish(stores, T, ["w"]) != []  # hour 9 of T is published
    # a late row of job w into hour 9, beside rows of another field with the same value
    stores.checkpoint("w", T, 4, CLOSES, [("ts_hour", H9, 2), ("ts_day", H9, 40)])
    with Session(stores.engine) as session, session.begin():  # hour 9 of U published too, and a day of T
        for table, field in ((U, "ts_hour"), (T, "ts_other")):
            session.add(
                PartitionStatusRow(
                    table_name=table, partition_field=field, partition_value=H9 + 1, label="x", start=NINE,
                    end=NINE, watermark=NINE, lateness_s=0, writers="w", records_at_completion=0,
                    completed_at=NINE, completed_by="x",
                )
            )  # fmt: skip
    stores.checkpoint("w", U, 4, CLOSES, [("ts_hour", H9 + 1, 7)])
    assert stores.partitions.late_records_in("w", T, 4) == 2
    assert stores.partitions.late_records_in("other", T, 4) == 0
    assert stores.partitions.late_records_in("w", U, 4) == 7
    assert stores.partitions.late_records_in("w", T, 2) == 0  # hour 10 of T was never published


def test_statuses_come_oldest_partition_first_whatever_plan_the_database_picks() -> None:
    """Read without the unique index (PostgreSQL's planner picks a sequential scan for a
    large status table): the rows come in the order they were written unless sorted."""
    uri = pg_uri()  # skips where the server is absent
    state_engine(uri)  # the schema
    engine = create_engine(uri, poolclass=NullPool)

    @event.listens_for(engine, "connect")
    def without_indexes(connection: Any, _record: Any) -> None:
        cursor = connection.cursor()
        for setting in ("enable_indexscan", "enable_indexonlyscan", "enable_bitmapscan"):
            cursor.execute(f"SET {setting} = off")
        cursor.close()

    table = unique_table()
    values = [H9 + n for n in range(24)]
    written = values[:]
    Random(7).shuffle(written)
    with Session(engine) as session, session.begin():
        for value in written:
            start, end = (from_micros(b) for b in FIELD.bounds(value))
            session.add(
                PartitionStatusRow(
                    table_name=table, partition_field=FIELD.name, partition_value=value, label=FIELD.label(value),
                    start=start, end=end, watermark=end, lateness_s=0, writers="job", records_at_completion=0,
                    completed_at=end, completed_by="job",
                )
            )  # fmt: skip
    statuses = PartitionStatusStore(engine).statuses(table)
    engine.dispose()
    assert [s.value for s in statuses] == values


def test_publish_returns_an_hour_without_rows_with_no_records(stores: Stores) -> None:
    T = unique_table()
    stores.checkpoint("w", T, 1, NINE + timedelta(hours=4), [("ts_hour", H9, 5), ("ts_hour", H9 + 2, 3)])
    stores.now = NINE + timedelta(hours=5)
    published = _publish(stores, T, ["w"])
    assert [(s.value, s.records_at_completion, s.records, s.late_records) for s in published] == [
        (H9, 5, 5, 0), (H9 + 1, 0, 0, 0), (H9 + 2, 3, 3, 0),
    ]  # fmt: skip
