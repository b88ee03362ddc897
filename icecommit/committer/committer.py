"""The global committer: one per job, on the driver.

Two phases. ``prepare`` validates a checkpoint's write results and stages them durably (a
manifest of the data files plus a ``prepared`` row in the checkpoint table). ``commit``
appends every prepared checkpoint of the job, in order, as one snapshot each, through the
one commit protocol (:mod:`icecommit.committer.protocol`). Each checkpoint is decided
about once (:mod:`icecommit.committer.planning`); each commit attempt then checks only
whether its (job id, checkpoint id) key appeared since, so a checkpoint is never committed
twice, whatever crashed, retried or lost its response before.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime

import pyarrow as pa
from pyiceberg.catalog import Catalog
from pyiceberg.manifest import DataFile
from pyiceberg.table import Table

from icecommit.catalog.loading import load_table
from icecommit.committer import fate, holding, modes, protocol
from icecommit.committer.checkpoint_commit import (
    CommitCheckpoint,
    FaultHook,
    checkpoint_summary,
    claim_table,
)
from icecommit.committer.checkpoint_samples import source_samples
from icecommit.committer.completion import CompletionPublisher, PartitionCompleteness
from icecommit.committer.features import require_supported
from icecommit.committer.holding import Gate
from icecommit.committer.observed import observed, observed_recovery, observed_refusal
from icecommit.committer.planning import CheckpointPlan, plan_checkpoint, refuse_decision, refuse_plan
from icecommit.committer.recording import CheckpointRecorder
from icecommit.committer.results import CommitResult, result_from_state, result_from_summary
from icecommit.committer.retry import RetryPolicy
from icecommit.committer.staging import (
    read_staged,
    replays_lost,
    same_files_or_error,
    stage_checkpoint,
    staged_files,
    staged_paths,
    waits_behind,
)
from icecommit.committer.validation import refuse_reused_checkpoint, validate_results
from icecommit.committer.validators import snapshot_that_added
from icecommit.core import ancestry
from icecommit.core.ancestry import MAIN_BRANCH
from icecommit.core.datafiles import WriteResult
from icecommit.core.decision import Action, Decision
from icecommit.core.errors import (
    CheckpointNotFoundError,
    InvalidArgumentError,
    ValidationError,
)
from icecommit.core.identifiers import checked_checkpoint_id, checked_job_id, table_name
from icecommit.core.key_lookup import KeyLookup
from icecommit.core.tableprops import check_table_properties
from icecommit.state.checkpoints import PREPARED, ROLLED_BACK, CheckpointState, CheckpointStore
from icecommit.state.database import state_engine, state_errors, state_uri
from icecommit.state.identity import records_state
from icecommit.state.partitions import PartitionStatus, PartitionStatusStore

logger = logging.getLogger(__name__)

FAULT_POINTS = ("after-stage", "after-prepare", "before-commit-attempt", "after-commit")


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
        store: the checkpoint table; defaults to the state database the catalog names
            (see :func:`icecommit.state.state_uri`).
        sleep: used between retries; injected in tests.
        fault: called at each of :data:`FAULT_POINTS`; injected in tests.
        completeness: when time partitions are published complete (after each commit)
            and whom to tell; see :class:`PartitionCompleteness`.
        query_id: the Spark streaming query whose batches this committer commits (the
            streaming sink passes ``query.id``); recorded with each checkpoint, and a batch
            id the job committed under another query is refused
            (:class:`~icecommit.errors.StreamingQueryMismatchError`).
        key_lookup: where an upsert's keys are looked up in the data files (default: here;
            ``ic.write`` passes :class:`~icecommit.writers.spark_key_lookup.SparkKeyLookup`).
    """

    def __init__(
        self,
        catalog: Catalog,
        table: Table | str,
        *,
        job_id: str,
        branch: str = MAIN_BRANCH,
        retry_policy: RetryPolicy | None = None,
        store: CheckpointStore | None = None,
        sleep: Callable[[float], None] = time.sleep,
        fault: FaultHook | None = None,
        completeness: PartitionCompleteness | None = None,
        query_id: str | None = None,
        key_lookup: KeyLookup | None = None,
        gate: Gate | None = None,
    ) -> None:
        checked_job_id(job_id)
        self._key_lookup, self._gate = key_lookup, gate
        if not isinstance(branch, str) or not branch:
            raise InvalidArgumentError("branch", branch, f"the name of a branch of the table (default {MAIN_BRANCH})")
        self._query_id = query_id
        self._catalog = catalog
        self._table_name = table_name(table)
        self.job_id = job_id
        self.branch = branch
        self._retry_policy = retry_policy
        self._store = store or CheckpointStore(state_engine(state_uri(catalog)))
        self._completeness = completeness or PartitionCompleteness()
        partitions = PartitionStatusStore(self._store.engine, clock=self._store.clock)
        self._completion = CompletionPublisher(partitions, self._table_name, job_id, self._completeness)
        self._recorder = CheckpointRecorder(
            self._store, self._table_name, job_id, branch, lambda: self.load_table().metadata
        )
        self._sleep = sleep
        self._fault = fault or _no_fault
        self._recovered_by: str | None = None
        # The table as this committer's last commit left it: a base for the next
        # compare-and-swap (a stale one loses and is retried), never for a skip.
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

    # -- the decision ------------------------------------------------------------------

    def plan(
        self, checkpoint_id: int, *, recommit: bool = False, table: Table | None = None, query_id: str | None = None
    ) -> CheckpointPlan:
        """Decide once what to do with ``checkpoint_id`` (see
        :func:`icecommit.core.decision.decide`): reads its state row and the table (None:
        load it), changes nothing. Prepare and commit take the plan and decide again only
        when the branch head moved since."""
        state = self._store.get(self.job_id, self._table_name, checkpoint_id)
        return self._plan_on(
            checkpoint_id, table if table is not None else self.load_table(), state, recommit, query_id
        )

    def decide(self, checkpoint_id: int, *, recommit: bool = False, table: Table | None = None) -> Decision:
        """What the committer would do with ``checkpoint_id`` now; changes nothing."""
        return self.plan(checkpoint_id, recommit=recommit, table=table, query_id=self._query_id).decision

    def _plan_on(
        self,
        checkpoint_id: int,
        table: Table,
        state: CheckpointState | None,
        recommit: bool = False,
        query_id: str | None = None,
    ) -> CheckpointPlan:
        with state_errors(self._store, "nothing was decided or changed"):
            records_state(self._table_name, table.metadata.properties, self._store.engine)
        ancestry.require_branch(table.metadata, self.branch)
        return plan_checkpoint(
            checkpoint_id, state, table, job_id=self.job_id, branch=self.branch,
            staged_paths=lambda s: staged_paths(s, table), recommit=recommit, query_id=query_id,
        )  # fmt: skip

    def refuse(self, checkpoint_id: int, decision: Decision | CheckpointPlan) -> None:
        """Raise the error of a decision that refuses the checkpoint (rolled back, out of
        order, another streaming query's batch); nothing for any other decision."""
        if isinstance(decision, CheckpointPlan):
            refuse_plan(decision, job_id=self.job_id, table_name=self._table_name, query_id=self._query_id)
            return
        state = functools.partial(self._store.get, self.job_id, self._table_name, checkpoint_id)
        refuse_decision(checkpoint_id, decision, state=state, highest=self.last_committed_checkpoint,
                        job_id=self.job_id, table_name=self._table_name, query_id=self._query_id)  # fmt: skip

    # -- phase 1 -----------------------------------------------------------------------

    def validate(self, checkpoint_id: int, results: Sequence[WriteResult], *, table: Table | None = None) -> None:
        """Run prepare's validation alone (nothing staged, nothing recorded), on ``table``
        (None: load it). Lets a caller that commits one checkpoint into several tables
        refuse bad input before any of them is prepared.

        Raises:
            SchemaMismatchError, ValidationError: as :meth:`prepare`.
        """
        metadata = (table if table is not None else self.load_table()).metadata
        check_table_properties(metadata, write_modes=tuple(modes.MODES))
        with state_errors(self._store, "nothing was validated"):
            records_state(self._table_name, metadata.properties, self._store.engine)  # before any table is prepared
        validate_results(
            results, metadata=metadata, job_id=self.job_id, checkpoint_id=checkpoint_id, table_name=self._table_name
        )

    def prepare(
        self,
        checkpoint_id: int,
        results: Sequence[WriteResult],
        *,
        routed_with: Sequence[WriteResult] = (),
        plan: CheckpointPlan | None = None,
        mode: str | None = None,
        keys: pa.Table | None = None,
    ) -> CheckpointState:
        """Validate a checkpoint's write results and stage them durably (the same files
        again: a no-op). ``plan``: its plan (:meth:`plan`), reused while the head holds.
        ``routed_with``: its results for the other tables its rows were routed to (this
        table's watermark moves with the checkpoint's event time, so a table that rarely
        gets rows does not hold its partitions back). ``mode``: ``append``,
        ``overwrite-partitions`` or ``upsert`` (None: the table's ``icecommit.write-mode``,
        else ``append``); an upsert's ``keys``: the key columns of every row it writes or
        deletes, staged with it.

        Raises:
            SchemaMismatchError: a task saw nulls in a required column.
            ValidationError: counts, files or ids do not hold, or the checkpoint was
                already prepared with different files.
        """
        prepared = self.prepare_planned(
            checkpoint_id, results, routed_with=routed_with, plan=plan, mode=mode, keys=keys
        )
        assert prepared.state is not None  # a prepared plan always has its row
        return prepared.state

    def prepare_planned(
        self,
        checkpoint_id: int,
        results: Sequence[WriteResult],
        *,
        routed_with: Sequence[WriteResult] = (),
        plan: CheckpointPlan | None = None,
        table: Table | None = None,
        mode: str | None = None,
        keys: pa.Table | None = None,
        held_along: bool = False,
    ) -> CheckpointPlan:
        """:meth:`prepare`, returning the plan that :meth:`commit` takes (its state is
        the checkpoint's row). ``table``: the table as the caller has just loaded it
        (None: load it); ``held_along``: another table of this routed checkpoint fails a
        check, so this one waits on its audit branch too (:meth:`checks_fail`)."""
        checked_checkpoint_id(checkpoint_id)
        loaded = table if table is not None else self.load_table()
        check_table_properties(
            loaded.metadata, write_modes=tuple(modes.MODES)
        )  # a property it cannot use fails here, before anything
        write_mode = modes.named(mode, loaded.metadata.properties)
        table = claim_table(loaded, self._store, self._retry_policy, load=self.load_table, sleep=self._sleep)
        validated = validate_results(results, metadata=table.metadata, job_id=self.job_id,
                                     checkpoint_id=checkpoint_id, table_name=self._table_name)  # fmt: skip
        if plan is None or plan.checkpoint_id != checkpoint_id or not plan.is_current(table, self.branch):
            plan = self.plan(checkpoint_id, table=table)
        if plan.state is not None and not (lost := replays_lost(plan, validated.digest)):  # lost: prepared again
            same_files_or_error(plan.state, validated.digest, len(validated.data_files), write_mode)
            return dataclasses.replace(plan, staged=None)  # a plan reused: its files are checked again
        self.refuse(checkpoint_id, plan)
        if plan.action is Action.ALREADY_IN:
            paths = {f.path for f in validated.data_files}
            refuse_reused_checkpoint(table, self.job_id, checkpoint_id, self.branch, paths, self._table_name)
        gate = holding.decide(self._store, self._gate, job_id=self.job_id, table=table, checkpoint_id=checkpoint_id,
                              files=staged_files(validated, table), received=validated.source_records,
                              live_branch=self.branch, lookup=self._key_lookup, held_along=held_along)  # fmt: skip
        state, inserted = stage_checkpoint(
            self._store,
            table,
            validated,
            results,
            routed_with=routed_with,
            job_id=self.job_id,
            table_name=self._table_name,
            query_id=self._query_id,
            fault=self._fault,
            replacing=plan.state if plan.state is not None and lost else None,
            mode=write_mode,
            keys=keys,
            gate=gate,
        )
        if not inserted:  # another process prepared it meanwhile
            same_files_or_error(state, validated.digest, len(validated.data_files), write_mode)
            return self.plan(checkpoint_id, table=table)
        self._fault("after-prepare", checkpoint_id)
        if plan.action is Action.WRITE:  # its files were found on storage just now: the commit reads no manifest
            return plan.prepared(state, table, staged_files(validated, table))
        return self._plan_on(checkpoint_id, table, state).with_staged(staged_files(validated, table))

    def checks_fail(self, checkpoint_id: int, results: Sequence[WriteResult], table: Table) -> bool:
        """Whether these write results fail one of this committer's checks; changes nothing."""
        return holding.checks_fail(self._store, self._gate, job_id=self.job_id, table=table,
                                   checkpoint_id=checkpoint_id, results=results, live_branch=self.branch,
                                   lookup=self._key_lookup)  # fmt: skip

    # -- phase 2 -----------------------------------------------------------------------

    def commit(self, checkpoint_id: int, *, plan: CheckpointPlan | None = None) -> CommitResult:
        """Commit every prepared checkpoint of this job up to ``checkpoint_id``, in order.

        ``plan``: the checkpoint's plan (from :meth:`plan` or :meth:`prepare_planned`),
        reused instead of deciding again.

        Returns:
            The result for ``checkpoint_id``; ``already-committed`` when it was committed
            before this call (even if its snapshot has been expired since).

        Raises:
            CheckpointNotFoundError: the checkpoint was never prepared nor committed.
            CheckpointRolledBackError: a rollback removed it (see :meth:`recommit`).
            CheckpointOutOfOrderError: never prepared, and at or below the job's highest committed one.
            CommitConflictError: concurrent commits won until the retry policy gave up.
            CommitStateUnknownError: an attempt failed without proof that it did not land
                and the table did not show it; ``recover()`` resolves it.
            DataFileMissingError: a staged data file is missing (or of an earlier one it waits behind).
        """
        checked_checkpoint_id(checkpoint_id)
        outcome: CommitResult | None = None
        committed_any = False
        for state in self._store.list(self._table_name, job_id=self.job_id, status=PREPARED, up_to=checkpoint_id):
            own = plan if plan is not None and plan.checkpoint_id == state.checkpoint_id and plan.state else None
            # after this call committed earlier checkpoints, the table they left is the base
            with waits_behind(state.checkpoint_id, checkpoint_id):  # a lost earlier one is named as such
                result = self._commit_prepared(state, plan=own, base=self._latest if committed_any else None)
            committed_any = True
            if state.checkpoint_id == checkpoint_id:
                outcome = result
        if outcome is not None and outcome.status != "rolled-back":
            return outcome
        target = self._store.get(self.job_id, self._table_name, checkpoint_id)
        # a plan to append that this call did not append is stale (another process did): decide again
        if (
            plan is None
            or committed_any
            or plan.action in (Action.COMMIT, Action.RECOMMIT)
            or plan.checkpoint_id != checkpoint_id
        ):
            plan = self.plan(checkpoint_id, query_id=self._query_id)
        self.refuse(checkpoint_id, plan)
        decision = plan.decision
        if decision.action is Action.ALREADY_IN:
            logger.info("checkpoint %d of job %s was already committed", checkpoint_id, self.job_id)
            if target is None:
                snapshot = plan.table.metadata.snapshot_by_id(decision.snapshot_id or -1)
                assert snapshot is not None  # the decision found it in this table's ancestry
                return result_from_summary(self.job_id, self._table_name, checkpoint_id, snapshot)
            if target.status == ROLLED_BACK:
                return self._recorder.landed_recommit(target, decision.snapshot_id)
            return result_from_state(target, "already-committed", snapshot_id=decision.snapshot_id)
        if decision.action is Action.HELD and target is not None:
            return holding.settle(self._gate, target, result_from_state(target, "held"))
        if decision.action in (Action.EMPTY, Action.ABANDONED) and target is not None:
            return result_from_state(target, "empty" if decision.action is Action.EMPTY else "abandoned")
        raise CheckpointNotFoundError(self.job_id, checkpoint_id, self._table_name)

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
        plan = self._plan_on(checkpoint_id, self.load_table(), state, recommit=True)
        if plan.action is Action.ALREADY_IN and state.status == ROLLED_BACK:
            return self._recorder.landed_recommit(state, plan.decision.snapshot_id)
        if plan.action is not Action.RECOMMIT:
            raise ValidationError(
                f"only a checkpoint that a rollback removed from the branch can be re-committed; this one is "
                f"{plan.action.value} ({plan.decision.reason})",
                checkpoint_id=checkpoint_id,
            )
        self._store.clear_committed_metrics(self.job_id, self._table_name, checkpoint_id)
        logger.warning("re-committing checkpoint %d of job %s after a rollback", checkpoint_id, self.job_id)
        return self._commit_prepared(state, plan=plan)

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
        return fate.take_over(self, old_job_id)

    # -- operator actions on one checkpoint (icecommit.committer.fate) -----------------

    def abandon(self, checkpoint_id: int, *, reason: str, by: str | None = None) -> CheckpointState:
        """Give up a prepared (or rolled-back) checkpoint so the job can go on (see
        :func:`icecommit.committer.fate.abandon`)."""
        return fate.abandon(self, self._recorder, checkpoint_id, reason=reason, by=by)

    def acknowledge(self, checkpoint_id: int, *, by: str | None = None) -> CheckpointState:
        """Acknowledge an abandoned checkpoint (see :func:`icecommit.committer.fate.acknowledge`)."""
        return fate.acknowledge(self, checkpoint_id, by=by)

    # -- what the table and the state say ----------------------------------------------

    def declare_source(self, checkpoint_id: int, counts: Mapping[datetime | None, int]) -> None:
        """Record source counts the caller knows (a Kafka offset range, a file's line count)
        per one-minute event-time window; reconciliation then checks the written rows
        against them instead of against what the tasks received."""
        self._store.record_samples(self.job_id, self._table_name, checkpoint_id, source_samples(counts))

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

    def _commit_prepared(
        self, state: CheckpointState, *, plan: CheckpointPlan | None = None, base: Table | None = None
    ) -> CommitResult:
        checkpoint_id = state.checkpoint_id
        require_supported(state)  # a later version's checkpoint is never committed as a plain append
        state = holding.route(self, self._gate, state, lambda: self._latest or self.load_table())  # checks, once
        if state.audit_branch not in (None, self.branch):  # it waits on its audit branch
            return holding.settle(self._gate, state, holding.hold(self, state))
        if plan is None:
            plan = self._plan_on(checkpoint_id, self._latest or self.load_table(), state)
            if plan.action not in (Action.COMMIT, Action.RECOMMIT) and self._latest is not None:
                # a cached copy is a fine base for a compare-and-swap, not for a decision that
                # skips or refuses: decide again on the table as it is now
                self._latest = None
                plan = self._plan_on(checkpoint_id, self.load_table(), state)
        if plan.action is Action.ROLLED_BACK:
            self._recorder.rolled_back(checkpoint_id)
            logger.warning(
                "checkpoint %d of job %s was prepared and had landed, but %s: recorded as rolled back, "
                "not committed again",
                checkpoint_id, self.job_id, plan.decision.reason,
            )  # fmt: skip
            return result_from_state(state, "rolled-back", snapshot_id=plan.decision.snapshot_id)
        if not state.has_changes:
            self._recorder.empty(checkpoint_id)
            logger.info("checkpoint %d of job %s is empty; no snapshot", checkpoint_id, self.job_id)
            if state.watermark_us is not None:  # a routed checkpoint's event time reached this table too
                self._completion.publish(plan.table)
            return result_from_state(state, "empty")
        plan = dataclasses.replace(plan, staged=plan.staged_for(state))  # only this row's, found just now
        data_files = list(plan.staged) if plan.staged is not None else read_staged(state, plan.table)
        if plan.action is Action.ALREADY_IN:  # one that landed is recorded as it is
            snapshot_id = plan.decision.snapshot_id or snapshot_that_added(
                plan.table, [f.file_path for f in data_files], self.branch
            )
            outcome = protocol.Outcome(snapshot_id, None, found_before=True, recovered=False, sent=0, retries=0)
        else:
            outcome = self._append(plan, state, data_files, base or plan.table)
        return self._record_outcome(state, plan, outcome, len(data_files))

    def _append(
        self, plan: CheckpointPlan, state: CheckpointState, data_files: list[DataFile], base: Table
    ) -> protocol.Outcome:
        """The checkpoint's commit through the commit protocol, planned by its mode's planner."""
        operation = CommitCheckpoint.of(
            self._catalog, plan, state, data_files, branch=self.branch, store=self._store, fault=self._fault,
            summary=checkpoint_summary(state, self._completion.store, self._recovered_by), key_lookup=self._key_lookup,
        )  # fmt: skip
        policy = self._retry_policy or RetryPolicy.from_properties(plan.table.metadata.properties)
        try:
            outcome = protocol.run(operation, base=base, load=self.load_table, policy=policy, sleep=self._sleep)
        except Exception:
            self._latest = None  # whatever failed, the next attempt starts from the table as it is
            raise
        self._latest = outcome.table
        return outcome

    def _record_outcome(
        self, state: CheckpointState, plan: CheckpointPlan, outcome: protocol.Outcome, files: int
    ) -> CommitResult:
        self._fault("after-commit", state.checkpoint_id)
        publish = lambda: self._completion.publish(self._latest or plan.table)  # noqa: E731
        recorded = self._recorder.outcome(state, outcome, files=files, recommit=plan.recommit, publish=publish)
        return holding.settle(self._gate, state, recorded)


# Observed here rather than with decorators: mutmut (the mutation tests) leaves every
# decorated function unmutated. Same wrappers, applied once, when the module is imported.
GlobalCommitter.refuse = observed_refusal(GlobalCommitter.refuse)  # type: ignore[method-assign]
GlobalCommitter.validate = observed_refusal(GlobalCommitter.validate)  # type: ignore[method-assign]
GlobalCommitter.prepare_planned = observed_refusal(GlobalCommitter.prepare_planned)  # type: ignore[method-assign]
GlobalCommitter.commit = observed(GlobalCommitter.commit)  # type: ignore[method-assign]
GlobalCommitter.recommit = observed(GlobalCommitter.recommit)  # type: ignore[method-assign]
GlobalCommitter.recover = observed_recovery(GlobalCommitter.recover)  # type: ignore[method-assign]
