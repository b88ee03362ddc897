"""Compaction: a partition's small data files rewritten into files near the target size.

``ic.compact`` plans before it acts. A partition of the table's current spec is a
candidate when it holds at least ``min_input_files`` files smaller than three quarters of
the target (Apache Iceberg's ``min-input-files`` and ``min-file-size-bytes`` defaults);
its small files are read a batch at a time and written again as files near the target
(rolled like a writer task's), in the local process or, given a SparkSession, one Spark task
per partition; the swap is one Iceberg ``replace`` snapshot, so that incremental readers of
other engines skip it. Before the swap, the group records in the state database how many
rows of each input file each output holds (:mod:`icecommit.state.compactions`), so that
reconciliation follows every checkpoint's rows exactly, after expiry too. Partitions are
committed in groups of at most ``max_bytes_per_commit`` input bytes (partial progress: a
failed group leaves the others).

Safe beside live commits: it takes no lock, and appends always win. Before each group's
commit, and again inside each retry after a conflict, every file it replaces must still be
live on the branch (not expired, rolled back or rewritten by another compaction) and no
delete file may have been added to its partitions since it planned; otherwise that group is
aborted: nothing is committed for it and the files it wrote are removed. A partition whose
files carry delete files (position or equality deletes of another engine) is not compacted
(rewriting it would have to apply them; it is reported as skipped). The replaced files are
never deleted here: expiry does that once no snapshot needs them.
"""

from __future__ import annotations

import json
import logging
import math
import pickle
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import TYPE_CHECKING

import pyarrow as pa
from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import ValidationException
from pyiceberg.expressions import AlwaysTrue, BooleanExpression
from pyiceberg.io import FileIO, load_file_io
from pyiceberg.io.pyarrow import ArrowScan
from pyiceberg.manifest import DataFile
from pyiceberg.table import FileScanTask, Table
from pyiceberg.table.locations import load_location_provider
from pyiceberg.table.metadata import TableMetadata, TableMetadataUtil

from icecommit.catalog.loading import load_table
from icecommit.committer import protocol
from icecommit.committer.planning import head_of
from icecommit.committer.producer import RewriteFiles
from icecommit.committer.retry import RetryPolicy
from icecommit.core.ancestry import branch_ancestry, require_branch
from icecommit.core.datafiles import DataFileRecord
from icecommit.core.errors import CommitStateUnknownError, InvalidArgumentError
from icecommit.core.identifiers import checked_count, checked_file_size, table_name
from icecommit.core.lineage import COMPACTION_ID_PROPERTY, path_key
from icecommit.state.compactions import CompactionStore, resolve_landed_groups
from icecommit.state.identity import table_state
from icecommit.state.manifests import to_data_file
from icecommit.writers.arrow import fitted, write_with
from icecommit.writers.files import TaskFileWriter, target_file_size

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

logger = logging.getLogger(__name__)

#: Iceberg's ``min-input-files`` default: fewer small files than this are left alone.
DEFAULT_MIN_INPUT_FILES = 5
#: Iceberg's ``max-file-group-size-bytes`` default (100 GiB) as the bytes one commit rewrites.
DEFAULT_MAX_BYTES_PER_COMMIT = 100 * 1024**3
#: The snapshot summary property a compaction commit carries.
COMPACTION_PROPERTY = "icecommit.compaction"

Partition = tuple[object, ...]


@dataclass(frozen=True)
class PartitionGroup:
    """One partition's small files, to be rewritten together.

    Attributes:
        partition: the partition values (Iceberg's internal representation), in spec order.
        label: the partition as a path, e.g. ``ts_hour=2026-05-01-13/event=click``.
        files: the paths of the files to rewrite.
        input_bytes / input_records: their total size and rows.
        expected_files: about how many files they become (bytes / target, rounded up).
    """

    partition: Partition
    label: str
    files: tuple[str, ...]
    input_bytes: int
    input_records: int
    expected_files: int


@dataclass(frozen=True)
class CommitGroup:
    """Partitions committed together, and what became of them.

    Attributes:
        status: ``planned`` (dry run), ``committed``, ``aborted`` (nothing committed), or
            ``deferred`` (not started: the time budget was spent).
        snapshot_id: the ``replace`` snapshot, when committed.
        output_files: files written for it (0 when planned or aborted).
        reason: why it was aborted.
    """

    partitions: tuple[PartitionGroup, ...]
    status: str = "planned"
    snapshot_id: int | None = None
    output_files: int = 0
    reason: str | None = None

    @property
    def input_files(self) -> int:
        return sum(len(p.files) for p in self.partitions)

    @property
    def input_bytes(self) -> int:
        return sum(p.input_bytes for p in self.partitions)


@dataclass(frozen=True)
class CompactionPlan:
    """What ``compact`` would do or did.

    Attributes:
        table / branch: what it compacts.
        base_snapshot_id: the snapshot it planned from.
        target_file_size: the size the files are rewritten to.
        groups: the commit groups, in order.
        skipped: partitions left alone (by label) and why (delete files, another spec).
        applied: False for a dry run.
    """

    table: str
    branch: str
    base_snapshot_id: int | None
    target_file_size: int
    groups: tuple[CommitGroup, ...]
    skipped: tuple[tuple[str, str], ...] = field(default_factory=tuple)
    applied: bool = False

    @property
    def committed(self) -> int:
        return sum(1 for g in self.groups if g.status == "committed")

    @property
    def aborted(self) -> int:
        return sum(1 for g in self.groups if g.status == "aborted")

    @property
    def deferred(self) -> int:
        return sum(1 for g in self.groups if g.status == "deferred")


#: Called at each step boundary of a commit group with the step about to run and the group:
#: ``rewrite`` (its inputs found live, no file written yet), ``commit`` (its files written,
#: before its lineage is recorded and the swap), ``attempt`` (each commit attempt, before it
#: checks its inputs again). Tests and soaks interleave other operations here.
StepHook = Callable[[str, CommitGroup], None]


class _Abort(Exception):
    """The group cannot be committed as planned; nothing of it lands."""


def plan_compaction(
    catalog: Catalog,
    table: Table | str,
    *,
    where: BooleanExpression | str | None = None,
    target_file_size: int | None = None,
    min_input_files: int = DEFAULT_MIN_INPUT_FILES,
    max_bytes_per_commit: int = DEFAULT_MAX_BYTES_PER_COMMIT,
    branch: str = "main",
    partition_filter: Callable[[PartitionGroup], bool] | None = None,
) -> CompactionPlan:
    """Plan a compaction without changing anything (see the module).

    ``partition_filter`` keeps only the candidate partitions it returns True for (the
    maintenance policy keeps the partitions published complete).

    Raises:
        InvalidArgumentError: a size or count that is not a positive whole number, or a
            branch the table does not have.
        TableNotFoundError: no such table.
    """
    name = table_name(table)
    target = checked_file_size(target_file_size)
    checked_count(min_input_files, "min_input_files")
    checked_count(max_bytes_per_commit, "max_bytes_per_commit")
    loaded = load_table(catalog, table)
    require_branch(loaded.metadata, branch)
    target = target or _target(loaded)
    head = loaded.refs().get(branch)
    if head is None:
        return CompactionPlan(name, branch, None, target, ())
    tasks = loaded.scan(row_filter=where if where is not None else AlwaysTrue(), snapshot_id=head.snapshot_id)
    spec_id = loaded.metadata.default_spec_id
    small_limit = target * 3 // 4
    by_partition: dict[Partition, list[FileScanTask]] = defaultdict(list)
    skipped: dict[Partition, str] = {}
    labels: dict[Partition, str] = {}
    for task in tasks.plan_files():
        data = task.file
        partition = _partition(data)
        if partition not in labels:
            spec = loaded.metadata.specs().get(data.spec_id, loaded.spec())
            labels[partition] = spec.partition_to_path(data.partition, loaded.schema()) or "(unpartitioned)"
        if data.spec_id != spec_id:
            skipped.setdefault(partition, f"files of an older partition spec ({data.spec_id})")
            continue
        if task.delete_files:
            skipped[partition] = "delete files apply to its rows"
            continue
        if data.file_size_in_bytes < small_limit:
            by_partition[partition].append(task)
    candidates = []
    for partition, found in sorted(by_partition.items(), key=lambda item: str(item[0])):
        if partition in skipped or len(found) < min_input_files:
            continue
        size = sum(t.file.file_size_in_bytes for t in found)
        candidates.append(
            PartitionGroup(
                partition=partition,
                label=labels[partition],
                files=tuple(sorted(t.file.file_path for t in found)),
                input_bytes=size,
                input_records=sum(t.file.record_count for t in found),
                expected_files=max(1, math.ceil(size / target)),
            )
        )
    if partition_filter is not None:
        candidates = [c for c in candidates if partition_filter(c)]
    groups: list[CommitGroup] = []
    current: list[PartitionGroup] = []
    for candidate in candidates:
        if current and sum(p.input_bytes for p in current) + candidate.input_bytes > max_bytes_per_commit:
            groups.append(CommitGroup(tuple(current)))
            current = []
        current.append(candidate)
    if current:
        groups.append(CommitGroup(tuple(current)))
    named = tuple(sorted((labels[partition], reason) for partition, reason in skipped.items()))
    return CompactionPlan(name, branch, head.snapshot_id, target, tuple(groups), named)


def compact(
    catalog: Catalog,
    table: Table | str,
    *,
    where: BooleanExpression | str | None = None,
    target_file_size: int | None = None,
    min_input_files: int = DEFAULT_MIN_INPUT_FILES,
    max_bytes_per_commit: int = DEFAULT_MAX_BYTES_PER_COMMIT,
    branch: str = "main",
    dry_run: bool = False,
    spark: SparkSession | None = None,
    retry_policy: RetryPolicy | None = None,
    on_step: StepHook | None = None,
    partition_filter: Callable[[PartitionGroup], bool] | None = None,
    time_budget: timedelta | None = None,
) -> CompactionPlan:
    """Rewrite small files into files near the target size, one ``replace`` snapshot per
    commit group (see the module); with ``dry_run`` only the plan.

    Args:
        spark: rewrite each partition's files as a Spark task (one Spark job per commit
            group), so the work spreads over the cluster; without it, in this process.
        partition_filter: as :func:`plan_compaction`.
        time_budget: start no group once this much time has passed (the groups left are
            returned ``deferred``; a group already started finishes).

    Returns:
        The plan, each group marked committed (with its snapshot) or aborted (with why).

    Raises:
        InvalidArgumentError, TableNotFoundError: as :func:`plan_compaction`.
        CommitConflictError: a group's commit lost every retry to other commits (groups
            committed before it stay committed; its files are removed).
        StateDatabaseError: the table's state database cannot record the group (nothing of
            the group is committed, its files are removed).
    """
    plan = plan_compaction(
        catalog, table, where=where, target_file_size=target_file_size, min_input_files=min_input_files,
        max_bytes_per_commit=max_bytes_per_commit, branch=branch, partition_filter=partition_filter,
    )  # fmt: skip
    if time_budget is not None and (not isinstance(time_budget, timedelta) or time_budget < timedelta(0)):
        raise InvalidArgumentError("time_budget", time_budget, "a timedelta of zero or more, or None for no limit")
    if spark is not None and not _is_spark_session(spark):
        raise InvalidArgumentError("spark", type(spark).__name__, "a SparkSession, or None to rewrite in this process")
    if dry_run or not plan.groups:
        return replace(plan, applied=not dry_run)
    loaded = load_table(catalog, plan.table)
    store = CompactionStore(table_state(catalog, loaded).engine)
    resolve_landed_groups(store, plan.table, loaded)
    done = []
    started = time.monotonic()
    for group in plan.groups:
        if time_budget is not None and time.monotonic() - started >= time_budget.total_seconds():
            done.append(replace(group, status="deferred", reason=f"the time budget ({time_budget}) was spent"))
            continue
        done.append(_rewrite(catalog, plan, group, store, spark, retry_policy, on_step or _no_step))
    result = replace(plan, groups=tuple(done), applied=True)
    logger.info("compacted %s: %d group(s) committed, %d aborted", plan.table, result.committed, result.aborted)
    return result


def _target(table: Table) -> int:
    return target_file_size(table.metadata)


@dataclass(frozen=True)
class _Written:
    """What rewriting one partition's files produced: the files, and how many rows of
    which input each holds (input path key, output path key, rows), or why it failed."""

    outputs: tuple[DataFileRecord, ...] = ()
    rewritten: tuple[tuple[str, str, int], ...] = ()
    error: str | None = None

    def to_json(self) -> str:
        return json.dumps(
            {"outputs": [f.to_dict() for f in self.outputs], "rewritten": self.rewritten, "error": self.error}
        )

    @classmethod
    def from_json(cls, text: str) -> _Written:
        data = json.loads(text)
        return cls(
            tuple(DataFileRecord.from_dict(f) for f in data["outputs"]),
            tuple((i, o, int(n)) for i, o, n in data["rewritten"]),
            data["error"],
        )


def rewrite_partition(
    metadata: TableMetadata,
    io: FileIO,
    tasks: Sequence[FileScanTask],
    *,
    target_size: int,
    task_id: int = 0,
    attempt: int = 0,
) -> _Written:
    """Read one partition's files, in order, a batch at a time, and write their rows again
    as files near ``target_size`` (what one compaction task does). Rows keep their order,
    so the output files hold consecutive runs of the inputs: the lineage is exact.

    Raises:
        _Abort: a file holds another number of rows than its metadata says (nothing is
            left behind).
    """
    writer = TaskFileWriter(
        metadata,
        io,
        job_id=None,
        checkpoint_id=0,
        task_id=task_id,
        attempt=attempt,
        location_provider=load_location_provider(metadata.location, metadata.properties),
        target_size=target_size,
    )
    read: list[tuple[str, int]] = []

    def batches() -> Iterator[pa.RecordBatch]:
        scan = ArrowScan(metadata, io, metadata.schema(), AlwaysTrue())
        for task in tasks:
            rows = 0
            for batch in scan.to_record_batches([task]):
                rows += batch.num_rows
                yield batch
            if rows != task.file.record_count:
                raise _Abort(
                    f"{task.file.file_path} holds {rows} rows, its metadata says {task.file.record_count}; "
                    "the group is not rewritten"
                )
            read.append((task.file.file_path, rows))

    # files of one partition may come from different writers (icecommit's, pyiceberg's append,
    # another engine's), read back with different Arrow types for one column (string and
    # large_string): each batch is cast to the table's types before they are written together
    written = write_with(writer, fitted(batches(), metadata.schema(), metadata.location))
    outputs = written.data_files
    return _Written(outputs, tuple(_rewritten(read, [(f.path, f.record_count) for f in outputs])))


def _rewritten(inputs: Sequence[tuple[str, int]], outputs: Sequence[tuple[str, int]]) -> Iterator[tuple[str, str, int]]:
    """Rows of consecutive inputs written to consecutive outputs: (input, output, rows) for
    every pair that shares rows (path keys)."""
    if sum(n for _, n in inputs) != sum(n for _, n in outputs):
        raise _Abort(
            f"the rewrite read {sum(n for _, n in inputs)} rows and wrote {sum(n for _, n in outputs)}; "
            "the group is not committed"
        )
    outs = iter(outputs)
    out_path, out_left = "", 0
    for in_path, in_left in inputs:
        while in_left:
            if not out_left:
                out_path, out_left = next(outs)
                continue
            take = min(in_left, out_left)
            yield path_key(in_path), path_key(out_path), take
            in_left -= take
            out_left -= take


def _rewrite_locally(
    table: Table, plan: CompactionPlan, partitions: Sequence[Sequence[FileScanTask]]
) -> list[_Written]:
    written: list[_Written] = []
    try:
        for unit, tasks in enumerate(partitions):
            written.append(_rewrite_unit(table.metadata, table.io, tasks, plan.target_file_size, unit, 0))
    except BaseException:  # interrupted: nothing of the group stays
        _remove(table.io, [f.path for w in written for f in w.outputs])
        raise
    return written


def _rewrite_unit(
    metadata: TableMetadata, io: FileIO, tasks: Sequence[FileScanTask], target: int, unit: int, attempt: int
) -> _Written:
    """One partition rewritten, or why it could not be (its own files already removed)."""
    try:
        return rewrite_partition(metadata, io, tasks, target_size=target, task_id=unit, attempt=attempt)
    except Exception as e:  # reported, so that the group is aborted
        logger.warning("compaction: rewriting partition %d failed: %r", unit, e)
        return _Written(error=str(e) if isinstance(e, _Abort) else f"{type(e).__name__}: {e}")


def _rewrite_with_spark(
    spark: SparkSession, table: Table, plan: CompactionPlan, partitions: Sequence[Sequence[FileScanTask]]
) -> list[_Written]:
    """One Spark job: each partition's files rewritten by one task. A task that fails
    removes its own files and reports why, so the group is aborted, not half-written."""
    from icecommit.writers.spark import ShippedTable, current_attempt

    shipped = ShippedTable.of(table)
    target = plan.target_file_size
    units = [(unit, pickle.dumps(list(tasks))) for unit, tasks in enumerate(partitions)]

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        attempt = current_attempt()
        metadata = TableMetadataUtil.parse_raw(shipped.metadata_json)
        io = load_file_io(shipped.io_properties, shipped.location)
        for batch in batches:
            for unit, blob in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist(), strict=True):
                result = _rewrite_unit(metadata, io, pickle.loads(blob), target, unit, attempt.attempt)
                yield pa.RecordBatch.from_pydict(
                    {"unit": pa.array([unit], pa.int32()), "result": pa.array([result.to_json()], pa.string())}
                )

    frame = spark.createDataFrame(units, "unit int, tasks binary").repartition(len(units), "unit")
    rows = frame.mapInArrow(run, "unit int, result string").collect()
    by_unit = {row["unit"]: _Written.from_json(row["result"]) for row in rows}
    return [by_unit[unit] for unit, _ in units]


def _rewrite(
    catalog: Catalog,
    plan: CompactionPlan,
    group: CommitGroup,
    store: CompactionStore,
    spark: SparkSession | None,
    retry_policy: RetryPolicy | None,
    on_step: StepHook,
) -> CommitGroup:
    table = load_table(catalog, plan.table)
    inputs = {path for p in group.partitions for path in p.files}
    try:
        live = {t.file.file_path: t for t in _live_tasks(table, plan, group, inputs)}
    except _Abort as e:
        logger.warning("compaction of %s: group aborted before writing: %s", plan.table, e)
        return replace(group, status="aborted", reason=str(e))
    partitions = [[live[path] for path in p.files] for p in group.partitions]
    on_step("rewrite", group)
    if spark is not None:
        written = _rewrite_with_spark(spark, table, plan, partitions)
    else:
        written = _rewrite_locally(table, plan, partitions)
    paths = [f.path for w in written for f in w.outputs]
    failed = [w.error for w in written if w.error is not None]
    if failed:
        _remove(table.io, paths)
        logger.warning("compaction of %s: group aborted, a rewrite task failed: %s", plan.table, failed[0])
        return replace(group, status="aborted", reason=f"a rewrite task failed: {failed[0]}")
    outputs = [to_data_file(record, table.metadata.format_version) for w in written for record in w.outputs]
    # the group's own id in its snapshot: a retry after a lost response finds it landed, and
    # the snapshot reported is this group's, not a concurrent append's
    group_id = uuid.uuid4().hex
    properties = {COMPACTION_PROPERTY: "true", COMPACTION_ID_PROPERTY: group_id}
    policy = retry_policy or RetryPolicy.from_properties(table.metadata.properties)
    recorded = False
    # the rewritten files keep the sequence number of the snapshot the plan read (Iceberg's
    # RewriteFiles rule): equality deletes committed since still apply to their rows
    base = table.metadata.snapshot_by_id(plan.base_snapshot_id) if plan.base_snapshot_id is not None else None
    started_from = base.sequence_number if base is not None else None

    operation = _ReplaceGroup(
        plan, group, group_id, inputs, outputs, properties, started_from, lambda: on_step("attempt", group)
    )
    try:
        on_step("commit", group)
        # where every row goes, recorded before the swap (reconciliation follows it)
        store.prepare(plan.table, group_id, (r for w in written for r in w.rewritten), input_files=len(inputs),
                      output_files=len(outputs))  # fmt: skip
        recorded = True
        snapshot_id = protocol.run(
            operation, base=load_table(catalog, plan.table), load=lambda: load_table(catalog, plan.table), policy=policy
        ).snapshot_id
        assert snapshot_id is not None  # a replace makes a snapshot
    except BaseException as e:
        landed = _landed_or_unknown(catalog, plan, group_id, operation.doubted)
        if landed is False:  # it did not land and cannot any more: nothing of it stays
            _remove(table.io, paths)
            if recorded:
                _forget(store, group_id)
            cause = e.cause if isinstance(e, CommitStateUnknownError) else e
            if isinstance(cause, (ValidationException, _Abort)):
                logger.warning("compaction of %s: group aborted, nothing committed: %s", plan.table, cause)
                reason = (
                    str(cause) if isinstance(cause, _Abort) else f"an input file changed during the commit: {cause}"
                )
                return replace(group, status="aborted", reason=reason)
            raise
        if landed is None:  # cannot tell: its files stay (the orphan sweep removes them if unused)
            raise
        snapshot_id = landed  # an attempt whose answer was lost had landed: its files are the table's now
    store.committed(group_id, snapshot_id)
    logger.info("compaction of %s: %d file(s) rewritten into %d as snapshot %d",
                plan.table, len(inputs), len(outputs), snapshot_id)  # fmt: skip
    return replace(group, status="committed", snapshot_id=snapshot_id, output_files=len(outputs))


class _ReplaceGroup(protocol.Operation):
    """Replacing a compaction group's input files by its outputs, in one snapshot that
    carries the group's id. Before each attempt: the group's id already on the branch (an
    attempt whose answer was lost landed), then its inputs still live with no delete file
    added against them (else the group is aborted, never re-applied on other rows)."""

    kind = "compaction"
    remedy = (
        "its files are kept; the next compaction or expiry records it if it landed, and the orphan sweep "
        "removes them if it did not"
    )

    def __init__(
        self,
        plan: CompactionPlan,
        group: CommitGroup,
        group_id: str,
        inputs: set[str],
        outputs: list[DataFile],
        properties: dict[str, str],
        started_from: int | None,
        on_attempt: Callable[[], None],
    ) -> None:
        self.plan = plan
        self.group = group
        self.group_id = group_id
        self.table_name = plan.table
        self.inputs = inputs
        self.outputs = outputs
        self.properties = properties
        self.started_from = started_from
        self._on_attempt = on_attempt
        self._current: dict[str, DataFile] = {}
        self._asserted: int | None = None
        #: heads asserted by attempts whose answer was lost (a REST 504): one may land later
        self.doubted: set[int | None] = set()

    def unknown(self, cause: BaseException) -> None:
        self.doubted.add(self._asserted)

    @property
    def label(self) -> str:
        return f"compaction group {self.group_id} of {self.plan.table}"

    def check(self, table: Table, number: int) -> protocol.Found | None:
        self._on_attempt()
        if number > 0 and (landed := _landed(table, self.plan.branch, self.group_id)) is not None:
            return protocol.Found(landed)
        self._current = {t.file.file_path: t.file for t in _live_tasks(table, self.plan, self.group, self.inputs)}
        return None

    def apply(self, table: Table) -> protocol.Applied:
        self._asserted = head_of(table, self.plan.branch)
        # the rewritten files keep the sequence number of the snapshot the plan read (Iceberg's
        # RewriteFiles rule): equality deletes committed since still apply to their rows
        with (
            table.transaction() as tx,
            RewriteFiles.of(
                tx, branch=self.plan.branch, snapshot_properties=self.properties, data_sequence_number=self.started_from
            ) as rewrite,
        ):
            for path in sorted(self.inputs):
                rewrite.delete_data_file(self._current[path])
            for data_file in self.outputs:
                rewrite.append_data_file(data_file)
        landed = _landed(table.catalog.load_table(self.plan.table), self.plan.branch, self.group_id)
        if landed is None:
            raise RuntimeError("the compaction snapshot is not on the branch after its commit")
        return protocol.Applied(landed, None)

    def find(self, table: Table) -> protocol.Found | None:
        landed = _landed(table, self.plan.branch, self.group_id)
        return protocol.Found(landed) if landed is not None else None


def _landed_or_unknown(
    catalog: Catalog, plan: CompactionPlan, group_id: str, doubted: set[int | None]
) -> int | bool | None:
    """The group's snapshot if it landed, False if it did not and cannot any more, None if
    that cannot be read or a lost attempt may still land (its asserted head is the head)."""
    try:
        table = load_table(catalog, plan.table)
        landed = _landed(table, plan.branch, group_id)
    except Exception:  # the catalog cannot answer: the files must stay
        logger.warning("compaction of %s: cannot tell whether group %s landed", plan.table, group_id, exc_info=True)
        return None
    if landed is None and head_of(table, plan.branch) in doubted:
        return None
    return False if landed is None else landed


def _forget(store: CompactionStore, group_id: str) -> None:
    try:
        store.aborted(group_id)
    except Exception:  # its lineage names files that never became live: harmless if it stays
        logger.warning("could not mark compaction group %s aborted", group_id, exc_info=True)


def _no_step(step: str, group: CommitGroup) -> None:
    return None


def _is_spark_session(value: object) -> bool:
    return any(c.__name__ == "SparkSession" for c in type(value).__mro__)


def _live_tasks(table: Table, plan: CompactionPlan, group: CommitGroup, inputs: set[str]) -> list[FileScanTask]:
    """The scan tasks of the group's input files as the branch has them now.

    Raises:
        _Abort: an input file is no longer live, or delete files were added to one of its
            partitions since the plan.
    """
    head = table.refs().get(plan.branch)
    if head is None:
        raise _Abort(f"branch {plan.branch} is gone")
    partitions = {p.partition for p in group.partitions}
    found: dict[str, FileScanTask] = {}
    for task in table.scan(snapshot_id=head.snapshot_id).plan_files():
        if _partition(task.file) not in partitions or task.file.spec_id != table.metadata.default_spec_id:
            continue
        if task.delete_files:
            raise _Abort(f"delete files were added to partition {_partition(task.file)} since the plan")
        if task.file.file_path in inputs:
            found[task.file.file_path] = task
    missing = sorted(inputs - set(found))
    if missing:
        raise _Abort(
            f"{len(missing)} input file(s) are no longer live (expired, rolled back or rewritten), e.g. {missing[0]}"
        )
    return [found[path] for path in sorted(inputs)]


def _landed(table: Table, branch: str, group_id: str) -> int | None:
    """The snapshot on the branch that committed the group with this id, if any."""
    for snapshot in branch_ancestry(table.metadata, branch):
        if snapshot.summary is not None and snapshot.summary.get(COMPACTION_ID_PROPERTY) == group_id:
            return snapshot.snapshot_id
    return None


def _partition(data_file: DataFile) -> Partition:
    record = data_file.partition
    return tuple(record[i] for i in range(len(record)))


def _remove(io: FileIO, paths: Sequence[str]) -> None:
    """Delete files this compaction wrote and did not commit (nothing references them)."""
    for path in paths:
        try:
            io.delete(path)
        except OSError:
            logger.warning("could not remove uncommitted compaction output %s", path)


__all__ = ["CommitGroup", "CompactionPlan", "PartitionGroup", "compact", "plan_compaction", "rewrite_partition"]
