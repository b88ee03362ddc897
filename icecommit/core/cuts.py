"""A consistent cut of several tables: the newest checkpoint of a job that every one of
them holds, and each table's snapshot as of it. Pure: the tables' metadata is given.

A table has committed checkpoint ``n`` of a job when its highest committed checkpoint
(the branch's high-water mark, or its ancestry) is at least ``n``; the cut's checkpoint
is the smallest of those marks. Each table's snapshot is the newest one of the job on the
branch whose checkpoint is at most the cut's: a table that got no rows in the cut's own
checkpoint is shown as of the last one that gave it some (its rows are all there). None
where the job has committed nothing to a table; then no checkpoint is common either.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pyiceberg.table.metadata import TableMetadata

from icecommit.core.ancestry import MAIN_BRANCH, committed_checkpoints, highest_committed_checkpoint


@dataclass(frozen=True)
class Cut:
    """Where every table of a job's checkpoint can be read together.

    Attributes:
        checkpoint_id: the newest checkpoint every table holds (None: there is none).
        snapshots: each table's snapshot id as of it, by table name (None: the job left
            no snapshot there yet), for time travel by snapshot id.
        marks: each table's own highest committed checkpoint (how far ahead it is).
    """

    checkpoint_id: int | None
    snapshots: dict[str, int | None]
    marks: dict[str, int | None]


def cut_of(tables: Mapping[str, TableMetadata], job_id: str, branch: str = MAIN_BRANCH) -> Cut:
    """The consistent cut of ``tables`` (metadata by name, read together) for ``job_id``."""
    marks = {name: highest_committed_checkpoint(metadata, job_id, branch) for name, metadata in tables.items()}
    known = [m for m in marks.values() if m is not None]
    checkpoint = min(known) if known and len(known) == len(marks) else None
    snapshots: dict[str, int | None] = {}
    for name, metadata in tables.items():
        limit = checkpoint if checkpoint is not None else -1
        held = committed_checkpoints(metadata, branch, job_id) if checkpoint is not None else []  # newest first
        snapshots[name] = next((c.snapshot_id for c in held if c.checkpoint_id <= limit), None)
    return Cut(checkpoint, snapshots, marks)


__all__ = ["Cut", "cut_of"]
