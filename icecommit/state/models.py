"""SQL tables of icecommit's own state: checkpoints (and, later, metrics and runs).

They live in the state database (:func:`icecommit.state.database.state_uri`: the catalog
property ``icecommit.state-uri``, else ``ICECOMMIT_STATE_URI``, else the catalog's own
database). The
schema is versioned in ``icecommit_schema_version`` and created on first use.
"""

from __future__ import annotations

from datetime import datetime, timezone

from sqlalchemy import BigInteger, Boolean, DateTime, Float, Index, Integer, String, Text, UniqueConstraint, and_
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

SCHEMA_VERSION = 13


class Base(DeclarativeBase):
    """Declarative base of icecommit's state tables."""


class SchemaVersionRow(Base):
    """The version of icecommit's state schema in this database."""

    __tablename__ = "icecommit_schema_version"

    component: Mapped[str] = mapped_column(String(64), primary_key=True)
    version: Mapped[int] = mapped_column(Integer)


class StateIdentityRow(Base):
    """The identity of this state database: one row, made when the schema is created.

    Tables record it (table property ``icecommit.state.id``), so that every entry point can
    tell whether the database it opened is the one that holds the table's checkpoints,
    whatever URL reached it.
    """

    __tablename__ = "icecommit_state_identity"

    key: Mapped[int] = mapped_column(Integer, primary_key=True)
    identity: Mapped[str] = mapped_column(String(36))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class CheckpointRow(Base):
    """One checkpoint of one job for one table: prepared, then committed.

    ``status`` is ``prepared``, ``committed``, ``rolled-back`` or ``abandoned``;
    ``snapshot_id`` is set once committed (NULL for an empty checkpoint, which commits no
    snapshot).
    """

    __tablename__ = "icecommit_checkpoints"
    __table_args__ = (UniqueConstraint("job_id", "table_name", "checkpoint_id", name="uq_icecommit_checkpoint"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(String(255), index=True)
    table_name: Mapped[str] = mapped_column(String(512))
    checkpoint_id: Mapped[int] = mapped_column(BigInteger)
    status: Mapped[str] = mapped_column(String(16))
    manifest_path: Mapped[str | None] = mapped_column(Text, nullable=True)
    files_digest: Mapped[str] = mapped_column(String(64))
    source_records: Mapped[int] = mapped_column(BigInteger, default=0)
    records: Mapped[int] = mapped_column(BigInteger, default=0)
    files: Mapped[int] = mapped_column(Integer, default=0)
    bytes: Mapped[int] = mapped_column(BigInteger, default=0)
    max_event_time_us: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    # what the checkpoint lets the job's watermark reach: its largest event time that was
    # not further ahead of the clock at prepare than the table's max future skew (NULL in
    # rows of schema 5 and before: max_event_time_us), and how many rows lay beyond that
    watermark_us: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    future_records: Mapped[int] = mapped_column(BigInteger, default=0)
    # the Spark streaming query (query.id, stable across restarts from one checkpoint
    # location) whose batch this is; NULL for batch writes
    query_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    # the offset ranges the query's sources reported for the batch (JSON: a list of
    # {"source", "start", "end", "records"}), beside its source count; NULL where none
    source_offsets: Mapped[str | None] = mapped_column(Text, nullable=True)
    # what committing the checkpoint needs beyond appending its data files (comma-separated
    # feature names, such as a schema change or a row delta; NULL: a plain append). Code
    # that does not know a recorded feature refuses to commit the checkpoint (schema 10)
    features: Mapped[str | None] = mapped_column(Text, nullable=True)
    # the schema id the checkpoint's own schema change made (NULL: it changed none), and
    # the table's last sequence number when its writers were given the table (an overwrite
    # conflicts with what was added after it); both schema 11
    schema_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    base_sequence_number: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    # an upsert's keys, staged beside its manifest (NULL: not an upsert); schema 11
    keys_path: Mapped[str | None] = mapped_column(Text, nullable=True)
    snapshot_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    retries: Mapped[int] = mapped_column(Integer, default=0)
    files_created: Mapped[int] = mapped_column(Integer, default=0)
    files_committed: Mapped[int] = mapped_column(Integer, default=0)
    files_skipped: Mapped[int] = mapped_column(Integer, default=0)
    files_missing: Mapped[int] = mapped_column(Integer, default=0)
    unknown_outcomes: Mapped[int] = mapped_column(Integer, default=0)
    #: commit calls that found the checkpoint already committed (replays, skipped)
    replays: Mapped[int] = mapped_column(Integer, default=0)
    prepared_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    committed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    # an operator gave the checkpoint up (status abandoned): why, who, when; and who
    # acknowledged it in the reconciliation report (until then it is a problem there)
    abandon_reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    abandoned_by: Mapped[str | None] = mapped_column(String(255), nullable=True)
    abandoned_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    acknowledged_by: Mapped[str | None] = mapped_column(String(255), nullable=True)
    acknowledged_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    # schema 13: its checks' results (JSON, NULL: it had none), decided once; the audit
    # branch it waits on and why (``checks``, ``manual``, ``queued``; NULL: it went to
    # the branch asked for); and who published it from there, when, why, forced or not
    check_results: Mapped[str | None] = mapped_column(Text, nullable=True)
    audit_branch: Mapped[str | None] = mapped_column(String(255), nullable=True)
    hold_reason: Mapped[str | None] = mapped_column(String(16), nullable=True)
    published_by: Mapped[str | None] = mapped_column(String(255), nullable=True)
    published_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    publish_reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    publish_forced: Mapped[bool] = mapped_column(Boolean, default=False)


class CheckpointTaskRow(Base):
    """A Spark task attempt whose output a prepared checkpoint accepted.

    The consistent view counts metrics of these attempts only: a failed or retried
    attempt never appears here, whatever metrics it left behind.
    """

    __tablename__ = "icecommit_checkpoint_tasks"
    __table_args__ = (Index("ix_icecommit_checkpoint_tasks", "job_id", "table_name", "checkpoint_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(String(255))
    table_name: Mapped[str] = mapped_column(String(512))
    checkpoint_id: Mapped[int] = mapped_column(BigInteger)
    task_id: Mapped[int] = mapped_column(Integer)
    attempt: Mapped[int] = mapped_column(Integer)


class MetricRow(Base):
    """Records counted at one stage, tagged with job, checkpoint, task attempt and window.

    Stages: ``source`` (rows the writers received, or, with no task, counts the caller
    declared), ``written`` (rows in data files), ``committed`` (rows in the committed
    snapshot). ``window_start`` is the one-minute event-time window (NULL: no event time).
    """

    __tablename__ = "icecommit_metrics"
    __table_args__ = (Index("ix_icecommit_metrics_checkpoint", "table_name", "job_id", "checkpoint_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(String(255))
    table_name: Mapped[str] = mapped_column(String(512))
    checkpoint_id: Mapped[int] = mapped_column(BigInteger)
    stage: Mapped[str] = mapped_column(String(32))
    task_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    attempt: Mapped[int | None] = mapped_column(Integer, nullable=True)
    window_start: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    records: Mapped[int] = mapped_column(BigInteger)
    bytes: Mapped[int] = mapped_column(BigInteger, default=0)
    files: Mapped[int] = mapped_column(Integer, default=0)
    recorded_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class CheckpointPartitionRow(Base):
    """Records a prepared checkpoint holds in one time partition of its table.

    ``partition_value`` is the transform's ordinal (hours, days, months or years since
    1970) of the time partition field ``partition_field``.
    """

    __tablename__ = "icecommit_checkpoint_partitions"
    __table_args__ = (
        Index("ix_icecommit_checkpoint_partitions", "table_name", "partition_field", "partition_value"),
        Index("ix_icecommit_checkpoint_partitions_ckpt", "job_id", "table_name", "checkpoint_id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(String(255))
    table_name: Mapped[str] = mapped_column(String(512))
    checkpoint_id: Mapped[int] = mapped_column(BigInteger)
    partition_field: Mapped[str] = mapped_column(String(255))
    partition_value: Mapped[int] = mapped_column(BigInteger)
    records: Mapped[int] = mapped_column(BigInteger)


class PartitionStatusRow(Base):
    """A time partition published complete: once per (table, field, value).

    ``records_at_completion`` counts the committed records when it was published; records
    committed into it later are late. ``notified_at`` is set once the completion callback
    returned (NULL: to be delivered).
    """

    __tablename__ = "icecommit_partition_status"
    __table_args__ = (
        UniqueConstraint("table_name", "partition_field", "partition_value", name="uq_icecommit_partition_status"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    table_name: Mapped[str] = mapped_column(String(512))
    partition_field: Mapped[str] = mapped_column(String(255))
    partition_value: Mapped[int] = mapped_column(BigInteger)
    label: Mapped[str] = mapped_column(String(255))
    start: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    end: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    watermark: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    lateness_s: Mapped[int] = mapped_column(BigInteger)
    writers: Mapped[str] = mapped_column(Text)
    records_at_completion: Mapped[int] = mapped_column(BigInteger)
    completed_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    completed_by: Mapped[str] = mapped_column(String(255))
    notified_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class CompletenessPolicyRow(Base):
    """The completeness policy a committer of the table last used (writers, lateness, idle
    timeout), so that a scheduler can publish partitions without a commit."""

    __tablename__ = "icecommit_completeness_policy"

    table_name: Mapped[str] = mapped_column(String(512), primary_key=True)
    writers: Mapped[str] = mapped_column(Text)
    lateness_s: Mapped[int] = mapped_column(BigInteger)
    idle_timeout_s: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    recorded_by: Mapped[str] = mapped_column(String(255))
    recorded_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class WriteModelRow(Base):
    """What a table's writes showed about its data: the shuffle bytes per Parquet byte a
    bin-packed write saw (so the next write, after a restart too, packs to the target)."""

    __tablename__ = "icecommit_write_model"

    table_name: Mapped[str] = mapped_column(String(512), primary_key=True)
    shuffle_ratio: Mapped[float] = mapped_column(Float)
    writes: Mapped[int] = mapped_column(Integer, default=0)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class CompactionRow(Base):
    """One compaction commit group of a table: recorded (with where its rows went) before
    its ``replace`` snapshot is committed, then marked committed or aborted.

    ``status`` is ``prepared``, ``committed`` or ``aborted``; ``compaction_id`` is the
    ``icecommit.compaction-id`` of its snapshot's summary.
    """

    __tablename__ = "icecommit_compactions"

    compaction_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    table_name: Mapped[str] = mapped_column(String(512), index=True)
    status: Mapped[str] = mapped_column(String(16))
    snapshot_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    input_files: Mapped[int] = mapped_column(Integer)
    output_files: Mapped[int] = mapped_column(Integer)
    records: Mapped[int] = mapped_column(BigInteger)
    prepared_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class RewrittenRowsRow(Base):
    """How many rows of one input file a compaction wrote into one of its output files
    (both as path keys): the exact lineage that reconciliation follows from a checkpoint's
    own files to the files that hold its rows now, whether or not the compaction's snapshot
    is still retained."""

    __tablename__ = "icecommit_rewritten_rows"
    __table_args__ = (Index("ix_icecommit_rewritten_rows_table", "table_name"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    compaction_id: Mapped[str] = mapped_column(String(64), index=True)
    table_name: Mapped[str] = mapped_column(String(512))
    input_path: Mapped[str] = mapped_column(Text)
    output_path: Mapped[str] = mapped_column(Text)
    records: Mapped[int] = mapped_column(BigInteger)


class LeaseRow(Base):
    """Who may run a table's maintenance now: one holder at a time, until ``expires_us``
    (microseconds since the epoch; a holder that dies lets it lapse)."""

    __tablename__ = "icecommit_leases"

    name: Mapped[str] = mapped_column(String(600), primary_key=True)
    holder: Mapped[str] = mapped_column(String(255))
    acquired_us: Mapped[int] = mapped_column(BigInteger)
    expires_us: Mapped[int] = mapped_column(BigInteger)


class ReconcileRunRow(Base):
    """One reconciliation run: when, over which range, whether it held, and a summary."""

    __tablename__ = "icecommit_reconcile_runs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    table_name: Mapped[str] = mapped_column(String(512), index=True)
    job_id: Mapped[str | None] = mapped_column(String(255), nullable=True)
    ran_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    since: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    until: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    ok: Mapped[bool] = mapped_column(Boolean)
    summary: Mapped[str] = mapped_column(Text)


class RefusalRow(Base):
    """Checkpoints the committer refused (a replay of a rolled-back checkpoint, an id below
    the job's last, another query's batch, a reused id: the ``CheckpointRefusedError``
    family), counted per table, job and kind, with the last one: for the metrics. Bad input
    (``InvalidInputError``) is not counted here: it leaves the state as it was."""

    __tablename__ = "icecommit_refusals"

    table_name: Mapped[str] = mapped_column(String(512), primary_key=True)
    job_id: Mapped[str] = mapped_column(String(255), primary_key=True)
    kind: Mapped[str] = mapped_column(String(64), primary_key=True)
    count: Mapped[int] = mapped_column(Integer, default=0)
    last_checkpoint_id: Mapped[int] = mapped_column(BigInteger)
    last_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class MaintenanceRunRow(Base):
    """One maintenance run that changed a table (an expiry, an orphan sweep, a compaction):
    when, how long, and what it did (``counts``: JSON of name to count), for the metrics
    that outlive the process that ran it."""

    __tablename__ = "icecommit_maintenance_runs"
    __table_args__ = (Index("ix_icecommit_maintenance_runs_table_kind", "table_name", "kind"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    table_name: Mapped[str] = mapped_column(String(512))
    kind: Mapped[str] = mapped_column(String(32))
    finished_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    seconds: Mapped[float] = mapped_column(Float)
    counts: Mapped[str] = mapped_column(Text)


#: Joins a metrics row to the task attempt its checkpoint accepted: the consistent view.
ACCEPTED_ATTEMPT = and_(
    CheckpointTaskRow.job_id == MetricRow.job_id,
    CheckpointTaskRow.table_name == MetricRow.table_name,
    CheckpointTaskRow.checkpoint_id == MetricRow.checkpoint_id,
    CheckpointTaskRow.task_id == MetricRow.task_id,
    CheckpointTaskRow.attempt == MetricRow.attempt,
)


# -- stored times: every time is stored in UTC ------------------------------------------
def utc_now() -> datetime:
    """The wall clock, in UTC (the default clock of the stores)."""
    return datetime.now(timezone.utc)


def as_utc(value: datetime) -> datetime:
    """SQLite returns naive datetimes; every stored time is UTC."""
    return value if value.tzinfo is not None else value.replace(tzinfo=timezone.utc)


def in_utc(value: datetime) -> datetime:
    """An aware time in UTC (a naive one is taken as UTC)."""
    return as_utc(value).astimezone(timezone.utc)
