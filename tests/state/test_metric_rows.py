"""Metrics rows go in bulk (``COPY`` on PostgreSQL, a DBAPI executemany on SQLite, an ORM
executemany elsewhere) and read back
exactly: every window, every null, every count, in the same transaction as the checkpoint."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from pyiceberg.catalog.sql import SqlCatalog
from sqlalchemy import create_engine, insert, select
from sqlalchemy.orm import Session

from icecommit.state import CheckpointStore, state_engine, state_uri
from icecommit.state.database import state_identity
from icecommit.state.models import MetricRow
from icecommit.state.samples import _METRIC_COLUMNS, COPY_MIN_ROWS, MetricSample, _copy_rows, _sqlite_rows
from tests.conftest import pg_uri, unique_table

START = datetime(2026, 11, 20, tzinfo=timezone.utc)
#: the COPY path runs on PostgreSQL alone: its cases judge mutants too
pytestmark = pytest.mark.mutation_postgres


@pytest.mark.parametrize("count", [COPY_MIN_ROWS - 1, COPY_MIN_ROWS, 1_500])
def test_many_window_counts_read_back_exactly(catalog: SqlCatalog, count: int) -> None:
    store = CheckpointStore(state_engine(state_uri(catalog)))
    table = unique_table()
    accepted = {0: 0, 1: 1, 2: 0}  # task: its accepted attempt
    samples = [
        MetricSample("written", START + timedelta(minutes=i), 1_000 + i, i % 3, accepted[i % 3], bytes=7 * i)
        for i in range(count)
    ]
    samples.append(MetricSample("written", None, 5, 1, 1))  # rows without an event time
    samples.append(MetricSample("written", START, 99, 0, 1))  # an attempt that was not accepted
    samples.append(MetricSample("source", None, 3))  # not from a task
    state, inserted = store.insert_prepared(
        job_id="j", table_name=table, checkpoint_id=1, manifest_path=None, files_digest="d",
        source_records=0, records=0, files=0, bytes_=0, max_event_time_us=None, samples=samples,
        tasks=sorted(accepted.items()),
    )  # fmt: skip
    assert inserted and state.checkpoint_id == 1
    totals = store.window_totals("j", table, 1, "written")
    assert totals == {**{START + timedelta(minutes=i): 1_000 + i for i in range(count)}, None: 5}
    with Session(store.engine) as session:
        rows = session.execute(select(MetricRow).where(MetricRow.table_name == table)).scalars().all()
        got = [(r.window_start, r.task_id, r.attempt, r.bytes, r.files) for r in rows]
    want = [(None, None, None, 0, 0), (None, 1, 1, 0, 0), (START, 0, 1, 0, 0)]
    want += [(START + timedelta(minutes=i), i % 3, accepted[i % 3], 7 * i, 0) for i in range(count)]
    key = lambda t: (t[0] is not None, t[0] or START, t[1] is not None, t[1] or 0, t[2] or 0)  # noqa: E731
    assert sorted(((w.astimezone(timezone.utc) if w else None, *rest) for w, *rest in got), key=key) == sorted(
        want, key=key
    )


def test_a_refused_prepare_leaves_no_metrics_behind(catalog: SqlCatalog) -> None:
    """The rows of a prepare whose checkpoint row already exists are rolled back with it."""
    store = CheckpointStore(state_engine(state_uri(catalog)))
    table = unique_table()
    args = dict(
        job_id="j", table_name=table, checkpoint_id=2, manifest_path=None, files_digest="d",
        source_records=0, records=0, files=0, bytes_=0, max_event_time_us=None,
    )  # fmt: skip
    first = [MetricSample("source", START + timedelta(minutes=i), 1, 0, 0) for i in range(100)]
    again = [MetricSample("source", START + timedelta(minutes=i), 2, 0, 0) for i in range(100)]
    assert store.insert_prepared(**args, samples=first, tasks=[(0, 0)])[1]
    assert not store.insert_prepared(**args, samples=again, tasks=[(0, 0)])[1]
    assert sum(store.window_totals("j", table, 2, "source").values()) == 100
    with Session(store.engine) as session:
        assert len(session.execute(select(MetricRow).where(MetricRow.table_name == table)).all()) == 100


def _row(table: str, **changed: object) -> tuple[object, ...]:
    values = {
        "job_id": "j", "table_name": table, "checkpoint_id": 1, "stage": "written", "task_id": 0, "attempt": 0,
        "window_start": START, "records": 5, "bytes": 1, "files": 1, "recorded_at": START, **changed,
    }  # fmt: skip
    return tuple(values[c] for c in _METRIC_COLUMNS)


@pytest.mark.parametrize("path", ["copy", "sqlite"])
def test_each_bulk_path_is_used_on_its_own_database_and_nowhere_else(catalog: SqlCatalog, path: str) -> None:
    """The bulk path is chosen by the database: COPY where PostgreSQL is reached through
    psycopg, a DBAPI executemany on SQLite (both read back the same, above); each writes
    nothing and says so elsewhere."""
    write = {"copy": _copy_rows, "sqlite": _sqlite_rows}[path]
    store = CheckpointStore(state_engine(state_uri(catalog)))
    table = unique_table()
    with Session(store.engine) as session, session.begin():
        used = write(session, [_row(table), _row(table, task_id=1, records=7)])
    own = store.engine.dialect.name == {"copy": "postgresql", "sqlite": "sqlite"}[path]
    assert used is own
    with Session(store.engine) as session:
        written = session.execute(select(MetricRow.records).where(MetricRow.table_name == table)).scalars().all()
    assert sorted(written) == ([5, 7] if own else [])


def test_sqlite_with_another_paramstyle_takes_the_orm_path(tmp_path: Path) -> None:
    """The DBAPI executemany is written with ``?`` marks: an engine of SQLite set to another
    paramstyle (``create_engine(..., paramstyle="named")``) goes through the ORM insert, and
    its rows read back the same."""
    engine = create_engine(f"sqlite:///{tmp_path / 'state.db'}", paramstyle="named")
    state_identity(engine)  # gives an engine made outside state_engine its schema
    store = CheckpointStore(engine)
    assert (store.engine.dialect.name, store.engine.dialect.paramstyle) == ("sqlite", "named")
    with Session(store.engine) as session, session.begin():
        assert _sqlite_rows(session, [_row("t")]) is False
    samples = [MetricSample("written", START + timedelta(minutes=i), 10 + i, 0, 0) for i in range(3)]
    _, inserted = store.insert_prepared(
        job_id="j", table_name="t", checkpoint_id=1, manifest_path=None, files_digest="d",
        source_records=0, records=0, files=0, bytes_=0, max_event_time_us=None, samples=samples, tasks=[(0, 0)],
    )  # fmt: skip
    assert inserted
    assert store.window_totals("j", "t", 1, "written") == {START + timedelta(minutes=i): 10 + i for i in range(3)}


def test_the_sqlite_path_stores_what_an_orm_insert_stores(tmp_path: Path) -> None:
    """Rows written by the DBAPI executemany are stored, byte for byte, as the ORM's insert
    stores them: times in their own zone's wall clock (two zones of one instant included,
    though the conversion of each time is made once), nulls, counts."""
    store = CheckpointStore(state_engine(f"sqlite:///{tmp_path / 'state.db'}"))
    eastern = timezone(timedelta(hours=-5))
    rows = [
        _row("t", window_start=START, task_id=None, attempt=None),
        _row("t", window_start=START.astimezone(eastern), records=6),  # the same instant, another zone
        _row("t", window_start=None, records=0, bytes=2**40, files=3),
        _row("t", window_start=datetime(2026, 11, 20, 1, 2, 3, 456789), stage="source"),  # naive
        _row("t", window_start=START, recorded_at=START + timedelta(microseconds=1)),
    ]
    with Session(store.engine) as session, session.begin():
        assert _sqlite_rows(session, [(*row[:1], "fast", *row[2:]) for row in rows])
        session.execute(
            insert(MetricRow), [dict(zip(_METRIC_COLUMNS, (*row[:1], "orm", *row[2:]), strict=True)) for row in rows]
        )
    columns = ", ".join(c for c in _METRIC_COLUMNS if c != "table_name")
    with store.engine.connect() as connection:
        stored = {
            name: connection.exec_driver_sql(
                f"SELECT {columns} FROM icecommit_metrics WHERE table_name = ? ORDER BY id", (name,)
            ).all()
            for name in ("fast", "orm")
        }
    assert stored["fast"] == stored["orm"]
    assert len(stored["fast"]) == len(rows)
    assert stored["fast"][0][5] != stored["fast"][1][5]  # each zone's wall clock, as the ORM stores it


@pytest.mark.postgres
def test_postgresql_through_psycopg2_writes_the_same_rows_without_copy() -> None:
    """A state database named ``postgresql+psycopg2://`` (the driver pyiceberg's SQL catalog
    installs) takes the executemany path: COPY is psycopg's API, which psycopg2 lacks."""
    uri = pg_uri().replace("postgresql+psycopg://", "postgresql+psycopg2://", 1)
    assert uri.startswith("postgresql+psycopg2://")
    store = CheckpointStore(state_engine(uri))
    assert store.engine.dialect.driver == "psycopg2"
    table = unique_table()
    with Session(store.engine) as session, session.begin():
        assert _copy_rows(session, [_row(table)]) is False
    samples = [MetricSample("written", START + timedelta(minutes=i), 10 + i, 0, 0) for i in range(COPY_MIN_ROWS + 5)]
    _, inserted = store.insert_prepared(
        job_id="j", table_name=table, checkpoint_id=1, manifest_path=None, files_digest="d",
        source_records=0, records=0, files=0, bytes_=0, max_event_time_us=None, samples=samples, tasks=[(0, 0)],
    )  # fmt: skip
    assert inserted
    assert store.window_totals("j", table, 1, "written") == {
        START + timedelta(minutes=i): 10 + i for i in range(COPY_MIN_ROWS + 5)
    }
