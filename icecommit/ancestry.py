"""Pure functions over table metadata: which checkpoints a branch already holds.

The snapshot summary is the single source of truth for de-duplication: every snapshot
icecommit commits carries the job id and checkpoint id, so after any crash, retry or lost
response the branch's ancestry tells whether a checkpoint landed.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.snapshots import Snapshot

JOB_ID = "icecommit.job-id"
CHECKPOINT_ID = "icecommit.checkpoint-id"
RECORDS = "icecommit.records"
FILES = "icecommit.files"
BYTES = "icecommit.bytes"
MAX_EVENT_TIME = "icecommit.max-event-time-us"
RECOVERED_BY = "icecommit.recovered-by"
#: The job's event-time watermark once this snapshot is committed (microseconds).
WATERMARK = "icecommit.watermark-us"
#: Records of this snapshot that fall into time partitions already published complete.
LATE_RECORDS = "icecommit.late-records"


@dataclass(frozen=True)
class CommittedCheckpoint:
    """A (job, checkpoint) found in a branch's ancestry."""

    job_id: str
    checkpoint_id: int
    snapshot_id: int
    timestamp_ms: int


def branch_ancestry(metadata: TableMetadata, branch: str = "main") -> Iterator[Snapshot]:
    """Snapshots of ``branch``, newest first (empty when the branch has no snapshot)."""
    ref = metadata.refs.get(branch)
    if ref is None:
        return
    by_id = {s.snapshot_id: s for s in metadata.snapshots}
    snapshot = by_id.get(ref.snapshot_id)
    while snapshot is not None:
        yield snapshot
        parent = snapshot.parent_snapshot_id
        snapshot = by_id.get(parent) if parent is not None else None


def checkpoint_of(snapshot: Snapshot) -> tuple[str, int] | None:
    """(job id, checkpoint id) of an icecommit snapshot, None for any other snapshot."""
    summary = snapshot.summary
    if summary is None:
        return None
    job = summary.get(JOB_ID)
    checkpoint = summary.get(CHECKPOINT_ID)
    if job is None or checkpoint is None:
        return None
    return str(job), int(checkpoint)


def committed_checkpoints(
    metadata: TableMetadata, branch: str = "main", job_id: str | None = None
) -> list[CommittedCheckpoint]:
    """Every icecommit checkpoint in the branch's ancestry, newest first."""
    found = []
    for snapshot in branch_ancestry(metadata, branch):
        key = checkpoint_of(snapshot)
        if key is None or (job_id is not None and key[0] != job_id):
            continue
        found.append(CommittedCheckpoint(key[0], key[1], snapshot.snapshot_id, snapshot.timestamp_ms))
    return found


def find_checkpoint(metadata: TableMetadata, job_id: str, checkpoint_id: int, branch: str = "main") -> Snapshot | None:
    """The snapshot of ``branch`` that committed (job, checkpoint), or None."""
    for snapshot in branch_ancestry(metadata, branch):
        if checkpoint_of(snapshot) == (job_id, checkpoint_id):
            return snapshot
    return None


def last_committed_checkpoint(metadata: TableMetadata, job_id: str, branch: str = "main") -> int | None:
    """The checkpoint id of the newest snapshot of ``branch`` committed by ``job_id``."""
    for snapshot in branch_ancestry(metadata, branch):
        key = checkpoint_of(snapshot)
        if key is not None and key[0] == job_id:
            return key[1]
    return None
