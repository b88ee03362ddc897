"""Read-only views of a table's snapshots and a job's checkpoints, as typed rows."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from pyiceberg.catalog import Catalog
from pyiceberg.table import Table

from icecommit.catalog.tables import resolve_table
from icecommit.core import ancestry
from icecommit.core.ancestry import MAIN_BRANCH
from icecommit.core.check_values import CheckResult
from icecommit.core.completeness import partition_value, time_partition
from icecommit.core.errors import InvalidArgumentError, JobNotFoundError
from icecommit.core.identifiers import checked_duration, table_name
from icecommit.state.checkpoints import ROLLED_BACK, CheckpointState, CheckpointStore
from icecommit.state.database import state_engine, state_uri
from icecommit.state.partitions import PartitionStatus, PartitionStatusStore
from icecommit.state.samples import SourceRange


@dataclass(frozen=True)
class SnapshotInfo:
    """One snapshot of a table, with what icecommit recorded in its summary."""

    snapshot_id: int
    parent_id: int | None
    committed_at: datetime
    operation: str
    job_id: str | None
    checkpoint_id: int | None
    added_records: int
    added_files: int
    max_event_time: datetime | None
    is_current: bool
    #: the table schema the snapshot was written with (its files' field ids)
    schema_id: int | None = None


@dataclass(frozen=True)
class CheckpointInfo:
    """One checkpoint of a job and what became of it.

    Attributes:
        status: ``prepared`` (pending), ``committed``, ``rolled-back`` (a rollback, by
            icecommit or another tool, removed it), ``abandoned`` (discarded too) or
            ``held`` (committed to its job's audit branch, waiting for a release).
        in_ancestry: the branch's ancestry holds its snapshot (False after expiry too).
        files_created / files_committed / files_skipped / files_missing: the publishing
            counters: files its writers made, files its commit added, files found already
            committed (a replay after a lost response or failover), files missing from
            storage at the last commit try. None where no state row exists (a checkpoint
            known only from the table).
        attempts / retries / unknown_outcomes: commit attempts, how many were retries
            after a conflict, and how many ended with an unknown outcome.
        source_offsets: the offset range each source of a streaming query reported for
            the batch (beside its source count); empty for batch writes.
        features: what the checkpoint did before its tasks wrote (``table-create``: it
            created the table; ``schema-change``: it changed the table's schema).
    """

    job_id: str
    checkpoint_id: int
    status: str
    snapshot_id: int | None
    records: int
    files: int
    in_ancestry: bool
    prepared_at: datetime | None
    committed_at: datetime | None
    files_created: int | None = None
    files_committed: int | None = None
    files_skipped: int | None = None
    files_missing: int | None = None
    attempts: int | None = None
    retries: int | None = None
    unknown_outcomes: int | None = None
    source_offsets: tuple[SourceRange, ...] = ()
    #: what the checkpoint did before its tasks wrote: ``table-create``, ``schema-change``
    features: tuple[str, ...] = ()
    #: the schema id the checkpoint's own schema change made (None: it changed none)
    changed_schema_id: int | None = None
    #: its checks' results (empty: it had none)
    checks: tuple[CheckResult, ...] = ()
    #: the audit branch it waits on, or waited on before it was published or discarded
    #: (None: it went to the branch asked for), and why: ``checks``, ``manual``, ``queued``
    audit_branch: str | None = None
    hold_reason: str | None = None
    #: who published it from its audit branch, when, why, and whether past a failed check
    published_by: str | None = None
    published_at: datetime | None = None
    publish_reason: str | None = None
    publish_forced: bool = False

    @property
    def checks_failed(self) -> bool:
        """Whether one of its checks failed."""
        return any(not r.ok for r in self.checks)


@dataclass(frozen=True)
class TableInfo:
    """One table of a catalog: its current snapshot and what it holds then.

    Attributes:
        records / data_files / delete_files: the current snapshot's totals (its summary's
            ``total-records``, ``total-data-files``, ``total-delete-files``; 0 when empty).
        last_commit: when the current snapshot was committed (None: no snapshot yet).
        last_checkpoint: the job and checkpoint of the newest snapshot icecommit committed
            on the main branch, if any.
    """

    name: str
    format_version: int
    snapshots: int
    current_snapshot_id: int | None
    records: int
    data_files: int
    delete_files: int
    last_commit: datetime | None
    last_checkpoint: tuple[str, int] | None


def list_tables(catalog: Catalog, namespace: str | None = None) -> list[TableInfo]:
    """The tables of ``namespace`` (default: of every namespace, nested ones too), by name.

    Raises:
        InvalidArgumentError: no such namespace (names the ones there are).
    """
    if namespace is not None:
        spaces = [tuple(namespace.split("."))]
        if not catalog.namespace_exists(spaces[0]):
            known = sorted(".".join(n) for n in catalog.list_namespaces())
            raise InvalidArgumentError(
                "namespace", namespace, f"a namespace of the catalog: {', '.join(known) or 'it has none yet'}"
            )
    else:
        spaces, pending = [], list(catalog.list_namespaces())
        while pending:
            space = pending.pop()
            spaces.append(tuple(space))
            pending.extend(catalog.list_namespaces(tuple(space)))
    found = []
    for space in spaces:
        for identifier in catalog.list_tables(space):
            table = catalog.load_table(identifier)
            current = table.current_snapshot()
            totals = current.summary if current is not None and current.summary is not None else None
            newest = next(
                (
                    key
                    for s in ancestry.branch_ancestry(table.metadata, MAIN_BRANCH)
                    if (key := ancestry.checkpoint_of(s))
                ),
                None,
            )
            found.append(
                TableInfo(
                    name=".".join(identifier),
                    format_version=table.metadata.format_version,
                    snapshots=len(table.metadata.snapshots),
                    current_snapshot_id=current.snapshot_id if current is not None else None,
                    records=int(totals.get("total-records") or 0) if totals else 0,
                    data_files=int(totals.get("total-data-files") or 0) if totals else 0,
                    delete_files=int(totals.get("total-delete-files") or 0) if totals else 0,
                    last_commit=(
                        datetime.fromtimestamp(current.timestamp_ms / 1000, tz=timezone.utc) if current else None
                    ),
                    last_checkpoint=newest,
                )
            )
    return sorted(found, key=lambda t: t.name)


def _micros_to_datetime(value: str | None) -> datetime | None:
    if value is None:
        return None
    return datetime.fromtimestamp(int(value) / 1_000_000, tz=timezone.utc)


def list_snapshots(catalog: Catalog, table: Table | str) -> list[SnapshotInfo]:
    """Every snapshot of the table, oldest first, the current one marked."""
    loaded = resolve_table(catalog, table)
    current = loaded.current_snapshot()
    rows = []
    for snapshot in sorted(loaded.metadata.snapshots, key=lambda s: (s.timestamp_ms, s.sequence_number or 0)):
        summary = snapshot.summary
        key = ancestry.checkpoint_of(snapshot)
        rows.append(
            SnapshotInfo(
                snapshot_id=snapshot.snapshot_id,
                parent_id=snapshot.parent_snapshot_id,
                committed_at=datetime.fromtimestamp(snapshot.timestamp_ms / 1000, tz=timezone.utc),
                operation=str(summary.operation.value) if summary else "unknown",
                job_id=key[0] if key else None,
                checkpoint_id=key[1] if key else None,
                added_records=int(summary.get("added-records") or 0) if summary else 0,
                added_files=int(summary.get("added-data-files") or 0) if summary else 0,
                max_event_time=_micros_to_datetime(summary.get(ancestry.MAX_EVENT_TIME) if summary else None),
                is_current=current is not None and snapshot.snapshot_id == current.snapshot_id,
                schema_id=snapshot.schema_id,
            )
        )
    return rows


def list_checkpoints(
    catalog: Catalog, table: Table | str, *, job_id: str | None = None, branch: str = MAIN_BRANCH
) -> list[CheckpointInfo]:
    """Checkpoints of a table: committed ones from the branch's ancestry, pending ones from
    the checkpoint table, ordered by job and checkpoint id. Those another branch holds and
    this one does not are that branch's to list, not this one's, except those that wait on
    (or were discarded from) a job's audit branch: held and queued ones are listed
    ``held``, discarded ones ``abandoned``, each with its audit branch, why it was held and
    its checks' results; a published one is ``committed``, with who published it.

    Raises:
        JobNotFoundError: ``job_id`` has no checkpoints there (names the jobs that do).
    """
    loaded = resolve_table(catalog, table)
    ancestry.require_branch(loaded.metadata, branch)  # a typo lists nothing: say so
    name = table_name(table)
    in_ancestry = {
        (c.job_id, c.checkpoint_id): c for c in ancestry.committed_checkpoints(loaded.metadata, branch, job_id)
    }
    off_branch = set(ancestry.rolled_back_snapshots(loaded.metadata, [branch]).values())
    elsewhere = ancestry.held_elsewhere(loaded.metadata, branch)
    store = CheckpointStore(state_engine(state_uri(catalog)))
    rows: dict[tuple[str, int], CheckpointInfo] = {}
    for state in store.list(name, job_id=job_id):
        key = (state.job_id, state.checkpoint_id)
        if key in elsewhere and state.audit_branch in (None, branch):
            continue  # not one held back from this branch: that branch's to list
        landed = in_ancestry.get(key)
        status = ROLLED_BACK if landed is None and key in off_branch and state.committed else state.status
        rows[key] = CheckpointInfo(
            job_id=state.job_id,
            checkpoint_id=state.checkpoint_id,
            status=status,
            snapshot_id=landed.snapshot_id if landed else state.snapshot_id,
            records=state.records,
            files=state.files,
            in_ancestry=landed is not None,
            prepared_at=state.prepared_at,
            committed_at=state.committed_at,
            files_created=state.counters.created,
            files_committed=state.counters.committed,
            files_skipped=state.counters.skipped,
            files_missing=state.counters.missing,
            attempts=state.attempts,
            retries=state.retries,
            unknown_outcomes=state.unknown_outcomes,
            features=state.features,
            changed_schema_id=state.schema_id,
            source_offsets=state.source_offsets,
            checks=_checks_of(state),
            audit_branch=state.audit_branch,
            hold_reason=state.hold_reason,
            published_by=state.published_by,
            published_at=state.published_at,
            publish_reason=state.publish_reason,
            publish_forced=state.publish_forced,
        )
    for key, landed in in_ancestry.items():
        if key in rows:
            continue
        snapshot = loaded.metadata.snapshot_by_id(landed.snapshot_id)
        summary = snapshot.summary if snapshot else None
        rows[key] = CheckpointInfo(
            job_id=landed.job_id,
            checkpoint_id=landed.checkpoint_id,
            status="committed",
            snapshot_id=landed.snapshot_id,
            records=int(summary.get(ancestry.RECORDS) or 0) if summary else 0,
            files=int(summary.get(ancestry.FILES) or 0) if summary else 0,
            in_ancestry=True,
            prepared_at=None,
            committed_at=datetime.fromtimestamp(landed.timestamp_ms / 1000, tz=timezone.utc),
        )
    # a typo lists nothing: say so, with the jobs there are (a job on other branches only is none)
    if job_id is not None and not rows and all(key[0] != job_id for key in elsewhere):
        jobs = {c.job_id for c in ancestry.committed_checkpoints(loaded.metadata, branch)} | set(store.jobs(name))
        raise JobNotFoundError(name, job_id, sorted(jobs))
    return [rows[k] for k in sorted(rows)]


def _checks_of(state: CheckpointState) -> tuple[CheckResult, ...]:
    """The check results recorded with a checkpoint (none when it had no checks)."""
    return tuple(CheckResult.from_dict(r) for r in json.loads(state.check_results)) if state.check_results else ()


def partition_status(catalog: Catalog, table: Table | str) -> list[PartitionStatus]:
    """Time partitions of a table published complete, oldest first, each with the records
    committed when it was published and the late records committed into it since.

    Raises:
        NoSuchTableError: the table does not exist.
    """
    resolve_table(catalog, table)
    return PartitionStatusStore(state_engine(state_uri(catalog))).statuses(table_name(table))


def wait_for_partition(
    catalog: Catalog,
    table: Table | str,
    label: str,
    *,
    timeout: timedelta = timedelta(hours=1),
    poll: timedelta = timedelta(seconds=30),
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> PartitionStatus | None:
    """Wait until the time partition ``label`` (e.g. ``ts_hour=2026-05-01-13``) is
    published complete: its status, within one ``poll`` of its publication, or None once
    ``timeout`` has passed without it (what a scheduler's sensor does).

    Raises:
        NoSuchTableError: the table does not exist.
        InvalidArgumentError: the table has no time partition, or its partition spec
            cannot have ``label``; raised at once, without waiting.
    """
    checked_duration(timeout, "timeout")
    checked_duration(poll, "poll", positive=True)
    if not isinstance(label, str):
        raise InvalidArgumentError("label", label, "a partition label such as ts_hour=2026-05-01-13")
    loaded = resolve_table(catalog, table)
    field = time_partition(loaded.metadata)
    if field is None:
        raise InvalidArgumentError("label", label, "a label of a time partition, and the table has none")
    try:
        value = partition_value(field, label)
    except ValueError as e:
        raise InvalidArgumentError("label", label, str(e).split("expected ", 1)[-1]) from None
    store = PartitionStatusStore(state_engine(state_uri(catalog)))
    name = table_name(table)
    deadline = clock() + timeout.total_seconds()
    while True:
        for status in store.statuses(name):
            if status.field == field.name and status.value == value:
                return status
        left = deadline - clock()
        if left <= 0:
            return None
        sleep(min(poll.total_seconds(), left))
