"""Operator actions on a job's checkpoints: committing what it prepared (``icecommit
recover``), and giving up one that cannot commit, loudly (``icecommit abandon``)."""

from __future__ import annotations

from pyiceberg.catalog import Catalog
from pyiceberg.table import Table

from icecommit.committer.committer import GlobalCommitter
from icecommit.committer.results import CommitResult
from icecommit.core.errors import JobNotFoundError
from icecommit.state.checkpoints import CheckpointState


def abandon_checkpoint(
    catalog: Catalog, table: Table | str, *, job_id: str, checkpoint_id: int, reason: str, by: str | None = None
) -> CheckpointState:
    """Mark a prepared or rolled-back checkpoint abandoned (see ``GlobalCommitter.abandon``).

    Raises:
        CheckpointNotFoundError, CheckpointCommittedError, ValueError: as there.
    """
    return GlobalCommitter(catalog, table, job_id=job_id).abandon(checkpoint_id, reason=reason, by=by)


def acknowledge_checkpoint(
    catalog: Catalog, table: Table | str, *, job_id: str, checkpoint_id: int, by: str | None = None
) -> CheckpointState:
    """Acknowledge an abandoned checkpoint: reports show it as information from then on.

    Raises:
        CheckpointNotFoundError: no such abandoned checkpoint.
    """
    return GlobalCommitter(catalog, table, job_id=job_id).acknowledge(checkpoint_id, by=by)


def recover_job(catalog: Catalog, table: Table | str, *, job_id: str) -> list[CommitResult]:
    """Commit, in order, every checkpoint ``job_id`` prepared for ``table`` and did not commit
    (see ``GlobalCommitter.recover``).

    Raises:
        JobNotFoundError: the job has no checkpoint of the table at all (a typo, most
            likely): names the jobs that have some.
        CommitStateUnknownError, CommitConflictError, CheckpointFeatureError,
        DataFileMissingError: as ``GlobalCommitter.commit``.
    """
    committer = GlobalCommitter(catalog, table, job_id=job_id)
    if not committer.store.has_job(committer.table_name, job_id):
        raise JobNotFoundError(committer.table_name, job_id, committer.store.jobs(committer.table_name))
    return committer.recover()
