"""The global committer: one per job, on the driver.

Two phases. ``prepare`` validates a checkpoint's write results and stages them durably (a
manifest of the data files plus a ``prepared`` row in the checkpoint table). ``commit``
appends every prepared checkpoint of the job, in order, as one snapshot each, using the
catalog's compare-and-swap with retry. Before every attempt the branch's ancestry is
searched for the (job id, checkpoint id) pair, so a checkpoint is never committed twice,
whatever crashed, retried or lost its response before.
"""

from __future__ import annotations

import dataclasses
import getpass
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime

from pyiceberg.catalog import Catalog
from pyiceberg.manifest import DataFile
from pyiceberg.table import Table
from pyiceberg.types import ListType, MapType, NestedField, StructType

from icecommit.catalog.loading import load_table
from icecommit.committer.attempt import append_once
from icecommit.committer.completion import CompletionPublisher, PartitionCompleteness
from icecommit.committer.recording import CheckpointRecorder
from icecommit.committer.results import CommitResult, CommitStatus, result_from_state
from icecommit.committer.retry import RetryPolicy, is_commit_conflict, run_with_retries
from icecommit.committer.samples import capped_watermark, max_of, minute_start, prepare_samples, routed_watermark
from icecommit.committer.validation import require_files_present, size_mismatches, validate_results
from icecommit.core import ancestry
from icecommit.core.completeness import micros
from icecommit.core.datafiles import WriteResult
from icecommit.core.decision import Action, Decision, StateView, TableView, decide
from icecommit.core.errors import (
    CheckpointCommittedError,
    CheckpointNotFoundError,
    CheckpointOutOfOrderError,
    CheckpointReusedError,
    CheckpointRolledBackError,
    CommitConflictError,
    CommitStateUnknownError,
    DataFileMissingError,
    InvalidArgumentError,
    PartitionSpecChangedError,
    SchemaChangedError,
    StagedManifestError,
    StagingError,
    StreamingQueryMismatchError,
    ValidationError,
)
from icecommit.core.identifiers import checked_checkpoint_id, checked_job_id, table_name
from icecommit.core.lineage import path_key, removals_of, trace_fates
from icecommit.core.tableprops import check_table_properties, future_skew
from icecommit.state.checkpoints import (
    ABANDONED,
    COMMITTED,
    PREPARED,
    ROLLED_BACK,
    SOURCE,
    CheckpointState,
    CheckpointStore,
    MetricSample,
    PublishCounters,
)
from icecommit.state.database import state_engine, state_errors, state_uri
from icecommit.state.identity import STATE_ID_PROPERTY, records_state, state_properties
from icecommit.state.manifests import read_staged_manifest, staged_manifest_path, write_staged_manifest
from icecommit.state.partitions import PartitionStatus, PartitionStatusStore

logger = logging.getLogger(__name__)

FAULT_POINTS = (
    "after-stage",
    "after-prepare",
    "before-commit-attempt",
    "after-commit",
)

FaultHook = Callable[[str, int], None]


def _no_fault(_point: str, _checkpoint_id: int) -> None:
    return None


class GlobalCommitter:
    """Commits one job's checkpoints into one table, exactly once.

    Args:
        catalog: the table's catalog.
        table: the table (name or pyiceberg Table).
        job_id: identifies the job in snapshot summaries and the checkpoint table.
        branch: the branch to commit to.
        retry_policy: defaults to the table's ``commit.retry.*`` properties.
        store: the checkpoint table; defaults to the catalog's database or
            ``ICECOMMIT_METRICS_URI``.
        sleep: used between retries; injected in tests.
        fault: called at each of :data:`FAULT_POINTS`; injected in tests.
        completeness: when time partitions are published complete (after each commit)
            and whom to tell; see :class:`PartitionCompleteness`.
        query_id: the Spark streaming query whose batches this committer commits (the
            streaming sink passes ``query.id``); recorded with each checkpoint, and a batch
            id the job committed under another query is refused
            (:class:`~icecommit.core.errors.StreamingQueryMismatchError`).
    """

    def __init__(
        self,
        catalog: Catalog,
        table: Table | str,
        *,
        job_id: str,
        branch: str = "main",
        retry_policy: RetryPolicy | None = None,
        store: CheckpointStore | None = None,
        sleep: Callable[[float], None] = time.sleep,
        fault: FaultHook | None = None,
        completeness: PartitionCompleteness | None = None,
        query_id: str | None = None,
    ) -> None:
        checked_job_id(job_id)
        if not isinstance(branch, str) or not branch:
            raise InvalidArgumentError("branch", branch, "the name of a branch of the table (default main)")
        self._query_id = query_id
        self._catalog = catalog
        self._table_name = table_name(table)
        self.job_id = job_id
        self.branch = branch
        self._retry_policy = retry_policy
        self._store = store or CheckpointStore(state_engine(state_uri(catalog)))
        self._completeness = completeness or PartitionCompleteness()
        self._completion = CompletionPublisher(
            PartitionStatusStore(self._store.engine, clock=self._store.clock),
            self._table_name,
            job_id,
            self._completeness,
        )
        self._recorder = CheckpointRecorder(
            self._store, self._table_name, job_id, branch, lambda: self.load_table().metadata
        )
        self._sleep = sleep
        self._fault = fault or _no_fault
        self._recovered_by: str | None = None
        # The table as this committer's last commit left it. A stale copy is harmless: an
        # attempt on a stale base loses the compare-and-swap and is retried on a fresh load.
        self._latest: Table | None = None

    @property
    def table_name(self) -> str:
        """The dotted name of the table this committer commits to."""
        return self._table_name

    @property
    def store(self) -> CheckpointStore:
        """The checkpoint table this committer records into."""
        return self._store

    def load_table(self) -> Table:
        """The table as the catalog has it now."""
        return load_table(self._catalog, self._table_name)

    # -- phase 1 -----------------------------------------------------------------------

    def validate(self, checkpoint_id: int, results: Sequence[WriteResult]) -> None:
        """Run prepare's validation alone (nothing staged, nothing recorded).

        Lets a caller that commits one checkpoint into several tables refuse bad input
        before any of them is prepared.

        Raises:
            SchemaMismatchError, ValidationError: as :meth:`prepare`.
        """
        metadata = self.load_table().metadata
        check_table_properties(metadata)
        with state_errors(self._store, "nothing was validated"):
            records_state(self._table_name, metadata.properties, self._store.engine)  # before any table is prepared
        validate_results(
            results,
            metadata=metadata,
            job_id=self.job_id,
            checkpoint_id=checkpoint_id,
            table_name=self._table_name,
        )

    def prepare(
        self, checkpoint_id: int, results: Sequence[WriteResult], *, routed_with: Sequence[WriteResult] = ()
    ) -> CheckpointState:
        """Validate a checkpoint's write results and stage them durably.

        Preparing the same checkpoint again with the same files is a no-op.

        ``routed_with`` are the same checkpoint's results for the other tables its rows
        were routed to: the watermark this table records then moves with the checkpoint's
        event time, not only with the rows this table received, so a table that rarely
        gets rows does not hold its partitions back (they count toward nothing else).

        Raises:
            SchemaMismatchError: a task saw nulls in a required column.
            ValidationError: counts, files or ids do not hold, or the checkpoint was
                already prepared with different files.
        """
        checked_checkpoint_id(checkpoint_id)
        loaded = self.load_table()
        check_table_properties(loaded.metadata)  # a property it cannot use fails here, before anything
        table = self._claim(loaded)
        validated = validate_results(
            results,
            metadata=table.metadata,
            job_id=self.job_id,
            checkpoint_id=checkpoint_id,
            table_name=self._table_name,
        )
        existing = self._store.get(self.job_id, self._table_name, checkpoint_id)
        if existing is not None:
            return self._same_or_error(existing, validated.digest, len(validated.data_files))
        decision = self._decide(checkpoint_id, None, table)
        self.refuse(checkpoint_id, decision)
        if decision.action is Action.ALREADY_IN:
            self._refuse_reused_checkpoint(table, checkpoint_id, {f.path for f in validated.data_files})
        require_files_present(validated.data_files, table.io, checkpoint_id)
        manifest_path = None
        if validated.data_files:
            manifest_path = staged_manifest_path(table, self.job_id, checkpoint_id)
            try:
                write_staged_manifest(table, manifest_path, validated.data_files)
            except OSError as e:  # a full disk, a lost connection: nothing recorded yet
                raise StagingError(checkpoint_id, manifest_path, e) from e
        self._fault("after-stage", checkpoint_id)
        limit_us = micros(self._store.clock() + future_skew(table.metadata.properties))
        watermark_us, future_records = capped_watermark(results, validated.max_event_time_us, limit_us)
        if routed_with:
            watermark_us = max_of(watermark_us, routed_watermark(routed_with, limit_us))
        if future_records:
            logger.warning(
                "checkpoint %d of job %s: %d row(s) lie more than %s ahead of the clock; they are committed, "
                "but do not move the watermark",
                checkpoint_id,
                self.job_id,
                future_records,
                future_skew(table.metadata.properties),
            )
        with state_errors(self._store, "nothing was recorded: prepare it again"):
            state, inserted = self._store.insert_prepared(
                job_id=self.job_id,
                table_name=self._table_name,
                checkpoint_id=checkpoint_id,
                manifest_path=manifest_path,
                files_digest=validated.digest,
                source_records=validated.source_records,
                records=validated.records,
                files=len(validated.data_files),
                bytes_=validated.bytes,
                max_event_time_us=validated.max_event_time_us,
                query_id=self._query_id,
                watermark_us=watermark_us,
                future_records=future_records,
                tasks=[(r.task_id, r.attempt) for r in results],
                samples=prepare_samples(results),
                partitions=CompletionPublisher.partition_records(table.metadata, validated.data_files),
            )
        if not inserted:
            return self._same_or_error(state, validated.digest, len(validated.data_files))
        logger.info(
            "prepared checkpoint %d of job %s: %d records in %d files",
            checkpoint_id,
            self.job_id,
            validated.records,
            len(validated.data_files),
        )
        self._fault("after-prepare", checkpoint_id)
        return state

    def _claim(self, table: Table) -> Table:
        """Make the table record this committer's state database before anything is staged
        for it (one catalog commit in the table's life); refuse when it records another."""
        with state_errors(self._store, "nothing was staged"):
            if records_state(self._table_name, table.metadata.properties, self._store.engine):
                return table
        policy = self._retry_policy or RetryPolicy.from_properties(table.metadata.properties)

        def claim(number: int) -> Table:
            fresh = table if number == 0 else self.load_table()
            if number > 0 and records_state(self._table_name, fresh.metadata.properties, self._store.engine):
                return fresh  # another committer of this state database claimed it meanwhile
            with fresh.transaction() as tx:  # asserts nothing but the table's uuid
                tx.set_properties(state_properties(self._store.engine))
            return fresh

        table = run_with_retries(policy, claim, checkpoint_id=None, sleep=self._sleep).value
        logger.info("table %s now records its state database (%s)", self._table_name, STATE_ID_PROPERTY)
        return table

    def _same_or_error(self, existing: CheckpointState, digest: str, files: int) -> CheckpointState:
        if existing.files_digest == digest:
            logger.info("checkpoint %d of job %s is already %s", existing.checkpoint_id, self.job_id, existing.status)
            return existing
        raise CheckpointReusedError(
            self.job_id,
            existing.checkpoint_id,
            self._table_name,
            status=existing.status,
            snapshot_id=existing.snapshot_id,
            staged=existing.files,
            offered=files,
        )

    def _refuse_reused_checkpoint(self, table: Table, checkpoint_id: int, paths: set[str]) -> None:
        """A (job, checkpoint) already in the ancestry with other files means the job's
        checkpoint counter went back: committing would silently drop the new data."""
        landed = ancestry.find_checkpoint(table.metadata, self.job_id, checkpoint_id, self.branch)
        if landed is None:
            return
        added = {
            entry.data_file.file_path
            for manifest in landed.manifests(table.io)
            for entry in manifest.fetch_manifest_entry(table.io)
            if entry.snapshot_id == landed.snapshot_id
        }
        if added != paths:
            raise CheckpointReusedError(
                self.job_id, checkpoint_id, self._table_name, status="committed", snapshot_id=landed.snapshot_id
            )

    # -- phase 2 -----------------------------------------------------------------------

    def commit(self, checkpoint_id: int) -> CommitResult:
        """Commit every prepared checkpoint of this job up to ``checkpoint_id``, in order.

        Returns:
            The result for ``checkpoint_id``; ``already-committed`` when it was committed
            before this call (even if its snapshot has been expired since).

        Raises:
            CheckpointNotFoundError: the checkpoint was never prepared nor committed.
            CheckpointRolledBackError: a rollback removed it (see :meth:`recommit`).
            CheckpointOutOfOrderError: never prepared, and at or below the job's highest
                committed checkpoint.
            CommitConflictError: concurrent commits won until the retry policy gave up.
            CommitStateUnknownError: an attempt failed without proof that it did not land
                and the ancestry did not show it; ``recover()`` resolves it.
            ValidationError: a staged data file is missing from storage.
        """
        checked_checkpoint_id(checkpoint_id)
        outcome: CommitResult | None = None
        for state in self._store.list(self._table_name, job_id=self.job_id, status=PREPARED, up_to=checkpoint_id):
            result = self._commit_prepared(state)
            if state.checkpoint_id == checkpoint_id:
                outcome = result
        target = self._store.get(self.job_id, self._table_name, checkpoint_id)
        if outcome is not None and outcome.status != "rolled-back":
            return outcome
        table = self.load_table()
        decision = self.decide(checkpoint_id, table=table)
        self.refuse(checkpoint_id, decision)
        if decision.action is Action.ALREADY_IN:
            logger.info("checkpoint %d of job %s was already committed", checkpoint_id, self.job_id)
            if target is None:
                return self._committed_without_state(checkpoint_id, decision.snapshot_id, table)
            if target.status == ROLLED_BACK:
                return self._record_landed_recommit(target, decision.snapshot_id)
            return result_from_state(target, "already-committed", snapshot_id=decision.snapshot_id)
        if decision.action in (Action.EMPTY, Action.ABANDONED) and target is not None:
            return result_from_state(target, "empty" if decision.action is Action.EMPTY else "abandoned")
        raise CheckpointNotFoundError(self.job_id, checkpoint_id, self._table_name)

    def decide(self, checkpoint_id: int, *, recommit: bool = False, table: Table | None = None) -> Decision:
        """What the committer would do with ``checkpoint_id`` now (see
        :func:`icecommit.core.decision.decide`); reads the state and the table, changes nothing.

        ``table``: the table as the caller has just loaded it (saves a second load on a
        path that needs it anyway); None loads it.
        """
        state = self._store.get(self.job_id, self._table_name, checkpoint_id)
        current = table if table is not None else self.load_table()
        return self._decide(checkpoint_id, state, current, recommit=recommit, query_id=self._query_id)

    def _decide(
        self,
        checkpoint_id: int,
        state: CheckpointState | None,
        table: Table,
        *,
        recommit: bool = False,
        data_files: Sequence[DataFile] | None = None,
        query_id: str | None = None,
    ) -> Decision:
        records_state(self._table_name, table.metadata.properties, self._store.engine)
        ancestry.require_branch(table.metadata, self.branch)
        view = ancestry.table_view(table.metadata, self.job_id, checkpoint_id, self.branch)
        row = StateView()
        if state is not None:
            row = StateView(
                state.status,  # type: ignore[arg-type]
                state.snapshot_id,
                has_files=state.manifest_path is not None,
                query_id=state.query_id,
            )
        if _files_decide(checkpoint_id, state, view):
            assert state is not None
            paths = [f.file_path for f in data_files] if data_files is not None else self._staged_paths(state, table)
            if paths:
                view = dataclasses.replace(view, files_live=_all_live(table, paths, self.branch))
        return decide(checkpoint_id, row, view, recommit=recommit, query_id=query_id)

    def _staged_paths(self, state: CheckpointState, table: Table) -> list[str]:
        """The data files a checkpoint staged ([] when its staged manifest is gone or
        unreadable: then its files cannot tell, and the decision does without them)."""
        if state.manifest_path is None or not table.io.new_input(state.manifest_path).exists():
            return []
        try:
            return [f.file_path for f in self._read_staged(state, table)]
        except StagedManifestError:
            return []

    def _read_staged(self, state: CheckpointState, table: Table) -> list[DataFile]:
        """The data files of a prepared checkpoint's staged manifest.

        Raises:
            StagedManifestError: the manifest is gone or cannot be read (names it, and how
                to abandon the checkpoint).
        """
        assert state.manifest_path is not None
        try:
            return read_staged_manifest(table.io, state.manifest_path, table.spec().spec_id)
        except FileNotFoundError as e:
            raise StagedManifestError(
                self.job_id, state.checkpoint_id, self._table_name, state.manifest_path, "is missing from storage"
            ) from e
        except OSError:
            raise  # storage that failed to answer is not a damaged manifest: the caller retries
        except Exception as e:  # Avro decoding raises many kinds on a truncated or foreign file
            raise StagedManifestError(
                self.job_id,
                state.checkpoint_id,
                self._table_name,
                state.manifest_path,
                f"cannot be read ({type(e).__name__}: {e})",
            ) from e

    def refuse(self, checkpoint_id: int, decision: Decision) -> None:
        """Raise the error of a decision that refuses the checkpoint (rolled back, out of
        order, another streaming query's batch); nothing for any other decision."""
        if decision.action is Action.OTHER_QUERY:
            state = self._store.get(self.job_id, self._table_name, checkpoint_id)
            raise StreamingQueryMismatchError(
                self.job_id,
                checkpoint_id,
                self._table_name,
                self._query_id or "",
                (state.query_id if state is not None else None) or "",
            )
        if decision.action is Action.ROLLED_BACK:
            raise CheckpointRolledBackError(self.job_id, checkpoint_id, decision.snapshot_id, self._table_name)
        if decision.action is Action.OUT_OF_ORDER:
            highest = ancestry.highest_committed_checkpoint(self.load_table().metadata, self.job_id, self.branch)
            raise CheckpointOutOfOrderError(self.job_id, checkpoint_id, highest or 0, self._table_name)

    def recommit(self, checkpoint_id: int) -> CommitResult:
        """Commit again a checkpoint that a rollback removed from the branch.

        Uses the checkpoint's staged manifest; its data files must still exist.

        Raises:
            CheckpointNotFoundError: the checkpoint was never prepared here.
            ValidationError: it is not rolled back (still in the table, or never
                committed), or its staged files are gone.
        """
        state = self._store.get(self.job_id, self._table_name, checkpoint_id)
        if state is None:
            raise CheckpointNotFoundError(self.job_id, checkpoint_id, self._table_name)
        self._latest = None  # decide on the table as it is now, never on a cached copy
        decision = self._decide(checkpoint_id, state, self.load_table(), recommit=True)
        if decision.action is Action.ALREADY_IN and state.status == ROLLED_BACK:
            return self._record_landed_recommit(state, decision.snapshot_id)
        if decision.action is not Action.RECOMMIT:
            raise ValidationError(
                f"only a checkpoint that a rollback removed from the branch can be re-committed; this one is "
                f"{decision.action.value} ({decision.reason})",
                checkpoint_id=checkpoint_id,
            )
        self._store.clear_committed_metrics(self.job_id, self._table_name, checkpoint_id)
        logger.warning("re-committing checkpoint %d of job %s after a rollback", checkpoint_id, self.job_id)
        return self._commit_prepared(state, recommit=True)

    def abandon(self, checkpoint_id: int, *, reason: str, by: str | None = None) -> CheckpointState:
        """Give up a prepared (or rolled-back) checkpoint so the job can go on: it is
        recorded as abandoned with the reason, who and when; its replays become recorded
        no-ops, its staged files become orphans for the sweeper, and reconciliation reports
        it as a problem until it is acknowledged (:meth:`acknowledge`).

        A compare-and-set on the state row: it cannot overwrite a commit recorded meanwhile,
        and if a committer lands the checkpoint at that moment the commit wins.

        Raises:
            CheckpointNotFoundError: no such checkpoint was prepared here.
            CheckpointCommittedError: the table holds it (or it was recorded committed).
            ValueError: an empty reason.
        """
        if not isinstance(reason, str) or not reason.strip():
            raise InvalidArgumentError(
                "reason", reason, "a non-empty text (it is kept with the checkpoint and shown in reports)"
            )
        state = self._store.get(self.job_id, self._table_name, checkpoint_id)
        if state is None:
            raise CheckpointNotFoundError(self.job_id, checkpoint_id, self._table_name)
        if state.status == ABANDONED:
            return state
        decision = self._decide(checkpoint_id, state, self.load_table())
        if decision.action in (Action.ALREADY_IN, Action.EMPTY):
            raise CheckpointCommittedError(self.job_id, checkpoint_id, decision.snapshot_id, self._table_name)
        if decision.action is Action.ROLLED_BACK and state.status == COMMITTED:
            # another tool's rollback, not recorded yet: record it, as a commit attempt would
            self._recorder.rolled_back(checkpoint_id)
        who = by or _current_user()
        if not self._store.abandon(self.job_id, self._table_name, checkpoint_id, reason=reason, by=who):
            raise CheckpointCommittedError(self.job_id, checkpoint_id, None, self._table_name)
        landed = ancestry.find_checkpoint(self.load_table().metadata, self.job_id, checkpoint_id, self.branch)
        if landed is not None:  # a committer won the race: the table holds it
            self._store.reopen_abandoned(self.job_id, self._table_name, checkpoint_id)
            raise CheckpointCommittedError(self.job_id, checkpoint_id, landed.snapshot_id, self._table_name)
        logger.warning("checkpoint %d of job %s abandoned by %s: %s", checkpoint_id, self.job_id, who, reason.strip())
        abandoned = self._store.get(self.job_id, self._table_name, checkpoint_id)
        assert abandoned is not None
        return abandoned

    def acknowledge(self, checkpoint_id: int, *, by: str | None = None) -> CheckpointState:
        """Acknowledge an abandoned checkpoint: reconciliation shows it as information from
        then on, instead of a problem.

        Raises:
            CheckpointNotFoundError: no such abandoned checkpoint.
        """
        if not self._store.acknowledge(self.job_id, self._table_name, checkpoint_id, by=by or _current_user()):
            raise CheckpointNotFoundError(self.job_id, checkpoint_id, self._table_name)
        acknowledged = self._store.get(self.job_id, self._table_name, checkpoint_id)
        assert acknowledged is not None
        return acknowledged

    def recover(self) -> list[CommitResult]:
        """Commit, in order, every checkpoint of this job that was prepared and not committed.

        A prepared checkpoint that a rollback removed (it had landed before the job died)
        is recorded as rolled back, not committed again. Never deletes a file; running it
        twice gives the same table.
        """
        pending = self._store.list(self._table_name, job_id=self.job_id, status=PREPARED)
        if pending:
            logger.info("recovering %d prepared checkpoint(s) of job %s", len(pending), self.job_id)
        return [self._commit_prepared(state) for state in pending]

    def take_over(self, old_job_id: str) -> list[CommitResult]:
        """Commit the prepared-but-uncommitted checkpoints of another job, explicitly.

        They are committed under the old job id (so the old job, if it ever restarts,
        still finds them in the ancestry and never commits them twice); each snapshot
        also records ``icecommit.recovered-by`` with this job's id.
        """
        old = GlobalCommitter(
            self._catalog,
            self._table_name,
            job_id=old_job_id,
            branch=self.branch,
            retry_policy=self._retry_policy,
            store=self._store,
            sleep=self._sleep,
            fault=self._fault,
            completeness=self._completeness,
        )
        old._recovered_by = self.job_id
        logger.info("job %s takes over the prepared checkpoints of job %s", self.job_id, old_job_id)
        return old.recover()

    def publish_complete_partitions(self) -> list[PartitionStatus]:
        """Publish the time partitions the writers' watermarks have closed (the committer
        does this after every commit; a scheduler may call it any time). Returns the
        partitions published by this call."""
        return self._completion.publish(self.load_table())

    def partition_status(self) -> list[PartitionStatus]:
        """Every time partition of the table published complete, with its late records."""
        return self._completion.store.statuses(self._table_name)

    def last_committed_checkpoint(self) -> int | None:
        """This job's highest committed checkpoint id: the table property every commit
        sets (it survives snapshot expiry), or the snapshot summaries of the branch."""
        return ancestry.highest_committed_checkpoint(self.load_table().metadata, self.job_id, self.branch)

    def is_committed(self, checkpoint_id: int) -> bool:
        """True when the table holds (job id, checkpoint id), even if its snapshot was
        expired since (its rows live on in later snapshots)."""
        return self.decide(checkpoint_id).action in (Action.ALREADY_IN, Action.EMPTY)

    # -- internals ---------------------------------------------------------------------

    def _committed_without_state(self, checkpoint_id: int, snapshot_id: int | None, table: Table) -> CommitResult:
        """A checkpoint the branch's ancestry in ``table`` (the table the decision read, so
        an expiry since cannot take the snapshot away) holds and this state database has no
        row of: its counts come from the snapshot's summary (0 where it does not say)."""
        snapshot = table.metadata.snapshot_by_id(snapshot_id) if snapshot_id is not None else None
        assert snapshot is not None and snapshot.summary is not None  # the decision found it by its summary
        summary = snapshot.summary
        records = int(summary.get(ancestry.RECORDS) or 0)
        files = int(summary.get(ancestry.FILES) or 0)
        size = int(summary.get(ancestry.BYTES) or 0)
        return CommitResult(
            job_id=self.job_id,
            table=self._table_name,
            checkpoint_id=checkpoint_id,
            status="already-committed",
            snapshot_id=snapshot.snapshot_id,
            records=records,
            files=files,
            bytes=size,
            attempts=0,
            retries=0,
        )

    def _record_landed_recommit(self, state: CheckpointState, snapshot_id: int | None) -> CommitResult:
        """A checkpoint recorded as rolled back that the table holds again (the decision
        found it in the branch's ancestry, or its files live after its snapshot expired): a
        re-commit landed and its process died before recording it. Recorded as committed
        now, with its committed-stage metrics; nothing is appended."""
        counters = PublishCounters(created=state.files, skipped=state.files)
        recorded = self._recorder.committed(
            state.checkpoint_id, snapshot_id, attempts=0, retries=0, counters=counters, recommit=True
        )
        logger.warning(
            "checkpoint %d of job %s is in the table again (snapshot %s), re-committed by a process that died "
            "before recording it: recorded as committed",
            state.checkpoint_id,
            self.job_id,
            snapshot_id,
        )
        return result_from_state(recorded, "already-committed", snapshot_id=snapshot_id)

    def _commit_prepared(self, state: CheckpointState, *, recommit: bool = False) -> CommitResult:
        checkpoint_id = state.checkpoint_id
        table = self._latest or self.load_table()
        first = self._decide(checkpoint_id, state, table, recommit=recommit)
        if first.action not in (Action.COMMIT, Action.RECOMMIT) and self._latest is not None:
            # a cached copy is a fine base for a compare-and-swap, not for a decision that
            # skips or refuses: decide again on the table as it is now
            self._latest = None
            table = self.load_table()
            first = self._decide(checkpoint_id, state, table, recommit=recommit)
        if first.action is Action.ROLLED_BACK:
            self._recorder.rolled_back(checkpoint_id)
            logger.warning(
                "checkpoint %d of job %s was prepared and had landed, but %s: recorded as rolled back, "
                "not committed again",
                checkpoint_id,
                self.job_id,
                first.reason,
            )
            return result_from_state(state, "rolled-back", snapshot_id=first.snapshot_id)
        if state.manifest_path is None:
            self._recorder.empty(checkpoint_id)
            logger.info("checkpoint %d of job %s is empty; no snapshot", checkpoint_id, self.job_id)
            if state.watermark_us is not None:  # a routed checkpoint's event time reached this table too
                self._completion.publish(table)
            return result_from_state(state, "empty")
        data_files = self._read_staged(state, table)
        if first.action in (Action.COMMIT, Action.RECOMMIT):  # one that landed is recorded as it is
            self._require_known_spec(data_files, table, checkpoint_id)
        policy = self._retry_policy or RetryPolicy.from_properties(table.metadata.properties)
        summary = self._summary(state)
        appends = 0  # attempts sent as appends (a retry may find the checkpoint already in)
        retries = 0
        base = table

        def attempt(number: int) -> tuple[bool, int | None]:
            """One attempt: decide on the table as it is, then append once or find it in."""
            nonlocal appends, retries
            retries = number
            table = base if number == 0 else self.load_table()
            decision = self._decide(checkpoint_id, state, table, recommit=recommit, data_files=data_files)
            if decision.action is Action.ALREADY_IN:
                return True, decision.snapshot_id or self._snapshot_that_added(table, data_files)
            if decision.action not in (Action.COMMIT, Action.RECOMMIT):
                raise CheckpointRolledBackError(self.job_id, checkpoint_id, decision.snapshot_id, self._table_name)
            self._require_known_spec(data_files, table, checkpoint_id)  # on every fresh table
            self._require_readable(data_files, table, checkpoint_id)
            self._require_present(data_files, table, checkpoint_id)
            appends += 1
            self._fault("before-commit-attempt", checkpoint_id)
            snapshot_id, self._latest = append_once(
                self._catalog,
                table,
                data_files,
                summary=summary,
                properties=self._properties_with(table, checkpoint_id),
                branch=self.branch,
                job_id=self.job_id,
                checkpoint_id=checkpoint_id,
            )
            return False, snapshot_id

        started = time.monotonic()
        try:
            landed_before, snapshot_id = run_with_retries(
                policy, attempt, checkpoint_id=checkpoint_id, sleep=self._sleep
            ).value
        except (ValidationError, CheckpointRolledBackError):
            self._latest = None
            raise
        except Exception as e:
            self._latest = None
            if is_commit_conflict(e):
                raise CommitConflictError(self._table_name, checkpoint_id, appends, time.monotonic() - started) from e
            snapshot_id = self._resolve_unknown(checkpoint_id, e)
            landed_before = False
        attempts = appends
        self._fault("after-commit", checkpoint_id)
        files = len(data_files)
        counters = PublishCounters(
            created=state.files,
            committed=0 if landed_before else files,
            skipped=files if landed_before else 0,
        )
        with state_errors(
            self._store,
            f"checkpoint {checkpoint_id} is in the table (snapshot {snapshot_id}) but not recorded: "
            "recover() records it, and nothing is committed twice",
        ):
            recorded = self._recorder.committed(
                checkpoint_id, snapshot_id, attempts=attempts, retries=retries, counters=counters, recommit=recommit
            )
        if recorded.status == ROLLED_BACK:
            logger.warning(
                "checkpoint %d of job %s landed, but a rollback removed it before its state was recorded; "
                "it stays rolled back",
                checkpoint_id,
                self.job_id,
            )
            return result_from_state(recorded, "rolled-back", snapshot_id=snapshot_id)
        self._completion.publish(self._latest or table)
        status: CommitStatus = "already-committed" if landed_before else "committed"
        logger.info(
            "checkpoint %d of job %s %s as snapshot %s (%d attempts, %d retries; files "
            "created %d, committed %d, skipped %d, missing %d)",
            checkpoint_id,
            self.job_id,
            status,
            snapshot_id,
            attempts,
            retries,
            counters.created,
            counters.committed,
            counters.skipped,
            counters.missing,
        )
        return result_from_state(state, status, snapshot_id=snapshot_id, attempts=attempts, retries=retries)

    def declare_source(self, checkpoint_id: int, counts: Mapping[datetime | None, int]) -> None:
        """Record source counts the caller knows (a Kafka offset range, a file's line count)
        per one-minute event-time window; reconciliation then checks the written rows
        against them instead of against what the tasks received."""
        samples = [
            MetricSample(SOURCE, minute_start(window) if window is not None else None, int(records))
            for window, records in counts.items()
        ]
        self._store.record_samples(self.job_id, self._table_name, checkpoint_id, samples)

    def _snapshot_that_added(self, table: Table, data_files: list[DataFile]) -> int | None:
        """The snapshot that added a checkpoint's files, read from the branch head's manifests
        (their entries keep it after the snapshot itself was expired); None when no live
        entry holds one of the files."""
        paths = {f.file_path for f in data_files}
        current = ancestry.branch_head(table.metadata, self.branch)
        if current is None:
            return None
        for manifest in current.manifests(table.io):
            for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
                if entry.data_file.file_path in paths and entry.snapshot_id is not None:
                    return entry.snapshot_id
        return None

    def _resolve_unknown(self, checkpoint_id: int, cause: Exception) -> int:
        """After an error that does not prove failure, ask the ancestry. Deletes nothing."""
        logger.warning("commit of checkpoint %d: outcome unknown (%r); checking ancestry", checkpoint_id, cause)
        self._store.record_unknown_outcome(self.job_id, self._table_name, checkpoint_id)
        try:
            metadata = self.load_table().metadata
        except Exception as e:
            raise CommitStateUnknownError(self._table_name, checkpoint_id, cause) from e
        found = ancestry.find_checkpoint(metadata, self.job_id, checkpoint_id, self.branch)
        if found is None:
            raise CommitStateUnknownError(self._table_name, checkpoint_id, cause) from cause
        return found.snapshot_id

    def _require_known_spec(self, data_files: list[DataFile], table: Table, checkpoint_id: int) -> None:
        """Refuse files whose partition spec the table no longer has (removed as unused by
        another engine's maintenance); files of an older spec that it still has commit under
        that spec (:class:`~icecommit.committer.producer.SpecPreservingAppend`)."""
        specs = table.metadata.specs()
        gone = {f.spec_id for f in data_files} - set(specs)
        if gone:
            raise PartitionSpecChangedError(
                self.job_id, checkpoint_id, self._table_name, min(gone), table.spec().spec_id
            )

    def _require_readable(self, data_files: list[DataFile], table: Table, checkpoint_id: int) -> None:
        """Refuse files that lack a required column of the table's current schema (one
        added as required after they were written): no reader could read them."""
        required = [(f.name, _field_ids(f)) for f in table.schema().fields if f.required]
        for data_file in data_files:
            present = set(data_file.value_counts or {}) | set(data_file.column_sizes or {})
            if not present:
                continue  # a file without column statistics cannot tell
            for name, ids in required:  # a nested column is there when one of its leaves is
                if not ids & present:
                    raise SchemaChangedError(self.job_id, checkpoint_id, self._table_name, name)

    def _require_present(self, data_files: list[DataFile], table: Table, checkpoint_id: int) -> None:
        bad = size_mismatches([(f.file_path, f.file_size_in_bytes) for f in data_files], table.io)
        if bad:
            path, size = bad[0]
            self._store.record_missing(self.job_id, self._table_name, checkpoint_id, len(bad))
            logger.error(
                "ALERT checkpoint %d of job %s: %d staged data file(s) missing or changed, e.g. %s",
                checkpoint_id,
                self.job_id,
                len(bad),
                path,
            )
            expected = next(f.file_size_in_bytes for f in data_files if f.file_path == path)
            raise DataFileMissingError(
                path,
                checkpoint_id=checkpoint_id,
                expected=expected,
                actual=size,
                bad=len(bad),
                total=len(data_files),
                table=self._table_name,
                job_id=self.job_id,
            )

    def _summary(self, state: CheckpointState) -> dict[str, str]:
        store = self._completion.store
        return ancestry.snapshot_summary(
            job_id=self.job_id,
            checkpoint_id=state.checkpoint_id,
            records=state.records,
            files=state.files,
            bytes_=state.bytes,
            max_event_time_us=state.max_event_time_us,
            watermark_us=store.watermark_through(self.job_id, self._table_name, state.checkpoint_id),
            late_records=store.late_records_in(self.job_id, self._table_name, state.checkpoint_id),
            future_records=state.future_records,
            query_id=state.query_id,
            recovered_by=self._recovered_by,
        )

    def _properties_with(self, table: Table, checkpoint_id: int) -> dict[str, str]:
        """The table properties set in the same catalog commit as the checkpoint's append:
        the job's high-water mark when the checkpoint raises it, and the state database's
        identity on a table prepared before tables recorded it."""
        properties = {}
        highest = ancestry.highest_committed_checkpoint(table.metadata, self.job_id, self.branch)
        if highest is None or checkpoint_id > highest:
            properties[ancestry.job_checkpoint_property(self.job_id)] = str(checkpoint_id)
        if STATE_ID_PROPERTY not in table.metadata.properties:
            properties.update(state_properties(self._store.engine))
        return properties


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


def _all_live(table: Table, paths: Sequence[str], branch: str) -> bool:
    """True when every path is in the table: a live data file of the branch's head, or
    rewritten or removed on purpose by a retained snapshot of the branch (compaction, an
    overwrite, a delete: the checkpoint was in the table and something after it changed its
    rows). Paths are compared by storage key, whatever their spelling. False when some file
    left the table with no retained snapshot to say why (a rollback, then expiry)."""
    current = ancestry.branch_head(table.metadata, branch)
    if current is None:
        return False
    live = {
        path_key(entry.data_file.file_path): entry.data_file.record_count
        for manifest in current.manifests(table.io)
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True)
    }
    wanted = [(path_key(p), 1) for p in paths]
    if all(path in live for path, _ in wanted):
        return True
    return trace_fates(wanted, live, removals_of(table, branch)).untraceable == 0


def _field_ids(field: NestedField) -> set[int]:
    """The field's id and the ids of everything nested in it."""
    ids = {field.field_id}
    kind = field.field_type
    if isinstance(kind, StructType):
        for child in kind.fields:
            ids |= _field_ids(child)
    elif isinstance(kind, ListType):
        ids |= _field_ids(kind.element_field)
    elif isinstance(kind, MapType):
        ids |= _field_ids(kind.key_field) | _field_ids(kind.value_field)
    return ids


def _current_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no login name in a container
        return "unknown"
