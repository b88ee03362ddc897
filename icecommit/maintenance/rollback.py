"""Rollback by snapshot, commit time, checkpoint or event time: plan first, then apply.

Every snapshot icecommit commits records the largest event time it committed
(``icecommit.max-event-time-us``), so a table can travel by data time, not only by
commit time.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

from pyiceberg.catalog import Catalog
from pyiceberg.manifest import DataFileContent, ManifestEntryStatus
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Operation, Snapshot

from icecommit.catalog.loading import load_table
from icecommit.catalog.manifest_entries import read_entries
from icecommit.catalog.multi_table import can_commit_together
from icecommit.catalog.position_deletes import targets
from icecommit.catalog.tables import resolve_table
from icecommit.committer import protocol
from icecommit.committer.commit_group import CommitGroup
from icecommit.core import ancestry
from icecommit.core.ancestry import MAIN_BRANCH
from icecommit.core.errors import (
    CatalogUnavailableError,
    InvalidArgumentError,
    NotAnAncestorError,
    PlanChangedError,
    SnapshotNotFoundError,
    StateDatabaseUnavailableError,
)
from icecommit.core.eventtime import event_time_column
from icecommit.core.identifiers import checked_checkpoint_id, checked_instant, table_name
from icecommit.state.checkpoints import COMMITTED, CheckpointState
from icecommit.state.identity import table_state

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RollbackPlan:
    """What a rollback does: which snapshots become invisible and how many rows.

    Attributes:
        current_snapshot_id: the table's current snapshot when planned.
        target_snapshot_id: the snapshot that becomes current.
        hidden_snapshot_ids: snapshots newer than the target on the current branch.
        hidden_records: rows those snapshots added (they disappear).
        hidden_checkpoints: (job, checkpoint) pairs those snapshots committed.
        applied: False for a dry run or a plan not yet applied.
        reappearing_records: rows of the target that those snapshots replaced (a partition
            overwrite) or deleted (an upsert's position deletes, a delete): they reappear.
        reappearing_checkpoints: the (job, checkpoint) pairs whose overwrites or upserts
            replaced or deleted them.
    """

    table: str
    selector: str
    current_snapshot_id: int | None
    target_snapshot_id: int
    is_ancestor: bool
    hidden_snapshot_ids: tuple[int, ...]
    hidden_records: int
    hidden_checkpoints: tuple[tuple[str, int], ...]
    applied: bool = False
    #: (job, checkpoint) pairs that a rollback to a snapshot off the branch brings back.
    restored_checkpoints: tuple[tuple[str, int], ...] = ()
    #: for a rollback by event time T: rows with an event time at or before T that the
    #: table holds now and the target lacks (the rollback picks the newest snapshot with no
    #: data after T, so a checkpoint that straddles T takes its earlier rows with it)
    lacking_up_to_event_time: int | None = None
    reappearing_records: int = 0
    reappearing_checkpoints: tuple[tuple[str, int], ...] = ()
    #: the branch rolled back (its head becomes the target)
    branch: str = MAIN_BRANCH


def _millis(value: datetime) -> int:
    value = value if value.tzinfo is not None else value.replace(tzinfo=timezone.utc)
    return int(value.timestamp() * 1000)


def _removed_by(table: Table, snapshot: Snapshot, at_target: dict[str, int]) -> tuple[set[str], dict[str, int]]:
    """What one snapshot removed of the target's data files (``at_target``: path -> rows):
    the files it took out whole, and the rows its position delete files delete per file."""
    io = table.io
    removed: set[str] = set()
    deleted: dict[str, int] = {}
    for manifest in snapshot.manifests(io):
        if manifest.added_snapshot_id != snapshot.snapshot_id:  # only its own manifests say what it changed
            continue
        for entry in manifest.fetch_manifest_entry(io, discard_deleted=False):
            data_file = entry.data_file
            if entry.snapshot_id != snapshot.snapshot_id:
                continue
            if entry.status == ManifestEntryStatus.DELETED and data_file.content == DataFileContent.DATA:
                if data_file.file_path in at_target:
                    removed.add(data_file.file_path)
            elif entry.status == ManifestEntryStatus.ADDED and data_file.content == DataFileContent.POSITION_DELETES:
                for path, rows in targets(io, data_file).items():
                    if path in at_target:
                        deleted[path] = deleted.get(path, 0) + rows
    return removed, deleted


def _reappearing(table: Table, target: Snapshot, hidden: list[Snapshot]) -> tuple[int, tuple[tuple[str, int], ...]]:
    """The rows of ``target`` that the ``hidden`` snapshots removed, and the checkpoints
    that removed them: data files of the target that a hidden overwrite (or delete) took
    out whole, and rows of the target's other data files that hidden position deletes
    (upserts) removed. Rows that a hidden snapshot added and another replaced are not
    counted: the target never held them. Compactions (``replace``) move rows, removing none.
    The count of a whole file is its record count: deletes the target itself applies to it
    are not subtracted (an upserted table's partitions are not overwritten too)."""
    at_target = {
        entry.file_path: entry.record_count
        for manifest in target.manifests(table.io)
        for entry in read_entries(table.io, manifest)
        if entry.content == DataFileContent.DATA
    }
    removed: set[str] = set()
    deleted: dict[str, int] = {}
    by: set[tuple[str, int]] = set()
    for snapshot in hidden:
        if snapshot.summary is None or snapshot.summary.operation == Operation.REPLACE:
            continue
        files, rows = _removed_by(table, snapshot, at_target)
        removed |= files
        for path, count in rows.items():
            deleted[path] = deleted.get(path, 0) + count
        if (files or rows) and (key := ancestry.checkpoint_of(snapshot)) is not None:
            by.add(key)
    records = sum(at_target[path] for path in removed)
    records += sum(rows for path, rows in deleted.items() if path not in removed)
    return records, tuple(sorted(by))


def _select(
    table: Table,
    name: str,
    *,
    to_snapshot: int | None,
    to_timestamp: datetime | None,
    to_checkpoint: int | None,
    job_id: str | None,
    to_event_time: datetime | None,
    branch: str,
) -> tuple[Snapshot, str]:
    chosen = [x is not None for x in (to_snapshot, to_timestamp, to_checkpoint, to_event_time)]
    if sum(chosen) != 1:
        raise InvalidArgumentError(
            "to_snapshot/to_timestamp/to_checkpoint/to_event_time",
            sum(chosen),
            "exactly one of them given (to_checkpoint with job_id)",
        )
    ancestry.require_branch(table.metadata, branch)
    lineage = list(ancestry.branch_ancestry(table.metadata, branch))  # newest first
    if to_snapshot is not None:
        snapshot = table.metadata.snapshot_by_id(to_snapshot)
        if snapshot is None:
            raise SnapshotNotFoundError(name, f"with id {to_snapshot}")
        return snapshot, f"snapshot {to_snapshot}"
    if to_timestamp is not None:
        limit = _millis(to_timestamp)
        for snapshot in lineage:
            if snapshot.timestamp_ms <= limit:
                return snapshot, f"timestamp {to_timestamp.isoformat()}"
        raise SnapshotNotFoundError(name, f"committed at or before {to_timestamp.isoformat()}")
    if to_checkpoint is not None:
        if not job_id:
            raise InvalidArgumentError("job_id", job_id, "the job whose checkpoint to_checkpoint names")
        found = ancestry.find_checkpoint(table.metadata, job_id, to_checkpoint, branch)
        if found is None:
            raise SnapshotNotFoundError(name, f"committing checkpoint {to_checkpoint} of job {job_id}")
        return found, f"checkpoint {to_checkpoint} of job {job_id}"
    assert to_event_time is not None
    return ancestry.newest_without_data_after(
        table.metadata, name, to_event_time, branch
    ), f"event time {to_event_time.isoformat()}"


def plan_rollback(
    catalog: Catalog,
    table: Table | str,
    *,
    to_snapshot: int | None = None,
    to_timestamp: datetime | None = None,
    to_checkpoint: int | None = None,
    job_id: str | None = None,
    to_event_time: datetime | None = None,
    allow_non_ancestor: bool = False,
    branch: str = MAIN_BRANCH,
) -> RollbackPlan:
    """Work out a rollback without changing anything.

    Raises:
        SnapshotNotFoundError: no snapshot matches the selector.
        TableSpecError: the target is not an ancestor of the current snapshot and
            ``allow_non_ancestor`` is False.
        ValueError: not exactly one selector.
    """
    name = table_name(table)
    for argument, value in (("to_timestamp", to_timestamp), ("to_event_time", to_event_time)):
        if value is not None:
            checked_instant(value, argument)
    if to_snapshot is not None and (isinstance(to_snapshot, bool) or not isinstance(to_snapshot, int)):
        raise InvalidArgumentError("to_snapshot", to_snapshot, "a snapshot id (an integer)")
    if to_checkpoint is not None:
        checked_checkpoint_id(to_checkpoint, "to_checkpoint")
    loaded = resolve_table(catalog, table)
    target, selector = _select(
        loaded, name, to_snapshot=to_snapshot, to_timestamp=to_timestamp, to_checkpoint=to_checkpoint,
        job_id=job_id, to_event_time=to_event_time, branch=branch,
    )  # fmt: skip
    lineage = list(ancestry.branch_ancestry(loaded.metadata, branch))
    ids = [s.snapshot_id for s in lineage]
    is_ancestor = target.snapshot_id in ids
    if not is_ancestor and not allow_non_ancestor:
        raise NotAnAncestorError(name, target.snapshot_id)
    restored: tuple[tuple[str, int], ...] = ()
    if is_ancestor:
        hidden = lineage[: ids.index(target.snapshot_id)]
    else:  # what the current branch holds and the target's own lineage does not, and back
        target_lineage = list(ancestry.ancestors_of(loaded.metadata, target.snapshot_id))
        kept = {s.snapshot_id for s in target_lineage}
        hidden = [s for s in lineage if s.snapshot_id not in kept]
        restored = tuple(
            key for s in target_lineage if s.snapshot_id not in ids and (key := ancestry.checkpoint_of(s)) is not None
        )
    records = sum(int(s.summary.get("added-records") or 0) for s in hidden if s.summary)
    reappearing, reappearing_by = _reappearing(loaded, target, hidden)
    checkpoints = tuple(key for s in hidden if (key := ancestry.checkpoint_of(s)) is not None)
    current = loaded.metadata.refs.get(branch)
    lacking = None
    column = event_time_column(loaded.metadata)
    if to_event_time is not None and column is not None and current is not None:
        when = to_event_time if to_event_time.tzinfo is not None else to_event_time.replace(tzinfo=timezone.utc)
        up_to = f"{column} <= '{when.isoformat()}'"

        def rows(snapshot_id: int) -> int:
            return int(
                loaded.scan(snapshot_id=snapshot_id, row_filter=up_to, selected_fields=(column,)).to_arrow().num_rows
            )

        lacking = max(rows(current.snapshot_id) - rows(target.snapshot_id), 0)
    return RollbackPlan(
        table=name,
        selector=selector,
        current_snapshot_id=current.snapshot_id if current else None,
        target_snapshot_id=target.snapshot_id,
        is_ancestor=is_ancestor,
        hidden_snapshot_ids=tuple(s.snapshot_id for s in hidden),
        hidden_records=records,
        hidden_checkpoints=checkpoints,
        restored_checkpoints=restored,
        lacking_up_to_event_time=lacking,
        reappearing_records=reappearing,
        reappearing_checkpoints=reappearing_by,
        branch=branch,
    )


def _off_branch_committed(table: Table, committed: list[CheckpointState]) -> dict[tuple[str, int], int]:
    """Checkpoints recorded as committed that a rollback took off every branch (their
    snapshot is still in the metadata): (job, checkpoint) -> that snapshot."""
    keys = {(state.job_id, state.checkpoint_id) for state in committed if state.snapshot_id is not None}
    # off every branch: a checkpoint another branch holds is not rolled back
    branches = [name for name, ref in table.metadata.refs.items() if str(ref.snapshot_ref_type) == "branch"]
    off = ancestry.rolled_back_snapshots(table.metadata, branches or [MAIN_BRANCH])
    return {key: snapshot_id for snapshot_id, key in off.items() if key in keys}


class _Rollback(protocol.Operation):
    """Making the plan's target the branch head: one compare-and-swap that asserts the head
    the plan saw; a conflict means the plan may no longer hold (refused: plan again)."""

    conflict = "refuse"
    kind = "rollback"
    remedy = "look at the table's snapshots (icecommit snapshots) and plan the rollback again"

    def __init__(self, plan: RollbackPlan) -> None:
        self.plan = plan
        self.table_name = plan.table

    @property
    def label(self) -> str:
        return f"rollback of {self.plan.table} to snapshot {self.plan.target_snapshot_id}"

    def apply(self, table: Table) -> protocol.Applied:
        manage = table.manage_snapshots()
        ref = table.metadata.refs.get(self.plan.branch)
        if self.plan.branch != MAIN_BRANCH and ref is not None:
            # the branch's head moved, its retention kept; asserts the head it had
            manage.create_branch(
                self.plan.target_snapshot_id, self.plan.branch, max_ref_age_ms=ref.max_ref_age_ms,
                max_snapshot_age_ms=ref.max_snapshot_age_ms, min_snapshots_to_keep=ref.min_snapshots_to_keep,
            ).commit()  # fmt: skip
        elif self.plan.is_ancestor:
            manage.rollback_to_snapshot(self.plan.target_snapshot_id).commit()
        else:
            manage.set_current_snapshot(self.plan.target_snapshot_id).commit()
        return protocol.Applied(self.plan.target_snapshot_id, None)

    def find(self, table: Table) -> protocol.Found | None:
        head = table.metadata.refs.get(self.plan.branch)
        landed = head is not None and head.snapshot_id == self.plan.target_snapshot_id
        return protocol.Found(self.plan.target_snapshot_id) if landed else None


def apply_rollback(catalog: Catalog, plan: RollbackPlan) -> RollbackPlan:
    """Make the plan's target the current snapshot (a compare-and-swap on the catalog),
    then record every checkpoint it hid, of every job, as rolled back in the committer's
    state: no committer commits them again unless a user re-commits them. A crash between
    the two leaves the hidden snapshots off the branch, which committers also read as a
    rollback (and ``expire`` records before it removes them).

    Raises:
        PlanChangedError: the branch moved since the plan was made, or another commit landed
            between that check and the rollback's own; nothing was rolled back: plan again.
        CommitStateUnknownError: the catalog's answer was lost and the table does not show
            the rollback.
    """
    loaded = load_table(catalog, plan.table)
    current = ancestry.branch_head(loaded.metadata, plan.branch)
    if (current.snapshot_id if current else None) != plan.current_snapshot_id:
        raise PlanChangedError(plan.table, "rollback", since="its branch moved")
    store = table_state(catalog, loaded)  # where the rollback is recorded, checked before it is made
    protocol.run(_Rollback(plan), base=loaded, load=lambda: load_table(catalog, plan.table), policy=protocol.ONCE)
    # what an earlier rollback killed between its swap and this step (or another tool's
    # rollback) left recorded as committed while its snapshot is off the branch: recorded
    # now, so running a rollback again finishes what a crashed one began
    try:
        left_over = _off_branch_committed(load_table(catalog, plan.table), store.list(plan.table, status=COMMITTED))
        hidden = sorted(set(plan.hidden_checkpoints) | set(left_over))
        if hidden or plan.restored_checkpoints:
            store.mark_rolled_back(plan.table, hidden, snapshots=left_over)
            store.mark_restored(plan.table, plan.restored_checkpoints)
    except (CatalogUnavailableError, StateDatabaseUnavailableError) as e:
        raise type(e)(
            e.uri,
            f"{e.reason}; the rollback of {plan.table} to snapshot {plan.target_snapshot_id} landed, but the "
            "checkpoints it hid are not recorded as rolled back yet (committers read them so meanwhile): run the "
            "same rollback again to record them",
        ) from e
    logger.warning(
        "rolled %s back to snapshot %d (%s): %d snapshot(s), %d rows hidden, %d rows back",
        plan.table, plan.target_snapshot_id, plan.selector, len(plan.hidden_snapshot_ids), plan.hidden_records,
        plan.reappearing_records,
    )  # fmt: skip
    return RollbackPlan(**{**plan.__dict__, "applied": True})


def apply_rollbacks(catalog: Catalog, plans: Sequence[RollbackPlan]) -> list[RollbackPlan]:
    """Apply the rollback ``plans`` of several tables (one each) together: in one catalog
    commit where the catalog can (every table rolls back, or none: a checkpoint written to
    several tables is taken back from all of them at once), else one after another. Each
    plan is applied as :func:`apply_rollback` applies it. Returns the plans applied, in order.

    Raises:
        InvalidArgumentError: no plan, or two plans of one table.
        PlanChangedError: a table moved since its plan was made: none rolled back (one
            after another: the tables before it did).
    """
    tables = [plan.table for plan in plans]
    if not tables or len(set(tables)) != len(tables):
        raise InvalidArgumentError("plans", tables, "one rollback plan per table, for one table or more")
    work = {plan.table: _applying(catalog, plan) for plan in plans}
    if len(plans) > 1 and can_commit_together(catalog):
        applied = CommitGroup(catalog).run(work)
    else:
        applied = {table: apply() for table, apply in work.items()}
    return [applied[table] for table in tables]


def _applying(catalog: Catalog, plan: RollbackPlan) -> Callable[[], RollbackPlan]:
    return lambda: apply_rollback(catalog, plan)
