"""What a commit returns: one checkpoint's outcome, or one checkpoint's over several tables."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from pyiceberg.table.snapshots import Snapshot

from icecommit.core import ancestry
from icecommit.core.check_values import CheckResult
from icecommit.state.checkpoints import CheckpointState

CommitStatus = Literal["committed", "already-committed", "empty", "rolled-back", "abandoned", "held"]


#: Step boundaries at which a fault hook is called (tests inject crashes there).
@dataclass(frozen=True)
class CommitResult:
    """The outcome of committing one checkpoint.

    Attributes:
        status: ``committed`` (this call made the snapshot), ``already-committed`` (the
            checkpoint was in the table; nothing written twice), ``empty`` (the
            checkpoint had no data files, so no snapshot was made), ``rolled-back``
            (``recover`` found that a rollback removed it: recorded, not committed again)
            ``abandoned`` (an operator gave it up: a recorded no-op) or ``held`` (on its
            job's audit branch, not on the branch readers use, until it is published).
        snapshot_id: the snapshot holding the checkpoint, None when empty.
        attempts / retries: commit attempts made by this call, and how many were retries.
        checks: its checks' results (name, ok, observed, detail), when it had checks.
    """

    job_id: str
    table: str
    checkpoint_id: int
    status: CommitStatus
    snapshot_id: int | None
    records: int
    files: int
    bytes: int
    attempts: int
    retries: int
    checks: tuple[CheckResult, ...] = ()

    @property
    def committed(self) -> bool:
        """True when this call made the snapshot."""
        return self.status == "committed"


@dataclass(frozen=True)
class RoutedCommitResult:
    """The outcome of committing one checkpoint into several tables (a routed write).

    Attributes:
        checkpoint_id: the checkpoint, the same in every table.
        results: per table name, its commit result.
        skipped_records: per table, rows of the source routed to a table whose checkpoint
            was already committed or prepared before this call (not written again).
    """

    checkpoint_id: int
    results: Mapping[str, CommitResult]
    skipped_records: Mapping[str, int]

    def __getitem__(self, table: str) -> CommitResult:
        return self.results[table]

    @property
    def committed(self) -> bool:
        """True when this call made a snapshot in at least one table."""
        return any(r.committed for r in self.results.values())

    @property
    def records(self) -> int:
        """Records of the checkpoint over every table."""
        return sum(r.records for r in self.results.values())

    @property
    def files(self) -> int:
        """Data files of the checkpoint over every table."""
        return sum(r.files for r in self.results.values())

    @property
    def bytes(self) -> int:
        """Bytes of the checkpoint's data files over every table."""
        return sum(r.bytes for r in self.results.values())


def result_from_state(
    state: CheckpointState,
    status: CommitStatus,
    *,
    snapshot_id: int | None = None,
    attempts: int = 0,
    retries: int = 0,
) -> CommitResult:
    """The result of a checkpoint whose counts come from its state row."""
    return CommitResult(
        job_id=state.job_id,
        table=state.table_name,
        checkpoint_id=state.checkpoint_id,
        status=status,
        snapshot_id=snapshot_id if snapshot_id is not None else state.snapshot_id,
        records=state.records,
        files=state.files,
        bytes=state.bytes,
        attempts=attempts,
        retries=retries,
    )


def result_from_summary(job_id: str, table: str, checkpoint_id: int, snapshot: Snapshot) -> CommitResult:
    """The result of a checkpoint that a snapshot of the table holds and the state has no
    row of: its counts come from the snapshot's summary (0 where it does not say)."""
    summary = snapshot.summary
    assert summary is not None  # the decision found it by its summary

    def count(key: str) -> int:
        return int(summary.get(key) or 0)

    return CommitResult(
        job_id=job_id,
        table=table,
        checkpoint_id=checkpoint_id,
        status="already-committed",
        snapshot_id=snapshot.snapshot_id,
        records=count(ancestry.RECORDS),
        files=count(ancestry.FILES),
        bytes=count(ancestry.BYTES),
        attempts=0,
        retries=0,
    )
