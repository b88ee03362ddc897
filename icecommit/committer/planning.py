"""One plan per (job, checkpoint): the state row, the table and the decision, gathered once.

:func:`plan_checkpoint` reads the facts the pure :func:`icecommit.core.decision.decide`
needs (the state row, what the branch's ancestry shows, and where only they can tell,
whether the checkpoint's staged files are live) and decides. Prepare and commit reuse the
plan; they decide again only when the branch head moved since (:meth:`CheckpointPlan.is_current`).
Between commit attempts only what changed since the planned head is read
(:func:`changed_since`).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pyiceberg.manifest import DataFile
from pyiceberg.table import Table

from icecommit.catalog.removals import removals_of
from icecommit.committer.validators import live_files
from icecommit.core import ancestry
from icecommit.core.decision import Action, Decision, StateView, TableView, decide
from icecommit.core.errors import CheckpointOutOfOrderError, CheckpointRolledBackError, StreamingQueryMismatchError
from icecommit.core.lineage import path_key, trace_fates
from icecommit.state.checkpoints import COMMITTED, PREPARED, ROLLED_BACK, CheckpointState

#: Seconds within which files a prepare found on storage are not looked up again by the
#: commit's first attempt (a plan kept longer, or reused, has them checked again).
STAGED_FRESH_S = 60.0


@dataclass(frozen=True)
class CheckpointPlan:
    """What a committer decided about one checkpoint, and on what.

    Attributes:
        checkpoint_id: the checkpoint.
        state: its row in the committer's state when planned (None: no row).
        table: the table the decision read.
        head: the branch head's snapshot id then (None: the branch had no snapshot).
        view: what the table showed about the (job, checkpoint).
        decision: the action, the snapshot it concerns and why.
        recommit: whether the caller asked to commit a rolled-back checkpoint again.
    """

    checkpoint_id: int
    state: CheckpointState | None
    table: Table
    head: int | None
    view: TableView
    decision: Decision
    recommit: bool = False
    #: the data files as this process's prepare staged them, found on storage then (None:
    #: planned from the state row; the commit reads its staged manifest and checks them)
    staged: tuple[DataFile, ...] | None = None
    #: when prepare found them (``time.monotonic()``)
    staged_at: float = 0.0

    @property
    def action(self) -> Action:
        return self.decision.action

    def is_current(self, table: Table, branch: str) -> bool:
        """True while the branch head of ``table`` is the one planned on (the decision
        still holds: one snapshot-id comparison)."""
        return head_of(table, branch) == self.head

    def staged_for(self, state: CheckpointState) -> tuple[DataFile, ...] | None:
        """The staged files this plan carries when they are ``state``'s (the same staged
        manifest and files: not a row another process prepared again since) and were found
        on storage moments ago (:data:`STAGED_FRESH_S`); else None: the commit reads the
        staged manifest and checks the files on storage."""
        if self.staged is None or self.state is None:
            return None
        same = (self.state.manifest_path, self.state.files_digest) == (state.manifest_path, state.files_digest)
        fresh = time.monotonic() - self.staged_at < STAGED_FRESH_S
        return self.staged if same and fresh else None

    def with_staged(self, staged: tuple[DataFile, ...]) -> CheckpointPlan:
        """This plan carrying the files its prepare staged and found on storage just now."""
        return dataclasses.replace(self, staged=staged, staged_at=time.monotonic())

    def prepared(
        self, state: CheckpointState, table: Table, staged: tuple[DataFile, ...] | None = None
    ) -> CheckpointPlan:
        """The plan once this checkpoint was prepared on ``table`` (whose head is the
        planned one): a new checkpoint that is now prepared and still not in the table is
        committed (the decision's rule for a prepared row the table does not hold).
        ``staged``: its data files as staged, found on storage by the prepare."""
        assert self.action is Action.WRITE
        return dataclasses.replace(
            self,
            state=state,
            table=table,
            decision=Decision(Action.COMMIT, None, "prepared, not in the table"),
            staged=staged,
            staged_at=time.monotonic(),
        )


def head_of(table: Table, branch: str) -> int | None:
    """The snapshot id the branch points at (None: no such branch or no snapshot)."""
    ref = table.metadata.refs.get(branch)
    return ref.snapshot_id if ref is not None else None


def plan_checkpoint(
    checkpoint_id: int,
    state: CheckpointState | None,
    table: Table,
    *,
    job_id: str,
    branch: str,
    staged_paths: Callable[[CheckpointState], Sequence[str]],
    recommit: bool = False,
    query_id: str | None = None,
) -> CheckpointPlan:
    """Gather the facts about ``checkpoint_id`` and decide (see the module).

    ``staged_paths`` reads the checkpoint's staged file list; it is called only where the
    other facts cannot tell an expired snapshot from a rolled-back one."""
    view = ancestry.table_view(table.metadata, job_id, checkpoint_id, branch)
    row = StateView()
    if state is not None:
        row = StateView(
            state.status,  # type: ignore[arg-type]
            state.snapshot_id,
            has_files=state.has_changes,
            query_id=state.query_id,
        )
    if _files_decide(checkpoint_id, state, view):
        assert state is not None
        paths = staged_paths(state)
        if paths:
            view = dataclasses.replace(view, files_live=all_live(table, paths, branch))
    decision = decide(checkpoint_id, row, view, recommit=recommit, query_id=query_id)
    return CheckpointPlan(checkpoint_id, state, table, head_of(table, branch), view, decision, recommit)


@dataclass(frozen=True)
class Changes:
    """What a commit attempt reads of the table since the planned head.

    Attributes:
        landed: a new snapshot on the branch carries the (job, checkpoint) key.
        off_branch: a new snapshot carries the key and is not on the branch (it landed,
            and a rollback took it off).
        unsure: something moved that only a full decision can judge (the planned head left
            the branch, or the job's high-water mark moved to this checkpoint or past it).
    """

    landed: int | None = None
    off_branch: int | None = None
    unsure: bool = False


def changed_since(plan: CheckpointPlan, table: Table, *, job_id: str, branch: str) -> Changes:
    """What changed in ``table`` since ``plan`` about its (job, checkpoint): the snapshots
    that are new since the plan, searched for the key on and off the branch, and the job's
    high-water property (one walk of the branch, only where new snapshots carry the key or
    the head moved)."""
    key = (job_id, plan.checkpoint_id)
    planned = {s.snapshot_id for s in plan.table.metadata.snapshots}
    mine = [
        s.snapshot_id
        for s in table.metadata.snapshots
        if s.snapshot_id not in planned and ancestry.checkpoint_of(s) == key
    ]
    recorded = ancestry.recorded_highest_checkpoints(table.metadata.properties, branch=branch).get(job_id)
    planned_mark = ancestry.recorded_highest_checkpoints(plan.table.metadata.properties, branch=branch).get(job_id)
    # the job's mark says something about this checkpoint only once it reaches it (the job's
    # earlier checkpoints, committed meanwhile, move it below)
    mark_moved = recorded != planned_mark and recorded is not None and recorded >= plan.checkpoint_id
    head = head_of(table, branch)
    if not mine and head == plan.head:
        return Changes(unsure=mark_moved)
    on_branch = {s.snapshot_id for s in ancestry.branch_ancestry(table.metadata, branch)}
    for snapshot_id in mine:
        if snapshot_id in on_branch:
            return Changes(landed=snapshot_id)
    if mine:
        return Changes(off_branch=mine[0])
    left = plan.head is not None and plan.head not in on_branch
    return Changes(unsure=left or mark_moved)


def _files_decide(checkpoint_id: int, state: CheckpointState | None, view: TableView) -> bool:
    """True where only the checkpoint's files can tell expired from rolled back: it landed
    once (by its state and the job's high-water mark) and the table shows no snapshot."""
    if state is None or state.manifest_path is None:
        return False
    if view.landed_snapshot_id is not None or view.off_branch_snapshot_id is not None:
        return False
    if state.status in (COMMITTED, ROLLED_BACK):
        return True
    highest = view.highest_committed
    return state.status == PREPARED and highest is not None and checkpoint_id <= highest


def all_live(table: Table, paths: Sequence[str], branch: str) -> bool:
    """True when every path is in the table: a live data file of the branch's head, or
    rewritten or removed on purpose by a retained snapshot of the branch (compaction, an
    overwrite, a delete: the checkpoint was in the table and something after it changed its
    rows). Paths are compared by storage key, whatever their spelling. False when some file
    left the table with no retained snapshot to say why (a rollback, then expiry)."""
    if ancestry.branch_head(table.metadata, branch) is None:
        return False
    live = {path_key(found.data_file.file_path): found.data_file.record_count for found in live_files(table, branch)}
    wanted = [(path_key(p), 1) for p in paths]
    if all(path in live for path, _ in wanted):
        return True
    return trace_fates(wanted, live, removals_of(table, branch)).untraceable == 0


def refuse_plan(plan: CheckpointPlan, *, job_id: str, table_name: str, query_id: str | None) -> None:
    """Raise the error of a plan whose decision refuses the checkpoint (rolled back, out of
    order, another streaming query's batch); nothing for any other decision.

    Raises:
        StreamingQueryMismatchError, CheckpointRolledBackError, CheckpointOutOfOrderError.
    """
    refuse_decision(
        plan.checkpoint_id,
        plan.decision,
        state=lambda: plan.state,
        highest=lambda: plan.view.highest_committed,
        job_id=job_id,
        table_name=table_name,
        query_id=query_id,
    )


def refuse_decision(
    checkpoint_id: int,
    decision: Decision,
    *,
    state: Callable[[], CheckpointState | None],
    highest: Callable[[], int | None],
    job_id: str,
    table_name: str,
    query_id: str | None,
) -> None:
    """:func:`refuse_plan` for a decision alone: ``state`` and ``highest`` are read only for
    the refusal that names them (the batch's query, the job's highest checkpoint)."""
    if decision.action is Action.OTHER_QUERY:
        row = state()
        committed_by = (row.query_id if row is not None else None) or ""
        raise StreamingQueryMismatchError(job_id, checkpoint_id, table_name, query_id or "", committed_by)
    if decision.action is Action.ROLLED_BACK:
        raise CheckpointRolledBackError(job_id, checkpoint_id, decision.snapshot_id, table_name)
    if decision.action is Action.OUT_OF_ORDER:
        raise CheckpointOutOfOrderError(job_id, checkpoint_id, highest() or 0, table_name)
