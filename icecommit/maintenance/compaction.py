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

import logging
import math
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import TYPE_CHECKING

from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import ValidationException
from pyiceberg.expressions import AlwaysTrue, BooleanExpression
from pyiceberg.manifest import DataFile, DataFileContent, ManifestContent, ManifestEntry
from pyiceberg.table import FileScanTask, Table

from icecommit.catalog.loading import load_table
from icecommit.catalog.manifest_entries import read_entries
from icecommit.catalog.position_deletes import targets
from icecommit.committer import protocol
from icecommit.committer.planning import head_of
from icecommit.committer.producer import RewriteFiles
from icecommit.committer.retry import RetryPolicy
from icecommit.core import progress
from icecommit.core.ancestry import MAIN_BRANCH, branch_ancestry, require_branch
from icecommit.core.errors import CommitStateUnknownError, InvalidArgumentError
from icecommit.core.identifiers import checked_count, checked_file_size, table_name
from icecommit.core.lineage import COMPACTION_ID_PROPERTY
from icecommit.core.pyiceberg_internals import manifest_planner
from icecommit.maintenance.rewrite import (
    Aborted,
    remove_uncommitted,
    rewrite_locally,
    rewrite_with_spark,
)
from icecommit.state.compactions import CompactionStore, resolve_landed_groups
from icecommit.state.identity import table_state
from icecommit.state.maintenance_runs import COMPACTION, MaintenanceRunStore
from icecommit.state.manifests import to_data_file
from icecommit.writers.files import target_file_size

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

logger = logging.getLogger(__name__)

#: Iceberg's ``min-input-files`` default: fewer small files than this are left alone.
DEFAULT_MIN_INPUT_FILES = 5
#: Iceberg's ``max-file-group-size-bytes`` default (100 GiB) as the bytes one commit rewrites.
DEFAULT_MAX_BYTES_PER_COMMIT = 100 * 1024**3
#: Iceberg's ``delete-ratio-threshold`` default: a file with this share of its rows deleted
#: by position delete files is rewritten whatever its size.
DEFAULT_DELETE_RATIO = 0.3
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
        input_bytes / input_records: their total size and rows (deleted ones included).
        expected_files: about how many files they become (bytes / target, rounded up).
        deleted_records: rows of the files that position delete files remove (left out
            of the rewrite).
        delete_files: the position delete files that apply to the files.
    """

    partition: Partition
    label: str
    files: tuple[str, ...]
    input_bytes: int
    input_records: int
    expected_files: int
    deleted_records: int = 0
    delete_files: int = 0


@dataclass(frozen=True)
class CommitGroup:
    """Partitions committed together, and what became of them.

    Attributes:
        status: ``planned`` (dry run), ``committed``, ``aborted`` (nothing committed), or
            ``deferred`` (not started: the time budget was spent).
        snapshot_id: the ``replace`` snapshot, when committed.
        output_files: files written for it (0 when planned or aborted).
        removed_delete_files: position delete files it dropped (every data file they
            point at was rewritten without the rows they delete).
        reason: why it was aborted.
    """

    partitions: tuple[PartitionGroup, ...]
    status: str = "planned"
    snapshot_id: int | None = None
    output_files: int = 0
    removed_delete_files: int = 0
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
        skipped: partitions left alone (by label) and why (equality deletes, another spec).
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


def plan_compaction(
    catalog: Catalog,
    table: Table | str,
    *,
    where: BooleanExpression | str | None = None,
    target_file_size: int | None = None,
    min_input_files: int = DEFAULT_MIN_INPUT_FILES,
    max_bytes_per_commit: int = DEFAULT_MAX_BYTES_PER_COMMIT,
    branch: str = MAIN_BRANCH,
    partition_filter: Callable[[PartitionGroup], bool] | None = None,
    delete_ratio: float | None = DEFAULT_DELETE_RATIO,
) -> CompactionPlan:
    """Plan a compaction without changing anything (see the module).

    ``partition_filter`` keeps only the candidate partitions it returns True for (the
    maintenance policy keeps the partitions published complete). ``delete_ratio``: a data
    file of which at least this share of rows is deleted by position delete files is
    rewritten whatever its size, and its partition compacted (None: only small files).

    Raises:
        InvalidArgumentError: a size or count that is not a positive whole number, or a
            branch the table does not have.
        TableNotFoundError: no such table.
    """
    name = table_name(table)
    target = checked_file_size(target_file_size)
    checked_count(min_input_files, "min_input_files")
    checked_count(max_bytes_per_commit, "max_bytes_per_commit")
    checked_delete_ratio(delete_ratio)
    loaded = load_table(catalog, table)
    require_branch(loaded.metadata, branch)
    target = target or _target(loaded)
    head = loaded.refs().get(branch)
    if head is None:
        return CompactionPlan(name, branch, None, target, ())
    tasks, equality = _planned(loaded, head.snapshot_id, where if where is not None else AlwaysTrue())
    spec_id = loaded.metadata.default_spec_id
    small_limit = target * 3 // 4
    by_partition: dict[Partition, list[tuple[FileScanTask, int]]] = defaultdict(list)
    heavy: set[Partition] = set()
    skipped: dict[Partition, str] = {}
    labels: dict[Partition, str] = {}
    read: dict[str, dict[str, int]] = {}  # what the delete files that point at several files say
    for task in tasks:
        data = task.file
        partition = _partition(data)
        if partition not in labels:
            spec = loaded.metadata.specs().get(data.spec_id, loaded.spec())
            labels[partition] = spec.partition_to_path(data.partition, loaded.schema()) or "(unpartitioned)"
        if data.spec_id != spec_id:
            skipped.setdefault(partition, f"files of an older partition spec ({data.spec_id})")
            continue
        if equality is None or partition in equality:
            skipped[partition] = "equality delete files (another engine's) apply to its rows"
            continue
        deleted = min(
            data.record_count, sum(targets(loaded.io, d, read).get(data.file_path, 0) for d in task.delete_files)
        )
        over = delete_ratio is not None and deleted > 0 and deleted >= delete_ratio * data.record_count
        if over:
            heavy.add(partition)
        if over or data.file_size_in_bytes < small_limit:
            by_partition[partition].append((task, deleted))
    candidates = []
    for partition, found in sorted(by_partition.items(), key=lambda item: str(item[0])):
        if partition in skipped or (len(found) < min_input_files and partition not in heavy):
            continue
        size = sum(t.file.file_size_in_bytes for t, _ in found)
        candidates.append(
            PartitionGroup(
                partition=partition,
                label=labels[partition],
                files=tuple(sorted(t.file.file_path for t, _ in found)),
                input_bytes=size,
                input_records=sum(t.file.record_count for t, _ in found),
                expected_files=max(1, math.ceil(size / target)),
                deleted_records=sum(n for _, n in found),
                delete_files=len({d.file_path for t, _ in found for d in t.delete_files}),
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
    branch: str = MAIN_BRANCH,
    dry_run: bool = False,
    spark: SparkSession | None = None,
    retry_policy: RetryPolicy | None = None,
    on_step: StepHook | None = None,
    partition_filter: Callable[[PartitionGroup], bool] | None = None,
    time_budget: timedelta | None = None,
    delete_ratio: float | None = DEFAULT_DELETE_RATIO,
) -> CompactionPlan:
    """Rewrite small files into files near the target size, one ``replace`` snapshot per
    commit group (see the module); with ``dry_run`` only the plan.

    Args:
        spark: rewrite each partition's files as a Spark task (one Spark job per commit
            group), so the work spreads over the cluster; without it, in this process.
        partition_filter, delete_ratio: as :func:`plan_compaction`.
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
        delete_ratio=delete_ratio,
    )  # fmt: skip
    if time_budget is not None and (not isinstance(time_budget, timedelta) or time_budget < timedelta(0)):
        raise InvalidArgumentError("time_budget", time_budget, "a timedelta of zero or more, or None for no limit")
    if spark is not None and not _is_spark_session(spark):
        raise InvalidArgumentError("spark", type(spark).__name__, "a SparkSession, or None to rewrite in this process")
    if dry_run or not plan.groups:
        return replace(plan, applied=not dry_run)
    loaded = load_table(catalog, plan.table)
    engine = table_state(catalog, loaded).engine
    store = CompactionStore(engine)
    resolve_landed_groups(store, plan.table, loaded)
    done = []
    started = time.monotonic()
    with progress.step(f"compaction of {plan.table}: commit groups", len(plan.groups), "group(s)") as advance:
        for group in plan.groups:
            if time_budget is not None and time.monotonic() - started >= time_budget.total_seconds():
                done.append(replace(group, status="deferred", reason=f"the time budget ({time_budget}) was spent"))
            else:
                done.append(_rewrite(catalog, plan, group, store, spark, retry_policy, on_step or _no_step))
            advance(1)
    result = replace(plan, groups=tuple(done), applied=True)
    logger.info("compacted %s: %d group(s) committed, %d aborted", plan.table, result.committed, result.aborted)
    landed = [g for g in done if g.status == "committed"]
    if landed or result.aborted:  # groups all deferred did no work
        MaintenanceRunStore(engine).record(plan.table, COMPACTION, time.monotonic() - started, {
            "groups_committed": len(landed), "groups_aborted": result.aborted, "groups_deferred": result.deferred,
            "files_rewritten": sum(g.input_files for g in landed),
            "bytes_rewritten": sum(g.input_bytes for g in landed), "files_written": sum(g.output_files for g in landed),
            "delete_files_removed": sum(g.removed_delete_files for g in landed),
        })  # fmt: skip
    return result


def checked_delete_ratio(value: object, argument: str = "delete_ratio") -> float | None:
    """A share of a data file's rows above 0 and at most 1, or None.

    Raises:
        InvalidArgumentError: anything else, named as ``argument``.
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise InvalidArgumentError(argument, value, "a share of a data file's rows above 0 and at most 1, or None")
    return float(value)


def _target(table: Table) -> int:
    return target_file_size(table.metadata)


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
    live = _live_group(table, plan, group, inputs)
    if isinstance(live, str):
        logger.warning("compaction of %s: group aborted before writing: %s", plan.table, live)
        return replace(group, status="aborted", reason=live)
    partitions = [[live.tasks[path] for path in p.files] for p in group.partitions]
    on_step("rewrite", group)
    if spark is not None:
        written = rewrite_with_spark(spark, table, plan.target_file_size, partitions, live.added_by)
    else:
        written = rewrite_locally(table, plan.target_file_size, partitions, live.added_by)
    paths = [f.path for w in written for f in w.outputs]
    failed = [w.error for w in written if w.error is not None]
    if failed:
        remove_uncommitted(table.io, paths)
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
        plan, group, group_id, live, outputs, properties, started_from, lambda: on_step("attempt", group)
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
            remove_uncommitted(table.io, paths)
            if recorded:
                _forget(store, group_id)
            cause = e.cause if isinstance(e, CommitStateUnknownError) else e
            if isinstance(cause, (ValidationException, Aborted)):
                logger.warning("compaction of %s: group aborted, nothing committed: %s", plan.table, cause)
                reason = (
                    str(cause) if isinstance(cause, Aborted) else f"an input file changed during the commit: {cause}"
                )
                return replace(group, status="aborted", reason=reason)
            raise
        if landed is None:  # cannot tell: its files stay (the orphan sweep removes them if unused)
            raise
        snapshot_id = landed  # an attempt whose answer was lost had landed: its files are the table's now
    store.committed(group_id, snapshot_id)
    dropped = len(operation.droppable)
    logger.info("compaction of %s: %d file(s) rewritten into %d as snapshot %d (%d deleted row(s) left out, "
                "%d delete file(s) dropped)", plan.table, len(inputs), len(outputs), snapshot_id,
                sum(w.dropped for w in written), dropped)  # fmt: skip
    return replace(
        group, status="committed", snapshot_id=snapshot_id, output_files=len(outputs), removed_delete_files=dropped
    )


class _ReplaceGroup(protocol.Operation):
    """Replacing a compaction group's input files by its outputs, in one snapshot that
    carries the group's id, and dropping the delete files that applied only to them.
    Before each attempt: the group's id already on the branch (an attempt whose answer was
    lost landed), then its inputs still live with the very delete files the rewrite
    applied (else the group is aborted, never re-applied on other rows)."""

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
        rewritten: _LiveGroup,
        outputs: list[DataFile],
        properties: dict[str, str],
        started_from: int | None,
        on_attempt: Callable[[], None],
    ) -> None:
        self.plan = plan
        self.group = group
        self.group_id = group_id
        self.table_name = plan.table
        self.inputs = set(rewritten.tasks)
        self.applied = rewritten.applied
        self.outputs = outputs
        self.properties = properties
        self.started_from = started_from
        self._on_attempt = on_attempt
        self._current: dict[str, DataFile] = {}
        self.droppable: tuple[DataFile, ...] = rewritten.droppable
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
        live = _live_group(table, self.plan, self.group, self.inputs)
        if isinstance(live, str):
            raise Aborted(live)
        changed = sorted(path for path, deletes in live.applied.items() if deletes != self.applied[path])
        if changed:
            raise Aborted(
                f"the delete files of {len(changed)} input file(s) changed since they were rewritten (rows were "
                f"deleted from them meanwhile), e.g. {changed[0]}"
            )
        self._current = {path: task.file for path, task in live.tasks.items()}
        self.droppable = live.droppable
        return None

    def apply(self, table: Table) -> protocol.Applied:
        self._asserted = head_of(table, self.plan.branch)
        # the rewritten files keep the sequence number of the snapshot the plan read (Iceberg's
        # RewriteFiles rule): equality deletes committed since still apply to their rows
        with (
            table.transaction() as tx,
            RewriteFiles.of(
                tx,
                branch=self.plan.branch,
                snapshot_properties=self.properties,
                data_sequence_number=self.started_from,
                removed_deletes=self.droppable,
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


@dataclass(frozen=True)
class _LiveGroup:
    """A group's input files as the branch has them now.

    Attributes:
        tasks: each input's scan task (with the delete files that apply to it), by path.
        applied: the paths of each input's delete files.
        added_by: each of those delete files' (sequence number, snapshot that added it).
        droppable: those delete files that point at no live file but the inputs: once the
            inputs are rewritten without their deleted rows, nothing needs them.
    """

    tasks: dict[str, FileScanTask]
    applied: dict[str, frozenset[str]]
    added_by: dict[str, tuple[int, int]]
    droppable: tuple[DataFile, ...]


def _live_group(table: Table, plan: CompactionPlan, group: CommitGroup, inputs: set[str]) -> _LiveGroup | str:
    """The group's inputs as the branch has them now, or why the group can no longer be
    committed: its branch is gone, an input file is no longer live, or equality delete
    files were added to one of its partitions since the plan."""
    head = table.refs().get(plan.branch)
    if head is None:
        return f"branch {plan.branch} is gone"
    partitions = {p.partition for p in group.partitions}
    found: dict[str, FileScanTask] = {}
    live: set[str] = set()
    tasks, equality = _planned(table, head.snapshot_id, AlwaysTrue())
    if equality is None or equality & partitions:
        return "equality delete files (another engine's) were added to its partitions since the plan"
    for task in tasks:
        live.add(task.file.file_path)
        if _partition(task.file) not in partitions or task.file.spec_id != table.metadata.default_spec_id:
            continue
        if task.file.file_path in inputs:
            found[task.file.file_path] = task
    missing = sorted(inputs - set(found))
    if missing:
        return f"{len(missing)} input file(s) are no longer live (expired, rolled back or rewritten), e.g. {missing[0]}"
    deletes = {d.file_path: d for task in found.values() for d in task.delete_files}
    added_by = _added_by(table, head.snapshot_id) if deletes else {}
    read: dict[str, dict[str, int]] = {}
    droppable = tuple(
        delete
        for path, delete in sorted(deletes.items())
        if all(target in inputs or target not in live for target in targets(table.io, delete, read))
    )
    return _LiveGroup(
        tasks={path: found[path] for path in sorted(inputs)},
        applied={path: frozenset(d.file_path for d in task.delete_files) for path, task in found.items()},
        added_by={path: added_by[path] for path in deletes},
        droppable=droppable,
    )


def _planned(
    table: Table, snapshot_id: int, where: BooleanExpression | str
) -> tuple[list[FileScanTask], set[Partition] | None]:
    """The snapshot's scan tasks, each with the position delete files that apply to it,
    and the partitions of the current spec that equality delete files (another engine's)
    apply to: compaction leaves those alone (None: they may apply anywhere). pyiceberg's
    own planning refuses a table with any equality delete file."""
    equality: list[DataFile] = []

    def positional(entry: ManifestEntry) -> bool:
        if entry.data_file.content == DataFileContent.EQUALITY_DELETES:
            equality.append(entry.data_file)
            return False
        return True

    scan = table.scan(row_filter=where, snapshot_id=snapshot_id)
    snapshot = table.metadata.snapshot_by_id(snapshot_id)
    assert snapshot is not None  # the head of a branch
    tasks = list(manifest_planner(scan).plan_files(snapshot.manifests(table.io), manifest_entry_filter=positional))
    spec = table.metadata.spec()
    if any(d.spec_id != spec.spec_id for d in equality) or (equality and spec.is_unpartitioned()):
        return tasks, None
    return tasks, {_partition(d) for d in equality}


def _added_by(table: Table, snapshot_id: int) -> dict[str, tuple[int, int]]:
    """Each live delete file of the snapshot: (its sequence number, the snapshot that added it)."""
    snapshot = table.metadata.snapshot_by_id(snapshot_id)
    assert snapshot is not None  # the head of a branch
    return {
        entry.file_path: (entry.sequence_number or 0, entry.snapshot_id or 0)
        for manifest in snapshot.manifests(table.io)
        if manifest.content == ManifestContent.DELETES
        for entry in read_entries(table.io, manifest)
    }


def _landed(table: Table, branch: str, group_id: str) -> int | None:
    """The snapshot on the branch that committed the group with this id, if any."""
    for snapshot in branch_ancestry(table.metadata, branch):
        if snapshot.summary is not None and snapshot.summary.get(COMPACTION_ID_PROPERTY) == group_id:
            return snapshot.snapshot_id
    return None


def _partition(data_file: DataFile) -> Partition:
    record = data_file.partition
    return tuple(record[i] for i in range(len(record)))


__all__ = [
    "CommitGroup",
    "CompactionPlan",
    "PartitionGroup",
    "checked_delete_ratio",
    "compact",
    "plan_compaction",
]
