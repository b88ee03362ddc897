"""The checkpoint and partition-status stores, transition by transition: each change
touches exactly the row of its (job, table, checkpoint), only from the statuses it allows,
and says how many rows it changed. Rows of another job, another table and another
checkpoint with the same id sit beside every row changed, so a lost condition shows."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone

import pytest
from pyiceberg.catalog.sql import SqlCatalog
from sqlalchemy import select
from sqlalchemy.orm import Session

from icecommit.state import CheckpointStore, state_engine, state_uri
from icecommit.state.checkpoints import CheckpointState, PublishCounters
from icecommit.state.models import CheckpointRow, MetricRow, PartitionStatusRow, in_utc
from icecommit.state.partitions import PartitionStatusStore
from icecommit.state.samples import (
    QUERY_INPUT,
    QUERY_INPUT_KEPT,
    QUERY_INPUT_ROUTED,
    QUERY_INPUT_ROUTED_KEPT,
    STAGE_COMMITTED,
    WRITTEN,
    MetricSample,
    SourceRange,
)
from tests.conftest import unique_table

NOW = datetime(2026, 11, 20, 9, 30, tzinfo=timezone.utc)
#: every (job, table, checkpoint) a test prepares: the neighbours of ("j", T, 1)
NEIGHBOURS = (("j", "T", 2), ("other", "T", 1), ("j", "U", 1))


@pytest.fixture
def store(catalog: SqlCatalog) -> CheckpointStore:
    return CheckpointStore(state_engine(state_uri(catalog)), clock=lambda: NOW)


@pytest.fixture
def names() -> dict[str, str]:
    """Table names of this test's own (the state database is shared by the session)."""
    return {"T": unique_table(), "U": unique_table()}


def _prepare(store: CheckpointStore, job: str, table: str, checkpoint_id: int, records: int = 10) -> None:
    store.insert_prepared(
        job_id=job, table_name=table, checkpoint_id=checkpoint_id, manifest_path=None, files_digest="d",
        source_records=records, records=records, files=1, bytes_=100, max_event_time_us=None,
        tasks=[(0, 0)], samples=[MetricSample(WRITTEN, None, records, task_id=0, attempt=0)],
    )  # fmt: skip


def _commit(store: CheckpointStore, job: str, table: str, checkpoint_id: int, snapshot_id: int | None) -> None:
    store.mark_committed(
        job, table, checkpoint_id, snapshot_id=snapshot_id, attempts=1, retries=0, counters=PublishCounters(),
        samples=[MetricSample(STAGE_COMMITTED, None, 10)],
    )  # fmt: skip


def _all(store: CheckpointStore, names: dict[str, str]) -> dict[tuple[str, str, int], CheckpointState]:
    rows = {}
    for alias, table in names.items():
        for row in store.list(table):
            rows[(row.job_id, alias, row.checkpoint_id)] = row
    return rows


def _statuses(store: CheckpointStore, names: dict[str, str]) -> dict[tuple[str, str, int], str]:
    return {key: row.status for key, row in _all(store, names).items()}


def _with_neighbours(store: CheckpointStore, names: dict[str, str]) -> None:
    for job, alias, checkpoint_id in (("j", "T", 1), *NEIGHBOURS):
        _prepare(store, job, names[alias], checkpoint_id)


def _metric_stages(store: CheckpointStore, job: str, table: str, checkpoint_id: int) -> list[tuple[str, int]]:
    with Session(store.engine) as session:
        query = select(MetricRow.stage, MetricRow.records).where(
            MetricRow.job_id == job, MetricRow.table_name == table, MetricRow.checkpoint_id == checkpoint_id
        )
        return sorted((stage, int(records)) for stage, records in session.execute(query))


def test_abandon_acknowledge_and_reopen_change_one_row_from_the_statuses_they_allow(
    store: CheckpointStore, names: dict[str, str]
) -> None:
    _with_neighbours(store, names)
    T = names["T"]
    assert store.abandon("j", T, 1, reason="lost", by="oncall") is True
    assert _statuses(store, names) == {("j", "T", 1): "abandoned", **{n: "prepared" for n in NEIGHBOURS}}
    row = store.get("j", T, 1)
    assert row is not None and (row.abandon_reason, row.abandoned_by, row.abandoned_at) == ("lost", "oncall", NOW)
    assert store.abandon("j", T, 1, reason="again", by="x") is False  # abandoned already: unchanged
    assert store.get("j", T, 1).abandon_reason == "lost"  # type: ignore[union-attr]

    assert store.acknowledge("other", T, 1, by="lead") is False  # prepared, not abandoned
    assert store.acknowledge("j", T, 1, by="lead") is True
    acknowledged = store.get("j", T, 1)
    assert acknowledged is not None and (acknowledged.acknowledged_by, acknowledged.acknowledged_at) == ("lead", NOW)
    assert all(r.acknowledged_by is None for k, r in _all(store, names).items() if k != ("j", "T", 1))

    store.reopen_abandoned("j", T, 1)  # a commit won the race: prepared again, its abandon undone
    reopened = store.get("j", T, 1)
    assert reopened is not None and reopened.status == "prepared"
    assert (reopened.abandon_reason, reopened.abandoned_by, reopened.abandoned_at) == (None, None, None)
    _commit(store, "j", T, 2, 7)
    store.reopen_abandoned("j", T, 2)  # not abandoned: left as it is
    assert store.get("j", T, 2).status == "committed"  # type: ignore[union-attr]
    # a committed or rolled-back checkpoint: abandon is a compare-and-set on the status
    assert store.abandon("j", T, 2, reason="late", by="x") is False
    assert store.mark_rolled_back(T, [("j", 2)]) == 1
    assert store.abandon("j", T, 2, reason="given up", by="x") is True


def test_mark_rolled_back_counts_what_it_changed_and_keeps_a_checkpoint_committed_again(
    store: CheckpointStore, names: dict[str, str]
) -> None:
    T, U = names["T"], names["U"]
    for checkpoint_id in range(1, 6):
        _prepare(store, "j", T, checkpoint_id)
    _prepare(store, "j", U, 2)
    _commit(store, "j", T, 1, 101)
    _commit(store, "j", T, 2, 102)
    _commit(store, "j", U, 2, 102)
    _commit(store, "j", T, 4, 104)
    store.abandon("j", T, 3, reason="r", by="b")
    # 3 (abandoned), 9 (no row) and 4 (committed again) come first and are skipped, not the end of it
    pairs = [("j", 3), ("j", 9), ("j", 4), ("j", 2), ("j", 5)]
    # 4 was committed again since: its row names snapshot 204, not the removed 104
    _commit(store, "j", T, 4, 204)
    assert store.mark_rolled_back(T, pairs, snapshots={("j", 2): 102, ("j", 4): 104}) == 2
    assert _statuses(store, names) == {
        ("j", "T", 1): "committed", ("j", "T", 2): "rolled-back", ("j", "T", 3): "abandoned",
        ("j", "T", 4): "committed", ("j", "T", 5): "rolled-back", ("j", "U", 2): "committed",
    }  # fmt: skip
    # without the snapshots, a committed row is taken as removed whatever its snapshot
    assert store.mark_rolled_back(T, [("j", 4)]) == 1
    assert store.mark_rolled_back(T, [("j", 1)], snapshots={("j", 1): 101}) == 1
    assert store.mark_rolled_back(T, [("j", 1), ("j", 2)]) == 0  # rolled back already


def test_mark_restored_puts_back_only_rolled_back_checkpoints_that_had_a_snapshot(
    store: CheckpointStore, names: dict[str, str]
) -> None:
    T, U = names["T"], names["U"]
    for checkpoint_id in (1, 2, 3, 4):
        _prepare(store, "j", T, checkpoint_id)
    _prepare(store, "other", T, 1)
    _prepare(store, "j", U, 1)
    for job, table, checkpoint_id in (("j", T, 1), ("j", T, 2), ("other", T, 1), ("j", U, 1)):
        _commit(store, job, table, checkpoint_id, 100 + checkpoint_id)
    # 3 was still prepared when the rollback removed it: it has no snapshot to go back to
    assert store.mark_rolled_back(T, [("j", 1), ("j", 2), ("j", 3), ("other", 1)]) == 4
    store.mark_rolled_back(U, [("j", 1)])
    assert store.mark_restored(T, [("j", 4), ("j", 3), ("j", 1), ("j", 2), ("j", 7)]) == 2
    assert _statuses(store, names) == {
        ("j", "T", 1): "committed", ("j", "T", 2): "committed", ("j", "T", 3): "rolled-back",
        ("j", "T", 4): "prepared", ("other", "T", 1): "rolled-back", ("j", "U", 1): "rolled-back",
    }  # fmt: skip
    assert store.get("j", T, 2).snapshot_id == 102  # type: ignore[union-attr]
    assert store.mark_restored(T, [("j", 1)]) == 0  # committed already
    assert store.mark_restored(T, []) == 0


def test_mark_committed_adds_attempts_and_leaves_a_rolled_back_row_unless_told(
    store: CheckpointStore, names: dict[str, str]
) -> None:
    T = names["T"]
    _prepare(store, "j", T, 1)
    first = store.mark_committed(
        "j", T, 1, snapshot_id=11, attempts=2, retries=1, counters=PublishCounters(committed=3, skipped=1, missing=0),
        samples=[MetricSample(STAGE_COMMITTED, None, 10)],
    )  # fmt: skip
    assert (first.status, first.snapshot_id, first.attempts, first.retries, first.committed_at) == (
        "committed", 11, 2, 1, NOW
    )  # fmt: skip
    assert (first.counters.committed, first.counters.skipped, first.counters.missing) == (3, 1, 0)
    store.mark_rolled_back(T, [("j", 1)])
    kept = store.mark_committed("j", T, 1, snapshot_id=12, attempts=1, retries=0, counters=PublishCounters())
    assert (kept.status, kept.snapshot_id, kept.attempts) == ("rolled-back", 11, 2)
    store.clear_committed_metrics("j", T, 1)
    again = store.mark_committed(
        "j", T, 1, snapshot_id=12, attempts=1, retries=3, counters=PublishCounters(committed=3),
        samples=[MetricSample(STAGE_COMMITTED, None, 10)], from_rolled_back=True,
    )  # fmt: skip
    assert (again.status, again.snapshot_id, again.attempts, again.retries) == ("committed", 12, 3, 4)
    assert _metric_stages(store, "j", T, 1) == [(STAGE_COMMITTED, 10), (WRITTEN, 10)]  # counted once


def test_clear_committed_metrics_drops_only_that_checkpoints_committed_stage(
    store: CheckpointStore, names: dict[str, str]
) -> None:
    _with_neighbours(store, names)
    T = names["T"]
    for job, alias, checkpoint_id in (("j", "T", 1), *NEIGHBOURS):
        _commit(store, job, names[alias], checkpoint_id, 1)
    store.clear_committed_metrics("j", T, 1)
    assert _metric_stages(store, "j", T, 1) == [(WRITTEN, 10)]
    for job, alias, checkpoint_id in NEIGHBOURS:
        assert _metric_stages(store, job, names[alias], checkpoint_id) == [(STAGE_COMMITTED, 10), (WRITTEN, 10)]


def test_unknown_outcomes_and_missing_files_are_counted_on_their_own_row(
    store: CheckpointStore, names: dict[str, str]
) -> None:
    _with_neighbours(store, names)
    T = names["T"]
    store.record_unknown_outcome("j", T, 1)
    store.record_unknown_outcome("j", T, 1)
    store.record_missing("j", T, 1, 3)
    rows = _all(store, names)
    assert (rows[("j", "T", 1)].unknown_outcomes, rows[("j", "T", 1)].counters.missing) == (2, 3)
    assert all((rows[n].unknown_outcomes, rows[n].counters.missing) == (0, 0) for n in NEIGHBOURS)
    store.record_missing("j", T, 1, 0)  # the last try found them all
    assert store.get("j", T, 1).counters.missing == 0  # type: ignore[union-attr]


def test_records_in_all_tables_sums_one_checkpoint_of_one_job_per_table(
    store: CheckpointStore, names: dict[str, str]
) -> None:
    T, U = names["T"], names["U"]
    job, other = f"j-{T}", f"other-{T}"  # the job is the key here: one of this test's own
    _prepare(store, job, T, 1, records=7)
    _prepare(store, job, U, 1, records=5)
    _prepare(store, job, T, 2, records=100)
    _prepare(store, other, U, 1, records=1000)
    _prepare(store, other, T, 1, records=0)  # a checkpoint that routed no rows to T
    assert store.records_in_all_tables(job, 1) == {T: 7, U: 5}
    assert store.records_in_all_tables(other, 1) == {U: 1000, T: 0}
    assert store.records_in_all_tables(job, 3) == {}


@pytest.mark.parametrize(
    ("preserves_rows", "routed", "stage"),
    [(False, False, QUERY_INPUT), (True, False, QUERY_INPUT_KEPT), (False, True, QUERY_INPUT_ROUTED),
     (True, True, QUERY_INPUT_ROUTED_KEPT)],
)  # fmt: skip
def test_a_querys_input_is_recorded_once_per_batch_with_its_offsets(
    store: CheckpointStore, names: dict[str, str], preserves_rows: bool, routed: bool, stage: str
) -> None:
    _with_neighbours(store, names)
    T = names["T"]
    offsets = [
        SourceRange("KafkaV2[Subscribe[t]]", '{"t":{"0":0}}', '{"t":{"0":12}}', 12),
        SourceRange("rate", None, "5", 0),
    ]
    for job, alias, checkpoint_id in NEIGHBOURS:
        store.record_query_input(job, names[alias], checkpoint_id, 3, preserves_rows=False, offsets=offsets[1:])
    store.record_query_input("j", T, 1, 9, preserves_rows=not preserves_rows, routed=not routed, offsets=offsets[1:])
    # a restarted query reports the batch again: the report replaces the earlier one
    store.record_query_input("j", T, 1, 12, preserves_rows=preserves_rows, routed=routed, offsets=offsets)
    assert _metric_stages(store, "j", T, 1) == sorted([(stage, 12), (WRITTEN, 10)])
    assert store.get("j", T, 1).source_offsets == tuple(offsets)  # type: ignore[union-attr]
    for job, alias, checkpoint_id in NEIGHBOURS:
        assert _metric_stages(store, job, names[alias], checkpoint_id) == [(QUERY_INPUT, 3), (WRITTEN, 10)]
        assert store.get(job, names[alias], checkpoint_id).source_offsets == (offsets[1],)  # type: ignore[union-attr]
    store.record_query_input("j", T, 1, 12, preserves_rows=preserves_rows, routed=routed)  # no offsets reported
    assert store.get("j", T, 1).source_offsets == ()  # type: ignore[union-attr]


def test_mark_notified_sets_the_time_on_that_partition_only(catalog: SqlCatalog, names: dict[str, str]) -> None:
    partitions = PartitionStatusStore(state_engine(state_uri(catalog)), clock=lambda: NOW)
    T, U = names["T"], names["U"]
    start = datetime(2026, 11, 20, tzinfo=timezone.utc)
    with Session(state_engine(state_uri(catalog))) as session, session.begin():
        # inserted out of order: statuses come by field, then value
        for table, field, value in ((T, "ts_hour", 5), (T, "ts_day", 6), (U, "ts_day", 5), (T, "ts_day", 5)):
            session.add(
                PartitionStatusRow(
                    table_name=table, partition_field=field, partition_value=value, label=f"{field}={value}",
                    start=start, end=start + timedelta(days=1), watermark=start, lateness_s=0,
                    writers="" if field == "ts_hour" else "j,k",
                    records_at_completion=0, completed_at=start, completed_by="j",
                )
            )  # fmt: skip
    [day_five] = [s for s in partitions.undelivered(T) if (s.field, s.value) == ("ts_day", 5)]
    partitions.mark_notified(day_five)
    assert [(s.field, s.value) for s in partitions.undelivered(T)] == [("ts_day", 6), ("ts_hour", 5)]
    assert [s.notified_at for s in partitions.statuses(T) if s.notified_at is not None] == [NOW]
    assert [s.notified_at for s in partitions.statuses(U)] == [None]
    assert [(s.field, s.value, s.writers) for s in partitions.statuses(T)] == [
        ("ts_day", 5, ("j", "k")), ("ts_day", 6, ("j", "k")), ("ts_hour", 5, ()),
    ]  # fmt: skip
    assert [(s.start, s.end, s.completed_by) for s in partitions.statuses(U)] == [
        (start, start + timedelta(days=1), "j")
    ]


def test_jobs_and_has_job_are_per_table(store: CheckpointStore, names: dict[str, str]) -> None:
    T, U = names["T"], names["U"]
    _prepare(store, "j", T, 1)
    _prepare(store, "j", T, 2)
    _prepare(store, "other", U, 1)
    assert (store.has_job(T, "j"), store.has_job(T, "other"), store.has_job(U, "other"), store.has_job(U, "j")) == (
        True, False, True, False
    )  # fmt: skip
    assert (store.jobs(T), store.jobs(U)) == (["j"], ["other"])


def test_the_default_clock_is_utc() -> None:
    from icecommit.state.models import utc_now

    before = datetime.now(timezone.utc)
    now = utc_now()
    assert now.tzinfo is timezone.utc and before <= now <= datetime.now(timezone.utc)


def test_a_range_holds_rows_of_its_own_table_only(store: CheckpointStore, names: dict[str, str]) -> None:
    T, U = names["T"], names["U"]
    _prepare(store, "j", T, 1)
    _prepare(store, "j", U, 2)  # prepared: it needs a person, but in another table
    until = NOW + timedelta(days=1)
    assert [(r.table_name, r.checkpoint_id) for r in store.in_range(T, until=until)] == [(T, 1)]
    assert [(r.table_name, r.checkpoint_id) for r in store.in_range(U, job_id="j", until=until)] == [(U, 2)]


@pytest.mark.mutation_postgres  # SQLite reads the rows through the unique index, in order anyway
def test_a_range_lists_each_jobs_checkpoints_in_order_whatever_order_they_were_prepared_in(
    store: CheckpointStore, names: dict[str, str]
) -> None:
    T = names["T"]
    for job, checkpoint_id in (("k", 2), ("j", 3), ("j", 1), ("k", 1), ("j", 2)):
        _prepare(store, job, T, checkpoint_id)
    rows = store.in_range(T, until=NOW + timedelta(days=1))
    assert [(r.job_id, r.checkpoint_id) for r in rows] == [("j", 1), ("j", 2), ("j", 3), ("k", 1), ("k", 2)]
    assert [(r.job_id, r.checkpoint_id) for r in store.list(T)] == [("j", 1), ("j", 2), ("j", 3), ("k", 1), ("k", 2)]


def test_a_prepared_row_reads_back_as_written_with_no_attempts_yet(
    store: CheckpointStore, names: dict[str, str]
) -> None:
    state, inserted = store.insert_prepared(
        job_id="j", table_name=names["T"], checkpoint_id=1, manifest_path="s3://b/m.avro", files_digest="d",
        source_records=12, records=11, files=2, bytes_=300, max_event_time_us=7_000, watermark_us=6_000,
        future_records=1, query_id="q",
    )  # fmt: skip
    assert inserted
    for row in (state, store.get("j", names["T"], 1)):
        assert row is not None
        assert (row.status, row.source_records, row.records, row.files, row.bytes) == ("prepared", 12, 11, 2, 300)
        assert (row.max_event_time_us, row.watermark_us, row.future_records, row.query_id) == (7_000, 6_000, 1, "q")
        assert (row.attempts, row.retries, row.snapshot_id) == (0, 0, None)
        # files created by the writers; none committed, skipped or missing yet, no unknown outcome
        assert (row.counters, row.unknown_outcomes) == (PublishCounters(created=2), 0)


def test_a_row_without_a_recorded_watermark_reads_its_event_time_maximum_as_one(
    store: CheckpointStore, names: dict[str, str]
) -> None:
    """Rows written before the watermark was recorded apart (NULL) hold it as the maximum."""
    _prepare(store, "j", names["T"], 1)
    store.insert_prepared(
        job_id="j", table_name=names["T"], checkpoint_id=2, manifest_path=None, files_digest="d",
        source_records=1, records=1, files=1, bytes_=1, max_event_time_us=9_000,
    )  # fmt: skip
    with Session(store.engine) as session, session.begin():
        for row in session.execute(select(CheckpointRow).where(CheckpointRow.table_name == names["T"])).scalars():
            row.watermark_us = None
    older, newer = store.get("j", names["T"], 1), store.get("j", names["T"], 2)
    assert older is not None and newer is not None
    assert (older.watermark_us, newer.watermark_us) == (None, 9_000)


def test_a_time_read_back_is_in_utc_whatever_the_process_time_zone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        moment = in_utc(datetime(2026, 11, 20, 9, 30))  # naive, as SQLite gives it back
        assert moment.tzinfo is timezone.utc and moment.hour == 9
        assert in_utc(datetime(2026, 11, 20, 9, 30, tzinfo=timezone(timedelta(hours=2)))).hour == 7
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()


def test_a_prepared_row_keeps_the_features_its_commit_needs_sorted_once_each(
    store: CheckpointStore, names: dict[str, str]
) -> None:
    table = names["T"]
    for checkpoint_id, features in ((1, ("schema-change", "row-delta", "row-delta")), (2, ())):
        store.insert_prepared(
            job_id="j", table_name=table, checkpoint_id=checkpoint_id, manifest_path=None, files_digest="d",
            source_records=1, records=1, files=0, bytes_=0, max_event_time_us=None, features=features,
        )  # fmt: skip
    first, second = store.get("j", table, 1), store.get("j", table, 2)
    assert first is not None and first.features == ("row-delta", "schema-change")
    assert second is not None and second.features == ()
