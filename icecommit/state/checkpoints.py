"""The checkpoint state table: what each job prepared and committed, per table."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from sqlalchemy import Engine, Select, and_, delete, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

if TYPE_CHECKING:
    pass

from icecommit.state.database import counted_or_logged, is_retry, retried, tried_once
from icecommit.state.models import (
    CheckpointPartitionRow,
    CheckpointRow,
    CheckpointTaskRow,
    MetricRow,
    RefusalRow,
    as_utc,
    in_utc,
    utc_now,
)
from icecommit.state.samples import (
    MetricSample,
    MetricSampleStore,
    SourceRange,
    _ranges_from_json,
)

PREPARED = "prepared"
COMMITTED = "committed"
#: A rollback removed the checkpoint's snapshot from the branch; never committed again
#: unless a user re-commits it.
ROLLED_BACK = "rolled-back"
#: An operator gave the checkpoint up; its replays are recorded no-ops.
ABANDONED = "abandoned"
#: Committed to the job's audit branch, waiting for an operator's release (or discard).
HELD = "held"


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
    unknown_outcomes: int = 0
    abandon_reason: str | None = None
    abandoned_by: str | None = None
    abandoned_at: datetime | None = None
    acknowledged_by: str | None = None
    acknowledged_at: datetime | None = None
    #: the event time this checkpoint lets its job's watermark reach (future rows left out)
    watermark_us: int | None = None
    #: rows further ahead of the clock at prepare than the table's max future skew
    future_records: int = 0
    #: the streaming query whose batch it is (None for a batch write)
    query_id: str | None = None
    #: the offset ranges its query's sources reported for the batch (streaming only)
    source_offsets: tuple[SourceRange, ...] = ()
    #: what its commit needs beyond appending its data files (empty: a plain append)
    features: tuple[str, ...] = ()
    #: the schema id its own schema change made (None: it changed none)
    schema_id: int | None = None
    #: the table's last sequence number when its writers were given the table
    base_sequence_number: int | None = None
    #: an upsert's keys, staged (None: not an upsert)
    keys_path: str | None = None
    #: its checks' results as stored (JSON; None: it had none, or they have not run)
    check_results: str | None = None
    #: the audit branch it waits on (None: it goes to the branch asked for) and why
    audit_branch: str | None = None
    hold_reason: str | None = None
    #: who brought it from the audit branch to readers, when, why, and whether forced
    published_by: str | None = None
    published_at: datetime | None = None
    publish_reason: str | None = None
    publish_forced: bool = False

    @property
    def has_changes(self) -> bool:
        """Whether committing it changes the table: it staged data files, or keys to delete."""
        return self.manifest_path is not None or self.keys_path is not None

    @property
    def committed(self) -> bool:
        """True once the checkpoint is committed (or recorded as empty)."""
        return self.status == COMMITTED


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
        watermark_us=row.watermark_us if row.watermark_us is not None or row.future_records else row.max_event_time_us,
        future_records=row.future_records or 0,
        query_id=row.query_id,
        source_offsets=_ranges_from_json(row.source_offsets),
        features=tuple(f for f in (row.features or "").split(",") if f),
        schema_id=row.schema_id,
        base_sequence_number=row.base_sequence_number,
        keys_path=row.keys_path,
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
        unknown_outcomes=row.unknown_outcomes or 0,
        abandon_reason=row.abandon_reason,
        abandoned_by=row.abandoned_by,
        abandoned_at=as_utc(row.abandoned_at) if row.abandoned_at is not None else None,
        acknowledged_by=row.acknowledged_by,
        acknowledged_at=as_utc(row.acknowledged_at) if row.acknowledged_at is not None else None,
        check_results=row.check_results,
        audit_branch=row.audit_branch,
        hold_reason=row.hold_reason,
        published_by=row.published_by,
        published_at=as_utc(row.published_at) if row.published_at is not None else None,
        publish_reason=row.publish_reason,
        publish_forced=bool(row.publish_forced),
    )


def _one(job_id: str, table_name: str, checkpoint_id: int) -> Select[CheckpointRow]:
    return select(CheckpointRow).where(
        CheckpointRow.job_id == job_id,
        CheckpointRow.table_name == table_name,
        CheckpointRow.checkpoint_id == checkpoint_id,
    )


class CheckpointStore(MetricSampleStore):
    """Reads and writes checkpoint rows. Every write is its own transaction.

    Args:
        engine: the state database (see :func:`icecommit.state.database.state_engine`).
        clock: returns the current time; injected in tests. Its times are stored in UTC
            (SQLite keeps a time's fields without its offset: a time in another zone would
            compare wrongly in a range query).
    """

    def __init__(self, engine: Engine, *, clock: Callable[[], datetime] = utc_now) -> None:
        self._engine = engine
        self._clock: Callable[[], datetime] = lambda: in_utc(clock())

    @property
    def engine(self) -> Engine:
        """The state database."""
        return self._engine

    @property
    def clock(self) -> Callable[[], datetime]:
        """The clock rows are stamped with."""
        return self._clock

    def get(self, job_id: str, table_name: str, checkpoint_id: int) -> CheckpointState | None:
        """The row of one checkpoint, or None."""
        with Session(self._engine) as session:
            row = session.execute(_one(job_id, table_name, checkpoint_id)).scalar_one_or_none()
            return _to_state(row) if row is not None else None

    get = retried(get)

    def records_in_all_tables(self, job_id: str, checkpoint_id: int) -> dict[str, int]:
        """Rows one checkpoint of a job wrote, per table (a routed batch writes several)."""
        query = select(CheckpointRow.table_name, CheckpointRow.records).where(
            CheckpointRow.job_id == job_id, CheckpointRow.checkpoint_id == checkpoint_id
        )
        with Session(self._engine) as session:
            return {name: int(records or 0) for name, records in session.execute(query)}

    records_in_all_tables = retried(records_in_all_tables)

    def in_range(
        self, table_name: str, *, job_id: str | None = None, since: datetime | None = None, until: datetime
    ) -> list[CheckpointState]:
        """Rows of a table prepared in ``[since, until)``, and whatever the range the rows
        that still need a person (prepared and not settled, abandoned and not
        acknowledged); ordered by job and checkpoint id. The range is applied by the
        database: a scheduled run over the last minutes of a table with ten thousand
        checkpoints reads a handful of rows, not all of them."""
        in_window = CheckpointRow.prepared_at < in_utc(until)
        if since is not None:
            in_window = and_(CheckpointRow.prepared_at >= in_utc(since), in_window)
        needs_a_person = or_(
            CheckpointRow.status == PREPARED,
            and_(CheckpointRow.status == ABANDONED, CheckpointRow.acknowledged_at.is_(None)),
        )
        query = select(CheckpointRow).where(CheckpointRow.table_name == table_name, or_(in_window, needs_a_person))
        if job_id is not None:
            query = query.where(CheckpointRow.job_id == job_id)
        query = query.order_by(CheckpointRow.job_id, CheckpointRow.checkpoint_id)
        with Session(self._engine) as session:
            return [_to_state(r) for r in session.execute(query).scalars()]

    in_range = retried(in_range)

    def has_job(self, table_name: str, job_id: str) -> bool:
        """Whether ``job_id`` has any checkpoint of the table."""
        query = select(CheckpointRow.id).where(CheckpointRow.table_name == table_name, CheckpointRow.job_id == job_id)
        with Session(self._engine) as session:
            return session.execute(query.limit(1)).first() is not None

    has_job = retried(has_job)

    def jobs(self, table_name: str) -> list[str]:
        """The jobs with checkpoints of the table, sorted."""
        query = select(CheckpointRow.job_id).where(CheckpointRow.table_name == table_name).distinct()
        with Session(self._engine) as session:
            return sorted(session.execute(query).scalars())

    jobs = retried(jobs)

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

    list = retried(list)

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
        watermark_us: int | None = None,
        future_records: int = 0,
        query_id: str | None = None,
        tasks: Sequence[tuple[int, int]] = (),
        samples: Sequence[MetricSample] = (),
        partitions: Sequence[tuple[str, int, int]] = (),
        features: Sequence[str] = (),
        schema_id: int | None = None,
        base_sequence_number: int | None = None,
        keys_path: str | None = None,
        gate: Mapping[str, str | None] | None = None,
    ) -> tuple[CheckpointState, bool]:
        """Insert a ``prepared`` row, its accepted task attempts, its metrics and its records
        per time partition (field, value, records), in one transaction; returns (row, inserted).
        ``gate``: its check results, and the audit branch it waits on and why (recorded with
        the row, so that whoever commits it sends it where its checks said).

        When the row already exists (a concurrent or repeated prepare), nothing is written
        and the existing row is returned with ``inserted=False`` for the caller to compare.
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
            watermark_us=watermark_us if watermark_us is not None or future_records else max_event_time_us,
            future_records=future_records,
            query_id=query_id,
            features=",".join(sorted(set(features))) or None,
            schema_id=schema_id,
            base_sequence_number=base_sequence_number,
            keys_path=keys_path,
            check_results=(gate or {}).get("check_results"),
            audit_branch=(gate or {}).get("audit_branch"),
            hold_reason=(gate or {}).get("hold_reason"),
            attempts=0,
            retries=0,
            files_created=files,
            files_committed=0,
            files_skipped=0,
            files_missing=0,
            unknown_outcomes=0,
            prepared_at=self._clock(),
        )
        try:
            with Session(self._engine) as session, session.begin():
                session.add(row)
                session.flush()
                session.add_all(
                    CheckpointTaskRow(
                        job_id=job_id, table_name=table_name, checkpoint_id=checkpoint_id, task_id=t, attempt=a
                    )
                    for t, a in tasks
                )
                self._add_metrics(session, job_id, table_name, checkpoint_id, samples)
                session.add_all(
                    CheckpointPartitionRow(
                        job_id=job_id,
                        table_name=table_name,
                        checkpoint_id=checkpoint_id,
                        partition_field=field,
                        partition_value=value,
                        records=records,
                    )
                    for field, value, records in partitions
                )
                state = _to_state(row)
            return state, True
        except IntegrityError:
            existing = self.get(job_id, table_name, checkpoint_id)
            if existing is None:
                raise
            return existing, False

    insert_prepared = retried(insert_prepared)

    def replace_prepared(
        self,
        replaced: CheckpointState,
        *,
        manifest_path: str | None,
        files_digest: str,
        source_records: int,
        records: int,
        files: int,
        bytes_: int,
        max_event_time_us: int | None,
        watermark_us: int | None,
        future_records: int,
        tasks: Sequence[tuple[int, int]],
        samples: Sequence[MetricSample],
        partitions: Sequence[tuple[str, int, int]],
        features: Sequence[str] = (),
        schema_id: int | None = None,
        base_sequence_number: int | None = None,
        keys_path: str | None = None,
    ) -> CheckpointState | None:
        """Prepare a checkpoint again from new files, in place of a prepared row whose staged
        files were lost: its files, counts, accepted task attempts, task metrics and records
        per time partition replaced in one transaction. A compare-and-set: only while the row
        is still ``replaced`` (prepared, with its files digest); None when it is not (another
        process committed, abandoned or prepared it again meanwhile). A streaming query's
        input counts and declared source counts (not from tasks) stay."""
        key = (replaced.job_id, replaced.table_name, replaced.checkpoint_id)
        with Session(self._engine) as session, session.begin():
            row = session.execute(_one(*key).with_for_update()).scalar_one_or_none()
            if row is None or row.status != PREPARED:
                return None
            if row.files_digest != replaced.files_digest:  # a retry whose lost try did it takes it
                return _to_state(row) if is_retry() and row.files_digest == files_digest else None
            for model in (CheckpointTaskRow, CheckpointPartitionRow):
                session.execute(
                    delete(model).where(
                        model.job_id == key[0], model.table_name == key[1], model.checkpoint_id == key[2]
                    )
                )
            session.execute(
                delete(MetricRow).where(
                    MetricRow.job_id == key[0],
                    MetricRow.table_name == key[1],
                    MetricRow.checkpoint_id == key[2],
                    MetricRow.task_id.is_not(None),
                )
            )
            row.manifest_path = manifest_path
            row.files_digest = files_digest
            row.source_records = source_records
            row.records = records
            row.files = row.files_created = files
            row.bytes = bytes_
            row.max_event_time_us = max_event_time_us
            row.watermark_us = watermark_us if watermark_us is not None or future_records else max_event_time_us
            row.future_records = future_records
            row.features = ",".join(sorted({*(row.features or "").split(","), *features} - {""})) or None
            row.schema_id = schema_id if schema_id is not None else row.schema_id
            row.base_sequence_number = base_sequence_number
            row.keys_path = keys_path
            row.files_missing = 0
            row.prepared_at = self._clock()
            session.add_all(
                CheckpointTaskRow(job_id=key[0], table_name=key[1], checkpoint_id=key[2], task_id=t, attempt=a)
                for t, a in tasks
            )
            self._add_metrics(session, *key, samples)
            session.add_all(
                CheckpointPartitionRow(
                    job_id=key[0], table_name=key[1], checkpoint_id=key[2],
                    partition_field=field, partition_value=value, records=n,
                )
                for field, value, n in partitions
            )  # fmt: skip
            session.flush()
            return _to_state(row)

    replace_prepared = retried(replace_prepared)

    def mark_rolled_back(
        self,
        table_name: str,
        checkpoints: Iterable[tuple[str, int]],
        *,
        snapshots: Mapping[tuple[str, int], int] | None = None,
    ) -> int:
        """Record that a rollback removed these (job, checkpoint) pairs from the branch,
        whether their rows said committed or still prepared (a job that died between the
        catalog's commit and its state update). Returns how many rows changed.

        With ``snapshots`` ((job, checkpoint) -> the snapshot that was removed), a row that
        says committed changes only when that is its snapshot: one committed again since
        (a recommit lands a new snapshot) stays committed.
        """
        changed = 0
        with Session(self._engine) as session, session.begin():
            for job_id, checkpoint_id in checkpoints:
                row = session.execute(_one(job_id, table_name, checkpoint_id)).scalar_one_or_none()
                if row is None or row.status not in (PREPARED, COMMITTED):
                    continue
                removed = (snapshots or {}).get((job_id, checkpoint_id))
                if row.status == COMMITTED and removed is not None and row.snapshot_id not in (None, removed):
                    continue
                row.status = ROLLED_BACK
                changed += 1
        return changed

    mark_rolled_back = retried(mark_rolled_back)

    def _set_if(
        self, job_id: str, table_name: str, checkpoint_id: int, statuses: tuple[str, ...], **values: object
    ) -> bool:
        """Update one checkpoint row only while its status is one of ``statuses`` (a
        compare-and-set in one statement); returns whether it did."""
        with Session(self._engine) as session, session.begin():
            changed = session.execute(
                update(CheckpointRow)
                .where(
                    CheckpointRow.job_id == job_id,
                    CheckpointRow.table_name == table_name,
                    CheckpointRow.checkpoint_id == checkpoint_id,
                    CheckpointRow.status.in_(statuses),
                )
                .values(**values)
            )
            if changed.rowcount or not is_retry():  # type: ignore[attr-defined]
                return bool(changed.rowcount)  # type: ignore[attr-defined]
            # a retry after a lost answer: the earlier try may have set it (its own values are there)
            row = session.execute(_one(job_id, table_name, checkpoint_id)).scalar_one_or_none()
            return row is not None and all(
                getattr(row, k) == v for k, v in values.items() if not isinstance(v, datetime)
            )

    _set_if = retried(_set_if)

    def abandon(self, job_id: str, table_name: str, checkpoint_id: int, *, reason: str, by: str) -> bool:
        """Mark a prepared, rolled-back or held checkpoint abandoned: a compare-and-set on its
        status, so it cannot overwrite a commit recorded meanwhile. Returns whether it did."""
        return self._set_if(
            job_id, table_name, checkpoint_id, (PREPARED, ROLLED_BACK, HELD),
            status=ABANDONED, abandon_reason=reason, abandoned_by=by, abandoned_at=self._clock(),
        )  # fmt: skip

    def reopen_abandoned(self, job_id: str, table_name: str, checkpoint_id: int) -> None:
        """Undo an abandon that lost a race with a commit (the table holds the checkpoint)."""
        with Session(self._engine) as session, session.begin():
            row = session.execute(_one(job_id, table_name, checkpoint_id)).scalar_one()
            if row.status == ABANDONED:
                row.status = PREPARED
                row.abandon_reason = row.abandoned_by = None
                row.abandoned_at = None

    reopen_abandoned = retried(reopen_abandoned)

    def acknowledge(self, job_id: str, table_name: str, checkpoint_id: int, *, by: str) -> bool:
        """Record that someone acknowledged an abandoned checkpoint (reports then show it as
        information). Returns False when it is not abandoned."""
        return self._set_if(
            job_id, table_name, checkpoint_id, (ABANDONED,), acknowledged_by=by, acknowledged_at=self._clock()
        )

    def record_gate(
        self,
        job_id: str,
        table_name: str,
        checkpoint_id: int,
        *,
        check_results: str | None,
        audit_branch: str | None,
        hold_reason: str | None,
    ) -> CheckpointState:
        """Record, once, a prepared checkpoint's check results (JSON) and the audit branch it
        waits on (a compare-and-set on a row with no decision); returns the row as it is then."""
        with Session(self._engine) as session, session.begin():
            session.execute(update(CheckpointRow).where(
                CheckpointRow.job_id == job_id, CheckpointRow.table_name == table_name,
                CheckpointRow.checkpoint_id == checkpoint_id, CheckpointRow.status == PREPARED,
                CheckpointRow.check_results.is_(None), CheckpointRow.audit_branch.is_(None),
            ).values(check_results=check_results, audit_branch=audit_branch, hold_reason=hold_reason))  # fmt: skip
            return _to_state(session.execute(_one(job_id, table_name, checkpoint_id)).scalar_one())

    record_gate = retried(record_gate)

    def mark_published(
        self,
        job_id: str,
        table_name: str,
        checkpoint_id: int,
        *,
        snapshot_id: int | None,
        by: str,
        reason: str | None,
        forced: bool,
    ) -> bool:
        """Record that a held checkpoint reached readers as ``snapshot_id`` (who released it,
        why, forced or not; a compare-and-set on its ``held`` status). Returns whether it did."""
        return self._set_if(
            job_id, table_name, checkpoint_id, (HELD,), status=COMMITTED, snapshot_id=snapshot_id,
            published_by=by, published_at=self._clock(), publish_reason=reason, publish_forced=forced,
        )  # fmt: skip

    def waiting(
        self, table_name: str | None, job_id: str | None = None, checkpoint_id: int | None = None
    ) -> builtins.list[CheckpointState]:
        """The checkpoints that wait on an audit branch (held, or prepared for it), of a table
        (None: any), a job, a checkpoint id; ordered by job, checkpoint id and table."""
        wanted = {"table_name": table_name, "job_id": job_id, "checkpoint_id": checkpoint_id}
        query = select(CheckpointRow).filter_by(**{k: v for k, v in wanted.items() if v is not None})
        query = query.where(CheckpointRow.audit_branch.is_not(None), CheckpointRow.status.in_((HELD, PREPARED)))
        order = (CheckpointRow.job_id, CheckpointRow.checkpoint_id, CheckpointRow.table_name)
        with Session(self._engine) as session:
            return [_to_state(r) for r in session.execute(query.order_by(*order)).scalars()]

    def mark_restored(self, table_name: str, checkpoints: Iterable[tuple[str, int]]) -> int:
        """Record that a rollback to a later snapshot put these rolled-back (job, checkpoint)
        pairs back on the branch: committed again. Returns how many rows changed."""
        changed = 0
        with Session(self._engine) as session, session.begin():
            for job_id, checkpoint_id in checkpoints:
                row = session.execute(_one(job_id, table_name, checkpoint_id)).scalar_one_or_none()
                if row is not None and row.status == ROLLED_BACK and row.snapshot_id is not None:
                    row.status = COMMITTED
                    changed += 1
        return changed

    mark_restored = retried(mark_restored)

    def record_replay(self, job_id: str, table_name: str, checkpoint_id: int) -> None:
        """Count a commit call that found the checkpoint already committed (a replay: skipped).
        Once, not retried (a lost reply must not count it twice); a state database that cannot
        count it is logged, never raised: the replay itself did what it should."""
        with (
            counted_or_logged(f"a replay of checkpoint {checkpoint_id} of job {job_id}"),
            Session(self._engine) as session,
            session.begin(),
        ):
            session.execute(
                update(CheckpointRow)
                .where(CheckpointRow.job_id == job_id, CheckpointRow.table_name == table_name,
                       CheckpointRow.checkpoint_id == checkpoint_id)
                .values(replays=CheckpointRow.replays + 1)
            )  # fmt: skip

    def record_refusal(self, job_id: str, table_name: str, checkpoint_id: int, kind: str) -> None:
        """Count a checkpoint the committer refused (``kind``: the error's name). Once, not
        retried; a state database that cannot count it is logged, never raised: the
        refusal is what the caller must see."""
        key = (RefusalRow.table_name == table_name, RefusalRow.job_id == job_id, RefusalRow.kind == kind)
        values = {"last_checkpoint_id": checkpoint_id, "last_at": self._clock()}
        with (
            counted_or_logged(f"the refusal of checkpoint {checkpoint_id} of job {job_id}"),
            Session(self._engine) as session,
            session.begin(),
        ):
            counted = session.execute(update(RefusalRow).where(*key).values(count=RefusalRow.count + 1, **values))
            if counted.rowcount == 0:  # type: ignore[attr-defined]
                session.add(RefusalRow(table_name=table_name, job_id=job_id, kind=kind, count=1, **values))

    def record_unknown_outcome(self, job_id: str, table_name: str, checkpoint_id: int) -> None:
        """Count a commit attempt whose outcome was unknown."""
        with Session(self._engine) as session, session.begin():
            row = session.execute(_one(job_id, table_name, checkpoint_id)).scalar_one()
            row.unknown_outcomes = (row.unknown_outcomes or 0) + 1

    record_unknown_outcome = tried_once(record_unknown_outcome)

    def record_missing(self, job_id: str, table_name: str, checkpoint_id: int, missing: int) -> None:
        """Record how many staged files were missing from storage at the last commit try."""
        with Session(self._engine) as session, session.begin():
            row = session.execute(_one(job_id, table_name, checkpoint_id)).scalar_one()
            row.files_missing = missing

    record_missing = retried(record_missing)

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
        samples: Sequence[MetricSample] = (),
        from_rolled_back: bool = False,
        status: str = COMMITTED,
    ) -> CheckpointState:
        """Record that a checkpoint is committed (``snapshot_id`` None: nothing to commit),
        with its ``committed``-stage metrics, in one transaction; ``status`` ``held``: it
        was committed to its audit branch (:attr:`CheckpointState.audit_branch`).

        A row a rollback marked ``rolled-back`` meanwhile is left as it is (and returned)
        unless ``from_rolled_back``: the caller decides whether its commit came after the
        rollback (a re-commit, or an append that landed on the rolled-back branch)."""
        with Session(self._engine) as session, session.begin():
            row = session.execute(_one(job_id, table_name, checkpoint_id)).scalar_one()
            if row.status == ROLLED_BACK and not from_rolled_back:
                return _to_state(row)
            if is_retry() and row.status == status and row.snapshot_id == snapshot_id:
                return _to_state(row)  # the earlier try recorded it and lost its answer: once only
            if row.status not in (COMMITTED, HELD) or from_rolled_back:
                # a re-commit cleared the committed metrics first, whatever the row said (a
                # rollback by another tool leaves it saying committed)
                self._add_metrics(session, job_id, table_name, checkpoint_id, samples)
            row.status = status
            row.snapshot_id = snapshot_id
            row.attempts += attempts
            row.retries += retries
            row.files_committed = counters.committed
            row.files_skipped = counters.skipped
            row.files_missing = counters.missing
            row.committed_at = self._clock()
            session.flush()
            return _to_state(row)

    mark_committed = retried(mark_committed)
