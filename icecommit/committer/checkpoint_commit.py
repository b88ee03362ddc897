"""The operations of the commit protocol that the committer makes: a checkpoint's commit
(any write mode), and the table's claim of its state database."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence

from pyiceberg.catalog import Catalog
from pyiceberg.manifest import DataFile
from pyiceberg.table import Table
from pyiceberg.types import ListType, MapType, NestedField, StructType
from sqlalchemy import Engine

from icecommit.catalog.data_file_keys import look_up_here
from icecommit.committer import modes, protocol
from icecommit.committer.attempt import commit_changes
from icecommit.committer.commit_group import tables_in_group
from icecommit.committer.modes import CheckpointBase, Planner
from icecommit.committer.planning import CheckpointPlan, changed_since, plan_checkpoint
from icecommit.committer.retry import RetryPolicy
from icecommit.committer.table_changes import TableChanges
from icecommit.committer.validation import size_mismatches
from icecommit.committer.validators import snapshot_that_added
from icecommit.core import ancestry
from icecommit.core.conflicts import AttemptNotSentError
from icecommit.core.decision import Action
from icecommit.core.errors import (
    CheckpointRolledBackError,
    DataFileMissingError,
    PartitionSpecChangedError,
    SchemaChangedError,
)
from icecommit.core.identifiers import table_name
from icecommit.core.key_lookup import KeyLookup
from icecommit.state.checkpoints import CheckpointState, CheckpointStore
from icecommit.state.database import state_errors
from icecommit.state.identity import STATE_ID_PROPERTY, records_state, state_properties
from icecommit.state.partitions import PartitionStatusStore

logger = logging.getLogger(__name__)

#: Called at a step boundary (tests inject crashes there): the point and the checkpoint.
FaultHook = Callable[[str, int], None]


class CommitCheckpoint(protocol.Operation):
    """Committing one prepared checkpoint as one snapshot that carries the (job, checkpoint)
    key in its summary, whatever its write mode: what every mode shares is here, what
    differs is the mode's planner (:mod:`icecommit.committer.modes`).

    Attempt 0 runs on the planned table (the plan decided to commit). An attempt on any
    other table (a retry's, or a base that the caller's earlier checkpoints left) first
    checks that the branch and the table's state database are still the ones planned for,
    then reads only what changed since the planned head: the key among the new snapshots (on the
    branch: it landed, an earlier attempt's answer was lost; off it: it landed and a
    rollback removed it, refused) and the job's high-water mark; where those cannot tell, it
    plans again on the table as it is. Then the validators run on that table: the files'
    partition specs, the current schema's required columns, the files' sizes on storage;
    and the mode's planner plans the attempt's :class:`TableChanges` on it, with the
    job's high-water mark set in the same catalog commit.
    """

    kind = "checkpoint"
    resolve_unsent = True

    def __init__(
        self,
        catalog: Catalog,
        plan: CheckpointPlan,
        base: CheckpointBase,
        planner: Planner,
        *,
        store: CheckpointStore,
        replan: Callable[[Table], CheckpointPlan],
        fault: FaultHook,
    ) -> None:
        self._catalog = catalog
        self.plan = plan
        self.base = base
        self.planner = planner
        self.job_id = base.job_id
        self.table_name = base.table_name
        self.checkpoint = self.checkpoint_id = base.checkpoint_id
        self.branch = base.branch
        self.data_files = list(base.data_files)
        self._store = store
        self._replan = replan
        self._fault = fault
        #: what the last attempt's planner planned (on the table that attempt runs on)
        self.changes: TableChanges | None = None

    @classmethod
    def of(
        cls,
        catalog: Catalog,
        plan: CheckpointPlan,
        state: CheckpointState,
        data_files: Sequence[DataFile],
        *,
        branch: str,
        summary: dict[str, str],
        store: CheckpointStore,
        key_lookup: KeyLookup | None,
        fault: FaultHook,
        replan: Callable[[Table], CheckpointPlan] | None = None,
    ) -> CommitCheckpoint:
        """The operation that commits prepared checkpoint ``state`` on ``branch`` under the
        mode it was prepared with (its keys, for an upsert, looked up by ``key_lookup``:
        None, in this process; ``replan``: how it decides again where the key check cannot
        tell, by default :func:`replan_with`)."""
        base = CheckpointBase(
            job_id=state.job_id, checkpoint_id=state.checkpoint_id, table_name=state.table_name, branch=branch,
            data_files=tuple(data_files), summary=summary, sequence_number=state.base_sequence_number or 0,
            recommit=plan.recommit, highest_committed=plan.view.highest_committed,
        )  # fmt: skip
        planner = modes.of_state(state).planner(state, key_lookup or look_up_here)
        replan = replan or replan_with(plan, job_id=state.job_id, branch=branch, staged=data_files)
        return cls(catalog, plan, base, planner, store=store, replan=replan, fault=fault)

    @property
    def label(self) -> str:
        return f"checkpoint {self.checkpoint} of job {self.job_id!r} in {self.table_name}"

    def check(self, table: Table, number: int) -> protocol.Found | None:
        if table is not self.plan.table:  # a retry's fresh table, or a base newer than the plan's
            ancestry.require_branch(table.metadata, self.branch)
            records_state(self.table_name, table.metadata.properties, self._store.engine)
            found = self._landed_since_plan(table)
            if found is not None:
                return found
        try:
            require_known_spec(self.data_files, table, self.job_id, self.checkpoint, self.table_name)
        except PartitionSpecChangedError as e:
            if number == 0:  # a base the caller kept from before a spec change: retried on the table as it is
                raise AttemptNotSentError(f"the base table predates partition spec {e.prepared_spec_id}") from e
            raise
        require_readable(self.data_files, table, self.job_id, self.checkpoint, self.table_name)
        if number > 0 or self.plan.staged is None:  # the first attempt after this process's prepare found them
            self._require_present(table)
        self._fault("before-commit-attempt", self.checkpoint)
        changes = self.planner.plan(table, self.base)
        self.changes = dataclasses.replace(changes, properties={**changes.properties, **self._properties_with(table)})
        return None

    def _landed_since_plan(self, table: Table) -> protocol.Found | None:
        changes = changed_since(self.plan, table, job_id=self.job_id, branch=self.branch)
        if changes.landed is not None:
            return protocol.Found(changes.landed)
        if changes.off_branch is not None:
            raise CheckpointRolledBackError(self.job_id, self.checkpoint, changes.off_branch, self.table_name)
        if not changes.unsure:
            return None
        fresh = self._replan(table)
        if fresh.action is Action.ALREADY_IN:
            return protocol.Found(
                fresh.decision.snapshot_id
                or snapshot_that_added(table, [f.file_path for f in self.data_files], self.branch)
            )
        if fresh.action not in (Action.COMMIT, Action.RECOMMIT):
            raise CheckpointRolledBackError(self.job_id, self.checkpoint, fresh.decision.snapshot_id, self.table_name)
        return None

    def apply(self, table: Table) -> protocol.Applied:
        assert self.changes is not None  # check() planned them on this table
        snapshot_id, after = commit_changes(
            table.catalog,  # the protocol's view of the catalog: it tells whether the attempt was sent
            table,
            self.changes,
            job_id=self.job_id,
            checkpoint_id=self.checkpoint,
        )
        # the table as the commit left it, on the committer's own catalog (a base for the next commit)
        return protocol.Applied(
            snapshot_id, Table(after.name(), after.metadata, after.metadata_location, after.io, self._catalog)
        )

    def find(self, table: Table) -> protocol.Found | None:
        found = ancestry.find_checkpoint(table.metadata, self.job_id, self.checkpoint, self.branch)
        return protocol.Found(found.snapshot_id) if found is not None else None

    def unknown(self, cause: BaseException) -> None:
        self._store.record_unknown_outcome(self.job_id, self.table_name, self.checkpoint)

    def _properties_with(self, table: Table) -> dict[str, str]:
        """The table properties set in the same catalog commit as the append: the job's
        high-water mark when the checkpoint raises it, and the state database's identity on
        a table prepared before tables recorded it."""
        properties = {}
        recorded = ancestry.recorded_highest_checkpoints(table.metadata.properties, branch=self.branch).get(self.job_id)
        highest = self.base.highest_committed
        if recorded is not None and (highest is None or recorded > highest):
            highest = recorded
        if highest is None or self.checkpoint > highest:
            properties[ancestry.job_checkpoint_property(self.job_id, branch=self.branch)] = str(self.checkpoint)
        if STATE_ID_PROPERTY not in table.metadata.properties:
            properties.update(state_properties(self._store.engine))
        return properties

    def _require_present(self, table: Table) -> None:
        bad = size_mismatches([(f.file_path, f.file_size_in_bytes) for f in self.data_files], table.io)
        if not bad:
            return
        path, size = bad[0]
        self._store.record_missing(self.job_id, self.table_name, self.checkpoint, len(bad))
        logger.error(
            "ALERT checkpoint %d of job %s: %d staged data file(s) missing or changed, e.g. %s",
            self.checkpoint,
            self.job_id,
            len(bad),
            path,
        )
        expected = next(f.file_size_in_bytes for f in self.data_files if f.file_path == path)
        raise DataFileMissingError(
            path,
            checkpoint_id=self.checkpoint,
            expected=expected,
            actual=size,
            bad=len(bad),
            total=len(self.data_files),
            table=self.table_name,
            job_id=self.job_id,
            staged=True,
        )


class ClaimTable(protocol.Operation):
    """Making the table record this committer's state database (one catalog commit in the
    table's life, before anything is staged for it). A lost compare-and-swap re-reads the
    table: another committer of the same state database may have claimed it meanwhile."""

    kind = "claim"
    idempotent = True

    def __init__(self, table_name: str, engine: Engine) -> None:
        self.table_name = table_name
        self._engine = engine

    @property
    def label(self) -> str:
        return f"recording the state database in {self.table_name}"

    def check(self, table: Table, number: int) -> protocol.Found | None:
        if number > 0 and records_state(self.table_name, table.metadata.properties, self._engine):
            return protocol.Found(None)
        return None

    def apply(self, table: Table) -> protocol.Applied:
        with table.transaction() as tx:  # asserts nothing but the table's uuid
            tx.set_properties(state_properties(self._engine))
        return protocol.Applied(None, table)

    def find(self, table: Table) -> protocol.Found | None:
        return self.check(table, 1)


def claim_table(
    table: Table,
    store: CheckpointStore,
    policy: RetryPolicy | None,
    *,
    load: Callable[[], Table],
    sleep: Callable[[float], None],
) -> Table:
    """The table, made to record ``store``'s state database before anything is staged for
    it (one catalog commit in the table's life); the table as it is when it records it
    already. ``policy``: None takes the table's ``commit.retry.*``.

    Raises:
        StateDatabaseMismatchError (from ``records_state``): it records another state database.
    """
    with state_errors(store, "nothing was staged"):  # refuses another state database
        if records_state(table_name(table), table.metadata.properties, store.engine):
            return table
    name = table_name(table)
    policy = policy or RetryPolicy.from_properties(table.metadata.properties)
    outcome = protocol.run(ClaimTable(name, store.engine), base=table, load=load, policy=policy, sleep=sleep)
    logger.info("table %s now records its state database (%s)", name, STATE_ID_PROPERTY)
    return outcome.table if outcome.table is not None else load()


def replan_with(
    plan: CheckpointPlan,
    *,
    job_id: str,
    branch: str,
    staged: Sequence[DataFile],
) -> Callable[[Table], CheckpointPlan]:
    """How an append plans again on a table whose changes the key check could not judge."""

    def replan(table: Table) -> CheckpointPlan:
        paths = [f.file_path for f in staged]
        return plan_checkpoint(
            plan.checkpoint_id,
            plan.state,
            table,
            job_id=job_id,
            branch=branch,
            staged_paths=lambda _state: paths,
            recommit=plan.recommit,
        )

    return replan


def require_known_spec(
    data_files: Sequence[DataFile], table: Table, job_id: str, checkpoint_id: int, table_name: str
) -> None:
    """Refuse files whose partition spec the table no longer has (removed as unused by
    another engine's maintenance); files of an older spec that it still has commit under
    that spec (:class:`~icecommit.committer.producer.SpecPreservingAppend`)."""
    specs = table.metadata.specs()
    gone = {f.spec_id for f in data_files} - set(specs)
    if gone:
        raise PartitionSpecChangedError(job_id, checkpoint_id, table_name, min(gone), table.spec().spec_id)


def require_readable(
    data_files: Sequence[DataFile], table: Table, job_id: str, checkpoint_id: int, table_name: str
) -> None:
    """Refuse files that lack a required column of the table's current schema (one added as
    required after they were written): no reader could read them."""
    required = [(f.name, _field_ids(f)) for f in table.schema().fields if f.required]
    for data_file in data_files:
        present = set(data_file.value_counts or {}) | set(data_file.column_sizes or {})
        if not present:
            continue  # a file without column statistics cannot tell
        for name, ids in required:  # a nested column is there when one of its leaves is
            if not ids & present:
                raise SchemaChangedError(job_id, checkpoint_id, table_name, name)


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


def checkpoint_summary(
    state: CheckpointState, partitions: PartitionStatusStore, recovered_by: str | None
) -> dict[str, str]:
    """The summary of the snapshot that commits a prepared checkpoint: its key, counts and
    event-time facts (:func:`icecommit.core.ancestry.snapshot_summary`), and how many
    tables it is committed to at once when it is one of several in one catalog commit."""
    job, table, checkpoint = state.job_id, state.table_name, state.checkpoint_id
    return ancestry.snapshot_summary(
        job_id=job,
        checkpoint_id=checkpoint,
        records=state.records,
        files=state.files,
        bytes_=state.bytes,
        max_event_time_us=state.max_event_time_us,
        watermark_us=partitions.watermark_through(job, table, checkpoint),
        late_records=partitions.late_records_in(job, table, checkpoint),
        future_records=state.future_records,
        query_id=state.query_id,
        recovered_by=recovered_by,
        tables_in_commit=tables_in_group(),
    )
