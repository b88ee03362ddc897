"""Operator actions on one checkpoint of a job: giving it up, and acknowledging that."""

from __future__ import annotations

import getpass
import logging
from typing import TYPE_CHECKING

from icecommit.committer.recording import CheckpointRecorder
from icecommit.committer.results import CommitResult
from icecommit.core import ancestry
from icecommit.core.decision import Action
from icecommit.core.errors import CheckpointCommittedError, CheckpointNotFoundError, InvalidArgumentError
from icecommit.state.checkpoints import ABANDONED, COMMITTED, CheckpointState

if TYPE_CHECKING:
    from icecommit.committer.committer import GlobalCommitter

logger = logging.getLogger(__name__)


def abandon(
    committer: GlobalCommitter,
    recorder: CheckpointRecorder,
    checkpoint_id: int,
    *,
    reason: str,
    by: str | None = None,
) -> CheckpointState:
    """Give up a prepared (or rolled-back) checkpoint so the job can go on: it is recorded
    as abandoned with the reason, who and when; its replays become recorded no-ops, its
    staged files become orphans for the sweeper, and reconciliation reports it as a problem
    until it is acknowledged (:func:`acknowledge`).

    A compare-and-set on the state row: it cannot overwrite a commit recorded meanwhile,
    and if a committer lands the checkpoint at that moment the commit wins.

    Raises:
        CheckpointNotFoundError: no such checkpoint was prepared here.
        CheckpointCommittedError: the table holds it (or it was recorded committed).
        InvalidArgumentError: an empty reason.
    """
    if not isinstance(reason, str) or not reason.strip():
        raise InvalidArgumentError(
            "reason", reason, "a non-empty text (it is kept with the checkpoint and shown in reports)"
        )
    store, job, table = committer.store, committer.job_id, committer.table_name
    state = store.get(job, table, checkpoint_id)
    if state is None:
        raise CheckpointNotFoundError(job, checkpoint_id, table)
    if state.status == ABANDONED:
        return state
    plan = committer.plan(checkpoint_id)
    if plan.action in (Action.ALREADY_IN, Action.EMPTY):
        raise CheckpointCommittedError(job, checkpoint_id, plan.decision.snapshot_id, table)
    if plan.action is Action.ROLLED_BACK and state.status == COMMITTED:
        recorder.rolled_back(checkpoint_id)  # another tool's rollback, not recorded yet
    who = by or current_user()
    if not store.abandon(job, table, checkpoint_id, reason=reason, by=who):
        raise CheckpointCommittedError(job, checkpoint_id, None, table)
    landed = ancestry.find_checkpoint(committer.load_table().metadata, job, checkpoint_id, committer.branch)
    if landed is not None:  # a committer won the race: the table holds it
        store.reopen_abandoned(job, table, checkpoint_id)
        raise CheckpointCommittedError(job, checkpoint_id, landed.snapshot_id, table)
    logger.warning("checkpoint %d of job %s abandoned by %s: %s", checkpoint_id, job, who, reason.strip())
    abandoned = store.get(job, table, checkpoint_id)
    assert abandoned is not None
    return abandoned


def acknowledge(committer: GlobalCommitter, checkpoint_id: int, *, by: str | None = None) -> CheckpointState:
    """Acknowledge an abandoned checkpoint: reconciliation shows it as information from
    then on, instead of a problem.

    Raises:
        CheckpointNotFoundError: no such abandoned checkpoint.
    """
    store, job, table = committer.store, committer.job_id, committer.table_name
    if not store.acknowledge(job, table, checkpoint_id, by=by or current_user()):
        raise CheckpointNotFoundError(job, checkpoint_id, table)
    acknowledged = store.get(job, table, checkpoint_id)
    assert acknowledged is not None
    return acknowledged


def take_over(committer: GlobalCommitter, old_job_id: str) -> list[CommitResult]:
    """:meth:`GlobalCommitter.take_over`: another job's prepared checkpoints, committed
    under that job's id, each snapshot recording ``icecommit.recovered-by``."""
    old = type(committer)(
        committer._catalog, committer.table_name, job_id=old_job_id, branch=committer.branch,
        retry_policy=committer._retry_policy, store=committer.store, sleep=committer._sleep, fault=committer._fault,
        completeness=committer._completeness, gate=committer._gate,
    )  # fmt: skip
    old._recovered_by = committer.job_id
    logger.info("job %s takes over the prepared checkpoints of job %s", committer.job_id, old_job_id)
    return old.recover()


def current_user() -> str:
    """Who acts, for the record (``unknown`` where the process has no login name)."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no login name in a container
        return "unknown"
