"""Refused by the checkpoint decision: nothing was staged; the message names the way forward."""

from __future__ import annotations

from icecommit.core.errors.base import CheckpointRefusedError


class CheckpointRolledBackError(CheckpointRefusedError):
    """A checkpoint was committed, then a rollback removed its snapshot from the branch.

    Replaying it is neither skipped nor duplicated silently: re-commit it explicitly
    (``GlobalCommitter.recommit`` or ``ic.write(..., recommit=True)``), or leave it out.
    """

    def __init__(
        self, job_id: str, checkpoint_id: int, snapshot_id: int | None, table: str, *, remedy: str | None = None
    ) -> None:
        self.job_id = job_id
        self.checkpoint_id = checkpoint_id
        self.snapshot_id = snapshot_id
        self.table = table
        landed = f" as snapshot {snapshot_id}" if snapshot_id is not None else ""
        super().__init__(
            f"checkpoint {checkpoint_id} of job {job_id!r} was committed{landed} to {table}, and a rollback "
            f"removed it from the branch; {remedy or 're-commit it explicitly (recommit=True) or leave it out'}"
        )


class CheckpointCommittedError(CheckpointRefusedError):
    """The table holds the checkpoint (or its state says committed), so it cannot be
    abandoned.

    Attributes:
        job_id / checkpoint_id / table: the checkpoint.
        snapshot_id: the snapshot holding it, when known.
    """

    def __init__(self, job_id: str, checkpoint_id: int, snapshot_id: int | None, table: str) -> None:
        self.job_id = job_id
        self.checkpoint_id = checkpoint_id
        self.table = table
        self.snapshot_id = snapshot_id
        where = f" (snapshot {snapshot_id})" if snapshot_id is not None else ""
        super().__init__(
            f"checkpoint {checkpoint_id}: job {job_id!r} has committed it to {table}{where}; only a prepared or "
            "rolled-back checkpoint can be abandoned (roll the table back first to remove committed data)"
        )


class CheckpointOutOfOrderError(CheckpointRefusedError):
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
        self.checkpoint_id = checkpoint_id
        self.table = table
        self.highest_committed = highest_committed
        super().__init__(
            f"checkpoint {checkpoint_id}: job {job_id!r} has already committed checkpoint {highest_committed} to "
            f"{table}, and checkpoint ids must grow within a job; this one was never committed there. If this is a "
            "new query or a job whose counter was reset, give it a new job_id"
        )


class StreamingQueryMismatchError(CheckpointRefusedError):
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
        self.checkpoint_id = checkpoint_id
        self.table = table
        self.query_id = query_id
        self.committed_by = committed_by
        super().__init__(
            f"checkpoint {checkpoint_id}: job {job_id!r} committed batch {checkpoint_id} to {table} under streaming "
            f"query {committed_by}, and query {query_id} offers it again: a query with a new checkpoint location "
            "counts its batches from 0. Give the new query a new job_id (or restart the old one from its checkpoint "
            "location)"
        )


class CheckpointReusedError(CheckpointRefusedError):
    """Different data files offered under a checkpoint id this job already prepared or
    committed: the job's checkpoint counter went back (a new streaming checkpoint location,
    a batch rerun from 0). Nothing was staged or committed.

    Attributes:
        job_id / checkpoint_id / table: the checkpoint.
        status: ``prepared`` or ``committed`` (what the id already holds).
        snapshot_id: the snapshot that holds it, when the table shows one.
        expected / actual: how many files are already under the id, and how many were offered
            (when known).
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
        self.checkpoint_id = checkpoint_id
        self.table = table
        self.status = status
        self.snapshot_id = snapshot_id
        self.expected = staged
        self.actual = offered
        where = f" as snapshot {snapshot_id}" if snapshot_id is not None else ""
        counts = f" ({staged} staged, {offered} offered)" if staged is not None else ""
        super().__init__(
            f"checkpoint {checkpoint_id}: job {job_id} in table {table}: already {status}{where} with different data "
            f"files{counts}; checkpoint ids must grow within a job: restart a job whose counter was reset under a "
            "new job id"
        )
