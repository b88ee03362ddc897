"""The checkpoint rows of a range come from the database's own filter: exactly the rows
prepared in ``[since, until)`` plus the ones that still need a person, on SQLite and
PostgreSQL, whatever time zone the clock and the range are given in."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from pyiceberg.catalog.sql import SqlCatalog

from icecommit.state import CheckpointStore, state_engine, state_uri
from icecommit.state.checkpoints import PublishCounters
from tests.conftest import unique_table

START = datetime(2026, 11, 20, tzinfo=timezone.utc)
PLUS_FIVE = timezone(timedelta(hours=5))


def _prepare(store: CheckpointStore, table: str, checkpoint_id: int, job: str = "j") -> None:
    store.insert_prepared(
        job_id=job, table_name=table, checkpoint_id=checkpoint_id, manifest_path=None, files_digest="d",
        source_records=0, records=0, files=0, bytes_=0, max_event_time_us=None,
    )  # fmt: skip


def test_a_range_selects_by_prepare_time_and_keeps_what_needs_a_person(catalog: SqlCatalog) -> None:
    now = [START]
    # a clock in UTC+5: stored in UTC, so the range below (in UTC and in UTC-3) compares right
    store = CheckpointStore(state_engine(state_uri(catalog)), clock=lambda: now[0].astimezone(PLUS_FIVE))
    table = unique_table()
    for checkpoint_id in range(1, 9):
        now[0] = START + timedelta(hours=checkpoint_id)
        _prepare(store, table, checkpoint_id)
        if checkpoint_id not in (2, 3):
            assert store.mark_committed(
                "j", table, checkpoint_id, snapshot_id=checkpoint_id, attempts=1, retries=0, counters=PublishCounters()
            )
    _prepare(store, table, 1, job="other")  # another job, prepared at hour 8
    store.abandon("j", table, 3, reason="test", by="me")  # abandoned, not acknowledged: kept whatever the range
    # hours 5 and 6: checkpoints 5 and 6 of job j, plus 2 (prepared, stuck) and 3 (abandoned)
    since = (START + timedelta(hours=5)).astimezone(timezone(timedelta(hours=-3)))
    until = START + timedelta(hours=7)
    rows = store.in_range(table, job_id="j", since=since, until=until)
    assert [(r.checkpoint_id, r.status) for r in rows] == [(2, "prepared"), (3, "abandoned"), (5, "committed"),
                                                          (6, "committed")]  # fmt: skip
    store.acknowledge("j", table, 3, by="me")
    assert [r.checkpoint_id for r in store.in_range(table, job_id="j", since=since, until=until)] == [2, 5, 6]
    everything = store.in_range(table, until=START + timedelta(days=1))
    assert [(r.job_id, r.checkpoint_id) for r in everything] == [("j", c) for c in range(1, 9)] + [("other", 1)]
    assert [r.checkpoint_id for r in store.in_range(table, job_id="other", until=START + timedelta(hours=8))] == [1]
    assert store.has_job(table, "other") and not store.has_job(table, "nobody")
    assert store.jobs(table) == ["j", "other"]
    assert all(r.prepared_at.utcoffset() == timedelta(0) for r in everything)
