"""Event-time watermarks per snapshot and time-partition completeness."""

from __future__ import annotations

import datetime as dt
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table import Table
from sqlalchemy import text

import icecommit as ic
from icecommit.committer import PartitionCompleteness, publish_complete_partitions
from icecommit.core.ancestry import LATE_RECORDS, WATERMARK, find_checkpoint
from icecommit.core.completeness import (
    TimePartition,
    micros,
    newly_complete,
    parse_duration,
    table_watermark,
    time_partition,
)
from icecommit.errors import InvalidArgumentError
from icecommit.state.database import state_engine, state_uri
from icecommit.state.partitions import PartitionStatus
from tests.conftest import unique_table
from tests.fakes import T0, commit_checkpoint, events_at
from tests.helpers import EVENTS_SCHEMA, write_arrow


def hours(statuses: list[PartitionStatus]) -> dict[str, tuple[int, int]]:
    """label -> (records at completion, late records)."""
    return {s.label: (s.records_at_completion, s.late_records) for s in statuses}


# -- pure decisions -----------------------------------------------------------------------


def test_partition_bounds_and_labels_for_every_granularity() -> None:
    day = 20574  # 2026-05-01
    assert TimePartition("ts_day", 0, "day", "ts").bounds(day) == (
        micros(T0),
        micros(T0 + timedelta(days=1)),
    )
    assert TimePartition("ts_day", 0, "day", "ts").label(day) == "ts_day=2026-05-01"
    hour = day * 24 + 3
    assert TimePartition("ts_hour", 0, "hour", "ts").label(hour) == "ts_hour=2026-05-01-03"
    assert TimePartition("ts_hour", 0, "hour", "ts").bounds(hour) == (
        micros(T0 + timedelta(hours=3)),
        micros(T0 + timedelta(hours=4)),
    )
    month = (2026 - 1970) * 12 + 1  # February 2026: 28 days
    start, end = TimePartition("ts_month", 0, "month", "ts").bounds(month)
    assert end - start == 28 * 86_400_000_000
    assert TimePartition("ts_month", 0, "month", "ts").label(month) == "ts_month=2026-02"
    year = TimePartition("ts_year", 0, "year", "ts")
    assert year.label(2024 - 1970) == "ts_year=2024"
    assert year.bounds(2024 - 1970)[1] - year.bounds(2024 - 1970)[0] == 366 * 86_400_000_000
    # before 1970: ordinals are negative
    assert TimePartition("ts_day", 0, "day", "ts").label(-1) == "ts_day=1969-12-31"


def test_a_partition_closes_when_the_slowest_writer_passes_its_end_plus_lateness() -> None:
    field = TimePartition("ts_hour", 0, "hour", "ts")
    h = micros(T0) // 3_600_000_000
    end_of_first = micros(T0 + timedelta(hours=1))
    assert newly_complete(field, [h, h + 1], watermark_us=end_of_first - 1, lateness_us=0) == []
    assert newly_complete(field, [h, h + 1], watermark_us=end_of_first, lateness_us=0) == [h]
    assert newly_complete(field, [h, h + 1], watermark_us=end_of_first, lateness_us=1) == []
    assert newly_complete(field, [h], watermark_us=end_of_first, lateness_us=0, published=[h]) == []
    assert newly_complete(field, [h], watermark_us=None, lateness_us=0) == []
    assert table_watermark({"a": 5, "b": 3}) == 3
    assert table_watermark({"a": 5, "b": None}) is None
    assert table_watermark({}) is None


def test_durations() -> None:
    assert parse_duration("0") == timedelta(0)
    assert parse_duration("15m") == timedelta(minutes=15)
    assert parse_duration(" 2H ") == timedelta(hours=2)
    with pytest.raises(ValueError, match="'soon' is not a duration"):
        parse_duration("soon")


def test_the_time_partition_is_the_time_transform_of_the_event_time_column(sqlite_catalog: SqlCatalog) -> None:
    table = ic.create_table(sqlite_catalog, "ns.t", EVENTS_SCHEMA, partition_by=["event", "day(ts)"])
    assert time_partition(table.metadata) == TimePartition("ts_day", 1, "day", "ts")
    plain = ic.create_table(sqlite_catalog, "ns.plain", EVENTS_SCHEMA, partition_by=["event"])
    assert time_partition(plain.metadata) is None
    # a time transform of another timestamp column is not the event time's partition
    schema = pa.schema([("id", pa.int64()), ("ts", pa.timestamp("us", tz="UTC")),
                        ("loaded", pa.timestamp("us", tz="UTC"))])  # fmt: skip
    other = ic.create_table(sqlite_catalog, "ns.other", schema, partition_by=["day(loaded)"],
                            properties={"icecommit.event-time-column": "ts"})  # fmt: skip
    assert time_partition(other.metadata) is None
    both = ic.create_table(sqlite_catalog, "ns.both", schema, partition_by=["day(loaded)", "hour(ts)"],
                           properties={"icecommit.event-time-column": "ts"})  # fmt: skip
    assert time_partition(both.metadata) == TimePartition("ts_hour", 1, "hour", "ts")


def test_a_naive_instant_is_utc_and_an_aware_one_keeps_its_offset() -> None:
    naive = dt.datetime(2026, 5, 1, 3, 0)
    assert micros(naive) == micros(naive.replace(tzinfo=dt.timezone.utc)) == 1_777_604_400_000_000
    five_east = dt.datetime(2026, 5, 1, 8, 0, tzinfo=dt.timezone(timedelta(hours=5)))
    assert micros(five_east) == micros(naive)  # 08:00 at UTC+5 is 03:00 UTC


# -- through the committer, on SQLite and PostgreSQL ----------------------------------------


@pytest.mark.database_independent
def test_watermark_completion_once_and_late_records(catalog: SqlCatalog) -> None:
    name = unique_table()
    table = ic.create_table(catalog, name, EVENTS_SCHEMA, partition_by=["event", "hour(ts)"])
    published: list[str] = []
    policy = PartitionCompleteness(on_complete=lambda s: published.append(s.label))

    # hours 0 and 1; watermark 01:10
    commit_checkpoint(catalog, table, "job", 0, events_at(0, 10, 59, 70), completeness=policy)
    assert published == ["ts_hour=2026-05-01-00"]
    commit_checkpoint(catalog, table, "job", 1, events_at(80, 125, first_id=10), completeness=policy)  # watermark 02:05
    assert published == ["ts_hour=2026-05-01-00", "ts_hour=2026-05-01-01"]
    # two late rows for hour 0 and one for hour 1 arrive after both were published
    commit_checkpoint(catalog, table, "job", 2, events_at(5, 6, 61, 130, first_id=20), completeness=policy)
    assert published == ["ts_hour=2026-05-01-00", "ts_hour=2026-05-01-01"], "published once, never again"

    committer = ic.GlobalCommitter(catalog, name, job_id="job")
    assert hours(committer.partition_status()) == {
        "ts_hour=2026-05-01-00": (3, 2),
        "ts_hour=2026-05-01-01": (2, 1),
    }
    metadata = catalog.load_table(name).metadata
    summaries = [find_checkpoint(metadata, "job", c).summary for c in range(3)]  # type: ignore[union-attr]
    assert [int(s[WATERMARK]) for s in summaries] == [
        micros(T0 + timedelta(minutes=70)),
        micros(T0 + timedelta(minutes=125)),
        micros(T0 + timedelta(minutes=130)),  # the watermark never goes back
    ]
    assert summaries[0].get(LATE_RECORDS) is None and summaries[1].get(LATE_RECORDS) is None
    assert summaries[2][LATE_RECORDS] == "3"
    # late rows are committed like any other: all 10 rows are in the table
    assert catalog.load_table(name).scan().to_arrow().num_rows == 10
    # ... and reconciliation reports them as late, not as a mismatch
    report = ic.reconcile(catalog, name, job_id="job", deep=True)
    assert report.ok, report.to_markdown()
    late = [p for p in report.problems if p.kind == "late-records"]
    assert [p.severity for p in late] == ["info", "info"]
    assert "2 record(s) committed into ts_hour=2026-05-01-00 after it was published complete" in late[0].message
    assert [(p.label, p.late_records) for p in report.partitions] == [
        ("ts_hour=2026-05-01-00", 2),
        ("ts_hour=2026-05-01-01", 1),
    ]
    assert report.to_dict()["partitions"][0]["records_at_completion"] == 3
    assert "| ts_hour=2026-05-01-00 |" in report.to_markdown()


def test_an_hour_without_rows_is_published_to_the_callback_with_no_records(sqlite_catalog: SqlCatalog) -> None:
    table = ic.create_table(sqlite_catalog, unique_table(), EVENTS_SCHEMA, partition_by=["hour(ts)"])
    published: list[tuple[str, int, int, int]] = []

    def seen(s: PartitionStatus) -> None:
        published.append((s.label, s.records_at_completion, s.records, s.late_records))

    policy = PartitionCompleteness(on_complete=seen)
    # hours 0, 2, 3; none in 1
    commit_checkpoint(sqlite_catalog, table, "job", 0, events_at(10, 11, 130, 190), completeness=policy)
    assert published == [
        ("ts_hour=2026-05-01-00", 2, 2, 0),
        ("ts_hour=2026-05-01-01", 0, 0, 0),
        ("ts_hour=2026-05-01-02", 1, 1, 0),
    ]


@pytest.mark.database_independent
def test_lateness_delays_completion(catalog: SqlCatalog) -> None:
    name = unique_table()
    table = ic.create_table(
        catalog, name, EVENTS_SCHEMA, partition_by=["hour(ts)"], properties={"icecommit.partition-lateness": "30m"}
    )
    commit_checkpoint(catalog, table, "job", 0, events_at(10, 80))  # watermark 01:20 < 01:00 + 30m
    committer = ic.GlobalCommitter(catalog, name, job_id="job")
    assert committer.partition_status() == []
    # watermark 01:35: hour 0 closes, with the late-ish row
    commit_checkpoint(catalog, table, "job", 1, events_at(20, 95, first_id=5))
    statuses = committer.partition_status()
    assert hours(statuses) == {"ts_hour=2026-05-01-00": (2, 0)}
    assert statuses[0].lateness == timedelta(minutes=30)
    # an explicit lateness wins over the table property
    commit_checkpoint(
        catalog, table, "job", 2, events_at(130, first_id=9), completeness=PartitionCompleteness(lateness=timedelta(0))
    )
    assert "ts_hour=2026-05-01-01" in hours(committer.partition_status())


def test_a_partition_waits_for_every_writer(catalog: SqlCatalog) -> None:
    name = unique_table()
    table = ic.create_table(catalog, name, EVENTS_SCHEMA, partition_by=["hour(ts)"])
    both = PartitionCompleteness(writers=("fast", "slow"))
    commit_checkpoint(catalog, table, "fast", 0, events_at(10, 200), completeness=both)
    committer = ic.GlobalCommitter(catalog, name, job_id="fast", completeness=both)
    assert committer.partition_status() == [], "the slow writer has committed nothing yet"
    # slow reaches 01:10
    commit_checkpoint(catalog, table, "slow", 0, events_at(20, 70, first_id=100), completeness=both)
    assert hours(committer.partition_status()) == {"ts_hour=2026-05-01-00": (2, 0)}
    commit_checkpoint(catalog, table, "slow", 1, events_at(250, first_id=200), completeness=both)  # slow reaches 04:10
    # hour 2 holds no data and both watermarks passed it: published with 0 records; hour 3
    # holds fast's row at 03:20 and waits for fast, whose watermark is 03:20
    assert hours(committer.partition_status()) == {
        "ts_hour=2026-05-01-00": (2, 0),
        "ts_hour=2026-05-01-01": (1, 0),
        "ts_hour=2026-05-01-02": (0, 0),
    }
    commit_checkpoint(catalog, table, "fast", 1, events_at(245, first_id=300), completeness=both)  # fast reaches 04:05
    assert sorted(hours(committer.partition_status())) == [
        "ts_hour=2026-05-01-00",
        "ts_hour=2026-05-01-01",
        "ts_hour=2026-05-01-02",
        "ts_hour=2026-05-01-03",
    ]
    statuses = committer.partition_status()
    assert statuses[0].writers == ("fast", "slow")


@pytest.mark.database_independent
def test_a_failed_callback_is_delivered_again_after_the_next_commit(catalog: SqlCatalog) -> None:
    name = unique_table()
    table = ic.create_table(catalog, name, EVENTS_SCHEMA, partition_by=["hour(ts)"])
    calls: list[str] = []

    def flaky(status: PartitionStatus) -> None:
        calls.append(status.label)
        if len(calls) == 1:
            raise ConnectionError("scheduler unreachable")

    policy = PartitionCompleteness(on_complete=flaky)
    # the commit lands; the call failed
    commit_checkpoint(catalog, table, "job", 0, events_at(0, 70), completeness=policy)
    assert catalog.load_table(name).scan().to_arrow().num_rows == 2
    committer = ic.GlobalCommitter(catalog, name, job_id="job")
    assert [s.notified_at for s in committer.partition_status()] == [None]
    commit_checkpoint(catalog, table, "job", 1, events_at(75, first_id=5), completeness=policy)
    assert calls == ["ts_hour=2026-05-01-00", "ts_hour=2026-05-01-00"]
    assert committer.partition_status()[0].notified_at is not None
    commit_checkpoint(catalog, table, "job", 2, events_at(80, first_id=6), completeness=policy)
    assert len(calls) == 2, "delivered once it succeeded, never again"


def test_completion_survives_a_crash_between_commit_and_publication(catalog: SqlCatalog) -> None:
    """The status is derived from committed checkpoints: a committer that died before
    publishing leaves it to the next commit, or to an explicit publish."""
    name = unique_table()
    table = ic.create_table(catalog, name, EVENTS_SCHEMA, partition_by=["hour(ts)"])
    commit_checkpoint(catalog, table, "job", 0, events_at(0, 70))
    engine = state_engine(state_uri(catalog))
    with engine.begin() as conn:  # as if the process died right after marking the commit
        conn.execute(text("DELETE FROM icecommit_partition_status WHERE table_name = :t"), {"t": name})
    committer = ic.GlobalCommitter(catalog, name, job_id="job")
    assert committer.partition_status() == []
    assert [s.label for s in committer.publish_complete_partitions()] == ["ts_hour=2026-05-01-00"]
    assert committer.publish_complete_partitions() == []
    assert hours(committer.partition_status()) == {"ts_hour=2026-05-01-00": (1, 0)}


def test_rows_without_event_time_belong_to_no_time_partition(sqlite_catalog: SqlCatalog) -> None:
    table = ic.create_table(sqlite_catalog, "ns.t", EVENTS_SCHEMA, partition_by=["hour(ts)"])
    data = events_at(0, 70)
    nulls = pa.table(
        {"id": [50], "ts": pa.array([None], pa.timestamp("us", tz="UTC")), "event": ["pv"], "score": [1.0]},
        schema=EVENTS_SCHEMA,
    )
    commit_checkpoint(sqlite_catalog, table, "job", 0, pa.concat_tables([data, nulls]))
    committer = ic.GlobalCommitter(sqlite_catalog, "ns.t", job_id="job")
    assert hours(committer.partition_status()) == {"ts_hour=2026-05-01-00": (1, 0)}


@pytest.mark.database_independent
def test_a_far_future_row_is_committed_and_counted_but_publishes_nothing_early(catalog: SqlCatalog) -> None:
    name = unique_table()
    table = ic.create_table(catalog, name, EVENTS_SCHEMA, partition_by=["hour(ts)"])
    rows = events_at(10, 20)
    future = pa.table(
        {
            "id": pa.array([99], pa.int64()),
            "ts": pa.array([dt.datetime(2099, 1, 1, 12, tzinfo=dt.timezone.utc)], pa.timestamp("us", tz="UTC")),
            "event": pa.array(["pv"]),
            "score": pa.array([1.0]),
        },
        schema=rows.schema,
    )
    commit_checkpoint(catalog, table, "job", 0, pa.concat_tables([rows, future]))
    committer = ic.GlobalCommitter(catalog, name, job_id="job")
    assert committer.partition_status() == []  # the 2099 row did not close 73 years of hours
    state = committer.store.get("job", name, 0)
    assert state is not None and (state.future_records, state.max_event_time_us) == (1, micros(future["ts"][0].as_py()))
    head = catalog.load_table(name).current_snapshot()
    assert head is not None and head.summary is not None
    assert head.summary["icecommit.future-records"] == "1"
    assert catalog.load_table(name).scan(row_filter="id == 99").to_arrow().num_rows == 1  # committed all the same
    commit_checkpoint(catalog, table, "job", 1, events_at(130, first_id=10))  # the watermark reaches 02:10
    assert hours(committer.partition_status()) == {"ts_hour=2026-05-01-00": (2, 0), "ts_hour=2026-05-01-01": (0, 0)}
    report = ic.reconcile(catalog, name)
    [warning] = [p for p in report.problems if p.kind == "future-records"]
    assert (warning.checkpoint_id, warning.severity) == (0, "warning") and "1 row(s)" in warning.message


@pytest.mark.database_independent
def test_a_routed_table_that_rarely_gets_rows_moves_with_the_checkpoints_event_time(catalog: SqlCatalog) -> None:
    quiet_name, busy_name = unique_table(), unique_table()
    quiet = ic.create_table(catalog, quiet_name, EVENTS_SCHEMA, partition_by=["hour(ts)"])
    busy = ic.create_table(catalog, busy_name, EVENTS_SCHEMA, partition_by=["hour(ts)"])
    committers = {name: ic.GlobalCommitter(catalog, name, job_id="job") for name in (quiet_name, busy_name)}

    def routed(checkpoint: int, quiet_rows: pa.Table | None, busy_rows: pa.Table) -> None:
        results = {
            quiet_name: [write_arrow(quiet, quiet_rows, job_id="job", checkpoint_id=checkpoint)]
            if quiet_rows is not None
            else [],
            busy_name: [write_arrow(busy, busy_rows, job_id="job", checkpoint_id=checkpoint)],
        }
        for name, own in results.items():
            others = [r for other, rs in results.items() if other != name for r in rs]
            committers[name].prepare(checkpoint, own, routed_with=others)
        for committer in committers.values():
            committer.commit(checkpoint)

    routed(0, events_at(10), events_at(20, first_id=10))
    routed(1, None, events_at(125, first_id=20))  # the quiet table gets no row; the checkpoint reached 02:05
    expected = {"ts_hour=2026-05-01-00": (1, 0), "ts_hour=2026-05-01-01": (0, 0)}
    assert hours(committers[quiet_name].partition_status()) == expected
    assert hours(committers[busy_name].partition_status()) == {
        "ts_hour=2026-05-01-00": (1, 0),
        "ts_hour=2026-05-01-01": (0, 0),
    }
    # a far-future row routed elsewhere does not move the quiet table either
    future = pa.table(
        {
            "id": pa.array([99], pa.int64()),
            "ts": pa.array([dt.datetime(2099, 1, 1, tzinfo=dt.timezone.utc)], pa.timestamp("us", tz="UTC")),
            "event": pa.array(["pv"]),
            "score": pa.array([1.0]),
        },
        schema=EVENTS_SCHEMA,
    )
    routed(2, None, future)
    assert hours(committers[quiet_name].partition_status()) == expected
    state = committers[quiet_name].store.get("job", quiet_name, 2)
    assert state is not None and (state.records, state.future_records) == (0, 0)
    # the table's own rows later than those routed elsewhere: its own event time counts
    own = events_at(190, first_id=40)
    routed(3, own, events_at(150, first_id=50))
    state = committers[quiet_name].store.get("job", quiet_name, 3)
    assert state is not None and state.watermark_us == micros(max(own["ts"].to_pylist()))


@pytest.mark.database_independent
def test_the_max_future_skew_is_a_table_property_checked_at_the_door(catalog: SqlCatalog) -> None:
    name = unique_table()
    table = ic.create_table(
        catalog, name, EVENTS_SCHEMA, partition_by=["hour(ts)"], properties={"icecommit.max-future-skew": "soon"}
    )
    committer = ic.GlobalCommitter(catalog, name, job_id="job")
    with pytest.raises(InvalidArgumentError) as raised:
        committer.prepare(0, [write_arrow(table, events_at(10), job_id="job", checkpoint_id=0)])
    assert "icecommit.max-future-skew" in str(raised.value) and "'soon'" in str(raised.value)
    assert committer.store.get("job", name, 0) is None


# -- idle writers ---------------------------------------------------------------------------


class Clock:
    """A settable clock for the state stores (prepare, commit and publication times)."""

    def __init__(self, minutes: int) -> None:
        self.now = T0 + timedelta(minutes=minutes)

    def __call__(self) -> dt.datetime:
        return self.now

    def at(self, minutes: int) -> None:
        self.now = T0 + timedelta(minutes=minutes)


def _commit_at(
    catalog: SqlCatalog, table: Table, clock: Clock, job: str, checkpoint: int, data: pa.Table, policy: object
) -> None:
    from icecommit.state.checkpoints import CheckpointStore

    store = CheckpointStore(state_engine(state_uri(catalog)), clock=clock)
    committer = ic.GlobalCommitter(catalog, table, job_id=job, store=store, completeness=policy)  # type: ignore[arg-type]
    committer.prepare(checkpoint, [write_arrow(table, data, job_id=job, checkpoint_id=checkpoint)])
    committer.commit(checkpoint)


def _labels(catalog: SqlCatalog, name: str) -> list[str]:
    return sorted(s.label for s in ic.GlobalCommitter(catalog, name, job_id="a").partition_status())


@pytest.mark.database_independent
def test_an_idle_live_writer_stops_holding_partitions_back_and_a_quiet_stream_publishes_its_last_hour(
    catalog: SqlCatalog,
) -> None:
    name = unique_table()
    table = ic.create_table(catalog, name, EVENTS_SCHEMA, partition_by=["hour(ts)"])
    policy = PartitionCompleteness(writers=("a", "b"), idle_timeout=timedelta(minutes=15))
    clock = Clock(55)
    _commit_at(catalog, table, clock, "a", 0, events_at(10, 50), policy)
    _commit_at(catalog, table, clock, "b", 0, events_at(50, first_id=100), policy)  # b is live: 00:50 at 00:55
    assert _labels(catalog, name) == []
    clock.at(80)  # 01:20: b has been quiet for 25 minutes, more than the idle timeout
    _commit_at(catalog, table, clock, "a", 1, events_at(75, first_id=200), policy)  # a reaches 01:15
    assert _labels(catalog, name) == ["ts_hour=2026-05-01-00"]  # b no longer holds hour 0 back
    # then a goes quiet too: the last hour the data reached is published once it is over
    # by lateness plus the idle timeout, by a scheduler (no commit), and nothing beyond it
    clock.at(130)  # 02:10
    assert publish_complete_partitions(catalog, name, clock=clock) == []
    clock.at(136)  # 02:16, past 02:00 + 15m
    published = publish_complete_partitions(catalog, name, clock=clock)
    assert [(s.label, s.records_at_completion) for s in published] == [("ts_hour=2026-05-01-01", 1)]
    clock.at(600)
    assert publish_complete_partitions(catalog, name, clock=clock) == []  # the data reached no further
    assert _labels(catalog, name) == ["ts_hour=2026-05-01-00", "ts_hour=2026-05-01-01"]


@pytest.mark.database_independent
def test_a_paused_backfill_and_a_writer_that_never_committed_keep_holding(catalog: SqlCatalog) -> None:
    name = unique_table()
    table = ic.create_table(catalog, name, EVENTS_SCHEMA, partition_by=["hour(ts)"])
    clock = Clock(200)  # 03:20
    backfill = PartitionCompleteness(writers=("live", "backfill"), idle_timeout=timedelta(minutes=15))
    _commit_at(catalog, table, clock, "backfill", 0, events_at(5, first_id=100), backfill)  # far behind the clock
    _commit_at(catalog, table, clock, "live", 0, events_at(10, 190), backfill)
    clock.at(400)  # both quiet for over three hours; the backfill was never live, so it holds hour 0
    assert publish_complete_partitions(catalog, name, clock=clock) == []
    name2 = unique_table()
    table2 = ic.create_table(catalog, name2, EVENTS_SCHEMA, partition_by=["hour(ts)"])
    typo = PartitionCompleteness(writers=("live", "liev"), idle_timeout=timedelta(minutes=15))
    clock.at(200)
    _commit_at(catalog, table2, clock, "live", 0, events_at(10, 190), typo)
    clock.at(900)
    assert publish_complete_partitions(catalog, name2, clock=clock) == []  # a typo releases nothing


@pytest.mark.database_independent
def test_the_idle_timeout_can_come_from_the_table_and_publish_needs_a_recorded_policy(
    catalog: SqlCatalog, tmp_path: Path
) -> None:
    name = unique_table()
    table = ic.create_table(
        catalog, name, EVENTS_SCHEMA, partition_by=["hour(ts)"], properties={"icecommit.writer-idle-timeout": "10m"}
    )
    with pytest.raises(InvalidArgumentError) as raised:
        publish_complete_partitions(catalog, name)
    assert "completeness policy" in str(raised.value)
    clock = Clock(50)
    _commit_at(catalog, table, clock, "a", 0, events_at(10, 45), PartitionCompleteness())
    clock.at(75)  # 01:15 = 01:00 + 10m idle + 5m
    assert [s.label for s in publish_complete_partitions(catalog, name, clock=clock)] == ["ts_hour=2026-05-01-00"]


@pytest.mark.database_independent
def test_a_published_partition_gets_its_marker_which_the_orphan_sweep_keeps(catalog: SqlCatalog) -> None:
    name = unique_table()
    table = ic.create_table(
        catalog,
        name,
        EVENTS_SCHEMA,
        partition_by=["hour(ts)", "event"],
        properties={"icecommit.partition-marker": "true"},
    )
    commit_checkpoint(catalog, table, "job", 0, events_at(10, 130))  # hours 0 and 1 are published; hour 2 is not
    location = table.metadata.location.removeprefix("file://")
    data = Path(location) / "data"
    markers = sorted(p.relative_to(data).as_posix() for p in data.rglob("_SUCCESS"))
    assert markers == ["ts_hour=2026-05-01-00/_SUCCESS", "ts_hour=2026-05-01-01/_SUCCESS"]
    assert (data / "ts_hour=2026-05-01-00" / "_SUCCESS").stat().st_size == 0
    # a marker a failure left out is written by the scheduler's publish; markers are never orphans,
    # a stray one where no partition was published is
    (data / "ts_hour=2026-05-01-01" / "_SUCCESS").unlink()
    stray = data / "ts_hour=2026-05-01-02" / "_SUCCESS"
    stray.write_bytes(b"")
    assert publish_complete_partitions(catalog, name) == []
    assert (data / "ts_hour=2026-05-01-01" / "_SUCCESS").exists()
    sweep = ic.maintenance.find_orphans(
        catalog, name, older_than=timedelta(0), now=dt.datetime.now(dt.timezone.utc) + timedelta(minutes=1)
    )
    assert [Path(o.path).relative_to(data).as_posix() for o in sweep.orphans] == ["ts_hour=2026-05-01-02/_SUCCESS"]
    # a table without the property gets none, and a wrong value is refused at the door
    plain = ic.create_table(catalog, unique_table(), EVENTS_SCHEMA, partition_by=["hour(ts)"])
    commit_checkpoint(catalog, plain, "job", 0, events_at(10, 130))
    assert not list(Path(plain.metadata.location.removeprefix("file://")).rglob("_SUCCESS"))
    wrong = ic.create_table(
        catalog,
        unique_table(),
        EVENTS_SCHEMA,
        partition_by=["hour(ts)"],
        properties={"icecommit.partition-marker": "yes"},
    )
    with pytest.raises(InvalidArgumentError) as raised:
        commit_checkpoint(catalog, wrong, "job", 0, events_at(10, 130))
    assert "icecommit.partition-marker" in str(raised.value) and "true or false" in str(raised.value)
