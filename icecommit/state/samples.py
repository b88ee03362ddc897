"""Metric samples: checkpoint-tagged record counts per stage (source, written, committed,
a streaming query's input) and one-minute event-time window, and the offset ranges a
streaming query's sources reported. The checkpoint store records them with its rows."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

from sqlalchemy import Engine, delete, func, insert, select, update
from sqlalchemy.orm import Session

if TYPE_CHECKING:
    import psycopg

from icecommit.state.database import retried, tried_once
from icecommit.state.models import ACCEPTED_ATTEMPT, CheckpointRow, CheckpointTaskRow, MetricRow, as_utc

#: The stages a metric sample counts at (stored values; a checkpoint's *status* constants,
#: such as ``COMMITTED``, live in :mod:`icecommit.state.checkpoints`).
SOURCE = "source"
WRITTEN = "written"
STAGE_COMMITTED = "committed"
#: rows a streaming query's source reported for a batch (its progress's numInputRows): a
#: shortfall of the written rows is information ...
QUERY_INPUT = "query-input"
#: ... or, when the sink was declared ``preserves_rows=True``, loss
QUERY_INPUT_KEPT = "query-input-kept"
#: the same for a routed sink: the rows of the batch for all the tables it routes to
QUERY_INPUT_ROUTED = "query-input-routed"
QUERY_INPUT_ROUTED_KEPT = "query-input-routed-kept"
QUERY_INPUT_STAGES = (QUERY_INPUT, QUERY_INPUT_KEPT, QUERY_INPUT_ROUTED, QUERY_INPUT_ROUTED_KEPT)


#: Metrics rows from which a PostgreSQL insert uses ``COPY`` (below, an executemany is as quick).
COPY_MIN_ROWS = 32


_METRIC_COLUMNS = (
    "job_id", "table_name", "checkpoint_id", "stage", "task_id", "attempt", "window_start", "records", "bytes",
    "files", "recorded_at",
)  # fmt: skip


def _copy_rows(session: Session, rows: Sequence[tuple[object, ...]]) -> bool:
    """``COPY`` metrics rows (tuples in ``_METRIC_COLUMNS`` order) into their table in the
    session's transaction; False (nothing written) where the database is not PostgreSQL
    through psycopg."""
    connection = session.connection()
    if connection.dialect.name != "postgresql" or connection.dialect.driver != "psycopg":
        return False
    session.flush()  # rows added to the session before these go first
    preparer = connection.dialect.identifier_preparer
    table = preparer.format_table(MetricRow.__table__)
    columns = ", ".join(preparer.quote(c) for c in _METRIC_COLUMNS)
    dbapi = cast("psycopg.Connection[Any]", connection.connection.dbapi_connection)
    with dbapi.cursor() as cursor, cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)
    return True


def _sqlite_rows(session: Session, rows: Sequence[tuple[object, ...]]) -> bool:
    """Insert metrics rows (tuples in ``_METRIC_COLUMNS`` order) on SQLite with one DBAPI
    ``executemany``, the times put through their column type's own bind conversion (the
    stored form stays the one an ORM insert writes); False (nothing written) elsewhere. The
    ORM's bulk insert built a parameter dictionary per row: about 60 ms for the 2,000 window
    counts of a 10,000-row checkpoint."""
    connection = session.connection()
    dialect = connection.dialect
    if dialect.name != "sqlite" or dialect.paramstyle != "qmark":
        return False
    session.flush()  # rows added to the session before these go first
    table = MetricRow.__table__
    # the columns whose type converts a value for SQLite (the times), by position
    processors = {
        i: f
        for i, c in enumerate(_METRIC_COLUMNS)
        if (f := table.c[c].type.dialect_impl(dialect).bind_processor(dialect)) is not None
    }
    # a window's start recurs per task, the record time is in every row: each converted once
    # (keyed with its zone: equal instants in two zones are stored as their own wall clocks)
    known: dict[tuple[object, object], object] = {}

    def bound(value: object, f: Callable[[Any], Any]) -> object:
        if value is None:
            return None
        key = (value, getattr(value, "tzinfo", None))
        if key not in known:
            known[key] = f(value)
        return known[key]

    converted = []
    for row in rows:
        values = list(row)
        for i, f in processors.items():
            values[i] = bound(values[i], f)
        converted.append(tuple(values))
    preparer = dialect.identifier_preparer
    columns = ", ".join(preparer.quote(c) for c in _METRIC_COLUMNS)
    marks = ", ".join("?" for _ in _METRIC_COLUMNS)
    connection.exec_driver_sql(f"INSERT INTO {preparer.format_table(table)} ({columns}) VALUES ({marks})", converted)
    return True


@dataclass(frozen=True)
class SourceRange:
    """What one source of a streaming query read for a batch: its offsets as the source
    reports them (Kafka: partition -> offset per topic; files: a log offset) and its rows."""

    source: str
    start: str | None
    end: str | None
    records: int


def _ranges_to_json(ranges: Sequence[SourceRange]) -> str | None:
    if not ranges:
        return None
    return json.dumps([{"source": r.source, "start": r.start, "end": r.end, "records": r.records} for r in ranges])


def _ranges_from_json(text: str | None) -> tuple[SourceRange, ...]:
    if not text:
        return ()
    return tuple(
        SourceRange(str(r["source"]), r.get("start"), r.get("end"), int(r.get("records") or 0))
        for r in json.loads(text)
    )


@dataclass(frozen=True)
class MetricSample:
    """Records counted at one stage for one checkpoint (task None: not from a task)."""

    stage: str
    window_start: datetime | None
    records: int
    task_id: int | None = None
    attempt: int | None = None
    bytes: int = 0
    files: int = 0


class MetricSampleStore:
    """The metric samples of checkpoints (a base of :class:`~icecommit.state.checkpoints.CheckpointStore`,
    which records them in the same transactions as its rows)."""

    _engine: Engine
    _clock: Callable[[], datetime]

    def _add_metrics(
        self, session: Session, job_id: str, table_name: str, checkpoint_id: int, samples: Iterable[MetricSample]
    ) -> None:
        """Insert metrics rows in bulk: a checkpoint can carry thousands of window counts
        (one per stage and minute), and one round trip each was most of a prepare. On
        PostgreSQL (psycopg) they go in with one ``COPY``, on SQLite with one DBAPI executemany,
        elsewhere with one ORM bulk insert."""
        now = self._clock()
        rows = [
            (job_id, table_name, checkpoint_id, sample.stage, sample.task_id, sample.attempt, sample.window_start,
             sample.records, sample.bytes, sample.files, now)
            for sample in samples
        ]  # fmt: skip
        if not rows:
            return
        if len(rows) >= COPY_MIN_ROWS and _copy_rows(session, rows):
            return
        if _sqlite_rows(session, rows):
            return
        session.execute(insert(MetricRow), [dict(zip(_METRIC_COLUMNS, row, strict=True)) for row in rows])

    def record_samples(self, job_id: str, table_name: str, checkpoint_id: int, samples: Sequence[MetricSample]) -> None:
        """Add metrics rows for a checkpoint (for example source counts a caller declares)."""
        with Session(self._engine) as session, session.begin():
            self._add_metrics(session, job_id, table_name, checkpoint_id, samples)

    record_samples = tried_once(record_samples)

    def record_query_input(
        self,
        job_id: str,
        table_name: str,
        checkpoint_id: int,
        records: int,
        *,
        preserves_rows: bool,
        offsets: Sequence[SourceRange] = (),
        routed: bool = False,
    ) -> None:
        """Record the rows a streaming query's source reported for a batch, and the offset
        ranges beside them (replacing an earlier report of the same batch: a restarted
        query reports a replayed batch again). ``routed``: the count is of the rows the
        batch routed to all its tables, recorded with each of them."""
        if routed:
            stage = QUERY_INPUT_ROUTED_KEPT if preserves_rows else QUERY_INPUT_ROUTED
        else:
            stage = QUERY_INPUT_KEPT if preserves_rows else QUERY_INPUT
        with Session(self._engine) as session, session.begin():
            session.execute(
                update(CheckpointRow)
                .where(
                    CheckpointRow.job_id == job_id,
                    CheckpointRow.table_name == table_name,
                    CheckpointRow.checkpoint_id == checkpoint_id,
                )
                .values(source_offsets=_ranges_to_json(offsets))
            )
            session.execute(
                delete(MetricRow).where(
                    MetricRow.job_id == job_id,
                    MetricRow.table_name == table_name,
                    MetricRow.checkpoint_id == checkpoint_id,
                    MetricRow.stage.in_(QUERY_INPUT_STAGES),
                )
            )
            self._add_metrics(session, job_id, table_name, checkpoint_id, [MetricSample(stage, None, records)])

    record_query_input = retried(record_query_input)

    def window_totals(self, job_id: str, table_name: str, checkpoint_id: int, stage: str) -> dict[datetime | None, int]:
        """Records per window at ``stage``, from the accepted task attempts only."""
        query = (
            select(MetricRow.window_start, func.sum(MetricRow.records))
            .join(CheckpointTaskRow, ACCEPTED_ATTEMPT)
            .where(
                MetricRow.job_id == job_id,
                MetricRow.table_name == table_name,
                MetricRow.checkpoint_id == checkpoint_id,
                MetricRow.stage == stage,
            )
            .group_by(MetricRow.window_start)
        )
        with Session(self._engine) as session:
            return {
                (as_utc(window) if window is not None else None): int(total) for window, total in session.execute(query)
            }

    window_totals = retried(window_totals)

    def clear_committed_metrics(self, job_id: str, table_name: str, checkpoint_id: int) -> None:
        """Drop a rolled-back checkpoint's committed-stage metrics before it is committed
        again, so that nothing counts twice (its status stays until the commit records it)."""
        with Session(self._engine) as session, session.begin():
            session.execute(
                delete(MetricRow).where(
                    MetricRow.job_id == job_id,
                    MetricRow.table_name == table_name,
                    MetricRow.checkpoint_id == checkpoint_id,
                    MetricRow.stage == STAGE_COMMITTED,
                )
            )

    clear_committed_metrics = retried(clear_committed_metrics)
