"""Releasing a held checkpoint: publish it to the branch readers use, or discard it; then
the checkpoints queued behind it follow, in order.

Publishing is exactly once on that branch, whatever fails: the branch is moved to the
held snapshot when nothing else landed there since the audit branch left it (a
fast-forward, one compare-and-swap on the branch's head; the snapshot keeps its id), else
the checkpoint's changes are committed again there through the commit protocol, re-planned
by its write mode against the branch (an upsert's keys resolved again, an overwrite's
conflicts checked against what the branch gained). Either way its key is looked for first,
so a publish after a crash or a lost reply finds it instead of applying it twice; then its
row is recorded ``committed``, with who released it, why, and whether a failed check was
overridden.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from pyiceberg.catalog import Catalog
from pyiceberg.table import Table
from pyiceberg.table.update.snapshot import ManageSnapshots

from icecommit.catalog.multi_table import can_commit_together
from icecommit.committer import fate, holding, protocol
from icecommit.committer.checkpoint_commit import CommitCheckpoint, checkpoint_summary
from icecommit.committer.commit_group import CommitGroup
from icecommit.committer.committer import GlobalCommitter
from icecommit.committer.holding import results_of
from icecommit.committer.planning import CheckpointPlan, head_of
from icecommit.committer.results import CommitResult, result_from_state
from icecommit.committer.retry import RetryPolicy
from icecommit.committer.staging import read_staged
from icecommit.core import ancestry
from icecommit.core.ancestry import MAIN_BRANCH
from icecommit.core.decision import Action, Decision
from icecommit.core.errors import CheckpointNotFoundError, InvalidArgumentError, PlanChangedError
from icecommit.core.publishing import can_fast_forward, release_order
from icecommit.state.checkpoints import ABANDONED, COMMITTED, HELD, CheckpointState

logger = logging.getLogger(__name__)


def publish_checkpoint(
    catalog: Catalog,
    table: Table | str,
    *,
    job_id: str,
    checkpoint_id: int,
    reason: str | None = None,
    force: bool = False,
    by: str | None = None,
    branch: str = MAIN_BRANCH,
) -> list[CommitResult]:
    """``ic.publish``: bring a checkpoint held on its job's audit branch to ``branch``
    (exactly once), then the checkpoints queued behind it; see :func:`publish`."""
    return publish(GlobalCommitter(catalog, table, job_id=job_id, branch=branch), checkpoint_id, reason=reason,
                   force=force, by=by)  # fmt: skip


def discard_checkpoint(
    catalog: Catalog,
    table: Table | str,
    *,
    job_id: str,
    checkpoint_id: int,
    reason: str,
    by: str | None = None,
    branch: str = MAIN_BRANCH,
) -> CheckpointState:
    """``ic.discard``: give up a checkpoint held on its job's audit branch and release the
    ones queued behind it; see :func:`discard`."""
    return discard(GlobalCommitter(catalog, table, job_id=job_id, branch=branch), checkpoint_id, reason=reason, by=by)


def publish(
    committer: GlobalCommitter,
    checkpoint_id: int,
    *,
    reason: str | None = None,
    force: bool = False,
    by: str | None = None,
) -> list[CommitResult]:
    """Bring held checkpoint ``checkpoint_id`` to the committer's branch, then the queued
    checkpoints right behind it (their checks passed); a routed checkpoint's other tables
    held with it are published too (all of them or none are refused). Returns one result
    per checkpoint and table published, in order (``already-committed`` for this table's
    when a publish before this one landed it).

    Raises:
        CheckpointNotFoundError: no such checkpoint was prepared here.
        InvalidArgumentError: it is not held (named with what it is), an earlier checkpoint
            of the job still waits (they reach readers in order), or a check failed and
            ``force`` with a ``reason`` was not given.
    """
    state = _held(committer, checkpoint_id)
    parts = [(committer, state), *_other_tables(committer, checkpoint_id)]  # a routed checkpoint: all or none
    waiting = [(c, s) for c, s in parts if s.status != COMMITTED]
    failed = [r for _, s in waiting for r in results_of(s) if not r.ok]
    for part, held in waiting:  # every refusal before anything is published
        earlier = [s.checkpoint_id for s in part.store.waiting(held.table_name, held.job_id)
                   if s.checkpoint_id < checkpoint_id]  # fmt: skip
        if earlier:
            raise InvalidArgumentError(
                "checkpoint_id", checkpoint_id, f"checkpoint {earlier[0]} of job {held.job_id!r} in "
                f"{held.table_name} first: it waits on the audit branch before this one, and checkpoints reach "
                "readers in order (publish or discard it)",
            )  # fmt: skip
    if failed and not force:
        named = "; ".join(f"{r.check}: {r.detail}" for r in failed)
        raise InvalidArgumentError("force", force, f"True with a reason: its checks failed ({named})")
    if force and (not isinstance(reason, str) or not reason.strip()):
        raise InvalidArgumentError("reason", reason, "why it is published anyway (kept with the checkpoint)")
    who = by or fate.current_user()
    published = [] if state.status != COMMITTED else [result_from_state(state, "already-committed")]
    publishing = {held.table_name: _publishing(part, held, reason=reason, by=who) for part, held in waiting}
    if len(publishing) > 1 and can_commit_together(committer._catalog):  # a routed checkpoint: one catalog commit
        landed = CommitGroup(committer._catalog, checkpoint_id).run(publishing)
    else:  # in a recorded order (this table, then the others by name): a replay completes it
        landed = {name: publish_part() for name, publish_part in publishing.items()}
    for part, held in waiting:
        published.append(landed[held.table_name])
        published.extend(_follow(part, checkpoint_id, who))
        part.publish_complete_partitions()  # their rows are where readers look now
    return published


def _publishing(
    committer: GlobalCommitter, held: CheckpointState, *, reason: str | None, by: str
) -> Callable[[], CommitResult]:
    forced = any(not r.ok for r in results_of(held))
    return lambda: _publish_one(committer, held, reason=reason, forced=forced, by=by)


def _other_tables(committer: GlobalCommitter, checkpoint_id: int) -> list[tuple[GlobalCommitter, CheckpointState]]:
    """The other tables' parts of a routed checkpoint held with this one (same job and
    checkpoint id, held on an audit branch, where one of them was held for another's failed
    check: ``routed``), each with a committer of its table; none for a checkpoint of one table."""
    group = [s for s in committer.store.waiting(None, committer.job_id, checkpoint_id) if s.status == HELD]
    if not any(s.hold_reason == "routed" for s in group):
        return []
    others = [s for s in group if s.table_name != committer.table_name]
    make = type(committer)
    return [
        (make(committer._catalog, s.table_name, job_id=s.job_id, branch=committer.branch, store=committer.store), s)
        for s in others
    ]


def discard(committer: GlobalCommitter, checkpoint_id: int, *, reason: str, by: str | None = None) -> CheckpointState:
    """Give up held checkpoint ``checkpoint_id``: recorded abandoned (with the reason, who and
    when), and the checkpoints queued behind it published. Once nothing waits on the audit
    branch, it is pointed back at the committer's branch head: the discarded snapshots hang
    on no branch, expiry takes them and the orphan sweep their files.

    Raises:
        CheckpointNotFoundError: no such checkpoint was prepared here.
        InvalidArgumentError: it is not held, or an empty reason.
    """
    state = _held(committer, checkpoint_id, discarded=True)  # discarded before: release what waits behind it
    if state.status == COMMITTED:
        raise InvalidArgumentError("checkpoint_id", checkpoint_id, "a held checkpoint (this one was published)")
    who = by or fate.current_user()
    for part, other in _other_tables(committer, checkpoint_id):  # a routed checkpoint: every table's part
        fate.abandon(part, part._recorder, checkpoint_id, reason=reason, by=who)
        if _follow(part, checkpoint_id, who):
            part.publish_complete_partitions()
        if other.audit_branch is not None:
            holding.let_go(part, other.audit_branch)
    recorded = fate.abandon(committer, committer._recorder, checkpoint_id, reason=reason, by=who)
    logger.warning("checkpoint %d of job %s discarded by %s: %s", checkpoint_id, committer.job_id, who, reason)
    if _follow(committer, checkpoint_id, who):
        committer.publish_complete_partitions()
    if state.audit_branch is not None:  # nothing waits there now: the discarded snapshots hang on no branch
        holding.let_go(committer, state.audit_branch)
    return recorded


def _held(committer: GlobalCommitter, checkpoint_id: int, *, discarded: bool = False) -> CheckpointState:
    """The checkpoint's row: held, or published from its audit branch before (or, with
    ``discarded``, discarded from it before: a discard that stopped part-way goes on)."""
    state = committer.store.get(committer.job_id, committer.table_name, checkpoint_id)
    if state is None:
        raise CheckpointNotFoundError(committer.job_id, checkpoint_id, committer.table_name)
    if state.status == HELD or (state.status == COMMITTED and state.published_at is not None):
        return state
    if discarded and state.status == ABANDONED and state.audit_branch is not None:
        return state
    raise InvalidArgumentError(
        "checkpoint_id", checkpoint_id, f"a checkpoint held on its audit branch (this one is {state.status}"
        f"{', not committed to it yet: commit or recover it first' if state.audit_branch else ''})",
    )  # fmt: skip


def _follow(committer: GlobalCommitter, released: int, who: str) -> list[CommitResult]:
    """Publish the queued checkpoints right behind ``released``, in order."""
    store, job, table = committer.store, committer.job_id, committer.table_name
    waiting = [s for s in store.waiting(table, job) if s.status == HELD]
    order = release_order([(s.checkpoint_id, s.hold_reason or "checks") for s in waiting], released)  # type: ignore[misc]
    by_id = {s.checkpoint_id: s for s in waiting}
    return [_publish_one(committer, by_id[c], reason=None, forced=False, by=who) for c in order]


def _publish_one(
    committer: GlobalCommitter, state: CheckpointState, *, reason: str | None, forced: bool, by: str
) -> CommitResult:
    """One held checkpoint to the committer's branch, exactly once, then recorded."""
    table = committer.load_table()
    branch = committer.branch
    snapshot_id = state.snapshot_id
    landed = ancestry.find_checkpoint(table.metadata, state.job_id, state.checkpoint_id, branch)
    policy = RetryPolicy.from_properties(table.metadata.properties)
    if landed is not None:
        snapshot_id = landed.snapshot_id  # an earlier publish landed it and was not recorded
    elif snapshot_id is not None:
        held = table.metadata.snapshot_by_id(snapshot_id)
        moved = None
        if held is not None and can_fast_forward(head_of(table, branch), held.parent_snapshot_id):
            try:
                moved = protocol.run(
                    FastForward(state, branch, snapshot_id), base=table, load=committer.load_table, policy=policy
                )
            except PlanChangedError:  # the branch moved meanwhile: committed again instead
                table = committer.load_table()
        if moved is None:
            snapshot_id = _commit_again(committer, state, table, policy)
    committer.store.mark_published(
        state.job_id, state.table_name, state.checkpoint_id, snapshot_id=snapshot_id, by=by, reason=reason,
        forced=forced,
    )  # fmt: skip
    logger.info(
        "checkpoint %d of job %s published to %s as snapshot %s by %s%s",
        state.checkpoint_id, state.job_id, branch, snapshot_id, by, " (forced)" if forced else "",
    )  # fmt: skip
    published = committer.store.get(state.job_id, state.table_name, state.checkpoint_id)
    assert published is not None
    return result_from_state(published, "committed", snapshot_id=snapshot_id)


def _commit_again(committer: GlobalCommitter, state: CheckpointState, table: Table, policy: RetryPolicy) -> int | None:
    """The held checkpoint's changes committed on the committer's branch through the commit
    protocol, planned again by its write mode on that branch."""
    branch = committer.branch
    data_files = read_staged(state, table)

    def plan_on(now: Table) -> CheckpointPlan:
        found = ancestry.find_checkpoint(now.metadata, state.job_id, state.checkpoint_id, branch)
        decision = (
            Decision(Action.ALREADY_IN, found.snapshot_id, "published")
            if found is not None
            else Decision(Action.COMMIT, None, "held on its audit branch, published")
        )
        view = ancestry.table_view(now.metadata, state.job_id, state.checkpoint_id, branch)
        return CheckpointPlan(state.checkpoint_id, state, now, head_of(now, branch), view, decision)

    plan = plan_on(table)
    operation = CommitCheckpoint.of(
        committer._catalog, plan, state, data_files, branch=branch, store=committer.store, fault=committer._fault,
        summary=checkpoint_summary(state, committer._completion.store, None), key_lookup=committer._key_lookup,
        replan=plan_on,
    )  # fmt: skip
    outcome = protocol.run(operation, base=table, load=committer.load_table, policy=policy)
    return outcome.snapshot_id


class FastForward(protocol.Operation):
    """Moving the branch readers use to a held checkpoint's snapshot (its parent is that
    branch's head) and raising the job's high-water mark of that branch, in one catalog
    commit. Its plan holds only while the branch stays where it was: a lost compare-and-swap
    is :class:`PlanChangedError` (the caller commits the changes again instead)."""

    kind = "publish"
    conflict = "refuse"

    def __init__(self, state: CheckpointState, branch: str, snapshot_id: int) -> None:
        self.table_name = state.table_name
        self.checkpoint_id = None  # its conflicts are named as a refused plan, not a checkpoint's
        self._job, self._checkpoint = state.job_id, state.checkpoint_id
        self.branch = branch
        self.snapshot_id = snapshot_id

    @property
    def label(self) -> str:
        return f"publishing checkpoint {self._checkpoint} of job {self._job!r} to {self.branch} of {self.table_name}"

    def check(self, table: Table, number: int) -> protocol.Found | None:
        return self.find(table)

    def apply(self, table: Table) -> protocol.Applied:
        mark = ancestry.job_checkpoint_property(self._job, branch=self.branch)
        recorded = ancestry.recorded_highest_checkpoints(table.metadata.properties, branch=self.branch).get(self._job)
        with table.transaction() as tx:
            if recorded is None or self._checkpoint > recorded:
                tx.set_properties({mark: str(self._checkpoint)})
            ManageSnapshots(tx).create_branch(self.snapshot_id, self.branch).commit()
        return protocol.Applied(self.snapshot_id, None)

    def find(self, table: Table) -> protocol.Found | None:
        found = ancestry.find_checkpoint(table.metadata, self._job, self._checkpoint, self.branch)
        return protocol.Found(found.snapshot_id) if found is not None else None


__all__ = ["FastForward", "discard", "discard_checkpoint", "publish", "publish_checkpoint"]
