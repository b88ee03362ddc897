"""``ic.write``: both phases, for the common case of one DataFrame per checkpoint, into one
table or routed by a column into several. A single table is a route of one: one
orchestration (recover, plan, write, validate, prepare, commit, maintain) serves both."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from functools import reduce
from typing import Any, overload

import pyarrow as pa
from pyiceberg.catalog import Catalog
from pyiceberg.io import FileIO
from pyiceberg.table import Table
from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema
from sqlalchemy.exc import SQLAlchemyError

from icecommit.catalog.connect import connect
from icecommit.catalog.loading import load_table
from icecommit.catalog.multi_table import can_commit_together, catalog_kind
from icecommit.catalog.tables import build_partition_spec, to_iceberg_schema, with_identifier_fields
from icecommit.committer import modes
from icecommit.committer.checkpoint_tables import commit_to_tables
from icecommit.committer.commit_group import CommitGroup
from icecommit.committer.committer import GlobalCommitter
from icecommit.committer.holding import Gate
from icecommit.committer.planning import CheckpointPlan
from icecommit.committer.results import CommitResult, RoutedCommitResult
from icecommit.committer.retry import RetryPolicy
from icecommit.committer.schema_change import create_for_checkpoint, evolve
from icecommit.committer.staging import lost_files
from icecommit.core.checks import validate_checks
from icecommit.core.datafiles import WriteResult
from icecommit.core.decision import Action
from icecommit.core.errors import (
    DataFileMissingError,
    IcecommitError,
    InvalidArgumentError,
    SchemaMismatchError,
    StateDatabaseError,
    UnroutedRecordsError,
    nothing_staged,
)
from icecommit.core.evolution import MERGE, STRICT, checked_mode, dead_letter_mode, plan_changes
from icecommit.core.identifiers import checked_checkpoint_id, checked_job_id, table_name
from icecommit.core.tableprops import check_properties, check_table_properties
from icecommit.maintenance.policy import MaintenancePolicy, MaintenanceRun, maintain
from icecommit.options import WriteOptions
from icecommit.state.checkpoints import CheckpointStore
from icecommit.state.write_model import WriteModelStore
from icecommit.writers.changes import upsert_changes
from icecommit.writers.distribution import distribution_mode, learned_ratio
from icecommit.writers.routing import RoutedSparkWriter, check_routed_frame, route_key
from icecommit.writers.schema import aligned_columns, iceberg_struct, quoted
from icecommit.writers.spark import SparkWriter, TaskHook
from icecommit.writers.spark_checks import SparkRowChecks
from icecommit.writers.spark_key_lookup import SparkKeyLookup

logger = logging.getLogger(__name__)

#: Where rows go, by the value of the routing column.
Routes = Mapping[Any, Table | str]


def discard_unstaged(results: Sequence[WriteResult], io: FileIO) -> int:
    """Delete the exact files of results that were refused before staging.

    Safe only because such files were never staged nor committed. Returns the count.
    """
    deleted = 0
    for result in results:
        for data_file in result.data_files:
            try:
                io.delete(data_file.path)
                deleted += 1
            except FileNotFoundError:
                continue
    return deleted


@overload
def write(
    df: DataFrame,
    table: Table | str,
    *,
    catalog: Catalog | None = None,
    job_id: str,
    checkpoint_id: int,
    options: WriteOptions | None = None,
    query_id: str | None = None,
    store: CheckpointStore | None = None,
    task_hook: TaskHook | None = None,
    **keywords: Any,
) -> CommitResult: ...


@overload
def write(
    df: DataFrame,
    table: Routes,
    *,
    catalog: Catalog | None = None,
    job_id: str,
    checkpoint_id: int,
    options: WriteOptions | None = None,
    query_id: str | None = None,
    store: CheckpointStore | None = None,
    task_hook: TaskHook | None = None,
    **keywords: Any,
) -> RoutedCommitResult: ...


def write(
    df: DataFrame,
    table: Table | str | Routes,
    *,
    catalog: Catalog | None = None,
    job_id: str,
    checkpoint_id: int,
    options: WriteOptions | None = None,
    query_id: str | None = None,
    store: CheckpointStore | None = None,
    task_hook: TaskHook | None = None,
    **keywords: Any,
) -> CommitResult | RoutedCommitResult:
    """Write ``df`` as checkpoint ``checkpoint_id`` of ``job_id``, exactly once.

    First commits any checkpoint of the job that an earlier run prepared and did not
    commit; then, unless the checkpoint is already committed, writes the data files with
    Spark, validates and stages them, and commits them as one snapshot.

    With ``route_by``, ``table`` maps values of that column to tables: the source is read
    once, each row goes to the table its value names, and every table commits the rows it
    got as ``checkpoint_id``. Rows with a null or unmapped value go to ``dead_letter``
    (created with the DataFrame's columns when it does not exist); without one they make
    the write fail with :class:`UnroutedRecordsError` and nothing is committed anywhere.
    After a crash, a rerun writes only the tables that do not hold the checkpoint yet.

    Args:
        options: the write options (:class:`~icecommit.WriteOptions`); each of its fields
            may also be given as a keyword (``branch=``, ``route_by=``, ``dead_letter=``,
            ``target_file_size=``, ``recommit=``, ``completeness=``, ``distribution=``,
            ``maintenance=``, ``schema_mode=``, ``create=``, ``partition_by=``,
            ``table_properties=``, ``identifier_fields=``, ``mode=``), which overrides the field.
        query_id: the streaming query whose batch this is (the streaming sink passes
            Spark's ``query.id``): a batch id the job committed under another query is
            refused with :class:`~icecommit.errors.StreamingQueryMismatchError`.
        store: icecommit's state (the checkpoint table); defaults to the state database
            the catalog names.
        task_hook: called in every task attempt after it has written its files (tests).

    Returns:
        The commit result (a :class:`RoutedCommitResult` with one result per table when
        routing); ``committed`` is False when the checkpoint was already committed
        (nothing is written twice).

    Raises:
        InvalidInputError: the DataFrame does not fit the table (SchemaMismatchError) or
            validation failed (ValidationError, UnroutedRecordsError); nothing is staged
            and the files written are removed.
        CheckpointRefusedError: the decision refused the checkpoint (rolled back: pass
            ``recommit=True``; out of order or another query's batch: use a new job id);
            nothing is written.
        CommitOutcomeError: see ``GlobalCommitter.commit`` (the files stay).
        EnvironmentFailureError: the catalog, the state database or storage failed.
    """
    opts = WriteOptions.of(options, **keywords)
    checked_job_id(job_id)
    checked_checkpoint_id(checkpoint_id)
    if not callable(getattr(df, "mapInArrow", None)):
        raise InvalidArgumentError("df", type(df).__name__, "a Spark DataFrame")
    if catalog is not None and not isinstance(catalog, Catalog):
        raise InvalidArgumentError("catalog", catalog, "a pyiceberg Catalog (ic.connect(...)), or None for the default")
    catalog = catalog or connect()
    if isinstance(table, Mapping):
        if opts.route_by is None:
            raise InvalidArgumentError(
                "route_by", None, "the column whose value picks the table, with a mapping of tables"
            )
    elif opts.route_by is not None or opts.dead_letter is not None:
        raise InvalidArgumentError(
            "table", table_name(table), "a mapping of routing values to tables when route_by or dead_letter is given"
        )
    landing = _Landing(catalog, job_id, checkpoint_id, opts, query_id, store, task_hook)
    return landing.run(df, table)


def write_many(
    frames: Mapping[Table | str, DataFrame],
    *,
    catalog: Catalog | None = None,
    job_id: str,
    checkpoint_id: int,
    options: WriteOptions | None = None,
    store: CheckpointStore | None = None,
    task_hook: TaskHook | None = None,
    **keywords: Any,
) -> RoutedCommitResult:
    """Write each DataFrame of ``frames`` to its table (by name) as checkpoint
    ``checkpoint_id`` of ``job_id``: one checkpoint of several tables, exactly once, and
    committed to all of them at once where the catalog can (``atomic``, see
    :class:`~icecommit.WriteOptions`). The options are ``ic.write``'s; those that differ per
    table take a mapping by table name (``mode``, ``partition_by``, ``checks``). A table
    that holds the checkpoint already is not written again.

    Returns:
        One result per table (a :class:`RoutedCommitResult`).

    Raises:
        As ``ic.write``; bad input in any table leaves every table as it was.
    """
    opts = WriteOptions.of(options, **keywords)
    checked_job_id(job_id)
    checked_checkpoint_id(checkpoint_id)
    if not isinstance(frames, Mapping) or not frames:
        raise InvalidArgumentError("frames", frames, "a mapping of table names to Spark DataFrames, one or more")
    named = {table_name(t): df for t, df in frames.items()}
    if len(named) != len(frames):
        raise InvalidArgumentError("frames", list(frames), "distinct tables")
    for name, df in named.items():
        if not callable(getattr(df, "mapInArrow", None)):
            raise InvalidArgumentError(f"frames[{name!r}]", type(df).__name__, "a Spark DataFrame")
    if opts.route_by is not None or opts.dead_letter is not None:
        raise InvalidArgumentError("route_by", opts.route_by, "None: write_many names each table's DataFrame")
    if catalog is not None and not isinstance(catalog, Catalog):
        raise InvalidArgumentError("catalog", catalog, "a pyiceberg Catalog (ic.connect(...)), or None for the default")
    landing = _Landing(catalog or connect(), job_id, checkpoint_id, opts, None, store, task_hook, frames=named)
    result = landing.run(next(iter(named.values())), tuple(named))
    assert isinstance(result, RoutedCommitResult)
    return result


@dataclass
class _Landing:
    """One checkpoint of one DataFrame into its tables (one table is a route of one), or of
    one DataFrame per table (``frames``: ``write_many``)."""

    catalog: Catalog
    job_id: str
    checkpoint_id: int
    options: WriteOptions
    query_id: str | None
    store: CheckpointStore | None
    task_hook: TaskHook | None
    tables: dict[str, Table] = field(default_factory=dict)
    committers: dict[str, GlobalCommitter] = field(default_factory=dict)
    plans: dict[str, CheckpointPlan] = field(default_factory=dict)
    results: dict[str, CommitResult] = field(default_factory=dict)
    keys: dict[str, pa.Table] = field(default_factory=dict)
    #: each table's own DataFrame (``write_many``; empty: every table's rows are ``df``'s),
    #: and as given (with an upsert's change column)
    frames: dict[str, DataFrame] = field(default_factory=dict)
    sources: dict[str, DataFrame] = field(default_factory=dict)

    def _frame(self, name: str, df: DataFrame) -> DataFrame:
        """The rows of table ``name``: its own DataFrame (``write_many``), else ``df``."""
        return self.frames.get(name, df)

    def run(self, df: DataFrame, target: Table | str | Routes | tuple[str, ...]) -> CommitResult | RoutedCommitResult:
        routed = isinstance(target, Mapping)
        if isinstance(target, tuple):  # write_many: the tables of ``frames``
            names = list(target)
        else:
            names = [table_name(t) for t in target.values()] if isinstance(target, Mapping) else [table_name(target)]
        routes = {v: table_name(t) for v, t in target.items()} if isinstance(target, Mapping) else {}
        if self.options.dead_letter is not None and self.options.dead_letter in names:
            raise InvalidArgumentError(
                "dead_letter", self.options.dead_letter, "a table that is not also a route target"
            )
        given, change = df, self.options.change_column
        if change is not None:
            for frame in (df, *self.frames.values()):
                if change not in frame.columns:
                    raise SchemaMismatchError(change, "is the change column, but not a column of the DataFrame")
            df = df.drop(change)
        self.sources = dict(self.frames)
        self.frames = {name: frame.drop(change) if change else frame for name, frame in self.frames.items()}
        if self.options.create:  # each table's own DataFrame, or the one they share
            for group in [[name] for name in names] if self.frames else [names]:
                self._check_creation(self._frame(group[0], df), group, routes)
        self._atomic(set(names))  # a catalog that cannot commit them together is refused before any write
        for name in names:
            if name not in self.tables:
                self.tables[name] = self._table(self._frame(name, df), name, routes)
                # before any Spark job
                check_table_properties(self.tables[name].metadata, write_modes=tuple(modes.MODES))
                gate = self.options.gate_of(name)
                validate_checks(gate.checks if gate is not None else (), self.tables[name].schema())
        if not self._reads_twice(routed):
            return self._land(given, df, target, names, routes)
        # A streaming batch this landing reads more than once (an upsert's checks and keys,
        # routing, a write again under a relaxed schema) is read from the source once:
        # Spark's progress counts every read of it as the source's rows.
        given.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            change = self.options.change_column
            return self._land(given, given.drop(change) if change else given, target, names, routes)
        finally:
            given.unpersist()

    def _reads_twice(self, routed: bool) -> bool:
        """Whether a streaming batch's rows may be read more than once by this landing."""
        if self.query_id is None:
            return False
        return routed or any(self._stages_keys(t) or self._mode(t) == MERGE for t in self.tables.values())

    def _land(
        self, source: DataFrame, df: DataFrame, target: Table | str | Routes | tuple[str, ...], names: list[str],
        routes: dict[Any, str],
    ) -> CommitResult | RoutedCommitResult:
        """Route, settle, write, prepare and commit (``source``: the rows as given, with an
        upsert's change column; ``df``: the rows as stored)."""
        routed = isinstance(target, Mapping) or bool(self.frames)
        dead_name = None
        if isinstance(target, Mapping):
            assert self.options.route_by is not None
            if all(self._mode(t) == STRICT for t in self.tables.values()):
                check_routed_frame(df, self.tables, self.options.route_by)
            elif self.options.route_by not in df.columns:  # the rest is checked as each table evolves
                raise SchemaMismatchError(self.options.route_by, "routing column is missing from the DataFrame")
            dead_name = self.options.dead_letter
            if dead_name is not None:
                self.tables[dead_name] = self._dead_letter(df, dead_name)
        for name in self.tables:
            self.committers[name] = GlobalCommitter(
                self.catalog,
                name,
                job_id=self.job_id,
                branch=self.options.branch,
                completeness=self.options.completeness,
                query_id=self.query_id,
                store=self.store,
                key_lookup=SparkKeyLookup(df.sparkSession),  # an upsert's keys, looked up by Spark tasks
                gate=self._gate(name, df),
            )
        pending = self._settle()
        if self.frames:  # each table's own rows: its upsert's rows, one per key
            for name in pending:
                self.frames[name] = self._changes(self.sources[name], self.frames[name], [name], {})
        else:
            df = self._changes(source, df, pending, routes)  # an upsert's rows, one per key; its keys kept
        skipped: dict[str, int] = {}
        # before any task writes (the tasks write with the new field ids), and every table's
        # refusal before any table's change
        self._evolve_all(df, {name: () for name in pending}, dead_name)
        if pending:

            def write_all() -> tuple[dict[str, list[WriteResult]], dict[str, int]]:
                if isinstance(target, Mapping):
                    return self._write_routed(df, target, pending, dead_name)
                return {name: self._write_one(self._frame(name, df), name) for name in pending}, {}

            written, skipped = write_all()
            if self._relax(df, written):  # required columns made optional: written again under it
                written, skipped = write_all()
            self._prepare_all(written)
            committing = {name: self.committers[name] for name in pending}
            together = self.catalog if self._atomic(committing) else None
            self.results.update(commit_to_tables(committing, self.checkpoint_id, self.plans, together_in=together))
            for name in pending:
                _maintain_after(self.catalog, name, self.options.maintenance, self.checkpoint_id)
            if skipped:
                logger.info(
                    "checkpoint %d: rows of tables that already hold it, not written: %s", self.checkpoint_id, skipped
                )
        if not routed:
            return self.results[names[0]]
        return RoutedCommitResult(
            checkpoint_id=self.checkpoint_id,
            results={name: self.results[name] for name in self.tables},
            skipped_records=skipped,
        )

    def _changes(
        self, source: DataFrame, df: DataFrame, pending: Sequence[str], routes: Mapping[Any, str]
    ) -> DataFrame:
        """For each table written under ``upsert``: its rows, one per key (a change
        column's deletes left out), with the keys of every row kept for its prepare;
        refused before anything is written when the rows break the key. A routed write
        upserts each such table's route on its own (its rows, its keys); the other routes'
        rows pass as they are."""
        upserting = [name for name in pending if self._stages_keys(self.tables[name])]
        # rows matched to routes as the routed writer matches them: the value as a string
        route = F.col(quoted(self.options.route_by or "")).cast("string")
        rows = []
        for name in upserting:
            values = [route_key(value) for value, target in routes.items() if target == name]
            mine = source.filter(route.isin(values)) if routes else source
            changes = upsert_changes(
                mine, self.tables[name], key=self.options.key, change_column=self.options.change_column,
                order_by=tuple(self.options.order_by or ()), name=name,
            )  # fmt: skip
            self.keys[name] = changes.keys
            rows.append(changes.rows)
        if not routes:
            return rows[0] if rows else df
        upserted = [route_key(value) for value, target in routes.items() if target in upserting]
        if not upserted:
            return df
        # the other routes' rows, and those of no route (a null or unknown value: dead letters)
        rest = df.filter(~F.coalesce(route.isin(upserted), F.lit(False)))
        return reduce(DataFrame.unionByName, rows, rest)

    def _stages_keys(self, table: Table) -> bool:
        """Whether ``table`` is written under a mode that stages the keys its rows replace
        (an upsert: its rows are made one per key first)."""
        return modes.named(self.options.mode_of(table_name(table)), table.metadata.properties).stages_keys

    def _mode(self, table: Table) -> str:
        return checked_mode(self.options.schema_mode, table.metadata.properties)

    def _check_creation(self, df: DataFrame, names: Sequence[str], routes: Mapping[Any, str]) -> None:
        """What ``create`` would make, checked before any table is made: each table's
        properties and partition spec against the DataFrame's columns."""
        schema = to_iceberg_schema(_arrow_schema(df, leave_out=self.options.route_by))
        check_properties(self.options.table_properties or {}, schema, write_modes=tuple(modes.MODES))
        for name in names:
            build_partition_spec(schema, self.options.partitions_of(name, routes), name)
        with_identifier_fields(schema, self.options.identifier_fields or self.options.key, names[0])

    def _table(self, df: DataFrame, name: str, routes: Mapping[Any, str]) -> Table:
        """The table ``name``; with ``create``, created from the DataFrame's columns (the
        routing column left out) when it does not exist."""
        if not self.options.create:
            return load_table(self.catalog, name)
        return create_for_checkpoint(
            self.catalog, name, _arrow_schema(df, leave_out=self.options.route_by),
            job_id=self.job_id, checkpoint_id=self.checkpoint_id,
            partition_by=self.options.partitions_of(name, routes),
            properties=dict(self.options.table_properties or {}),
            identifier_fields=self.options.identifier_fields or self.options.key,
        )  # fmt: skip

    def _atomic(self, tables: Collection[str]) -> bool:
        """Whether a checkpoint of these tables is committed in one catalog commit (see
        ``WriteOptions.atomic``).

        Raises:
            InvalidArgumentError: ``atomic=True`` on a catalog that cannot.
        """
        able = can_commit_together(self.catalog)
        if self.options.atomic is True and not able:
            raise InvalidArgumentError(
                "atomic", True, f"False or 'auto': a {catalog_kind(self.catalog)} cannot commit several tables at once"
            )
        return able and self.options.atomic is not False and len(tables) > 1

    def _gate(self, name: str, df: DataFrame) -> Gate | None:
        """What ``name``'s checkpoints pass before readers see them: the checks that read
        rows read a large checkpoint's in Spark tasks."""
        gate = self.options.gate_of(name)
        return None if gate is None else dataclasses.replace(gate, row_summaries=SparkRowChecks(df.sparkSession))

    def _dead_letter(self, df: DataFrame, name: str) -> Table:
        """The dead-letter table, created with the DataFrame's columns (all optional) if absent."""
        return create_for_checkpoint(
            self.catalog, name, _arrow_schema(df), job_id=self.job_id, checkpoint_id=self.checkpoint_id,
            partition_by=None, properties={}, identifier_fields=None,
        )  # fmt: skip

    def _relax(self, df: DataFrame, written: Mapping[str, Sequence[WriteResult]]) -> bool:
        """Under ``merge``, make the required columns the tasks found nulls in optional
        (never an identifier field); the files written are removed (the tasks stopped at
        the nulls) and the caller writes again. False when there is nothing to relax."""
        nulls = {
            name: sorted({v.column for r in results for v in r.violations})
            for name, results in written.items()
            if self._mode(self.plans[name].table) == MERGE
        }
        others = [n for n, results in written.items() if any(r.violations for r in results) and not nulls.get(n)]
        if not any(nulls.values()) or others:  # another table refuses its nulls: validation says so
            return False
        for name, results in written.items():
            discard_unstaged(results, self.tables[name].io)
        self._evolve_all(df, {name: columns for name, columns in nulls.items() if columns}, dead_name=None)
        return True

    def _evolve_all(self, df: DataFrame, tables: Mapping[str, Sequence[str]], dead_name: str | None) -> None:
        """Commit the schema change the checkpoint's rows need in each of ``tables`` (name to
        the required columns its rows hold nulls in) under the write's schema mode, then
        plan the write on the table it left. Every table's change is planned (and refused)
        before any is committed. A dead-letter table icecommit made from the source's
        columns takes the source's new columns whatever the mode; one made by hand keeps its
        own."""
        route = self.options.route_by
        planned = {}
        for name, nulls_in in tables.items():
            table, dead_letter = self.plans[name].table, name == dead_name
            mode = self._mode(table)
            if dead_letter:
                mode = dead_letter_mode(mode, table.metadata.properties)
            frame = self._frame(name, df)
            if mode == STRICT:
                if route is not None:  # the routed frame was not checked as a whole: this table's columns
                    aligned_columns(frame, table.schema(), name, ignore=set(frame.columns))
                continue
            ignore = () if dead_letter or route is None else (route,)
            incoming = iceberg_struct(frame.schema, name, known={*table.schema().column_names, *ignore})
            plan_changes(table.schema(), incoming, mode, table=name, nulls_in=nulls_in, ignore=ignore)  # refuses
            planned[name] = (mode, incoming, ignore, nulls_in)
        for name, (mode, incoming, ignore, nulls_in) in planned.items():
            plan, committer = self.plans[name], self.committers[name]
            evolved = evolve(
                plan.table, job_id=self.job_id, checkpoint_id=self.checkpoint_id, incoming=incoming, mode=mode,
                load=committer.load_table, policy=RetryPolicy.from_properties(plan.table.metadata.properties),
                ignore=ignore, nulls_in=nulls_in,
            )  # fmt: skip
            if evolved is not plan.table:
                self.tables[name] = evolved
                self.plans[name] = dataclasses.replace(plan, table=evolved)

    def _settle(self) -> list[str]:
        """Recover each table's job, then plan the checkpoint once per table: the tables
        that need its data files are returned; the others are settled (in the table,
        empty, abandoned, or re-committed from its staged files). Refusals (rolled back,
        out of order, another query's batch) raise here, before any Spark job runs."""
        pending = []
        recovered: dict[str, list[CommitResult]] = {}
        if self._atomic(self.committers):  # what an earlier run prepared: in one catalog commit too
            try:
                recovered = CommitGroup(self.catalog, self.checkpoint_id).run(
                    {name: committer.recover for name, committer in self.committers.items()}
                )
            except IcecommitError:  # each table's recovery below says what stopped it
                recovered = {}
        for name, committer in self.committers.items():
            try:
                if recovered[name] if name in recovered else committer.recover():  # it committed: the table changed
                    self.tables[name] = committer.load_table()
            except DataFileMissingError as e:
                self.tables[name] = committer.load_table()  # what it committed before the lost one
                if e.checkpoint_id is not None and e.checkpoint_id < self.checkpoint_id:
                    raise e.behind(self.checkpoint_id) from e
                if e.checkpoint_id != self.checkpoint_id:  # a later one: this checkpoint does not wait for it
                    logger.warning("%s", e)
            plan = committer.plan(
                self.checkpoint_id, recommit=self.options.recommit, table=self.tables[name], query_id=self.query_id
            )
            committer.refuse(self.checkpoint_id, plan)
            # this very checkpoint was prepared and its staged files lost: written again, prepared again
            lost = plan.action is Action.COMMIT and plan.state is not None and lost_files(plan.state, plan.table)
            if plan.action is Action.WRITE or lost:
                self.plans[name] = plan
                pending.append(name)
            elif plan.action is Action.RECOMMIT:
                self.results[name] = committer.recommit(self.checkpoint_id)
            else:
                self.results[name] = result = committer.commit(self.checkpoint_id, plan=plan)
                if result.status == "already-committed":  # a replay: say so, it is easy to do by mistake
                    logger.warning(
                        "checkpoint %d of job %s is already committed to %s (%s row(s), snapshot %s): the DataFrame "
                        "was not written", self.checkpoint_id, self.job_id, name, f"{result.records:,}",
                        result.snapshot_id,
                    )  # fmt: skip
                else:
                    logger.info(
                        "checkpoint %d of job %s in %s: %s (%s); nothing to write",
                        self.checkpoint_id, self.job_id, name, plan.action.value, plan.decision.reason,
                    )  # fmt: skip
        return pending

    def _write_one(self, df: DataFrame, name: str) -> list[WriteResult]:
        table = self.plans[name].table
        model = WriteModelStore(self.committers[name].store.engine)
        packing = distribution_mode(table.metadata, self.options.distribution) == "bin-pack"
        writer = SparkWriter(
            table,
            job_id=self.job_id,
            options=self.options,
            task_hook=self.task_hook,
            shuffle_ratio=_known_ratio(model, name) if packing else None,
        )
        results = writer.write(df, self.checkpoint_id)
        _learn(model, name, writer, [r.bytes for r in results])
        return results

    def _write_routed(
        self, df: DataFrame, routes: Routes, pending: list[str], dead_name: str | None
    ) -> tuple[dict[str, list[WriteResult]], dict[str, int]]:
        assert self.options.route_by is not None
        writer = RoutedSparkWriter(
            self.tables,
            {route_key(value): table_name(target) for value, target in routes.items()},
            dead_letter=dead_name,
            job_id=self.job_id,
            options=self.options,
            task_hook=self.task_hook,
        )
        written = writer.write(df, self.checkpoint_id, targets=pending)
        if written.unrouted_records:
            refused = UnroutedRecordsError(
                self.options.route_by,
                written.unrouted_records,
                list(written.unrouted_values),
                checkpoint_id=self.checkpoint_id,
            )
            self._discard(written.results, set(), refused)
            raise refused
        return dict(written.results), written.skipped_records

    def _prepare_all(self, written: Mapping[str, Sequence[WriteResult]]) -> None:
        """Validate every table's results before preparing any, so bad input leaves every
        table as it was; then prepare each (a crash part-way is settled by the next run).
        The files of the tables not prepared are removed exactly when the error proves
        nothing of them was staged."""
        prepared: set[str] = set()
        try:
            fresh = {name: self.committers[name].load_table() for name in written}
            for name, task_results in written.items():
                self.committers[name].validate(self.checkpoint_id, task_results, table=fresh[name])
            # a routed checkpoint reaches readers in all its tables or none: one failed check holds them all
            along = len(written) > 1 and any(
                self.committers[name].checks_fail(self.checkpoint_id, rs, fresh[name]) for name, rs in written.items()
            )
            for name, task_results in written.items():
                others = [r for other, rs in written.items() if other != name for r in rs]
                mode = self.options.mode_of(name)
                self.plans[name] = self.committers[name].prepare_planned(
                    self.checkpoint_id, task_results, routed_with=others, plan=self.plans[name], table=fresh[name],
                    mode=mode, keys=self.keys.get(name), held_along=along,
                )  # fmt: skip
                prepared.add(name)
        except IcecommitError as e:
            self._discard(written, prepared, e)
            raise

    def _discard(self, written: Mapping[str, Sequence[WriteResult]], prepared: set[str], error: Exception) -> None:
        if not nothing_staged(error):
            return  # the files stay: they may be staged, or the outcome is not known
        removed = sum(
            discard_unstaged(results, self.tables[name].io) for name, results in written.items() if name not in prepared
        )
        logger.warning("checkpoint %d refused; removed %d unstaged data files", self.checkpoint_id, removed)


def _maintain_after(
    catalog: Catalog, table: str, policy: MaintenancePolicy | None, checkpoint_id: int
) -> MaintenanceRun | None:
    """Run the maintenance policy after a commit, when due; the commit stands whatever
    happens here (a failure is logged, and the next due run tries again)."""
    if policy is None or not policy.due(checkpoint_id):
        return None
    try:
        return maintain(catalog, table, policy)
    except Exception:
        logger.warning("maintenance of %s after checkpoint %d failed", table, checkpoint_id, exc_info=True)
        return None


def _arrow_schema(df: DataFrame, *, leave_out: str | None = None) -> pa.Schema:
    """The DataFrame's columns as Arrow types (Spark ``TIMESTAMP`` as UTC instants), all
    optional, without ``leave_out``."""
    try:
        arrow = to_arrow_schema(df.schema, timezone="UTC")
    except TypeError:  # pyspark 3.5 has no timezone argument and always uses UTC
        arrow = to_arrow_schema(df.schema)
    return pa.schema([f.with_nullable(True) for f in arrow if f.name != leave_out])


def _known_ratio(model: WriteModelStore, table: str) -> float | None:
    """The shuffle ratio the table's earlier bin-packed writes showed (None: unknown, or
    the state database could not say; the default is used then)."""
    try:
        return model.shuffle_ratio(table)
    except (SQLAlchemyError, StateDatabaseError):
        logger.warning("could not read the shuffle ratio of %s; bin-packing with the default", table, exc_info=True)
        return None


def _learn(model: WriteModelStore, table: str, writer: SparkWriter, task_bytes: list[int]) -> None:
    """Keep what a bin-packed write showed about the table's shuffle ratio (best effort: a
    failure costs the next write its estimate, never this write its commit)."""
    if writer.distribution != "bin-pack" or writer.advisory_bytes is None:
        return
    ratio = learned_ratio(task_bytes, writer.advisory_bytes, writer.shuffle_ratio)
    if ratio is None:
        return
    try:
        model.record_shuffle_ratio(table, ratio)
        logger.info("%s: shuffle bytes per Parquet byte now estimated at %.2f", table, ratio)
    except (SQLAlchemyError, StateDatabaseError):
        logger.warning("could not record the shuffle ratio of %s", table, exc_info=True)


__all__ = ["Routes", "WriteOptions", "discard_unstaged", "write", "write_many"]
