"""``ic.write``: both phases, for the common case of one DataFrame per checkpoint,
into one table or routed by a column into several."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, overload

import pyarrow as pa
from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.io import FileIO
from pyiceberg.table import Table
from pyspark.sql import DataFrame
from pyspark.sql.pandas.types import to_arrow_schema
from sqlalchemy.exc import SQLAlchemyError

from icecommit.catalog.connect import connect
from icecommit.catalog.loading import load_table
from icecommit.catalog.tables import create_table
from icecommit.committer.committer import GlobalCommitter
from icecommit.committer.completion import PartitionCompleteness
from icecommit.committer.results import CommitResult, RoutedCommitResult
from icecommit.core.datafiles import WriteResult
from icecommit.core.decision import Action
from icecommit.core.errors import InvalidArgumentError, SchemaMismatchError, UnroutedRecordsError, ValidationError
from icecommit.core.identifiers import checked_checkpoint_id, checked_file_size, checked_job_id, table_name
from icecommit.core.tableprops import check_table_properties
from icecommit.maintenance.policy import MaintenancePolicy, MaintenanceRun, maintain
from icecommit.state.checkpoints import CheckpointStore
from icecommit.state.write_model import WriteModelStore
from icecommit.writers.distribution import distribution_mode, learned_ratio
from icecommit.writers.routing import RoutedSparkWriter, RoutedWrite, check_routed_frame, route_key
from icecommit.writers.spark import SparkWriter, TaskHook

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


def _settled(
    committer: GlobalCommitter, checkpoint_id: int, recommit: bool, table: Table | None = None
) -> CommitResult | None:
    """The checkpoint's result when it needs no new data files (in the table, empty,
    abandoned, or re-committed from its staged files), after the committer's recovery;
    None when it must be written. Refusals (rolled back, out of order) raise here, before
    any Spark job runs. ``table``: the table as loaded after the recovery (None: load it)."""
    decision = committer.decide(checkpoint_id, recommit=recommit, table=table)
    committer.refuse(checkpoint_id, decision)  # another streaming query's batch
    if decision.action is Action.WRITE:
        return None
    if decision.action is Action.RECOMMIT:
        return committer.recommit(checkpoint_id)
    logger.info(
        "checkpoint %d of job %s in %s: %s (%s); nothing to write",
        checkpoint_id,
        committer.job_id,
        committer.table_name,
        decision.action.value,
        decision.reason,
    )
    return committer.commit(checkpoint_id)


@overload
def write(
    df: DataFrame,
    table: Table | str,
    *,
    catalog: Catalog | None = None,
    job_id: str,
    checkpoint_id: int,
    route_by: None = None,
    dead_letter: None = None,
    branch: str = "main",
    target_file_size: int | None = None,
    task_hook: TaskHook | None = None,
    recommit: bool = False,
    completeness: PartitionCompleteness | None = None,
    query_id: str | None = None,
    store: CheckpointStore | None = None,
    distribution: str | None = None,
    maintenance: MaintenancePolicy | None = None,
) -> CommitResult: ...


@overload
def write(
    df: DataFrame,
    table: Routes,
    *,
    catalog: Catalog | None = None,
    job_id: str,
    checkpoint_id: int,
    route_by: str,
    dead_letter: Table | str | None = None,
    branch: str = "main",
    target_file_size: int | None = None,
    task_hook: TaskHook | None = None,
    recommit: bool = False,
    completeness: PartitionCompleteness | None = None,
    query_id: str | None = None,
    store: CheckpointStore | None = None,
    distribution: str | None = None,
    maintenance: MaintenancePolicy | None = None,
) -> RoutedCommitResult: ...


@overload
def write(
    df: DataFrame,
    table: Table | str | Routes,
    *,
    catalog: Catalog | None = None,
    job_id: str,
    checkpoint_id: int,
    route_by: str | None = None,
    dead_letter: Table | str | None = None,
    branch: str = "main",
    target_file_size: int | None = None,
    task_hook: TaskHook | None = None,
    recommit: bool = False,
    completeness: PartitionCompleteness | None = None,
    query_id: str | None = None,
    store: CheckpointStore | None = None,
    distribution: str | None = None,
    maintenance: MaintenancePolicy | None = None,
) -> CommitResult | RoutedCommitResult: ...


def write(
    df: DataFrame,
    table: Table | str | Routes,
    *,
    catalog: Catalog | None = None,
    job_id: str,
    checkpoint_id: int,
    route_by: str | None = None,
    dead_letter: Table | str | None = None,
    branch: str = "main",
    target_file_size: int | None = None,
    task_hook: TaskHook | None = None,
    recommit: bool = False,
    completeness: PartitionCompleteness | None = None,
    query_id: str | None = None,
    store: CheckpointStore | None = None,
    distribution: str | None = None,
    maintenance: MaintenancePolicy | None = None,
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
        completeness: when time partitions are published complete and whom to tell (see
            :class:`~icecommit.committer.PartitionCompleteness`).
        query_id: the streaming query whose batch this is (the streaming sink passes
            Spark's ``query.id``): a batch id the job committed under another query is
            refused with :class:`~icecommit.core.errors.StreamingQueryMismatchError`.
        store: icecommit's state (the checkpoint table); defaults to the catalog's
            database or ``ICECOMMIT_METRICS_URI``.
        distribution: ``"none"``, ``"hash"`` or ``"bin-pack"``: how rows reach the writer
            tasks (one shuffle after the scan; see :mod:`icecommit.writers.distribution`).
            None takes the table's ``write.distribution-mode``, else ``hash`` for a
            partitioned table (as Iceberg's Spark writer) and ``none`` otherwise.
        maintenance: compaction and expiry to run after the commit, by one process per
            table at a time (see :mod:`icecommit.maintenance.policy`); a failure there is logged and
            never undoes or fails the commit.

    Returns:
        The commit result (a :class:`RoutedCommitResult` with one result per table when
        routing); ``committed`` is False when the checkpoint was already committed
        (nothing is written twice).

    Raises:
        SchemaMismatchError: the DataFrame does not fit the table (nothing committed; any
            files written are removed).
        ValidationError: pre-commit validation failed (likewise); UnroutedRecordsError
            is one.
        CheckpointRolledBackError: the checkpoint was committed and a rollback removed it;
            pass ``recommit=True`` to commit its staged files again (nothing is rewritten).
        CheckpointOutOfOrderError: the table does not hold the checkpoint and the job has
            committed a higher one (checkpoint ids grow within a job); nothing is written.
        CommitConflictError, CommitStateUnknownError: see ``GlobalCommitter.commit``.
    """
    checked_job_id(job_id)
    checked_checkpoint_id(checkpoint_id)
    checked_file_size(target_file_size)
    if maintenance is not None and not isinstance(maintenance, MaintenancePolicy):
        raise InvalidArgumentError("maintenance", maintenance, "an icecommit MaintenancePolicy, or None")
    if not callable(getattr(df, "mapInArrow", None)):
        raise InvalidArgumentError("df", type(df).__name__, "a Spark DataFrame")
    if catalog is not None and not isinstance(catalog, Catalog):
        raise InvalidArgumentError("catalog", catalog, "a pyiceberg Catalog (ic.connect(...)), or None for the default")
    catalog = catalog or connect()
    if isinstance(table, Mapping):
        if route_by is None:
            raise InvalidArgumentError(
                "route_by", None, "the column whose value picks the table, with a mapping of tables"
            )
        return _write_routed(
            df,
            table,
            catalog=catalog,
            route_by=route_by,
            dead_letter=dead_letter,
            job_id=job_id,
            checkpoint_id=checkpoint_id,
            branch=branch,
            target_file_size=target_file_size,
            task_hook=task_hook,
            recommit=recommit,
            completeness=completeness,
            query_id=query_id,
            store=store,
            distribution=distribution,
            maintenance=maintenance,
        )
    if route_by is not None or dead_letter is not None:
        raise InvalidArgumentError(
            "table", table_name(table), "a mapping of routing values to tables when route_by or dead_letter is given"
        )
    committer = GlobalCommitter(
        catalog, table, job_id=job_id, branch=branch, completeness=completeness, query_id=query_id, store=store
    )
    # One load serves the checks, the decision and the writers, unless the recovery
    # committed something (then the table changed and is loaded again).
    current = committer.load_table()
    check_table_properties(current.metadata)  # before any Spark job
    if committer.recover():
        current = committer.load_table()
    settled = _settled(committer, checkpoint_id, recommit, current)
    if settled is not None:
        return settled
    model = WriteModelStore(committer.store.engine)
    packing = distribution_mode(current.metadata, distribution) == "bin-pack"
    writer = SparkWriter(
        current,
        job_id=job_id,
        target_file_size=target_file_size,
        task_hook=task_hook,
        distribution=distribution,
        shuffle_ratio=_known_ratio(model, committer.table_name) if packing else None,
    )
    results = writer.write(df, checkpoint_id)
    _learn(model, committer.table_name, writer, [r.bytes for r in results])
    try:
        committer.prepare(checkpoint_id, results)
    except (SchemaMismatchError, ValidationError):
        removed = discard_unstaged(results, current.io)
        logger.warning("checkpoint %d refused; removed its %d unstaged data files", checkpoint_id, removed)
        raise
    result = committer.commit(checkpoint_id)
    _maintain_after(catalog, committer.table_name, maintenance, checkpoint_id)
    return result


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


def _dead_letter_table(catalog: Catalog, table: Table | str, df: DataFrame) -> Table:
    """The dead-letter table, created with the DataFrame's columns (all optional) if absent."""
    if isinstance(table, Table):
        return table
    try:
        return catalog.load_table(table)
    except NoSuchTableError:
        try:
            arrow = to_arrow_schema(df.schema, timezone="UTC")
        except TypeError:  # pyspark 3.5 has no timezone argument and always uses UTC
            arrow = to_arrow_schema(df.schema)
        schema = pa.schema([f.with_nullable(True) for f in arrow])
        logger.info("creating dead-letter table %s with the source's columns", table)
        return create_table(catalog, table, schema)


def _write_routed(
    df: DataFrame,
    routes: Routes,
    *,
    catalog: Catalog,
    route_by: str,
    dead_letter: Table | str | None,
    job_id: str,
    checkpoint_id: int,
    branch: str,
    target_file_size: int | None,
    task_hook: TaskHook | None,
    recommit: bool,
    completeness: PartitionCompleteness | None,
    query_id: str | None,
    store: CheckpointStore | None,
    distribution: str | None,
    maintenance: MaintenancePolicy | None,
) -> RoutedCommitResult:
    tables: dict[str, Table] = {}
    for target in routes.values():
        name = table_name(target)
        if name not in tables:
            tables[name] = load_table(catalog, name)
            check_table_properties(tables[name].metadata)  # before any Spark job
    check_routed_frame(df, tables, route_by)
    dead_name = None
    if dead_letter is not None:
        dead_name = table_name(dead_letter)
        if dead_name in tables:
            raise InvalidArgumentError("dead_letter", dead_name, "a table that is not also a route target")
        tables[dead_name] = _dead_letter_table(catalog, dead_letter, df)
    committers = {
        name: GlobalCommitter(
            catalog, name, job_id=job_id, branch=branch, completeness=completeness, query_id=query_id, store=store
        )
        for name in tables
    }
    for committer in committers.values():
        committer.recover()
    results: dict[str, CommitResult] = {}
    for name, committer in committers.items():
        settled = _settled(committer, checkpoint_id, recommit)
        if settled is not None:
            results[name] = settled
    pending = [name for name in tables if name not in results]
    skipped: dict[str, int] = {}
    if pending:
        writer = RoutedSparkWriter(
            {name: committers[name].load_table() for name in tables},
            {route_key(value): table_name(target) for value, target in routes.items()},
            route_by=route_by,
            dead_letter=dead_name,
            job_id=job_id,
            target_file_size=target_file_size,
            task_hook=task_hook,
            distribution=distribution,
        )
        written = writer.write(df, checkpoint_id, targets=pending)
        _prepare_all(written, committers, checkpoint_id, route_by, tables)
        for name in pending:
            results[name] = committers[name].commit(checkpoint_id)
        for name in pending:
            _maintain_after(catalog, name, maintenance, checkpoint_id)
        skipped = written.skipped_records
        if skipped:
            logger.info("checkpoint %d: rows of tables that already hold it, not written: %s", checkpoint_id, skipped)
    return RoutedCommitResult(
        checkpoint_id=checkpoint_id, results={name: results[name] for name in tables}, skipped_records=skipped
    )


def _prepare_all(
    written: RoutedWrite,
    committers: Mapping[str, GlobalCommitter],
    checkpoint_id: int,
    route_by: str,
    tables: Mapping[str, Table],
) -> None:
    """Validate every table's results before preparing any, so bad input leaves every
    table as it was; then prepare each (a crash part-way is settled by the next run)."""
    prepared: set[str] = set()
    results = written.results
    try:
        if written.unrouted_records:
            raise UnroutedRecordsError(
                route_by, written.unrouted_records, list(written.unrouted_values), checkpoint_id=checkpoint_id
            )
        for name, task_results in results.items():
            committers[name].validate(checkpoint_id, task_results)
        for name, task_results in results.items():
            others = [r for other, rs in results.items() if other != name for r in rs]
            committers[name].prepare(checkpoint_id, task_results, routed_with=others)
            prepared.add(name)
    except (SchemaMismatchError, ValidationError):
        removed = sum(
            discard_unstaged(task_results, tables[name].io)
            for name, task_results in results.items()
            if name not in prepared
        )
        logger.warning("checkpoint %d refused; removed %d unstaged data files", checkpoint_id, removed)
        raise


def _known_ratio(model: WriteModelStore, table: str) -> float | None:
    """The shuffle ratio the table's earlier bin-packed writes showed (None: unknown, or
    the state database could not say; the default is used then)."""
    try:
        return model.shuffle_ratio(table)
    except SQLAlchemyError:
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
    except SQLAlchemyError:
        logger.warning("could not record the shuffle ratio of %s", table, exc_info=True)
