"""Pure functions over table metadata: which checkpoints a branch already holds.

The snapshot summary is the single source of truth for de-duplication: every snapshot
icecommit commits carries the job id and checkpoint id, so after any crash, retry or lost
response the branch's ancestry tells whether a checkpoint landed.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import quote

from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.snapshots import Snapshot

from icecommit.core.completeness import micros
from icecommit.core.decision import TableView
from icecommit.core.errors import InvalidArgumentError, SnapshotNotFoundError

JOB_ID = "icecommit.job-id"
CHECKPOINT_ID = "icecommit.checkpoint-id"
RECORDS = "icecommit.records"
FILES = "icecommit.files"
BYTES = "icecommit.bytes"
MAX_EVENT_TIME = "icecommit.max-event-time-us"
RECOVERED_BY = "icecommit.recovered-by"
#: How many tables the checkpoint was committed to in the same catalog commit (only
#: where it was several: ``atomic``).
TABLES_IN_COMMIT = "icecommit.tables-in-commit"
#: The job's event-time watermark once this snapshot is committed (microseconds).
WATERMARK = "icecommit.watermark-us"
#: Records of this snapshot that fall into time partitions already published complete.
LATE_RECORDS = "icecommit.late-records"
FUTURE_RECORDS = "icecommit.future-records"
QUERY_ID = "icecommit.query-id"
#: Table property prefix: ``icecommit.job.<job id>.checkpoint`` holds the job's highest
#: checkpoint id committed to the main branch. It is set in the same catalog commit as
#: every append, so it is exact whenever the append is, and no snapshot expiry
#: (icecommit's or another engine's) removes it.
JOB_PROPERTY_PREFIX = "icecommit.job."
JOB_PROPERTY_SUFFIX = ".checkpoint"
#: Table property prefix of the marks of every other branch:
#: ``icecommit.branch.<branch, encoded>.job.<job id>.checkpoint``. The branch is
#: percent-encoded, dots too (``v1.2`` is ``v1%2E2``), so it holds no dot and ends at the
#: first one: no two (branch, job) pairs share a name, and none is main's name of a job.
BRANCH_PROPERTY_PREFIX = "icecommit.branch."


#: The branch every operation, look-up and report works on unless given another.
MAIN_BRANCH = "main"


def snapshot_summary(
    *,
    job_id: str,
    checkpoint_id: int,
    records: int,
    files: int,
    bytes_: int,
    max_event_time_us: int | None = None,
    watermark_us: int | None = None,
    late_records: int = 0,
    future_records: int = 0,
    query_id: str | None = None,
    recovered_by: str | None = None,
    tables_in_commit: int | None = None,
) -> dict[str, str]:
    """The summary properties of the snapshot that commits one checkpoint (what every
    reader of the keys above finds; optional facts only when there are some)."""
    summary = {
        JOB_ID: job_id,
        CHECKPOINT_ID: str(checkpoint_id),
        RECORDS: str(records),
        FILES: str(files),
        BYTES: str(bytes_),
    }
    if max_event_time_us is not None:
        summary[MAX_EVENT_TIME] = str(max_event_time_us)
    if watermark_us is not None:
        summary[WATERMARK] = str(watermark_us)
    if late_records:
        summary[LATE_RECORDS] = str(late_records)
    if future_records:
        summary[FUTURE_RECORDS] = str(future_records)
    if query_id is not None:
        summary[QUERY_ID] = query_id
    if recovered_by is not None:
        summary[RECOVERED_BY] = recovered_by
    if tables_in_commit is not None:
        summary[TABLES_IN_COMMIT] = str(tables_in_commit)
    return summary


def job_checkpoint_property(job_id: str, *, branch: str = MAIN_BRANCH) -> str:
    """The table property holding ``job_id``'s highest checkpoint id committed to
    ``branch`` (main's is ``icecommit.job.<job id>.checkpoint``, as before branches had
    their own; see :data:`BRANCH_PROPERTY_PREFIX` for the others')."""
    return f"{_job_property_prefix(branch)}{job_id}{JOB_PROPERTY_SUFFIX}"


def recorded_highest_checkpoints(properties: Mapping[str, str], *, branch: str = MAIN_BRANCH) -> dict[str, int]:
    """Every job's highest checkpoint id committed to ``branch``, from the table's
    properties (job id -> checkpoint id; another branch's marks are not among them)."""
    prefix = _job_property_prefix(branch)
    found = {}
    for key, value in properties.items():
        if key.startswith(prefix) and key.endswith(JOB_PROPERTY_SUFFIX):
            job = key[len(prefix) : -len(JOB_PROPERTY_SUFFIX)]
            if job and value.lstrip("-").isdigit():
                found[job] = int(value)
    return found


def _job_property_prefix(branch: str) -> str:
    if branch == MAIN_BRANCH:
        return JOB_PROPERTY_PREFIX
    # quote leaves letters, digits and "_.-~" as they are and encodes "%" itself: with the
    # dot encoded as well, the encoding is one-to-one and dot-free
    return f"{BRANCH_PROPERTY_PREFIX}{quote(branch, safe='').replace('.', '%2E')}.job."


@dataclass(frozen=True)
class CommittedCheckpoint:
    """A (job, checkpoint) found in a branch's ancestry."""

    job_id: str
    checkpoint_id: int
    snapshot_id: int
    timestamp_ms: int


def branch_ancestry(metadata: TableMetadata, branch: str = MAIN_BRANCH) -> Iterator[Snapshot]:
    """Snapshots of ``branch``, newest first (empty when the branch has no snapshot)."""
    ref = metadata.refs.get(branch)
    if ref is None:
        return
    yield from ancestors_of(metadata, ref.snapshot_id)


def branch_head(metadata: TableMetadata, branch: str = MAIN_BRANCH) -> Snapshot | None:
    """The snapshot ``branch`` points at (None: no such branch, or no snapshot yet)."""
    ref = metadata.refs.get(branch)
    return metadata.snapshot_by_id(ref.snapshot_id) if ref is not None else None


def ancestors_of(metadata: TableMetadata, snapshot_id: int) -> Iterator[Snapshot]:
    """A snapshot and its ancestors still in the metadata, newest first."""
    by_id = {s.snapshot_id: s for s in metadata.snapshots}
    snapshot = by_id.get(snapshot_id)
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
    metadata: TableMetadata, branch: str = MAIN_BRANCH, job_id: str | None = None
) -> list[CommittedCheckpoint]:
    """Every icecommit checkpoint in the branch's ancestry, newest first."""
    found = []
    for snapshot in branch_ancestry(metadata, branch):
        key = checkpoint_of(snapshot)
        if key is None or (job_id is not None and key[0] != job_id):
            continue
        found.append(CommittedCheckpoint(key[0], key[1], snapshot.snapshot_id, snapshot.timestamp_ms))
    return found


def find_checkpoint(
    metadata: TableMetadata, job_id: str, checkpoint_id: int, branch: str = MAIN_BRANCH
) -> Snapshot | None:
    """The snapshot of ``branch`` that committed (job, checkpoint), or None."""
    for snapshot in branch_ancestry(metadata, branch):
        if checkpoint_of(snapshot) == (job_id, checkpoint_id):
            return snapshot
    return None


def last_committed_checkpoint(metadata: TableMetadata, job_id: str, branch: str = MAIN_BRANCH) -> int | None:
    """The checkpoint id of the newest snapshot of ``branch`` committed by ``job_id``."""
    for snapshot in branch_ancestry(metadata, branch):
        key = checkpoint_of(snapshot)
        if key is not None and key[0] == job_id:
            return key[1]
    return None


def highest_committed_checkpoint(metadata: TableMetadata, job_id: str, branch: str = MAIN_BRANCH) -> int | None:
    """The job's highest checkpoint id committed to ``branch``: the branch's table property
    (:func:`job_checkpoint_property`), or, for checkpoints committed before the property
    existed, the branch's ancestry; the larger of the two. Another branch's mark is never
    read: main's may count checkpoints committed after a branch was made from it."""
    return _highest(metadata, job_id, branch, branch_ancestry(metadata, branch))


def _highest(metadata: TableMetadata, job_id: str, branch: str, lineage: Iterable[Snapshot]) -> int | None:
    recorded = metadata.properties.get(job_checkpoint_property(job_id, branch=branch))
    # icecommit writes a non-negative whole number; anything else (another tool's edit) is ignored
    candidates = [int(recorded)] if recorded is not None and recorded.isascii() and recorded.isdigit() else []
    in_ancestry = next((key[1] for s in lineage if (key := checkpoint_of(s)) is not None and key[0] == job_id), None)
    if in_ancestry is not None:
        candidates.append(in_ancestry)
    return max(candidates) if candidates else None


def lineage_complete(metadata: TableMetadata, branch: str = MAIN_BRANCH) -> bool:
    """True when the branch's ancestry provably reaches the table's first snapshot (no
    ancestor was expired), so a snapshot missing from it was never an ancestor or was
    taken off by a rollback.

    Proof is the oldest ancestor having no parent *and* sequence number 1: pyiceberg's
    expiry clears the parent id of a snapshot whose parent it removes, so a missing
    parent alone proves nothing. Format-version 1 tables have no sequence numbers and are
    never taken as complete.
    """
    return _complete(list(branch_ancestry(metadata, branch)))


def _complete(lineage: Sequence[Snapshot]) -> bool:
    if not lineage:
        return True
    last = lineage[-1]
    return last.parent_snapshot_id is None and last.sequence_number == 1


def rolled_back_snapshots(
    metadata: TableMetadata, branches: Iterable[str] = (MAIN_BRANCH,), *, lineage: Sequence[Snapshot] | None = None
) -> dict[int, tuple[str, int]]:
    """What "rolled back" means, read from the table (the one place it is derived): every
    snapshot that committed an icecommit checkpoint, is still in the metadata, is on none of
    ``branches``' lineages, and whose checkpoint no snapshot of those lineages holds (one
    re-committed since is in). Snapshot id -> (job id, checkpoint id), in metadata order.

    ``lineage``: the snapshots of the branches' lineages, when the caller has walked them.
    """
    walked = list(lineage) if lineage is not None else [s for b in branches for s in branch_ancestry(metadata, b)]
    on_branch = {s.snapshot_id for s in walked}
    landed = {key for s in walked if (key := checkpoint_of(s)) is not None}
    return {
        s.snapshot_id: key
        for s in metadata.snapshots
        if s.snapshot_id not in on_branch and (key := checkpoint_of(s)) is not None and key not in landed
    }


def held_elsewhere(
    metadata: TableMetadata, branch: str = MAIN_BRANCH, *, lineage: Sequence[Snapshot] | None = None
) -> frozenset[tuple[str, int]]:
    """The (job, checkpoint) pairs that another branch's ancestry holds and ``branch``'s
    does not: that branch's to list and reconcile, neither lost nor rolled back on this one.

    ``lineage``: the snapshots of ``branch``'s lineage, when the caller has walked it.
    """
    walked = lineage if lineage is not None else list(branch_ancestry(metadata, branch))
    here = {key for s in walked if (key := checkpoint_of(s)) is not None}
    return frozenset(
        key
        for name, ref in metadata.refs.items()
        if name != branch and str(ref.snapshot_ref_type) == "branch"
        for s in branch_ancestry(metadata, name)
        if (key := checkpoint_of(s)) is not None and key not in here
    )


def table_view(metadata: TableMetadata, job_id: str, checkpoint_id: int, branch: str = MAIN_BRANCH) -> TableView:
    """What the table shows about one (job, checkpoint), for :func:`icecommit.core.decision.decide`
    (one walk of the branch's lineage)."""
    lineage = list(branch_ancestry(metadata, branch))
    key = (job_id, checkpoint_id)
    landed = next((s for s in lineage if checkpoint_of(s) == key), None)
    off_branch = None
    if landed is None:
        rolled_back = rolled_back_snapshots(metadata, lineage=lineage)
        off_branch = next((snapshot_id for snapshot_id, found in rolled_back.items() if found == key), None)
    return TableView(
        landed_snapshot_id=landed.snapshot_id if landed is not None else None,
        off_branch_snapshot_id=off_branch,
        highest_committed=_highest(metadata, job_id, branch, lineage),
        lineage_complete=_complete(lineage),
    )


def require_branch(metadata: TableMetadata, branch: object) -> str:
    """``branch`` when commits can go to it: ``main`` (made by the first commit) or a branch
    the table has.

    Raises:
        InvalidArgumentError: not a name, a tag, or a branch the table does not have
            (create it first; a commit to it would land on no branch).
    """
    branches = sorted(name for name, ref in metadata.refs.items() if str(ref.snapshot_ref_type) == "branch")
    if isinstance(branch, str) and (branch == MAIN_BRANCH or branch in branches):
        return branch
    accepted = f"a branch of the table ({', '.join(branches) or MAIN_BRANCH + ', made by the first commit'})"
    if isinstance(branch, str) and branch:
        accepted += "; create a new branch first (ManageSnapshots.create_branch)"
    raise InvalidArgumentError("branch", branch, accepted)


def newest_without_data_after(
    metadata: TableMetadata, name: str, when: datetime, branch: str = MAIN_BRANCH
) -> Snapshot:
    """The newest snapshot of the branch whose committed data (its own and all its
    ancestors') has no event time after ``when``: what ``rollback --to-event-time`` rolls
    back to. A checkpoint that straddles ``when`` is left out entirely (and every later
    one), so the result is not "all data up to when": for that, see
    :func:`icecommit.catalog.event_time_versions.snapshot_at_event_time`. A snapshot that does not
    record its event time (another tool's) ends the walk.

    Raises:
        SnapshotNotFoundError: no such snapshot.
    """
    limit_us = micros(when)
    best: Snapshot | None = None
    for snapshot in reversed(list(branch_ancestry(metadata, branch))):
        value = snapshot.summary.get(MAX_EVENT_TIME) if snapshot.summary else None
        if value is None or int(value) > limit_us:
            break
        best = snapshot
    if best is None:
        raise SnapshotNotFoundError(name, f"whose committed data is all at or before {when.isoformat()}")
    return best
