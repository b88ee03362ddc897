"""Reconciliation: prove source = written = committed = readable, or say where not.

Gathering (SQL reads, table metadata, storage look-ups) sits in :func:`reconcile`; every
judgement is made by :func:`judge`, a pure function over the gathered facts.
"""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from fractions import Fraction

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

from icecommit import ancestry
from icecommit.errors import InvalidRangeError, JobNotFoundError
from icecommit.eventtime import event_time_column
from icecommit.identifiers import checked_instant, table_name
from icecommit.lineage import Fate, path_key, removals_of, rounded, trace_fates
from icecommit.loading import load_table
from icecommit.manifest_entries import read_entries
from icecommit.metrics.report_model import (
    CheckpointLine,
    CommitHealth,
    Lag,
    PartitionLine,
    Problem,
    ReconciliationReport,
    Thresholds,
    WindowLine,
)
from icecommit.paths import StorageKey, UnsupportedPathError, storage_key
from icecommit.state.checkpoints import (
    ABANDONED,
    QUERY_INPUT_KEPT,
    QUERY_INPUT_ROUTED,
    QUERY_INPUT_ROUTED_KEPT,
    QUERY_INPUT_STAGES,
    ROLLED_BACK,
    SOURCE,
    STAGE_COMMITTED,
    WRITTEN,
    CheckpointState,
    as_utc,
    in_utc,
)
from icecommit.state.compactions import CompactionStore, Lineage
from icecommit.state.identity import table_state
from icecommit.state.manifests import read_staged_manifest
from icecommit.state.models import CheckpointTaskRow, MetricRow
from icecommit.state.partitions import PartitionStatus, PartitionStatusStore

logger = logging.getLogger(__name__)

Key = tuple[str, int]  # (job id, checkpoint id)
Window = datetime | None


@dataclass(frozen=True)
class LiveFile:
    """A data file the current snapshot of the table references."""

    path: str
    records: int
    snapshot_id: int
    sequence: int = 0


@dataclass(frozen=True)
class LiveDeleteFile:
    """A row-level delete file the current snapshot references."""

    path: str
    equality: bool  # equality deletes; position deletes otherwise
    records: int
    snapshot_id: int
    sequence: int


@dataclass
class Facts:
    """Everything reconciliation looks at, gathered once."""

    table: str
    job_id: str | None
    since: datetime | None
    until: datetime
    checkpoints: list[CheckpointState]
    # per (job, checkpoint): stage -> window -> records, from accepted task attempts
    task_counts: dict[Key, dict[str, dict[Window, int]]]
    # per (job, checkpoint): window -> records, declared by the caller
    declared: dict[Key, dict[Window, int]]
    # per (job, checkpoint): window -> records, recorded at commit
    committed: dict[Key, dict[Window, int]]
    # metrics of task attempts a checkpoint did not accept: (job, checkpoint, task, attempt, records)
    ignored: list[tuple[str, int, int, int, int]]
    live_files: list[LiveFile]
    snapshot_checkpoints: dict[int, Key]
    ancestry_counts: Counter[Key]
    missing_paths: list[str]
    deep_counts: dict[Key, dict[Window, int]] | None = None
    # time partitions published complete (their late records are reported, not errors)
    partitions: list[PartitionStatus] = field(default_factory=list)
    # committed checkpoints whose snapshot is in the metadata but off the branch: another
    # tool's rollback, not yet recorded in the state
    off_branch: frozenset[Key] = frozenset()
    # committed checkpoints whose snapshot was expired and none of whose files are live:
    # something removed them from the table (another tool's rollback, then its expiry)
    gone: frozenset[Key] = frozenset()
    # when each committed checkpoint reached the table: the state's commit time (its
    # snapshot's time where the state has none)
    landed_at: dict[Key, datetime] = field(default_factory=dict)
    # committed checkpoints with fewer rows in their own live files than they committed:
    # where their files' rows went (rewritten by a replace, removed by an overwrite or
    # delete, or untraceable), followed through icecommit's compaction lineage (state) and
    # the retained snapshots
    fates: dict[Key, Fate] = field(default_factory=dict)
    # rows of committed checkpoints' live files that position delete files remove, per
    # (deleting snapshot, "row-level delete")
    row_deletes: dict[Key, dict[tuple[int, str], int]] = field(default_factory=dict)
    # live equality delete files (they match rows by value: not attributed to checkpoints)
    equality_deletes: list[LiveDeleteFile] = field(default_factory=list)
    # per streaming batch: the rows its query's source reported (Spark's numInputRows), and
    # whether the sink declared that every one of them must land (preserves_rows)
    query_input: dict[Key, tuple[int, bool]] = field(default_factory=dict)
    #: a routed sink's batches: (rows the query read, preserves rows, rows written per table)
    routed_input: dict[Key, tuple[int, bool, dict[str, int]]] = field(default_factory=dict)
    now: datetime = field(default_factory=lambda: datetime.now(timezone.utc))


def _pct(part: int, whole: int) -> float:
    return 0.0 if whole == 0 else 100.0 * part / whole


def _line_numbers(source: int, values: Iterable[int]) -> tuple[float, float]:
    values = list(values)
    lost = max(0, source - min(values, default=source))
    extra = max(0, max(values, default=source) - source)
    return _pct(lost, source), _pct(extra, source)


def _weighted_percentile(samples: Sequence[tuple[float, int]], q: float) -> float | None:
    total = sum(weight for _, weight in samples)
    if total == 0:
        return None
    threshold = q * total
    running = 0
    for value, weight in sorted(samples):
        running += weight
        if running >= threshold:
            return value
    return sorted(samples)[-1][0]


def _removal(operation: str) -> str:
    return "row-level deletes" if operation == "row-level delete" else f"an {operation}"


def _out_of_order(facts: Facts) -> list[Problem]:
    """A warning for each checkpoint that reached the table after a higher one of its job
    (the committer refuses that today; a table written by another tool or an older icecommit
    can hold it, and readers that trust the order would be misled)."""
    problems = []
    by_job: dict[str, list[tuple[datetime, int]]] = defaultdict(list)
    for (job, checkpoint_id), when in facts.landed_at.items():
        by_job[job].append((when, checkpoint_id))
    for job, landed in sorted(by_job.items()):
        highest: tuple[int, datetime] | None = None
        for when, checkpoint_id in sorted(landed):
            if highest is not None and checkpoint_id < highest[0]:
                problems.append(
                    Problem("out-of-order", f"checkpoint {checkpoint_id} of job {job} reached the table at "
                            f"{when.isoformat()}, after checkpoint {highest[0]} (at {highest[1].isoformat()}); "
                            "the job's checkpoints did not land in order", job, checkpoint_id, severity="warning")
                )  # fmt: skip
            if highest is None or checkpoint_id > highest[0]:
                highest = (checkpoint_id, when)
    return problems


def _own_paths(facts: Facts) -> dict[Key, set[str]]:
    """The path keys of each checkpoint's own live files (added by its snapshot)."""
    own: dict[Key, set[str]] = defaultdict(set)
    for live in facts.live_files:
        if (key := facts.snapshot_checkpoints.get(live.snapshot_id)) is not None:
            own[key].add(path_key(live.path))
    return own


def _rewritten_rows_in(facts: Facts, path: str) -> dict[Key, Fraction]:
    """Rows of each checkpoint that a rewrite (compaction) put into the live file ``path``."""
    own = _own_paths(facts)
    return {
        key: fate.held[path]
        for key, fate in facts.fates.items()
        if path in fate.held and path not in own.get(key, set())
    }


def judge(facts: Facts, thresholds: Thresholds) -> ReconciliationReport:
    """Decide, from gathered facts, what reconciles and what does not."""
    problems: list[Problem] = []
    readable_by_key: Counter[Key] = Counter()
    for live in facts.live_files:
        key = facts.snapshot_checkpoints.get(live.snapshot_id)
        if key is not None:
            readable_by_key[key] += live.records

    lines: list[CheckpointLine] = []
    pending: list[CheckpointLine] = []
    window_totals: dict[Window, Counter[str]] = defaultdict(Counter)
    open_windows: set[Window] = set()
    lag_samples: list[tuple[float, int]] = []
    for state in facts.checkpoints:
        key = (state.job_id, state.checkpoint_id)
        counts = facts.task_counts.get(key, {})
        source_windows = facts.declared.get(key) or counts.get(SOURCE, {})
        written_windows = counts.get(WRITTEN, {})
        source = sum(source_windows.values()) if source_windows else state.source_records
        written = sum(written_windows.values()) if written_windows else state.records
        if state.status in (ROLLED_BACK, ABANDONED) or key in facts.off_branch or key in facts.gone:
            # removed on purpose: shown, never counted as loss, kept out of the windows
            abandoned = state.status == ABANDONED
            why = "abandoned by an operator" if abandoned else "removed by a rollback"
            if key in facts.gone and state.status not in (ROLLED_BACK, ABANDONED):
                why = ("no longer in the table: its snapshot was expired and none of its files are live, "
                       "and no retained snapshot removed them (another tool's rollback, or a rewrite whose "
                       "snapshot was expired too)")  # fmt: skip
            lines.append(
                CheckpointLine(state.job_id, state.checkpoint_id, ABANDONED if abandoned else ROLLED_BACK,
                               state.snapshot_id, state.committed_at, source, written, 0, 0, 0.0, 0.0, True,
                               f"{why} (information, not loss)")
            )  # fmt: skip
            if abandoned:
                who = f" by {state.abandoned_by}" if state.abandoned_by else ""
                when = f" at {state.abandoned_at.isoformat()}" if state.abandoned_at else ""
                acked = state.acknowledged_at is not None
                what = (f"abandoned{who}{when} ({state.abandon_reason}); its {written:,} rows are not in the table"
                        + (f"; acknowledged by {state.acknowledged_by}" if acked else
                           f"; acknowledge with: icecommit abandon {facts.table} --job {state.job_id} "
                           f"--checkpoint {state.checkpoint_id} --ack"))  # fmt: skip
                problems.append(
                    Problem(ABANDONED, f"checkpoint {state.checkpoint_id} of job {state.job_id}: {what}",
                            state.job_id, state.checkpoint_id, severity="info" if acked else "error")
                )  # fmt: skip
            else:
                problems.append(
                    Problem(ROLLED_BACK, f"checkpoint {state.checkpoint_id} of job {state.job_id}: {why}; its "
                            f"{written:,} rows are not in the table", state.job_id, state.checkpoint_id,
                            severity="info")
                )  # fmt: skip
            continue
        if not state.committed:
            pending_for = facts.now - state.prepared_at
            stuck = pending_for > thresholds.max_pending
            pending.append(
                CheckpointLine(state.job_id, state.checkpoint_id, "stuck" if stuck else "pending", None, None, source,
                               written, 0, 0, 0.0, 0.0, not stuck,
                               "prepared, not committed yet (pending, not loss)" if not stuck else
                               f"prepared {pending_for} ago and still not committed")
            )  # fmt: skip
            if stuck:
                problems.append(
                    Problem("stuck", f"checkpoint {state.checkpoint_id} of job {state.job_id} has been prepared for "
                            f"{pending_for} (more than {thresholds.max_pending}) without a commit: run the job or its "
                            f"recover(), or give it up: icecommit abandon {facts.table} --job {state.job_id} "
                            f"--checkpoint {state.checkpoint_id} --reason TEXT", state.job_id, state.checkpoint_id)
                )  # fmt: skip
            for window in set(source_windows) | set(written_windows):
                open_windows.add(window)
                window_totals[window]["source"] += source_windows.get(window, 0)
                window_totals[window]["written"] += written_windows.get(window, 0)
            continue
        committed_windows = facts.committed.get(key, {})
        # a checkpoint with files whose snapshot could not be found (it landed, its snapshot
        # expired and its files were rewritten before its state was recorded) is not empty
        landed = state.snapshot_id is not None or state.manifest_path is not None
        committed = sum(committed_windows.values()) if committed_windows else (state.records if landed else 0)
        readable = readable_by_key.get(key, 0) if state.snapshot_id is not None else 0
        fate = facts.fates.get(key)
        compacted = rounded(fate.compacted) if fate is not None else 0
        if fate is not None:  # its files' rows followed through rewrites and removals
            readable = max(readable, rounded(fate.readable))
        if facts.deep_counts is not None and landed:
            # rows rewritten into files that are missing on storage are not readable
            lost_with = sum(
                (_rewritten_rows_in(facts, path_key(p)).get(key, Fraction(0)) for p in facts.missing_paths),
                Fraction(0),
            )
            readable = sum(facts.deep_counts.get(key, {}).values()) + compacted - rounded(lost_with)
        removed = {by: rounded(rows) for by, rows in fate.removed.items()} if fate is not None else {}
        for by, rows in facts.row_deletes.get(key, {}).items():  # still in its files, deleted by position
            removed[by] = removed.get(by, 0) + rows
            readable -= rows
        untraceable = rounded(fate.untraceable) if fate is not None else 0
        accounted = readable + sum(removed.values()) + untraceable  # removed on purpose is not lost
        notes = []
        query = facts.query_input.get(key)
        if query is not None and query[1]:
            source = query[0]  # every row the query read must land: the source is the query's input
        loss, dup = _line_numbers(source, (written, committed, accounted))
        if query is not None and not query[1] and query[0] != written:
            notes.append(f"query input {query[0]:,}")
            problems.append(
                Problem("query-input", f"checkpoint {state.checkpoint_id} of job {state.job_id}: the streaming "
                        f"query's source reported {query[0]:,} row(s) and it wrote {written:,} "
                        f"({query[0] - written:+,} the query itself did not write: a filter, an aggregation); "
                        "information (declare streaming_sink(..., preserves_rows=True) to count them as loss)",
                        state.job_id, state.checkpoint_id, severity="info")
            )  # fmt: skip
        elif key in facts.routed_input:
            read, kept, per_table = facts.routed_input[key]
            total = sum(per_table.values())
            tables = ", ".join(f"{t} {n:,}" for t, n in sorted(per_table.items()))
            notes.append(f"routed: query input {read:,}, written to all its tables {total:,}")
            if read != total:
                what = (
                    "loss (the sink was declared preserves_rows=True)"
                    if kept and total < read
                    else "information (declare streaming_sink(..., preserves_rows=True) to count a shortfall as loss)"
                )
                problems.append(
                    Problem("loss" if kept and total < read else "query-input",
                            f"checkpoint {state.checkpoint_id} of job {state.job_id}: the streaming query's source "
                            f"reported {read:,} row(s) for the tables it routes to, and they got {total:,} "
                            f"({tables}); {what}",
                            state.job_id, state.checkpoint_id,
                            severity="error" if kept and total < read else "info")
                )  # fmt: skip
        elif query is None and state.query_id is not None:
            notes.append("source count not recorded")
        if written != source:
            notes.append(f"written {written:+,} vs source")
        if committed != written:
            notes.append(f"committed {committed - written:+,} vs written")
        if compacted:
            notes.append(f"{compacted:,} readable in files another snapshot rewrote")
        for (snapshot_id, operation), rows in sorted(removed.items()):
            notes.append(f"{rows:,} removed by snapshot {snapshot_id} ({operation})")
            problems.append(
                Problem("removed", f"checkpoint {state.checkpoint_id} of job {state.job_id}: {rows:,} of its rows "
                        f"were removed on purpose by snapshot {snapshot_id} ({_removal(operation)}); information, "
                        "not loss",
                        state.job_id, state.checkpoint_id, severity="info")
            )  # fmt: skip
        if untraceable:
            notes.append(f"{untraceable:,} untraceable")
            problems.append(
                Problem("untraceable", f"checkpoint {state.checkpoint_id} of job {state.job_id}: {untraceable:,} of "
                        "its rows are no longer in its files, and the snapshot that removed or rewrote them has "
                        "been expired, so reconciliation cannot tell whether they were compacted, deleted on "
                        "purpose or lost; reconcile before expiring another engine's rewrites to keep the trail",
                        state.job_id, state.checkpoint_id, severity="warning")
            )  # fmt: skip
        if accounted != committed:
            notes.append(f"readable {accounted - committed:+,} vs committed")
        ok = loss <= thresholds.max_loss_pct and dup <= thresholds.max_duplication_pct
        status = "committed" if landed else "empty"
        lines.append(
            CheckpointLine(state.job_id, state.checkpoint_id, status, state.snapshot_id, state.committed_at, source,
                           written, committed, readable, loss, dup, ok, "; ".join(notes))
        )  # fmt: skip
        if not ok:
            kind = "loss" if loss > thresholds.max_loss_pct else "duplication"
            problems.append(
                Problem(kind, f"checkpoint {state.checkpoint_id} of job {state.job_id}: source {source:,}, written "
                        f"{written:,}, committed {committed:,}, readable {readable:,}", state.job_id,
                        state.checkpoint_id)
            )  # fmt: skip
        deep_windows = facts.deep_counts.get(key, {}) if facts.deep_counts is not None else {}
        if deep_windows is not None and (compacted or removed):
            # rows in files another snapshot rewrote cannot be told apart by checkpoint; its
            # windows are taken as committed and the checkpoint's total is what is checked
            deep_windows = committed_windows
        for window in set(source_windows) | set(written_windows) | set(committed_windows) | set(deep_windows):
            totals = window_totals[window]
            totals["source"] += source_windows.get(window, 0)
            totals["written"] += written_windows.get(window, 0)
            totals["committed"] += committed_windows.get(window, 0)
            totals["readable"] += deep_windows.get(window, 0)
            if window is not None and state.committed_at is not None:
                waited = (state.committed_at - window).total_seconds()
                lag_samples.append((waited, committed_windows.get(window, 0)))

    windows = []
    for window in sorted(window_totals, key=lambda w: (w is not None, w or datetime.min.replace(tzinfo=timezone.utc))):
        totals = window_totals[window]
        closed = window not in open_windows
        values = [totals["written"], totals["committed"]]
        if facts.deep_counts is not None:
            values.append(totals["readable"])
        loss, dup = _line_numbers(totals["source"], values)
        ok = (not closed) or (loss <= thresholds.max_loss_pct and dup <= thresholds.max_duplication_pct)
        windows.append(
            WindowLine(window, closed, totals["source"], totals["written"], totals["committed"],
                       totals["readable"] if facts.deep_counts is not None else None, loss, dup, ok)
        )  # fmt: skip
        if not ok:
            label = window.isoformat() if window else "without event time"
            problems.append(
                Problem("window-mismatch", f"window {label}: source {totals['source']:,}, written "
                        f"{totals['written']:,}, committed {totals['committed']:,}"
                        + (f", readable {totals['readable']:,}" if facts.deep_counts is not None else ""))
            )  # fmt: skip

    for key, count in sorted(facts.ancestry_counts.items()):
        if count > 1 and (facts.job_id is None or key[0] == facts.job_id):
            problems.append(
                Problem("double-commit", f"checkpoint {key[1]} of job {key[0]} is in the ancestry {count} times",
                        key[0], key[1])
            )  # fmt: skip
    for path in facts.missing_paths:
        holders = sorted((key, rounded(rows)) for key, rows in _rewritten_rows_in(facts, path_key(path)).items())
        holds = "".join(f"; it holds {rows:,} row(s) of checkpoint {c} of job {j}, rewritten into it by a compaction"
                        for (j, c), rows in holders)  # fmt: skip
        problems.append(
            Problem("missing-file", f"data file referenced by the table is missing: {path}{holds}", path=path)
        )
    by_path: dict[str, list[int]] = defaultdict(list)
    for live in facts.live_files:
        by_path[live.path].append(live.snapshot_id)
    for path, snapshots in sorted(by_path.items()):
        if len(snapshots) > 1:
            problems.append(
                Problem("duplicate-file", f"data file is live {len(snapshots)} times (snapshots "
                        f"{', '.join(map(str, snapshots))}): {path}", path=path)
            )  # fmt: skip
    for job_id, checkpoint_id, task_id, attempt, records in facts.ignored:
        problems.append(
            Problem("ignored-metrics", f"checkpoint {checkpoint_id} of job {job_id}: metrics of task {task_id} "
                    f"attempt {attempt} ({records:,} records) come from an attempt the checkpoint did not accept; "
                    "they are left out of every count", job_id, checkpoint_id, severity="warning")
        )  # fmt: skip

    problems.extend(_out_of_order(facts))
    for state in facts.checkpoints:
        if state.future_records and state.committed:
            problems.append(
                Problem("future-records", f"checkpoint {state.checkpoint_id} of job {state.job_id}: "
                        f"{state.future_records:,} row(s) had event times further ahead of the clock than the "
                        "table's icecommit.max-future-skew when prepared; they are in the table but did not move "
                        "the watermark (a wrong device clock or a parsing bug?)", state.job_id, state.checkpoint_id,
                        severity="warning")
            )  # fmt: skip
    if facts.equality_deletes:
        rows = sum(d.records for d in facts.equality_deletes)
        snapshots = sorted({d.snapshot_id for d in facts.equality_deletes})
        problems.append(
            Problem("equality-deletes", f"{len(facts.equality_deletes):,} equality delete file(s) with {rows:,} "
                    f"delete row(s) (snapshots {', '.join(map(str, snapshots))}) remove rows by value on purpose; "
                    "they cannot be told apart by checkpoint, so readable counts do not subtract them",
                    severity="info")
        )  # fmt: skip

    for published in facts.partitions:
        if published.late_records:
            problems.append(
                Problem("late-records", f"{published.late_records:,} record(s) committed into {published.label} "
                        f"after it was published complete at {published.completed_at.isoformat()} with "
                        f"{published.records_at_completion:,} (they are in the table)", severity="info")
            )  # fmt: skip

    health = CommitHealth(
        checkpoints=len(lines),
        attempts=sum(s.attempts for s in facts.checkpoints),
        retries=sum(s.retries for s in facts.checkpoints),
        conflicts=sum(s.retries for s in facts.checkpoints),
        unknown_outcomes=sum(s.unknown_outcomes for s in facts.checkpoints),
        files_missing=sum(s.counters.missing for s in facts.checkpoints),
    )
    lag = Lag(_weighted_percentile(lag_samples, 0.5), _weighted_percentile(lag_samples, 0.99))
    errors = [p for p in problems if p.severity == "error"]
    ok = not errors and all(line.ok for line in lines) and all(w.ok for w in windows)
    return ReconciliationReport(
        table=facts.table,
        job_id=facts.job_id,
        since=facts.since,
        until=facts.until,
        generated_at=facts.now,
        deep=facts.deep_counts is not None,
        thresholds=thresholds,
        ok=ok,
        checkpoints=tuple(lines),
        pending=tuple(pending),
        windows=tuple(windows),
        problems=tuple(problems),
        health=health,
        lag=lag,
        partitions=tuple(
            PartitionLine(p.label, p.end, p.completed_at, p.records_at_completion, p.records, p.late_records)
            for p in facts.partitions
        ),
    )


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


def _live_files(table: Table, from_sequence: int = 0) -> tuple[list[LiveFile], list[LiveDeleteFile]]:
    """The current snapshot's live data files and row-level delete files, from the
    manifests written at or after data sequence number ``from_sequence`` (a file's entry
    is only ever in manifests written by the snapshot that added it or later ones, so
    every file added at that sequence number or later is among them; 0 reads them all)."""
    snapshot = table.current_snapshot()
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
) -> dict[Key, dict[tuple[int, str], int]]:
    """Rows of each checkpoint's live files that position delete files remove (a delete
    applies to data files of its sequence number or older), per deleting snapshot."""
    positional = [d for d in deletes if not d.equality]
    if not positional:
        return {}
    by_path = {path_key(f.path): f for f in live}
    removed: dict[Key, dict[tuple[int, str], int]] = defaultdict(lambda: defaultdict(int))

    def read(delete: LiveDeleteFile) -> tuple[LiveDeleteFile, list[dict[str, object]]]:
        with table.io.new_input(delete.path).open() as stream:
            paths = pq.read_table(stream, columns=["file_path"]).column("file_path")
        return delete, pc.value_counts(paths).to_pylist()

    with ThreadPoolExecutor(max_workers=4) as pool:
        for delete, counts in pool.map(read, positional):
            for item in counts:
                target = by_path.get(path_key(str(item["values"])))
                if target is None or target.sequence > delete.sequence:
                    continue
                key = snapshot_keys.get(target.snapshot_id)
                if key is not None:
                    rows = min(int(item["counts"]), target.records)  # type: ignore[call-overload]
                    removed[key][(delete.snapshot_id, "row-level delete")] += rows
    return {key: dict(by) for key, by in removed.items()}


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

    with ThreadPoolExecutor(max_workers=4) as pool:
        for key, windows in pool.map(read, [f for f in live if f.snapshot_id in snapshot_keys]):
            if key is not None:
                for window, n in windows.items():
                    counts[key][window] += n
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
    branch: str = "main",
) -> ReconciliationReport:
    """Reconcile a table's checkpoints prepared in ``[since, until)``.

    Args:
        catalog: the table's catalog (its database holds the metrics, unless
            ``ICECOMMIT_METRICS_URI`` says otherwise).
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
    loaded = load_table(catalog, name)
    ancestry.require_branch(loaded.metadata, branch)
    store = table_state(catalog, loaded)
    engine = store.engine
    if job_id is not None and not store.has_job(name, job_id):
        raise JobNotFoundError(name, job_id, store.jobs(name))
    # the range, and whatever the range what still needs a person (stuck, abandoned and
    # not acknowledged)
    states = store.in_range(name, job_id=job_id, since=_utc(since) if since else None, until=_utc(until))
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
        for snapshot in ancestry.branch_ancestry(loaded.metadata, branch)
        if snapshot.snapshot_id in checkpoint_by_snapshot
    )
    # a range reads only the manifests that can hold its checkpoints' files
    live, deletes = _live_files(loaded, _first_sequence(loaded.metadata, snapshot_keys) if since is not None else 0)
    event_time = event_time_column(loaded.metadata)
    missing = _missing(sorted({f.path for f in live} | {d.path for d in deletes}), loaded.io)
    off_branch = frozenset(
        key for snapshot_id, key in snapshot_keys.items() if snapshot_id in snapshots and key not in in_ancestry
    )
    rewritten = CompactionStore(engine).lineage(name)
    fates = _fates(loaded, states, live, snapshot_keys, off_branch, branch, rewritten)
    gone = _gone(snapshots, states, live, snapshot_keys, fates)
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
        row_deletes=_row_deletes(loaded, live, deletes, snapshot_keys),
        equality_deletes=[d for d in deletes if d.equality],
        query_input=query_input,
        routed_input=routed_input,
    )
    report = judge(facts, thresholds or Thresholds())
    logger.info("reconciled %s: ok=%s, %d problem(s)", name, report.ok, len(report.problems))
    return report


def _fates(
    table: Table,
    states: list[CheckpointState],
    live: list[LiveFile],
    snapshot_keys: dict[int, Key],
    off_branch: frozenset[Key],
    branch: str,
    rewritten: Lineage,
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
    removals = removals_of(table, branch)
    fates: dict[Key, Fate] = {}
    for state in short:
        assert state.manifest_path is not None
        try:
            files = read_staged_manifest(table.io, state.manifest_path, table.spec().spec_id)
        except (OSError, ValueError) as e:  # staged manifest gone: nothing to follow
            logger.warning("cannot follow checkpoint %d of job %s: %r", state.checkpoint_id, state.job_id, e)
            continue
        fates[(state.job_id, state.checkpoint_id)] = trace_fates(
            [(path_key(f.file_path), f.record_count) for f in files], live_paths, removals, rewritten
        )
    return fates


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
