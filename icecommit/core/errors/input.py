"""Invalid input: the input or the call is wrong; nothing was staged. Fix it and run again."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from pyiceberg.exceptions import NoSuchTableError

from icecommit.core.errors.base import InvalidInputError


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


class CheckpointNotFoundError(InvalidInputError):
    """No prepared or committed checkpoint matches the request."""

    def __init__(self, job_id: str, checkpoint_id: int, table: str | None = None) -> None:
        self.job_id = job_id
        self.checkpoint_id = checkpoint_id
        self.table = table
        where = f" for table {table}" if table else ""
        super().__init__(
            f"job {job_id!r} has no checkpoint {checkpoint_id}{where}: prepare it first (GlobalCommitter.prepare, "
            "or ic.write), or check the job id and the table"
        )


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


class InvalidRangeError(InvalidInputError):
    """A time range whose start is not before its end."""


class KeyViolationError(InvalidInputError):
    """The rows of an upsert break its key: a null in a key column, or several rows of one
    key in one checkpoint with no ``order_by`` to decide (or an ``order_by`` tie); nothing
    was written.

    Attributes:
        key: the key columns.
        kind: ``null``, ``duplicate``, or ``tie`` (rows of one key with equal ``order_by`` values).
        count: the rows at fault (null keys) or the keys with more than one row (duplicates).
        sample: one such key, as a mapping of column to value (None for nulls).
    """

    def __init__(
        self, key: Sequence[str], kind: str, count: int, sample: Mapping[str, object] | None, *, table: str
    ) -> None:
        self.key = tuple(key)
        self.kind = kind
        self.count = count
        self.sample = dict(sample) if sample is not None else None
        self.table = table
        columns = ", ".join(self.key)
        if kind == "null":
            what = f"{count:,} row(s) have a null in the key ({columns}); keys must be non-null"
        else:
            shown = ", ".join(f"{k}={v!r}" for k, v in (self.sample or {}).items())
            remedy = (
                "order_by= does not decide between them: order by a column that differs (a sequence number)"
                if kind == "tie"
                else "give order_by= (the last row of a key wins), or write them in separate checkpoints"
            )
            what = f"{count:,} key(s) of ({columns}) have more than one row in this checkpoint, e.g. {shown}; {remedy}"
        super().__init__(f"upsert into {table}: {what}; nothing was written")


class ChangeTypeError(InvalidInputError):
    """A change-type column (``change_column=``) holds a value that is not a change type
    (``c``, ``r``, ``u`` upsert; ``d`` deletes); nothing was written.

    Attributes:
        column / value / count: the column, one value it holds, and how many rows hold one.
    """

    def __init__(self, column: str, value: object, count: int, *, table: str) -> None:
        self.column = column
        self.value = value
        self.count = count
        self.table = table
        super().__init__(
            f"upsert into {table}: column {column!r} (change_column) holds {value!r} in {count:,} row(s); "
            "expected c, r, u (the row replaces its key's) or d (the key is deleted); nothing was written"
        )
