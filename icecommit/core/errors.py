"""The icecommit error hierarchy.

Every error icecommit raises derives from :class:`IcecommitError` and carries the facts
of the failure as attributes (table, checkpoint id, column, expected vs actual), so a
caller can act on them without parsing the message. Each belongs to one of four families,
which say what the caller does next:

- :class:`InvalidInputError`: the input or the call is wrong; nothing was staged. Fix it.
- :class:`CheckpointRefusedError`: the checkpoint decision refused the checkpoint (rolled
  back, out of order, reused, another query's batch); nothing was staged. The message says
  the way forward (a new job id, ``recommit=True``, leave it out).
- :class:`CommitOutcomeError`: a commit did not end as asked. A conflict
  (:class:`CommitConflictError`) did not land: retry later. An unknown outcome
  (:class:`CommitStateUnknownError`) may have landed: run ``recover()``; nothing was deleted.
- :class:`EnvironmentFailureError`: the catalog, the state database or storage failed or
  holds something icecommit cannot use; an operator acts.

Some classes moved family in 0.2: their old base (:class:`ValidationError`,
:class:`TableSpecError`) stays a second base for one release, so existing ``except``
clauses keep catching them; :func:`family_of` gives the one family that counts.
"""

from __future__ import annotations

from datetime import datetime

from pyiceberg.exceptions import NoSuchTableError


class IcecommitError(Exception):
    """Root of every error icecommit raises."""


class InvalidInputError(IcecommitError):
    """The input or the call is wrong (a column, a count, an argument, a name); nothing was
    staged, so the files a write made are removed. Fix the input and run again."""


class CheckpointRefusedError(IcecommitError):
    """The checkpoint decision refused this checkpoint; nothing was staged (the files a
    write made are removed). The message names the way forward."""


class CommitOutcomeError(IcecommitError):
    """A commit did not end as asked: lost to concurrent commits (retry later), or its
    outcome is unknown (run ``recover()``). Never a reason to delete a file."""


class EnvironmentFailureError(IcecommitError):
    """The catalog, the state database or storage failed, or holds something icecommit
    cannot use (a lost file, a changed table, another state database); an operator acts."""


#: The families, in the order :func:`family_of` tries them (a class that keeps an old base
#: as its second base belongs to the family of its first).
FAMILIES: tuple[type[IcecommitError], ...] = (
    CommitOutcomeError,
    EnvironmentFailureError,
    CheckpointRefusedError,
    InvalidInputError,
)


def family_of(error: BaseException) -> type[IcecommitError] | None:
    """The family an error belongs to (None: not an icecommit error)."""
    for family in FAMILIES:
        if isinstance(error, family):
            return family
    return None


def nothing_staged(error: BaseException) -> bool:
    """True when the error proves that nothing of the checkpoint was staged, so the data
    files a write made for it may be removed: invalid input and the decision's refusals.
    Never for a commit outcome or an environment failure."""
    return family_of(error) in (InvalidInputError, CheckpointRefusedError)


class SchemaMismatchError(InvalidInputError):
    """The input does not fit the table's schema; nothing was committed.

    Attributes:
        column: the column at fault (dotted path for nested fields).
        reason: what is wrong with it.
    """

    def __init__(self, column: str, reason: str, *, table: str | None = None) -> None:
        self.column = column
        self.reason = reason
        self.table = table
        where = f" of table {table}" if table else ""
        super().__init__(f"column {column!r}{where}: {reason}")


class ValidationError(InvalidInputError):
    """Pre-commit validation of a checkpoint's write results failed; nothing was committed.

    Attributes:
        checkpoint_id: the checkpoint whose results were refused.
        reason: what did not hold (a count, a file).
        expected / actual: the two sides of a count mismatch, when it is one.
        path: the data file at fault, when it is one.
    """

    def __init__(
        self,
        reason: str,
        *,
        checkpoint_id: int | None = None,
        expected: object = None,
        actual: object = None,
        path: str | None = None,
    ) -> None:
        self.reason = reason
        self.checkpoint_id = checkpoint_id
        self.expected = expected
        self.actual = actual
        self.path = path
        prefix = f"checkpoint {checkpoint_id}: " if checkpoint_id is not None else ""
        super().__init__(prefix + reason)


class CommitConflictError(CommitOutcomeError):
    """Concurrent commits kept winning until the retry policy gave up; nothing of this
    commit landed. Retry later (or raise ``commit.retry.*``).

    Attributes:
        table / checkpoint_id: the table, and the checkpoint (None for another operation).
        operation: what was being committed, as the message names it.
        attempts / elapsed_s: how many attempts were made, in how long.
    """

    def __init__(
        self,
        table: str,
        checkpoint_id: int | None,
        attempts: int,
        elapsed_s: float,
        *,
        operation: str | None = None,
    ) -> None:
        self.table = table
        self.checkpoint_id = checkpoint_id
        self.attempts = attempts
        self.elapsed_s = elapsed_s
        self.operation = operation or (
            f"checkpoint {checkpoint_id} of {table}" if checkpoint_id is not None else f"a commit to {table}"
        )
        super().__init__(
            f"{self.operation}: gave up after {attempts} conflicting commit attempts in {elapsed_s:.2f}s; "
            "nothing of it landed: retry later"
        )


class CommitStateUnknownError(CommitOutcomeError):
    """A commit attempt failed in a way that does not prove it did not land, and the table
    did not show it either. Nothing was deleted.

    Attributes:
        table / checkpoint_id: the table, and the checkpoint (None for another operation).
        operation: what was being committed, as the message names it.
        cause: the error the attempt raised.
        remedy: what resolves it (for a checkpoint, ``recover()``).
    """

    def __init__(
        self,
        table: str,
        checkpoint_id: int | None,
        cause: BaseException,
        *,
        operation: str | None = None,
        remedy: str = "run recover() to resolve it",
    ) -> None:
        self.table = table
        self.checkpoint_id = checkpoint_id
        self.cause = cause
        self.remedy = remedy
        self.operation = operation or (
            f"checkpoint {checkpoint_id} of {table}" if checkpoint_id is not None else f"a commit to {table}"
        )
        super().__init__(f"{self.operation}: commit outcome unknown ({cause!r}); {remedy}")


class CheckpointNotFoundError(InvalidInputError):
    """No prepared or committed checkpoint matches the request."""

    def __init__(self, job_id: str, checkpoint_id: int, table: str | None = None) -> None:
        self.job_id = job_id
        self.checkpoint_id = checkpoint_id
        self.table = table
        where = f" for table {table}" if table else ""
        super().__init__(f"job {job_id!r} has no checkpoint {checkpoint_id}{where}")


class SnapshotNotFoundError(InvalidInputError):
    """No snapshot matches the request."""

    def __init__(self, table: str, what: str) -> None:
        self.table = table
        self.what = what
        super().__init__(f"table {table}: no snapshot {what}")


class CompletenessNotReachedError(InvalidInputError):
    """The time partition holding an event time has not been published complete yet, so
    the table has no data-time version for it (yet).

    Attributes:
        table / event_time / partition: what was asked, and the partition that holds it.
    """

    def __init__(self, table: str, event_time: datetime, partition: str) -> None:
        self.table = table
        self.event_time = event_time
        self.partition = partition
        super().__init__(
            f"table {table}: event time {event_time.isoformat()} is not complete yet ({partition} has not been "
            "published); wait for it (icecommit partitions --wait) or ask for complete=False"
        )


class TableSpecError(InvalidInputError):
    """A table definition is invalid or conflicts with an existing table."""

    def __init__(self, table: str, reason: str) -> None:
        self.table = table
        self.reason = reason
        super().__init__(f"table {table}: {reason}")


class TableNotFoundError(TableSpecError, NoSuchTableError):
    """The catalog has no such table (nor, possibly, its namespace); also a pyiceberg
    ``NoSuchTableError``, so handlers of either catch it.

    Attributes:
        table: the name asked for.
        known: the tables the catalog has in that namespace (empty when the namespace
            does not exist).
        catalog: the catalog looked in (its name and, for a SQL catalog, its database
            with any password hidden).
    """

    def __init__(self, table: str, known: list[str], *, namespace_exists: bool, catalog: str | None = None) -> None:
        self.known = known
        self.catalog = catalog
        where = f" in catalog {catalog}" if catalog else ""
        if not namespace_exists:
            reason = f"does not exist{where} (nor does its namespace {table.rsplit('.', 1)[0]})"
        elif known:
            shown = ", ".join(known[:10]) + (f" and {len(known) - 10} more" if len(known) > 10 else "")
            reason = f"does not exist{where}; the namespace holds {shown}"
        else:
            reason = f"does not exist{where}; its namespace holds no table"
        super().__init__(table, reason)


class NotAnAncestorError(TableSpecError):
    """A rollback target that is not an ancestor of the current snapshot (making it
    current would also hide what only the current branch holds); nothing changed.

    Attributes:
        table / snapshot_id: the table and the target snapshot.
    """

    def __init__(self, table: str, snapshot_id: int) -> None:
        self.snapshot_id = snapshot_id
        super().__init__(
            table,
            f"snapshot {snapshot_id} is not an ancestor of the current snapshot "
            "(pass allow_non_ancestor=True to make it current anyway)",
        )


class CheckpointRolledBackError(CheckpointRefusedError):
    """A checkpoint was committed, then a rollback removed its snapshot from the branch.

    Replaying it is neither skipped nor duplicated silently: re-commit it explicitly
    (``GlobalCommitter.recommit`` or ``ic.write(..., recommit=True)``), or leave it out.
    """

    def __init__(self, job_id: str, checkpoint_id: int, snapshot_id: int | None, table: str) -> None:
        self.job_id = job_id
        self.checkpoint_id = checkpoint_id
        self.snapshot_id = snapshot_id
        self.table = table
        landed = f" as snapshot {snapshot_id}" if snapshot_id is not None else ""
        super().__init__(
            f"checkpoint {checkpoint_id} of job {job_id!r} was committed{landed} to {table}, and a rollback "
            "removed it from the branch; re-commit it explicitly (recommit=True) or leave it out"
        )


class CheckpointCommittedError(CheckpointRefusedError, ValidationError):
    """The table holds the checkpoint (or its state says committed), so it cannot be
    abandoned.

    Attributes:
        job_id / table: the job and the table.
        snapshot_id: the snapshot holding it, when known.
    """

    def __init__(self, job_id: str, checkpoint_id: int, snapshot_id: int | None, table: str) -> None:
        self.job_id = job_id
        self.table = table
        self.snapshot_id = snapshot_id
        where = f" (snapshot {snapshot_id})" if snapshot_id is not None else ""
        super().__init__(
            f"job {job_id!r} has committed it to {table}{where}; only a prepared or rolled-back checkpoint can be "
            "abandoned (roll the table back first to remove committed data)",
            checkpoint_id=checkpoint_id,
        )


class CheckpointOutOfOrderError(CheckpointRefusedError, ValidationError):
    """A checkpoint id at or below the job's highest committed one, which the table does
    not hold: checkpoint ids grow within a job, so committing it would either duplicate a
    replay or slip old data in behind newer data. Nothing was written or committed.

    Attributes:
        job_id / table: the job and the table.
        checkpoint_id: the refused id.
        highest_committed: the job's highest committed checkpoint id in the table.
    """

    def __init__(self, job_id: str, checkpoint_id: int, highest_committed: int, table: str) -> None:
        self.job_id = job_id
        self.table = table
        self.highest_committed = highest_committed
        super().__init__(
            f"job {job_id!r} has already committed checkpoint {highest_committed} to {table}, and checkpoint ids "
            "must grow within a job; this one was never committed there. If this is a new query or a job whose "
            "counter was reset, give it a new job_id",
            checkpoint_id=checkpoint_id,
            expected=f"> {highest_committed}",
            actual=checkpoint_id,
        )


class StreamingQueryMismatchError(CheckpointRefusedError, ValidationError):
    """A streaming batch whose job already committed that batch id under another Spark
    streaming query: a query restarted with a new checkpoint location but the same job id
    starts its batch ids at 0 again, and skipping them as "already committed" would drop
    its data. Nothing was written or committed.

    Attributes:
        job_id / checkpoint_id / table: the batch.
        query_id: the query offering it now; committed_by: the query that committed the id.
    """

    def __init__(self, job_id: str, checkpoint_id: int, table: str, query_id: str, committed_by: str) -> None:
        self.job_id = job_id
        self.table = table
        self.query_id = query_id
        self.committed_by = committed_by
        super().__init__(
            f"job {job_id!r} committed batch {checkpoint_id} to {table} under streaming query {committed_by}, and "
            f"query {query_id} offers it again: a query with a new checkpoint location counts its batches from 0. "
            "Give the new query a new job_id (or restart the old one from its checkpoint location)",
            checkpoint_id=checkpoint_id,
            expected=committed_by,
            actual=query_id,
        )


class CheckpointReusedError(CheckpointRefusedError, ValidationError):
    """Different data files offered under a checkpoint id this job already prepared or
    committed: the job's checkpoint counter went back (a new streaming checkpoint location,
    a batch rerun from 0). Nothing was staged or committed.

    Attributes:
        job_id / checkpoint_id / table: the checkpoint.
        status: ``prepared`` or ``committed`` (what the id already holds).
        snapshot_id: the snapshot that holds it, when the table shows one.
        expected / actual: files already under the id, and files offered (when known).
    """

    def __init__(
        self,
        job_id: str,
        checkpoint_id: int,
        table: str,
        *,
        status: str,
        snapshot_id: int | None = None,
        staged: int | None = None,
        offered: int | None = None,
    ) -> None:
        self.job_id = job_id
        self.table = table
        self.status = status
        self.snapshot_id = snapshot_id
        where = f" as snapshot {snapshot_id}" if snapshot_id is not None else ""
        counts = f" ({staged} staged, {offered} offered)" if staged is not None else ""
        super().__init__(
            f"job {job_id} in table {table}: already {status}{where} with different data files{counts}; "
            "checkpoint ids must grow within a job: restart a job whose counter was reset under a new job id",
            checkpoint_id=checkpoint_id,
            expected=staged,
            actual=offered,
        )


class DataFileMissingError(EnvironmentFailureError, ValidationError):
    """A data file of a checkpoint is absent from storage or not the size recorded for it
    (at prepare, or at commit: a staged file lost since). Nothing was committed.

    Attributes:
        path: the first bad file; expected / actual: its recorded size and its size on
            storage (None when absent); bad / total: how many of the checkpoint's files.
        table / job_id: where known.
    """

    def __init__(
        self,
        path: str,
        *,
        checkpoint_id: int,
        expected: int | None,
        actual: int | None,
        bad: int,
        total: int,
        table: str | None = None,
        job_id: str | None = None,
    ) -> None:
        self.bad = bad
        self.total = total
        self.table = table
        self.job_id = job_id
        what = "is missing from storage" if actual is None else f"has {actual} bytes on storage, {expected} recorded"
        super().__init__(
            f"data file {path} {what} ({bad} of {total} files bad)",
            checkpoint_id=checkpoint_id,
            expected=expected,
            actual=actual,
            path=path,
        )


class PartitionSpecChangedError(EnvironmentFailureError, ValidationError):
    """A checkpoint prepared under a partition spec that the table no longer has (another
    engine's maintenance removed it as unused). Files of an older spec that the table still
    has commit under it; these cannot, because their partition values have no spec to be
    read with. Nothing was committed; abandon it and write its rows again.

    Attributes:
        job_id / checkpoint_id / table: the checkpoint.
        prepared_spec_id / current_spec_id: the spec its files were written for, and the table's.
    """

    def __init__(
        self, job_id: str, checkpoint_id: int, table: str, prepared_spec_id: int, current_spec_id: int
    ) -> None:
        self.job_id = job_id
        self.table = table
        self.prepared_spec_id = prepared_spec_id
        self.current_spec_id = current_spec_id
        super().__init__(
            f"job {job_id} in table {table}: prepared under partition spec {prepared_spec_id}, which the table "
            f"no longer has (its spec is now {current_spec_id}); its files cannot be committed. Give it up with "
            f"GlobalCommitter(...).abandon({checkpoint_id}, reason=...) and write its rows again under a new "
            "checkpoint id",
            checkpoint_id=checkpoint_id,
            expected=current_spec_id,
            actual=prepared_spec_id,
        )


class SchemaChangedError(EnvironmentFailureError, ValidationError):
    """The table's schema changed after a checkpoint was prepared in a way its files cannot
    follow: a required column was added that they lack, so every read of them would fail.
    Nothing was committed; abandon the checkpoint and write its rows again.

    Attributes:
        job_id / checkpoint_id / table: the checkpoint; column: the required column.
    """

    def __init__(self, job_id: str, checkpoint_id: int, table: str, column: str) -> None:
        self.job_id = job_id
        self.table = table
        self.column = column
        super().__init__(
            f"job {job_id} in table {table}: required column {column!r} was added after the checkpoint was prepared, "
            f"and its files do not have it (they would be unreadable). Give it up with "
            f"GlobalCommitter(...).abandon({checkpoint_id}, reason=...) and write its rows again under a new "
            "checkpoint id",
            checkpoint_id=checkpoint_id,
            expected=column,
            actual=None,
        )


class StagedManifestError(EnvironmentFailureError, ValidationError):
    """A prepared checkpoint's staged manifest cannot be read (missing or corrupt), so the
    checkpoint cannot commit; abandoning it lets the job go on.

    Attributes:
        job_id / checkpoint_id / table: the checkpoint; path: the staged manifest.
    """

    def __init__(self, job_id: str, checkpoint_id: int, table: str, path: str, problem: str) -> None:
        self.job_id = job_id
        self.table = table
        super().__init__(
            f"job {job_id} in table {table}: staged manifest {path} {problem}; the checkpoint cannot commit. "
            f"If its data is lost, give it up with GlobalCommitter(...).abandon({checkpoint_id}, reason=...) "
            "so the job can go on",
            checkpoint_id=checkpoint_id,
            path=path,
        )


class UnroutedRecordsError(ValidationError):
    """Rows whose routing value maps to no table, with no dead-letter table to take them.

    Nothing was committed to any table.

    Attributes:
        column: the routing column.
        records: how many rows had no route.
        values: a few of the routing values that had no route (None for a null).
    """

    def __init__(self, column: str, records: int, values: list[str | None], *, checkpoint_id: int) -> None:
        self.column = column
        self.records = records
        self.values = values
        shown = ", ".join("null" if v is None else repr(v) for v in values)
        super().__init__(
            f"{records} row(s) have a value of routing column {column!r} that maps to no table (e.g. {shown}); "
            "add them to the routes or pass dead_letter=",
            checkpoint_id=checkpoint_id,
            actual=records,
        )


class UnsafeLocationError(EnvironmentFailureError):
    """A deleting command (orphan sweep, expiry's cleanup) or a table definition would
    reach files that are not the table's own: a location that contains another table's,
    or files in another file system than the table's location. Nothing was deleted.

    Attributes:
        table: the table.
        location: the location or file at fault.
        reason: what is wrong with it.
    """

    def __init__(self, table: str, location: str, reason: str) -> None:
        self.table = table
        self.location = location
        self.reason = reason
        super().__init__(f"table {table}: {reason} ({location}); nothing was deleted")


class InvalidArgumentError(InvalidInputError, ValueError):
    """An argument or table property icecommit reads has a value it cannot use; nothing
    was written, staged or committed.

    Attributes:
        argument: the Python parameter or the table property.
        value: the value given.
        accepted: what would be accepted.
    """

    def __init__(self, argument: str, value: object, accepted: str) -> None:
        self.argument = argument
        self.value = value
        self.accepted = accepted
        super().__init__(f"{argument}={value!r} is not valid: expected {accepted}")


class CatalogUnavailableError(EnvironmentFailureError):
    """The catalog cannot be opened, or does not exist where only an existing one will do;
    nothing was created.

    Attributes:
        uri: the catalog's database URL (password hidden) or ``catalog NAME``.
        reason: what is wrong.
    """

    def __init__(self, uri: str, reason: str) -> None:
        self.uri = uri
        self.reason = reason
        super().__init__(f"catalog {uri}: {reason}" if not uri.startswith("catalog ") else f"{uri}: {reason}")


class JobNotFoundError(InvalidInputError):
    """A job that has no checkpoints for the table.

    Attributes:
        table / job_id: what was asked for.
        known_jobs: the jobs that do have checkpoints for the table.
    """

    def __init__(self, table: str, job_id: str, known_jobs: list[str]) -> None:
        self.table = table
        self.job_id = job_id
        self.known_jobs = known_jobs
        known = ", ".join(known_jobs) if known_jobs else "none"
        super().__init__(f"no checkpoints for job {job_id!r} in table {table}; known jobs: {known}")


class StagingError(EnvironmentFailureError):
    """Storage failed while a checkpoint's manifest was being staged (a full disk, a lost
    connection); nothing was recorded, so preparing again is safe. The original error is
    ``__cause__``.

    Attributes:
        checkpoint_id / path: the checkpoint and the staged manifest being written.
    """

    def __init__(self, checkpoint_id: int, path: str, cause: BaseException) -> None:
        self.checkpoint_id = checkpoint_id
        self.path = path
        super().__init__(
            f"checkpoint {checkpoint_id}: staging {path} failed ({type(cause).__name__}: {cause}); "
            "nothing was recorded: prepare it again once storage is back"
        )


class StateDatabaseError(EnvironmentFailureError):
    """icecommit's state database cannot be used for what was asked; nothing was changed.

    Attributes:
        uri: the state database opened (password hidden).
        reason: what is wrong.
    """

    def __init__(self, uri: str, reason: str) -> None:
        self.uri = uri
        self.reason = reason
        super().__init__(f"state database {uri}: {reason}")


class StateDatabaseUnavailableError(StateDatabaseError):
    """The state database could not be reached or opened (the cause is ``__cause__``)."""


class StateSchemaError(StateDatabaseError):
    """The state database was written by a newer icecommit than this one.

    Attributes:
        found / supported: its schema version and the newest this icecommit knows.
    """

    def __init__(self, uri: str, found: int, supported: int) -> None:
        self.found = found
        self.supported = supported
        super().__init__(
            uri,
            f"schema version {found} is newer than this icecommit supports ({supported}); "
            "upgrade icecommit (a database is never downgraded)",
        )


class StateDatabaseMismatchError(StateDatabaseError):
    """The table records another state database than the one opened: committing, expiring
    or sweeping with this one would not see the table's checkpoints.

    Attributes:
        table: the table.
        expected_id / expected_uri: the state database the table records.
        actual_id / uri: the one opened.
    """

    def __init__(self, table: str, *, expected_id: str, expected_uri: str, actual_id: str, uri: str) -> None:
        self.table = table
        self.expected_id = expected_id
        self.expected_uri = expected_uri
        self.actual_id = actual_id
        super().__init__(
            uri,
            f"table {table} keeps its checkpoints in state database {expected_id} ({expected_uri}), "
            f"not in this one ({actual_id}); point ICECOMMIT_METRICS_URI (or the catalog) at that database. "
            f"If the state was moved there on purpose, set the table property icecommit.state.id to {actual_id}",
        )


class InvalidRangeError(InvalidInputError):
    """A time range whose start is not before its end."""


class PlanChangedError(CommitConflictError, TableSpecError):
    """A planned change (a rollback, an expiry) lost its catalog commit to another commit
    made after it was planned; nothing of it landed. Plan again: the plan may no longer
    hold, so it is never re-applied as it was.

    Attributes:
        table / operation: the table and the change (``rollback``, ``expiry``).
    """

    def __init__(self, table: str, operation: str) -> None:
        self.table = table
        self.checkpoint_id = None
        self.attempts = 1
        self.elapsed_s = 0.0
        self.operation = operation
        self.reason = f"changed since the {operation} was planned (another commit landed meanwhile); plan again"
        Exception.__init__(self, f"table {table}: {self.reason}")


__all__ = [
    "FAMILIES",
    "CatalogUnavailableError",
    "CheckpointCommittedError",
    "CheckpointNotFoundError",
    "CheckpointOutOfOrderError",
    "CheckpointRefusedError",
    "CheckpointReusedError",
    "CheckpointRolledBackError",
    "CommitConflictError",
    "CommitOutcomeError",
    "CommitStateUnknownError",
    "CompletenessNotReachedError",
    "DataFileMissingError",
    "EnvironmentFailureError",
    "IcecommitError",
    "InvalidArgumentError",
    "InvalidInputError",
    "InvalidRangeError",
    "JobNotFoundError",
    "NotAnAncestorError",
    "PartitionSpecChangedError",
    "PlanChangedError",
    "SchemaChangedError",
    "SchemaMismatchError",
    "SnapshotNotFoundError",
    "StagedManifestError",
    "StagingError",
    "StateDatabaseError",
    "StateDatabaseMismatchError",
    "StateDatabaseUnavailableError",
    "StateSchemaError",
    "StreamingQueryMismatchError",
    "TableNotFoundError",
    "TableSpecError",
    "UnroutedRecordsError",
    "UnsafeLocationError",
    "ValidationError",
    "family_of",
    "nothing_staged",
]
