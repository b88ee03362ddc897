"""What to do with one checkpoint: one pure function over what the state and the table show.

``commit``, ``recover``, ``recommit``, the ``ic.write`` replay path, the routed writer and
the streaming sink all ask :func:`decide` and carry out the :class:`Action` it returns;
none of them re-derives the decision. No I/O here: the facts are gathered by the caller
(see :func:`icecommit.ancestry.table_view`), so every case is tested as a table of facts.

How the facts are read (the exactly-once rules, over a table's whole life):

- In the branch's ancestry: the checkpoint is in the table. Nothing else matters.
- Abandoned by an operator: a recorded no-op, whatever else holds.
- Removed by a rollback: recorded as rolled back in the state (icecommit's rollback and
  expiry record it), or its snapshot is still in the metadata but off the branch (any
  tool's rollback). Refused unless the user asks to re-commit it.
- Out of the ancestry otherwise, but the job's highest committed checkpoint (a table
  property set in the same catalog commit as every append, which no expiry removes) is at
  or above it, and the state says it was committed or prepared: it landed, and its
  snapshot was expired since. Its rows live on in later snapshots, so it is in the table;
  unless the branch's lineage is complete back to the table's first snapshot, which proves
  the snapshot is not an ancestor: then a rollback removed it.
- Never prepared here, at or below the job's highest committed checkpoint: checkpoint ids
  grow within a job, so this is a reused id or an out-of-order replay; refused before
  anything is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Literal

CheckpointStatus = Literal["prepared", "committed", "rolled-back", "abandoned"]


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
    #: At or below the job's highest committed checkpoint, never prepared: refuse.
    OUT_OF_ORDER = "out-of-order"


@dataclass(frozen=True)
class StateView:
    """The checkpoint's row in the committer's state (None fields: no row)."""

    status: CheckpointStatus | None = None
    snapshot_id: int | None = None


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
    """

    landed_snapshot_id: int | None = None
    off_branch_snapshot_id: int | None = None
    highest_committed: int | None = None
    lineage_complete: bool = True


@dataclass(frozen=True)
class Decision:
    """An action, the snapshot it concerns (if any), and why, for logs and errors."""

    action: Action
    snapshot_id: int | None
    reason: str


def decide(checkpoint_id: int, state: StateView, table: TableView, *, recommit: bool = False) -> Decision:
    """What to do with ``checkpoint_id`` of a job, given its state row and the table."""
    if table.landed_snapshot_id is not None:
        return Decision(Action.ALREADY_IN, table.landed_snapshot_id, "in the branch's ancestry")
    if state.status == "abandoned":
        return Decision(Action.ABANDONED, None, "abandoned by an operator")
    if state.status == "committed" and state.snapshot_id is None:
        return Decision(Action.EMPTY, None, "committed with no data files")
    rolled_back = _rolled_back(checkpoint_id, state, table)
    if rolled_back is not None:
        action = Action.RECOMMIT if recommit and state.status is not None else Action.ROLLED_BACK
        return Decision(action, rolled_back[0], rolled_back[1])
    at_or_below = table.highest_committed is not None and checkpoint_id <= table.highest_committed
    if state.status == "committed" or (state.status == "prepared" and at_or_below):
        return Decision(Action.ALREADY_IN, state.snapshot_id, "committed; its snapshot was expired since")
    if state.status == "prepared":
        return Decision(Action.COMMIT, None, "prepared, not in the table")
    if at_or_below:
        return Decision(
            Action.OUT_OF_ORDER, None, f"at or below the job's highest committed checkpoint {table.highest_committed}"
        )
    return Decision(Action.WRITE, None, "new")


def _rolled_back(checkpoint_id: int, state: StateView, table: TableView) -> tuple[int | None, str] | None:
    if state.status == "rolled-back":
        return state.snapshot_id, "a rollback removed it (recorded)"
    if table.off_branch_snapshot_id is not None:
        return table.off_branch_snapshot_id, "its snapshot is no longer an ancestor of the branch (a rollback)"
    landed_once = state.status == "committed" or (
        state.status == "prepared" and table.highest_committed is not None and checkpoint_id <= table.highest_committed
    )
    if landed_once and table.lineage_complete:
        return state.snapshot_id, "committed once, and the branch's complete lineage no longer holds it (a rollback)"
    return None
