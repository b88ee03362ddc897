"""Recording what became of a checkpoint in the committer's state: committed (with its
publishing counters, attempts and committed-stage counts), empty, or rolled back."""

from __future__ import annotations

import logging
from collections.abc import Callable

from pyiceberg.table.metadata import TableMetadata

from icecommit.committer.protocol import Outcome
from icecommit.committer.results import CommitResult, CommitStatus, result_from_state
from icecommit.core import ancestry
from icecommit.core.errors import CatalogUnavailableError
from icecommit.state.checkpoints import COMMITTED, HELD, ROLLED_BACK, CheckpointState, CheckpointStore, PublishCounters
from icecommit.state.database import state_errors
from icecommit.state.samples import STAGE_COMMITTED, WRITTEN, MetricSample

logger = logging.getLogger(__name__)


class CheckpointRecorder:
    """Writes one job's checkpoint outcomes for one table into the state."""

    def __init__(
        self,
        store: CheckpointStore,
        table_name: str,
        job_id: str,
        branch: str,
        load_metadata: Callable[[], TableMetadata],
        *,
        held: bool = False,
    ) -> None:
        #: it records checkpoints committed to their audit branch: ``held``, not committed
        self.held = held
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
                status=HELD if self.held else COMMITTED,
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

    def outcome(
        self, state: CheckpointState, outcome: Outcome, *, files: int, recommit: bool, publish: Callable[[], object]
    ) -> CommitResult:
        """Record how a prepared checkpoint's commit ended, then publish the partitions it
        completed (``publish``); returns the result the caller reports."""
        checkpoint_id = state.checkpoint_id
        snapshot_id = outcome.snapshot_id
        landed_before = outcome.found_before
        counters = PublishCounters(
            created=state.files, committed=0 if landed_before else files, skipped=files if landed_before else 0
        )
        landed = (
            f"checkpoint {checkpoint_id} is in the table (snapshot {snapshot_id}) but not recorded: "
            "recover() records it, and nothing is committed twice"
        )
        try:
            with state_errors(self._store, landed):
                recorded = self.committed(
                    checkpoint_id,
                    snapshot_id,
                    attempts=outcome.sent,
                    retries=outcome.retries,
                    counters=counters,
                    recommit=recommit,
                )
        except CatalogUnavailableError as e:  # reading the table after a rollback raced the commit
            raise CatalogUnavailableError(e.uri, f"{e.reason}; {landed}") from e
        if recorded.status == ROLLED_BACK:
            logger.warning(
                "checkpoint %d of job %s landed, but a rollback removed it before its state was recorded; "
                "it stays rolled back",
                checkpoint_id, self._job_id,
            )  # fmt: skip
            return result_from_state(recorded, "rolled-back", snapshot_id=snapshot_id)
        if self.held:  # its rows are not where readers look: no partition is complete by them
            logger.info("checkpoint %d of job %s held on branch %s as snapshot %s", checkpoint_id, self._job_id,
                        self._branch, snapshot_id)  # fmt: skip
            return result_from_state(recorded, "held", snapshot_id=snapshot_id, attempts=outcome.sent)
        publish()
        status: CommitStatus = "already-committed" if landed_before else "committed"
        logger.info(
            "checkpoint %d of job %s %s as snapshot %s (%d attempts, %d retries; files "
            "created %d, committed %d, skipped %d, missing %d)",
            checkpoint_id, self._job_id, status, snapshot_id, outcome.sent, outcome.retries,
            counters.created, counters.committed, counters.skipped, counters.missing,
        )  # fmt: skip
        return result_from_state(state, status, snapshot_id=snapshot_id, attempts=outcome.sent, retries=outcome.retries)

    def landed_recommit(self, state: CheckpointState, snapshot_id: int | None) -> CommitResult:
        """A checkpoint recorded as rolled back that the table holds again: a re-commit
        landed and its process died before recording it. Recorded as committed now, with
        its committed-stage metrics; nothing is appended."""
        counters = PublishCounters(created=state.files, skipped=state.files)
        recorded = self.committed(
            state.checkpoint_id, snapshot_id, attempts=0, retries=0, counters=counters, recommit=True
        )
        logger.warning(
            "checkpoint %d of job %s is in the table again (snapshot %s), re-committed by a process that died "
            "before recording it: recorded as committed",
            state.checkpoint_id, self._job_id, snapshot_id,
        )  # fmt: skip
        return result_from_state(recorded, "already-committed", snapshot_id=snapshot_id)
