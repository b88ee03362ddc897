"""Commit outcomes: lost to concurrent commits (retry later), or not known (recover)."""

from __future__ import annotations

from icecommit.core.errors.base import CommitOutcomeError, IcecommitError


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


class TableGroupError(CommitConflictError):
    """One checkpoint's tables commit together, and another of them failed before its part
    was committed: this table's part was not sent either (all of them land, or none).
    Its part stays prepared; the next run, or ``recover()``, commits the checkpoint.

    Attributes:
        table / checkpoint_id: this table, and the checkpoint.
        failed_table: the table whose part failed.
        cause: what that part raised.
    """

    def __init__(self, table: str, checkpoint_id: int | None, failed_table: str, cause: BaseException) -> None:
        self.table = table
        self.checkpoint_id = checkpoint_id
        self.failed_table = failed_table
        self.cause = cause
        self.attempts = 0
        self.elapsed_s = 0.0
        self.operation = f"checkpoint {checkpoint_id} of {table}" if checkpoint_id is not None else f"{table}'s part"
        IcecommitError.__init__(
            self,
            f"{self.operation}: not committed, because {failed_table}, committed with it in one catalog commit, "
            f"failed ({cause!r}); no table of the checkpoint changed: run again, or recover()",
        )


class PlanChangedError(CommitConflictError):
    """The table changed after a change (a rollback, an expiry) was planned: found before
    its commit, or by its commit losing to another; nothing of it landed. Plan again: the
    plan may no longer hold, so it is never re-applied as it was.

    Attributes:
        table / operation: the table and the change (``rollback``, ``expiry``).
        since: what changed (by default, another commit landed during the change's own).
    """

    def __init__(self, table: str, operation: str, *, since: str = "another commit landed meanwhile") -> None:
        self.table = table
        self.checkpoint_id = None
        self.attempts = 1
        self.elapsed_s = 0.0
        self.operation = operation
        self.since = since
        CommitOutcomeError.__init__(
            self, f"table {table}: changed since the {operation} was planned ({since}); plan again"
        )


class OverwriteConflictError(CommitConflictError):
    """A partition overwrite found a data or delete file added to a partition it replaces
    after the table its writers were given (another job's append, a compaction, a delete):
    replacing the partition would drop rows it never saw (Iceberg's ``ReplacePartitions``
    rules). Nothing was committed and retrying cannot help: abandon the checkpoint and run
    the overwrite again as a new checkpoint, which sees those rows.

    Attributes:
        partition: the partition, as a path.
        snapshot_id: the snapshot that added (or removed) the file; None when it was expired.
        by: (job id, checkpoint id) when that snapshot is icecommit's, else None.
        path: the file; what: ``added`` or ``removed``.
    """

    def __init__(
        self,
        table: str,
        checkpoint_id: int,
        job_id: str,
        *,
        partition: str,
        snapshot_id: int | None,
        by: tuple[str, int] | None,
        path: str,
        what: str = "added",
    ) -> None:
        self.table = table
        self.checkpoint_id = checkpoint_id
        self.attempts = 0
        self.elapsed_s = 0.0
        self.operation = f"checkpoint {checkpoint_id} of job {job_id!r} in {table}"
        self.partition = partition
        self.snapshot_id = snapshot_id
        self.by = by
        self.path = path
        self.what = what
        writer = f"checkpoint {by[1]} of job {by[0]!r}" if by is not None else "another writer"
        snapshot = f"snapshot {snapshot_id} ({writer})" if snapshot_id is not None else "a snapshot expired since"
        CommitOutcomeError.__init__(
            self,
            f"{self.operation} overwrites partition {partition}, but {snapshot} {what} {path} there after this "
            "checkpoint's writers read the table; the overwrite would not replace what it saw, so nothing was "
            f"committed. Abandon it (GlobalCommitter(...).abandon({checkpoint_id}, reason=...)) and run the "
            "overwrite again as a new checkpoint",
        )


class CheckpointHeldError(CommitOutcomeError):
    """A checkpoint's checks failed: its commit ended on its job's audit branch, where any
    Iceberg reader can look at it, and nothing of it reached the branch readers use (its
    files are staged and committed there: nothing is removed).
    Publish it (``ic.publish(..., force=True, reason=...)``, ``icecommit publish``) or
    discard it (``ic.discard``, ``icecommit discard``); the CLI exits with its own code, 5.

    Attributes:
        job_id / checkpoint_id / table: the checkpoint.
        branch: the audit branch it waits on.
        failed: each failed check as (name, observed value, detail).
    """

    def __init__(
        self,
        job_id: str,
        checkpoint_id: int,
        table: str,
        branch: str,
        failed: list[tuple[str, object, str]],
    ) -> None:
        self.job_id = job_id
        self.checkpoint_id = checkpoint_id
        self.table = table
        self.branch = branch
        self.failed = failed
        named = "; ".join(f"{name}: {detail}" for name, _, detail in failed)
        super().__init__(
            f"checkpoint {checkpoint_id} of job {job_id!r} in {table} is held on branch {branch}: {len(failed)} "
            f"check(s) failed ({named}); publish it with `icecommit publish {table} --job {job_id} --checkpoint "
            f"{checkpoint_id} --force --reason ...` or discard it with `icecommit discard ...`"
        )
