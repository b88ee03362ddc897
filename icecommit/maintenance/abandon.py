"""Giving up a checkpoint that cannot commit, loudly: the operation behind
``icecommit abandon``."""

from __future__ import annotations

from pyiceberg.catalog import Catalog
from pyiceberg.table import Table

from icecommit.committer.committer import GlobalCommitter
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
