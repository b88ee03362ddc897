"""Reconciliation: prove source = written = committed = readable, or say where not.

Gathering (SQL reads, table metadata, storage look-ups) sits in :func:`reconcile`; every
judgement is made by :func:`icecommit.metrics.judge.judge`, a pure function over the
gathered facts.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections import Counter, defaultdict
from collections.abc import Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone

import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from pyiceberg.catalog import Catalog
from pyiceberg.io import FileIO
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.manifest import DataFileContent
from pyiceberg.table import Table
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.snapshots import Snapshot
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from icecommit.catalog.loading import load_table
from icecommit.catalog.manifest_entries import read_entries
from icecommit.catalog.position_deletes import referenced_rows
from icecommit.catalog.removals import removals_of
from icecommit.core import ancestry, progress, telemetry
from icecommit.core.ancestry import MAIN_BRANCH
from icecommit.core.errors import InvalidRangeError, JobNotFoundError
from icecommit.core.eventtime import event_time_column
from icecommit.core.identifiers import checked_instant, table_name
from icecommit.core.lineage import Fate, FateTracer, path_key
from icecommit.core.overwrite import OVERWRITE_PARTITIONS, REPLACED_PARTITIONS
from icecommit.core.paths import StorageKey, UnsupportedPathError, storage_key
from icecommit.core.upsert import (
    CHECKPOINT_KEYS,
    DELETE_CHANGES,
    DELETED_KEYS,
    DELETED_ROWS,
    INSERTED_KEYS,
    RECEIVED_ROWS,
    UPDATED_KEYS,
    UPSERT,
)
from icecommit.core.write_modes import WRITE_MODE_PROPERTY
from icecommit.metrics.judge import Facts, Key, LiveDeleteFile, LiveFile, Overwrite, Window, judge
from icecommit.metrics.render import summary_counts
from icecommit.metrics.report_model import (
    ReconciliationReport,
    Thresholds,
)
from icecommit.state import source_counts
from icecommit.state.checkpoints import ABANDONED, COMMITTED, HELD, CheckpointState
from icecommit.state.compactions import CompactionStore, Lineage
from icecommit.state.identity import table_state
from icecommit.state.manifests import read_staged_manifest
from icecommit.state.models import CheckpointTaskRow, MetricRow, as_utc, in_utc
from icecommit.state.partitions import PartitionStatusStore
from icecommit.state.samples import (
    QUERY_INPUT_KEPT,
    QUERY_INPUT_ROUTED,
    QUERY_INPUT_ROUTED_KEPT,
    QUERY_INPUT_STAGES,
    SOURCE,
    STAGE_COMMITTED,
    WRITTEN,
)

logger = logging.getLogger(__name__)

# -- gathering --------------------------------------------------------------------------


def _metric_counts(
    engine: Engine, table: str, keys: set[Key]
) -> tuple[dict[Key, dict[str, dict[Window, int]]], dict[Key, dict[Window, int]], dict[Key, dict[Window, int]],
           list[tuple[str, int, int, int, int]], dict[Key, tuple[int, bool]], set[Key]]:  # fmt: skip
    """Counts per checkpoint from the metrics table; the last two are the query input a
    streaming sink recorded and which of those batches were routed to several tables."""
    task_counts: dict[Key, dict[str, dict[Window, int]]] = defaultdict(lambda: defaultdict(dict))
    declared: dict[Key, dict[Window, int]] = defaultdict(dict)
    committed: dict[Key, dict[Window, int]] = defaultdict(dict)
    query_input: dict[Key, tuple[int, bool]] = {}
    routed: set[Key] = set()
    if not keys:
        return task_counts, declared, committed, [], query_input, routed
    # The database narrows to the range's jobs and checkpoint ids (a scheduled run's few
    # checkpoints of a table with thousands; the keys themselves are matched here) and
    # sums per task attempt; which attempts a checkpoint accepted is read on its own and
    # matched here too. Joining the two tables in SQL left the plan to the planners: with
    # the id range, SQLite probed the task table by range instead of by equality and
    # PostgreSQL, its statistics stale after a bulk load, chose a nested loop over every
    # pair; either made a whole-table run of 10,000 checkpoints take 30 to 60 s.
    ids = [checkpoint_id for _, checkpoint_id in keys]
    jobs = sorted({job for job, _ in keys})
    with Session(engine) as session:
        accepted = {
            (job_id, checkpoint_id, task_id, attempt)
            for job_id, checkpoint_id, task_id, attempt in session.execute(
                select(CheckpointTaskRow.job_id, CheckpointTaskRow.checkpoint_id, CheckpointTaskRow.task_id,
                       CheckpointTaskRow.attempt)
                .where(CheckpointTaskRow.table_name == table, CheckpointTaskRow.job_id.in_(jobs),
                       CheckpointTaskRow.checkpoint_id.between(min(ids), max(ids)))
            )
        }  # fmt: skip
        rows = session.execute(
            select(MetricRow.job_id, MetricRow.checkpoint_id, MetricRow.task_id, MetricRow.attempt, MetricRow.stage,
                   MetricRow.window_start, func.sum(MetricRow.records))
            .where(MetricRow.table_name == table, MetricRow.job_id.in_(jobs),
                   MetricRow.checkpoint_id.between(min(ids), max(ids)))
            .group_by(MetricRow.job_id, MetricRow.checkpoint_id, MetricRow.task_id, MetricRow.attempt,
                      MetricRow.stage, MetricRow.window_start)
        ).all()  # fmt: skip
    ignored_by: Counter[tuple[str, int, int, int]] = Counter()
    for job_id, checkpoint_id, task_id, attempt, stage, window, summed in rows:
        key = (job_id, checkpoint_id)
        if key not in keys:
            continue
        records = int(summed)
        when = as_utc(window) if window else None
        if task_id is not None:  # from a task attempt: counted only if the checkpoint accepted it
            if (job_id, checkpoint_id, task_id, attempt) in accepted:
                by_window = task_counts[key][stage]
                by_window[when] = by_window.get(when, 0) + records
            elif stage == WRITTEN:
                ignored_by[(job_id, checkpoint_id, int(task_id), int(attempt or 0))] += records
            continue
        if stage in QUERY_INPUT_STAGES:
            query_input[key] = (records, stage in (QUERY_INPUT_KEPT, QUERY_INPUT_ROUTED_KEPT))
            if stage in (QUERY_INPUT_ROUTED, QUERY_INPUT_ROUTED_KEPT):
                routed.add(key)
            continue
        target = declared if stage == SOURCE else committed if stage == STAGE_COMMITTED else None
        if target is not None:
            target[key][when] = target[key].get(when, 0) + records
    ignored = [(*attempt_key, records) for attempt_key, records in sorted(ignored_by.items())]
    return task_counts, declared, committed, ignored, query_input, routed


def _live_files(table: Table, branch: str, from_sequence: int = 0) -> tuple[list[LiveFile], list[LiveDeleteFile]]:
    """The live data files and row-level delete files of the branch's head, from the
    manifests written at or after data sequence number ``from_sequence`` (a file's entry
    is only ever in manifests written by the snapshot that added it or later ones, so
    every file added at that sequence number or later is among them; 0 reads them all)."""
    snapshot = ancestry.branch_head(table.metadata, branch)
    if snapshot is None:
        return [], []
    files = []
    deletes = []
    for manifest in snapshot.manifests(table.io):
        if from_sequence > 0 and manifest.sequence_number < from_sequence:
            continue
        for entry in read_entries(table.io, manifest):
            if entry.snapshot_id is None:
                continue
            sequence = entry.sequence_number or 0
            if entry.content == DataFileContent.DATA:
                files.append(LiveFile(entry.file_path, entry.record_count, entry.snapshot_id, sequence))
            else:
                deletes.append(
                    LiveDeleteFile(
                        entry.file_path,
                        entry.content == DataFileContent.EQUALITY_DELETES,
                        entry.record_count,
                        entry.snapshot_id,
                        sequence,
                    )
                )
    return files, deletes


def _first_sequence(metadata: TableMetadata, snapshot_ids: Collection[int]) -> int:
    """The lowest data sequence number of the given snapshots: the manifests that can hold
    their files are those written at or after it. 0 (read every manifest) for a v1 table
    (no sequence numbers), when a snapshot is no longer in the metadata (expired: its
    sequence number is unknown), or when there is no snapshot to look for."""
    if metadata.format_version < 2 or not snapshot_ids:
        return 0
    sequences = {s.snapshot_id: s.sequence_number for s in metadata.snapshots}
    if any(sid not in sequences for sid in snapshot_ids):
        return 0
    return min(sequences[sid] or 0 for sid in snapshot_ids)


def _row_deletes(
    table: Table, live: Sequence[LiveFile], deletes: Sequence[LiveDeleteFile], snapshot_keys: Mapping[int, Key]
) -> tuple[dict[Key, dict[tuple[int, str], int]], dict[str, dict[tuple[int, str], int]]]:
    """Rows of each checkpoint's live files that position delete files remove (a delete
    applies to data files of its sequence number or older), per deleting snapshot; and the
    same for the live files no checkpoint added (a compaction's), by path key."""
    positional = [d for d in deletes if not d.equality]
    if not positional:
        return {}, {}
    by_path = {path_key(f.path): f for f in live}
    removed: dict[Key, dict[tuple[int, str], int]] = defaultdict(lambda: defaultdict(int))
    rewritten: dict[str, dict[tuple[int, str], int]] = defaultdict(lambda: defaultdict(int))

    def read(delete: LiveDeleteFile) -> tuple[LiveDeleteFile, dict[str, int]]:
        return delete, referenced_rows(table.io, delete.path)

    with ThreadPoolExecutor(max_workers=4) as pool:
        for delete, counts in pool.map(read, positional):
            for path, count in counts.items():
                target = by_path.get(path_key(path))
                if target is None or target.sequence > delete.sequence:
                    continue
                key = snapshot_keys.get(target.snapshot_id)
                rows = min(count, target.records)
                if key is not None:
                    removed[key][(delete.snapshot_id, "row-level delete")] += rows
                else:
                    rewritten[path_key(path)][(delete.snapshot_id, "row-level delete")] += rows
    return {key: dict(by) for key, by in removed.items()}, {path: dict(by) for path, by in rewritten.items()}


def _missing(paths: Sequence[str], io: FileIO) -> list[str]:
    """Paths absent from storage: one batched look-up per file system (exact paths, no
    listing), through the table's own FileIO (its endpoint and credentials); paths are
    grouped by storage key, so ``file:/x`` and ``file:///x`` reach the same file."""
    if not paths:
        return []
    by_store: dict[tuple[str, str], list[tuple[str, StorageKey]]] = defaultdict(list)
    unkeyed: list[str] = []
    for path in paths:
        try:
            key = storage_key(path)
        except UnsupportedPathError:
            unkeyed.append(path)
            continue
        by_store[(key.scheme, key.authority)].append((path, key))
    missing = [p for p in unkeyed if not io.new_input(p).exists()]
    for (scheme, authority), group in by_store.items():
        if scheme == "file":
            filesystem: pafs.FileSystem = pafs.LocalFileSystem()
        elif isinstance(io, PyArrowFileIO):
            filesystem = io.fs_by_scheme(scheme, authority)
        else:
            missing.extend(p for p, _ in group if not io.new_input(p).exists())
            continue
        natives = [key.path if scheme == "file" else f"{authority}{key.path}" for _, key in group]
        infos = filesystem.get_file_info(natives)
        missing.extend(p for (p, _), info in zip(group, infos, strict=True) if info.type == pafs.FileType.NotFound)
    return missing


def _deep_counts(
    table: Table,
    live: Sequence[LiveFile],
    snapshot_keys: Mapping[int, Key],
    event_time: str | None,
    missing: Collection[str] = (),
) -> dict[Key, dict[Window, int]]:
    """Readable rows per checkpoint and window, from the data. Files found missing count
    zero rows (they are reported as missing), as does a file that vanishes mid-read."""
    counts: dict[Key, dict[Window, int]] = defaultdict(lambda: defaultdict(int))
    gone = set(missing)

    def read(file: LiveFile) -> tuple[Key | None, Counter[Window]]:
        key = snapshot_keys.get(file.snapshot_id)
        windows: Counter[Window] = Counter()
        if file.path in gone:
            return key, windows
        try:
            with table.io.new_input(file.path).open() as stream:
                data = pq.read_table(stream, columns=[event_time] if event_time else [])
        except FileNotFoundError:
            logger.warning("data file vanished while reading it: %s", file.path)
            return key, windows
        if event_time is None:
            windows[None] += data.num_rows
            return key, windows
        minutes = pc.floor_temporal(data.column(event_time), unit="minute")
        for item in pc.value_counts(minutes).to_pylist():
            value = item["values"]
            windows[as_utc(value) if value is not None else None] += item["counts"]
        return key, windows

    files = [f for f in live if f.snapshot_id in snapshot_keys]
    with (
        ThreadPoolExecutor(max_workers=4) as pool,
        progress.step(f"deep reconcile of {table_name(table)}: reading data files", len(files), "file(s)") as advance,
    ):
        for key, windows in pool.map(read, files):
            if key is not None:
                for window, n in windows.items():
                    counts[key][window] += n
            advance(1)
    return counts


def reconcile(
    catalog: Catalog,
    table: Table | str,
    *,
    job_id: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    deep: bool = False,
    thresholds: Thresholds | None = None,
    branch: str = MAIN_BRANCH,
) -> ReconciliationReport:
    """Reconcile a table's checkpoints prepared in ``[since, until)``.

    Args:
        catalog: the table's catalog (the state database it names holds the metrics;
            see :func:`icecommit.state.state_uri`).
        table: the table.
        job_id: only this job's checkpoints (all jobs when None).
        since / until: the range of checkpoint prepare times (until defaults to now).
        deep: count readable rows by reading the data files (per window), not only from
            the table's file metadata.
        thresholds: tolerated loss and duplication, in percent (none by default).

    Returns:
        A typed report; ``report.ok`` is True only when every committed checkpoint and
        every closed window reconciles and nothing is missing or committed twice.

    Raises:
        JobNotFoundError: ``job_id`` has no checkpoints for the table (names the jobs that do).
        InvalidRangeError: ``since`` is not before ``until``.
        StateDatabaseError: the table's state database cannot be reached or is not the one
            opened.
    """
    name = table_name(table)
    for argument, value in (("since", since), ("until", until)):
        if value is not None:
            checked_instant(value, argument)
    until = until or datetime.now(timezone.utc)
    if since is not None and _utc(since) >= _utc(until):
        raise InvalidRangeError(f"since ({since.isoformat()}) must be before until ({until.isoformat()})")
    began = time.perf_counter()
    source_counts.settle(name)  # a streaming query's last counts, reported after its batches
    loaded = load_table(catalog, name)
    ancestry.require_branch(loaded.metadata, branch)
    store = table_state(catalog, loaded)
    engine = store.engine
    if job_id is not None and not store.has_job(name, job_id):
        raise JobNotFoundError(name, job_id, store.jobs(name))
    # the range, and whatever the range what still needs a person (stuck, abandoned and
    # not acknowledged)
    states = store.in_range(name, job_id=job_id, since=_utc(since) if since else None, until=_utc(until))
    lineage = list(ancestry.branch_ancestry(loaded.metadata, branch))
    elsewhere = ancestry.held_elsewhere(loaded.metadata, branch, lineage=lineage)
    states = _this_branch(states, store.waiting(name, job_id), elsewhere, branch, since=since, until=until)
    keys = {(s.job_id, s.checkpoint_id) for s in states}
    task_counts, declared, committed, ignored, query_input, routed = _metric_counts(engine, name, keys)
    routed_input = {
        key: (*query_input.pop(key), store.records_in_all_tables(*key)) for key in routed if key in query_input
    }
    # the table's snapshots by id, and the checkpoint of each icecommit snapshot, once
    # (metadata.snapshot_by_id scans the list: a lookup per checkpoint made reconciling
    # 10,000 checkpoints quadratic)
    snapshots = {snapshot.snapshot_id: snapshot for snapshot in loaded.metadata.snapshots}
    checkpoint_by_snapshot = {
        snapshot_id: key for snapshot_id, snapshot in snapshots.items() if (key := ancestry.checkpoint_of(snapshot))
    }
    snapshot_keys = {snapshot_id: key for snapshot_id, key in checkpoint_by_snapshot.items() if key in keys}
    # a committed checkpoint whose snapshot was expired: its files still name the snapshot
    # that added them, and the state row remembers which one that was
    for state in states:
        if state.committed and state.snapshot_id is not None:
            snapshot_keys.setdefault(state.snapshot_id, (state.job_id, state.checkpoint_id))
    in_ancestry = Counter(
        checkpoint_by_snapshot[snapshot.snapshot_id]
        for snapshot in lineage
        if snapshot.snapshot_id in checkpoint_by_snapshot
    )
    # a range reads only the manifests that can hold its checkpoints' files
    live, deletes = _live_files(
        loaded, branch, _first_sequence(loaded.metadata, snapshot_keys) if since is not None else 0
    )
    event_time = event_time_column(loaded.metadata)
    missing = _missing(sorted({f.path for f in live} | {d.path for d in deletes}), loaded.io)
    rolled_back = set(ancestry.rolled_back_snapshots(loaded.metadata, lineage=lineage).values())
    off_branch = frozenset(key for key in snapshot_keys.values() if key in rolled_back)
    compactions = CompactionStore(engine)
    rewritten = compactions.lineage(name)
    fates = _fates(loaded, states, live, snapshot_keys, off_branch, branch, rewritten, compactions.group_lineage(name))
    gone = _gone(snapshots, states, live, snapshot_keys, fates)
    row_deletes, rewritten_row_deletes = _row_deletes(loaded, live, deletes, snapshot_keys)
    facts = Facts(
        table=name,
        job_id=job_id,
        since=_utc(since) if since else None,
        until=_utc(until),
        checkpoints=states,
        task_counts=task_counts,
        declared=declared,
        committed=committed,
        ignored=ignored,
        live_files=live,
        snapshot_checkpoints=snapshot_keys,
        ancestry_counts=in_ancestry,
        missing_paths=missing,
        deep_counts=_deep_counts(loaded, live, snapshot_keys, event_time, missing) if deep else None,
        partitions=[p for p in PartitionStatusStore(engine).statuses(name) if since is None or p.end >= _utc(since)],
        off_branch=off_branch,
        gone=gone,
        landed_at=_landed_at(snapshots, states, off_branch | gone),
        fates={k: v for k, v in fates.items() if k not in gone},
        row_deletes=row_deletes,
        rewritten_row_deletes=rewritten_row_deletes,
        equality_deletes=[d for d in deletes if d.equality],
        query_input=query_input,
        routed_input=routed_input,
        overwrites=_overwrites(snapshots, checkpoint_by_snapshot),
    )
    report = judge(facts, thresholds or Thresholds())
    logger.info("reconciled %s: ok=%s, %d problem(s)", name, report.ok, len(report.problems))
    counts = summary_counts(report)
    lost, duplicated = counts["loss"], counts["duplicated"]
    assert isinstance(lost, int) and isinstance(duplicated, int)
    telemetry.record_reconcile(name, job_id, seconds=time.perf_counter() - began, ok=report.ok, lost=lost,
                               duplicated=duplicated)  # fmt: skip
    return report


def _this_branch(
    states: list[CheckpointState],
    waiting: list[CheckpointState],
    elsewhere: Collection[Key],
    branch: str,
    *,
    since: datetime | None,
    until: datetime,
) -> list[CheckpointState]:
    """The rows reconciled on ``branch``: those of the range, and whatever the range those
    that wait on an audit branch (``waiting``: a person must release them); not those another
    branch holds and this one does not (that branch's to reconcile), unless they were held
    back from this one on their job's audit branch (held, queued, discarded, or published and
    rolled back since). A discarded one outside the range is left out: nothing waits on it.
    Reconciling the audit branch itself, a checkpoint held there counts as committed to it."""
    known = {(s.job_id, s.checkpoint_id) for s in states}
    rows = [*states, *(s for s in waiting if (s.job_id, s.checkpoint_id) not in known)]
    rows.sort(key=lambda s: (s.job_id, s.checkpoint_id))
    kept = []
    for state in rows:
        if (state.job_id, state.checkpoint_id) in elsewhere and state.audit_branch in (None, branch):
            continue
        prepared = _utc(state.prepared_at)
        outside = prepared >= _utc(until) or (since is not None and prepared < _utc(since))
        if state.status == ABANDONED and state.audit_branch not in (None, branch) and outside:
            continue
        if state.status == HELD and state.audit_branch == branch:
            state = dataclasses.replace(state, status=COMMITTED)
        kept.append(state)
    return kept


def _fates(
    table: Table,
    states: list[CheckpointState],
    live: list[LiveFile],
    snapshot_keys: dict[int, Key],
    off_branch: frozenset[Key],
    branch: str,
    rewritten: Lineage,
    by_group: Mapping[str, Lineage],
) -> dict[Key, Fate]:
    """Where the rows of each committed checkpoint that has fewer rows in its own live
    files than it committed went: its files (from its staged manifest) followed through
    the lineage icecommit's compactions recorded (exact, and kept after their snapshots are
    expired) and the branch's retained snapshots that removed files. The table's removals
    are read only when some checkpoint falls short."""
    own: Counter[Key] = Counter()
    for file in live:
        if (key := snapshot_keys.get(file.snapshot_id)) is not None:
            own[key] += file.records
    short = [
        s
        for s in states
        if s.committed
        and s.manifest_path is not None
        and (key := (s.job_id, s.checkpoint_id)) not in off_branch
        and own[key] < s.records
    ]
    if not short:
        return {}
    live_paths: dict[str, int] = {}
    for file in live:
        live_paths[path_key(file.path)] = file.records
    tracer = FateTracer(live_paths, removals_of(table, branch), rewritten, by_group)  # one lineage for all
    fates: dict[Key, Fate] = {}
    for state in short:
        assert state.manifest_path is not None
        try:
            files = read_staged_manifest(table.io, state.manifest_path, table.spec().spec_id)
        except (OSError, ValueError) as e:  # staged manifest gone: nothing to follow
            logger.warning("cannot follow checkpoint %d of job %s: %r", state.checkpoint_id, state.job_id, e)
            continue
        fates[(state.job_id, state.checkpoint_id)] = tracer.trace(
            [(path_key(f.file_path), f.record_count) for f in files]
        )
    return fates


def _overwrites(snapshots: Mapping[int, Snapshot], keys: Mapping[int, Key]) -> dict[int, Overwrite]:
    """What each retained snapshot of an icecommit partition overwrite or upsert replaced."""
    found = {}
    for snapshot_id, snapshot in snapshots.items():
        summary = snapshot.summary
        mode = summary.get(WRITE_MODE_PROPERTY) if summary is not None else None
        if summary is None or mode not in (OVERWRITE_PARTITIONS, UPSERT) or snapshot_id not in keys:
            continue
        upsert = mode == UPSERT
        found[snapshot_id] = Overwrite(
            keys[snapshot_id],
            partitions=int(summary.get(REPLACED_PARTITIONS) or 0),
            records=int(summary.get(DELETED_ROWS if upsert else "deleted-records") or 0),
            files=int(summary.get("added-delete-files" if upsert else "deleted-data-files") or 0),
            mode=mode,
            changes=(
                int(summary.get(INSERTED_KEYS) or 0),
                int(summary.get(UPDATED_KEYS) or 0),
                int(summary.get(DELETED_KEYS) or 0),
            ),
            received=_received(summary) if upsert else None,
        )
    return found


def _received(summary: Mapping[str, str]) -> tuple[int, int, int] | None:
    """An upsert's account of the rows it received (rows, keys, keys deleted); None where
    its summary has none."""
    rows = summary.get(RECEIVED_ROWS)
    if rows is None:
        return None
    return int(rows), int(summary.get(CHECKPOINT_KEYS) or 0), int(summary.get(DELETE_CHANGES) or 0)


def _gone(
    snapshots: Mapping[int, Snapshot],
    states: list[CheckpointState],
    live: list[LiveFile],
    snapshot_keys: dict[int, Key],
    fates: Mapping[Key, Fate],
) -> frozenset[Key]:
    """Committed checkpoints that left the table without a trace: their snapshot expired
    and no live file was added by it. Only a snapshot removes files from the live set, so
    something took them out on purpose (a missing file on storage is still live, and is
    reported as such); the committer judges such a checkpoint rolled back as well."""
    with_live_files = {snapshot_keys.get(f.snapshot_id) for f in live}
    return frozenset(
        key
        for s in states
        if s.committed
        and s.snapshot_id is not None
        and s.records > 0
        and s.snapshot_id not in snapshots
        and (key := (s.job_id, s.checkpoint_id)) not in with_live_files
        and not _traced(fates.get(key))
    )


def _traced(fate: Fate | None) -> bool:
    """Whether some of a checkpoint's rows were followed to a live file or a removal."""
    return fate is not None and (fate.readable > 0 or bool(fate.removed))


def _landed_at(
    snapshots: Mapping[int, Snapshot], states: list[CheckpointState], off_branch: frozenset[Key]
) -> dict[Key, datetime]:
    landed: dict[Key, datetime] = {}
    for state in states:
        key = (state.job_id, state.checkpoint_id)
        if not state.committed or state.snapshot_id is None or key in off_branch:
            continue
        snapshot = snapshots.get(state.snapshot_id)
        if state.committed_at is not None:  # one clock for every checkpoint of the job
            landed[key] = _utc(state.committed_at)
        elif snapshot is not None:
            landed[key] = datetime.fromtimestamp(snapshot.timestamp_ms / 1000, timezone.utc)
    return landed


#: In UTC (a naive time is taken as UTC): the state database compares stored UTC times.
_utc = in_utc


__all__ = ["Facts", "LiveFile", "judge", "reconcile"]
