"""What to do with one checkpoint: one pure function over what the state and the table show.

``commit``, ``recover``, ``recommit``, the ``ic.write`` replay path, the routed writer and
the streaming sink all ask :func:`decide` and carry out the :class:`Action` it returns;
none of them re-derives the decision. No I/O here: the facts are gathered by the caller
(see :func:`icecommit.core.ancestry.table_view`), so every case is tested as a table of facts.

How the facts are read (the exactly-once rules, over a table's whole life):

- In the branch's ancestry: the checkpoint is in the table. Nothing else matters.
- Abandoned by an operator: a recorded no-op, whatever else holds.
- Held on the job's audit branch (a check failed, or every checkpoint waits for a release):
  nothing more until an operator publishes it (then it is in the ancestry) or discards it.
- Removed by a rollback: recorded as rolled back in the state (icecommit's rollback and
  expiry record it), or its snapshot is still in the metadata but off the branch (any
  tool's rollback). Refused unless the user asks to re-commit it.
- Out of the ancestry otherwise, but the job's highest committed checkpoint (a table
  property set in the same catalog commit as every append, which no expiry removes) is at
  or above it, and the state says it was committed or prepared: it landed once. Its files
  decide: live in the current snapshot, its snapshot was merely expired and its rows are
  in the table; gone, a rollback removed it (and expiry erased the trace). Where the
  files were not looked at, a branch lineage complete back to the table's first snapshot
  proves a rollback; otherwise it is taken as expired.
- Never prepared here, at or below the job's highest committed checkpoint: checkpoint ids
  grow within a job, so this is a reused id or an out-of-order replay; refused before
  anything is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Literal

CheckpointStatus = Literal["prepared", "committed", "held", "rolled-back", "abandoned"]


class Action(str, Enum):
    """What a caller does with a checkpoint."""

    #: Nothing of it exists yet: write its data files and prepare it.
    WRITE = "write"
    #: Prepared and not in the table: commit it.
    COMMIT = "commit"
    #: In the table already (live in the ancestry, or expired with its rows in later
    #: snapshots): record it as committed if the state does not say so; write nothing.
    ALREADY_IN = "already-in"
    #: Recorded as committed with no data files: nothing to do.
    EMPTY = "empty"
    #: Removed by a rollback and the caller asked to commit it again.
    RECOMMIT = "recommit"
    #: Removed by a rollback: refuse (CheckpointRolledBackError).
    ROLLED_BACK = "rolled-back"
    #: Abandoned by an operator: a recorded no-op.
    ABANDONED = "abandoned"
    #: Committed to the job's audit branch and held there until an operator publishes or
    #: discards it: nothing reaches the branch asked for; write nothing.
    HELD = "held"
    #: At or below the job's highest committed checkpoint, never prepared: refuse.
    OUT_OF_ORDER = "out-of-order"
    #: A streaming batch id the job prepared or committed under another streaming query
    #: (a new checkpoint location, the same job id): refuse (StreamingQueryMismatchError).
    OTHER_QUERY = "other-query"


@dataclass(frozen=True)
class StateView:
    """The checkpoint's row in the committer's state (None fields: no row)."""

    status: CheckpointStatus | None = None
    snapshot_id: int | None = None
    #: whether it staged data files (a committed row with files whose snapshot could not be
    #: found, its files since rewritten, is not an empty checkpoint)
    has_files: bool = False
    #: the streaming query that prepared it (None: a batch write)
    query_id: str | None = None


@dataclass(frozen=True)
class TableView:
    """What the table shows about one (job, checkpoint).

    Attributes:
        landed_snapshot_id: the snapshot of the branch's ancestry that committed it.
        off_branch_snapshot_id: a snapshot in the metadata, not in the ancestry, that
            committed it (a rollback moved the branch away from it).
        highest_committed: the job's highest committed checkpoint id (table property, or
            the ancestry for tables committed to before the property existed).
        lineage_complete: the ancestry walk reached the table's first snapshot (nothing
            between was expired), so absence from it is proof.
        files_live: whether the checkpoint's staged data files are live in the current
            snapshot (None: not looked at). Read where the other facts cannot tell a
            checkpoint whose snapshot was expired (its files live on) from one a rollback
            removed and expiry then erased (its files are gone from the table).
    """

    landed_snapshot_id: int | None = None
    off_branch_snapshot_id: int | None = None
    highest_committed: int | None = None
    lineage_complete: bool = True
    files_live: bool | None = None


@dataclass(frozen=True)
class Decision:
    """An action, the snapshot it concerns (if any), and why, for logs and errors."""

    action: Action
    snapshot_id: int | None
    reason: str


def decide(
    checkpoint_id: int, state: StateView, table: TableView, *, recommit: bool = False, query_id: str | None = None
) -> Decision:
    """What to do with ``checkpoint_id`` of a job, given its state row and the table;
    ``query_id`` is the streaming query offering it as a batch (None for a batch write or a
    recovery, which commits what was prepared whoever prepared it)."""
    if query_id is not None and state.query_id is not None and state.query_id != query_id:
        return Decision(Action.OTHER_QUERY, state.snapshot_id, f"batch of streaming query {state.query_id}")
    if table.landed_snapshot_id is not None:
        return Decision(Action.ALREADY_IN, table.landed_snapshot_id, "in the branch's ancestry")
    if state.status == "abandoned":
        return Decision(Action.ABANDONED, None, "abandoned by an operator")
    if state.status == "held":
        return Decision(Action.HELD, state.snapshot_id, "held on the job's audit branch until it is published")
    if state.status == "committed" and state.snapshot_id is None and not state.has_files:
        return Decision(Action.EMPTY, None, "committed with no data files")

    def rolled_back(snapshot_id: int | None, why: str) -> Decision:
        action = Action.RECOMMIT if recommit and state.status is not None else Action.ROLLED_BACK
        return Decision(action, snapshot_id, why)

    if table.off_branch_snapshot_id is not None:
        return rolled_back(table.off_branch_snapshot_id, "its snapshot is no longer an ancestor of the branch")
    at_or_below = table.highest_committed is not None and checkpoint_id <= table.highest_committed
    landed_once = state.status in ("committed", "rolled-back") or (state.status == "prepared" and at_or_below)
    if landed_once and table.files_live:
        return Decision(Action.ALREADY_IN, state.snapshot_id, "its snapshot was expired; its files are in the table")
    if state.status == "rolled-back":
        return rolled_back(state.snapshot_id, "a rollback removed it (recorded)")
    if landed_once:
        if table.files_live is False:
            return rolled_back(state.snapshot_id, "it landed once and its files are no longer in the table")
        if table.lineage_complete:
            return rolled_back(state.snapshot_id, "it landed once and the branch's complete lineage lacks it")
        return Decision(Action.ALREADY_IN, state.snapshot_id, "committed; its snapshot was expired since")
    if state.status == "prepared":
        return Decision(Action.COMMIT, None, "prepared, not in the table")
    if at_or_below:
        return Decision(
            Action.OUT_OF_ORDER, None, f"at or below the job's highest committed checkpoint {table.highest_committed}"
        )
    return Decision(Action.WRITE, None, "new")
