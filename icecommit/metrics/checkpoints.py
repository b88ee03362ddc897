"""The checkpoint state table: what each job prepared and committed, per table."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone

from sqlalchemy import Engine, Select, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from icecommit.metrics.models import CheckpointRow

PREPARED = "prepared"
COMMITTED = "committed"


def utc_now() -> datetime:
    """The wall clock, in UTC (the default clock of the stores)."""
    return datetime.now(timezone.utc)


@dataclass(frozen=True)
class PublishCounters:
    """Files of one checkpoint: created by writers, committed, skipped as already
    committed (e.g. after failover), and missing from storage."""

    created: int = 0
    committed: int = 0
    skipped: int = 0
    missing: int = 0


@dataclass(frozen=True)
class CheckpointState:
    """One row of the checkpoint table."""

    job_id: str
    table_name: str
    checkpoint_id: int
    status: str
    manifest_path: str | None
    files_digest: str
    source_records: int
    records: int
    files: int
    bytes: int
    max_event_time_us: int | None
    snapshot_id: int | None
    attempts: int
    retries: int
    counters: PublishCounters
    prepared_at: datetime
    committed_at: datetime | None

    @property
    def committed(self) -> bool:
        """True once the checkpoint is committed (or recorded as empty)."""
        return self.status == COMMITTED


def as_utc(value: datetime) -> datetime:
    """SQLite returns naive datetimes; every stored time is UTC."""
    return value if value.tzinfo is not None else value.replace(tzinfo=timezone.utc)


def _to_state(row: CheckpointRow) -> CheckpointState:
    return CheckpointState(
        job_id=row.job_id,
        table_name=row.table_name,
        checkpoint_id=row.checkpoint_id,
        status=row.status,
        manifest_path=row.manifest_path,
        files_digest=row.files_digest,
        source_records=row.source_records,
        records=row.records,
        files=row.files,
        bytes=row.bytes,
        max_event_time_us=row.max_event_time_us,
        snapshot_id=row.snapshot_id,
        attempts=row.attempts,
        retries=row.retries,
        counters=PublishCounters(
            created=row.files_created,
            committed=row.files_committed,
            skipped=row.files_skipped,
            missing=row.files_missing,
        ),
        prepared_at=as_utc(row.prepared_at),
        committed_at=as_utc(row.committed_at) if row.committed_at is not None else None,
    )


def _one(job_id: str, table_name: str, checkpoint_id: int) -> Select[CheckpointRow]:
    return select(CheckpointRow).where(
        CheckpointRow.job_id == job_id,
        CheckpointRow.table_name == table_name,
        CheckpointRow.checkpoint_id == checkpoint_id,
    )


class CheckpointStore:
    """Reads and writes checkpoint rows. Every write is its own transaction.

    Args:
        engine: the state database (see :func:`icecommit.metrics.database.state_engine`).
        clock: returns the current time; injected in tests.
    """

    def __init__(self, engine: Engine, *, clock: Callable[[], datetime] = utc_now) -> None:
        self._engine = engine
        self._clock = clock

    def get(self, job_id: str, table_name: str, checkpoint_id: int) -> CheckpointState | None:
        """The row of one checkpoint, or None."""
        with Session(self._engine) as session:
            row = session.execute(_one(job_id, table_name, checkpoint_id)).scalar_one_or_none()
            return _to_state(row) if row is not None else None

    def list(
        self,
        table_name: str,
        *,
        job_id: str | None = None,
        status: str | None = None,
        up_to: int | None = None,
    ) -> list[CheckpointState]:
        """Rows of a table, ordered by job and checkpoint id."""
        query = select(CheckpointRow).where(CheckpointRow.table_name == table_name)
        if job_id is not None:
            query = query.where(CheckpointRow.job_id == job_id)
        if status is not None:
            query = query.where(CheckpointRow.status == status)
        if up_to is not None:
            query = query.where(CheckpointRow.checkpoint_id <= up_to)
        query = query.order_by(CheckpointRow.job_id, CheckpointRow.checkpoint_id)
        with Session(self._engine) as session:
            return [_to_state(r) for r in session.execute(query).scalars()]

    def insert_prepared(
        self,
        *,
        job_id: str,
        table_name: str,
        checkpoint_id: int,
        manifest_path: str | None,
        files_digest: str,
        source_records: int,
        records: int,
        files: int,
        bytes_: int,
        max_event_time_us: int | None,
    ) -> tuple[CheckpointState, bool]:
        """Insert a ``prepared`` row; returns (row, inserted).

        When the row already exists (a concurrent or repeated prepare), the existing row
        is returned with ``inserted=False`` and the caller compares it.
        """
        row = CheckpointRow(
            job_id=job_id,
            table_name=table_name,
            checkpoint_id=checkpoint_id,
            status=PREPARED,
            manifest_path=manifest_path,
            files_digest=files_digest,
            source_records=source_records,
            records=records,
            files=files,
            bytes=bytes_,
            max_event_time_us=max_event_time_us,
            attempts=0,
            retries=0,
            files_created=files,
            files_committed=0,
            files_skipped=0,
            files_missing=0,
            prepared_at=self._clock(),
        )
        try:
            with Session(self._engine) as session, session.begin():
                session.add(row)
                session.flush()
                state = _to_state(row)
            return state, True
        except IntegrityError:
            existing = self.get(job_id, table_name, checkpoint_id)
            if existing is None:
                raise
            return existing, False

    def record_missing(self, job_id: str, table_name: str, checkpoint_id: int, missing: int) -> None:
        """Record how many staged files were missing from storage at the last commit try."""
        with Session(self._engine) as session, session.begin():
            row = session.execute(_one(job_id, table_name, checkpoint_id)).scalar_one()
            row.files_missing = missing

    def mark_committed(
        self,
        job_id: str,
        table_name: str,
        checkpoint_id: int,
        *,
        snapshot_id: int | None,
        attempts: int,
        retries: int,
        counters: PublishCounters,
    ) -> CheckpointState:
        """Record that a checkpoint is committed (``snapshot_id`` None: nothing to commit)."""
        with Session(self._engine) as session, session.begin():
            row = session.execute(_one(job_id, table_name, checkpoint_id)).scalar_one()
            row.status = COMMITTED
            row.snapshot_id = snapshot_id
            row.attempts += attempts
            row.retries += retries
            row.files_committed = counters.committed
            row.files_skipped = counters.skipped
            row.files_missing = counters.missing
            row.committed_at = self._clock()
            session.flush()
            return _to_state(row)
