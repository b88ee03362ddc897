"""Recording what became of a checkpoint in the committer's state: committed (with its
publishing counters, attempts and committed-stage counts), empty, or rolled back."""

from __future__ import annotations

from collections.abc import Callable

from pyiceberg.table.metadata import TableMetadata

from icecommit.core import ancestry
from icecommit.state.checkpoints import (
    ROLLED_BACK,
    STAGE_COMMITTED,
    WRITTEN,
    CheckpointState,
    CheckpointStore,
    MetricSample,
    PublishCounters,
)


class CheckpointRecorder:
    """Writes one job's checkpoint outcomes for one table into the state."""

    def __init__(
        self,
        store: CheckpointStore,
        table_name: str,
        job_id: str,
        branch: str,
        load_metadata: Callable[[], TableMetadata],
    ) -> None:
        self._store = store
        self._table_name = table_name
        self._job_id = job_id
        self._branch = branch
        self._load_metadata = load_metadata

    def rolled_back(self, checkpoint_id: int) -> None:
        """A rollback removed it (seen in the table, not recorded before)."""
        self._store.mark_rolled_back(self._table_name, [(self._job_id, checkpoint_id)])

    def empty(self, checkpoint_id: int) -> CheckpointState:
        """Committed with no data files: no snapshot."""
        return self._store.mark_committed(
            self._job_id,
            self._table_name,
            checkpoint_id,
            snapshot_id=None,
            attempts=0,
            retries=0,
            counters=PublishCounters(),
        )

    def committed(
        self,
        checkpoint_id: int,
        snapshot_id: int | None,
        *,
        attempts: int,
        retries: int,
        counters: PublishCounters,
        recommit: bool,
    ) -> CheckpointState:
        """Mark the checkpoint committed, unless a rollback recorded it as removed while it
        was being committed and the branch does not hold it (the rollback came last)."""

        def mark(from_rolled_back: bool) -> CheckpointState:
            return self._store.mark_committed(
                self._job_id,
                self._table_name,
                checkpoint_id,
                snapshot_id=snapshot_id,
                attempts=attempts,
                retries=retries,
                counters=counters,
                samples=self._committed_samples(checkpoint_id),
                from_rolled_back=from_rolled_back,
            )

        recorded = mark(recommit)
        if recorded.status == ROLLED_BACK:
            fresh = self._load_metadata()
            if ancestry.find_checkpoint(fresh, self._job_id, checkpoint_id, self._branch) is not None:
                recorded = mark(True)  # this append landed after the rollback
        return recorded

    def _committed_samples(self, checkpoint_id: int) -> list[MetricSample]:
        written = self._store.window_totals(self._job_id, self._table_name, checkpoint_id, WRITTEN)
        return [MetricSample(STAGE_COMMITTED, window, records) for window, records in written.items()]
