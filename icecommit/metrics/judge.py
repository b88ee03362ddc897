"""Reconciliation's judgement: one pure function over the gathered facts.

:func:`icecommit.metrics.reconcile.reconcile` gathers (SQL reads, table metadata, storage
look-ups) into :class:`Facts`; :func:`judge` decides what they show: each checkpoint's
counts from source to readable, every problem with its kind, severity and the fact behind
it, the per-window and partition lines and the commit health. No I/O here, so every case
is tested as facts in, report out.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from fractions import Fraction
from itertools import accumulate

from icecommit.core.lineage import Fate, path_key, rounded, rounded_table
from icecommit.metrics.held_lines import checks_of, discarded, failed_checks, gated, held_note
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
from icecommit.state.checkpoints import ABANDONED, HELD, PREPARED, ROLLED_BACK, CheckpointState
from icecommit.state.partitions import PartitionStatus
from icecommit.state.samples import SOURCE, WRITTEN

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


@dataclass(frozen=True)
class Overwrite:
    """What one checkpoint's partition overwrite or upsert replaced (from its snapshot's
    summary): partitions, rows and data files replaced; for an upsert, live rows its keys
    deleted and the delete files that say so."""

    by: Key
    partitions: int
    records: int
    files: int
    mode: str = "overwrite-partitions"
    #: an upsert's keys inserted, updated and deleted
    changes: tuple[int, int, int] = (0, 0, 0)
    #: an upsert's account of what it received: rows, their keys, the keys it deleted (None
    #: where it was not recorded: keys staged by the caller, or an older icecommit)
    received: tuple[int, int, int] | None = None

    @property
    def consumed(self) -> int:
        """Rows the checkpoint received and by design did not write: one per key it deleted
        (by its change type), and every row a later row of its key superseded in it."""
        if self.received is None:
            return 0
        rows, keys, deleted = self.received
        return rows - keys + deleted


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
    # the same for live files no checkpoint added (a compaction's), by path key: shared
    # among the checkpoints whose rows the file holds (``Fate.held``), in proportion
    rewritten_row_deletes: dict[str, dict[tuple[int, str], int]] = field(default_factory=dict)
    # live equality delete files (they match rows by value: not attributed to checkpoints)
    equality_deletes: list[LiveDeleteFile] = field(default_factory=list)
    # per streaming batch: the rows its query's source reported (Spark's numInputRows), and
    # whether the sink declared that every one of them must land (preserves_rows)
    query_input: dict[Key, tuple[int, bool]] = field(default_factory=dict)
    #: a routed sink's batches: (rows the query read, preserves rows, rows written per table)
    routed_input: dict[Key, tuple[int, bool, dict[str, int]]] = field(default_factory=dict)
    #: partition overwrites (icecommit's): snapshot id -> what it replaced
    overwrites: dict[int, Overwrite] = field(default_factory=dict)
    now: datetime = field(default_factory=lambda: datetime.now(timezone.utc))


def _pct(part: int, whole: int) -> float:
    """``part`` in percent of ``whole``; rows against a whole of none are all of it (100%)."""
    if whole == 0:
        return 0.0 if part == 0 else 100.0
    return 100.0 * part / whole


#: The stages between which a checkpoint's counts can part.
SOURCE_WRITTEN, WRITTEN_COMMITTED, COMMITTED_READABLE = "source-written", "written-committed", "committed-readable"


def parting_stage(expected: int, written: int, committed: int, readable: int) -> str:
    """The first stage where a checkpoint's counts part: what its source says it should
    have written (``expected``) against what it wrote, then committed, then what is readable
    of it (removed on purpose included)."""
    if written != expected:
        return SOURCE_WRITTEN
    if committed != written:
        return WRITTEN_COMMITTED
    return COMMITTED_READABLE


def _line_numbers(source: int, values: Iterable[int]) -> tuple[float, float]:
    """Loss and duplication, in percent of ``source``: how far the lowest of ``values``
    (counts further down the pipeline; at least one) falls below it, and the highest rises
    above it."""
    values = list(values)
    lost = max(0, source - min(values))
    extra = max(0, max(values) - source)
    return _pct(lost, source), _pct(extra, source)


def _weighted_percentile(samples: Sequence[tuple[float, int]], q: float) -> float | None:
    """The smallest value by which a share ``q`` (0 < q <= 1) of the total weight is reached."""
    total = sum(weight for _, weight in samples)
    if total == 0:
        return None
    ordered = sorted(samples)
    running = accumulate(weight for _, weight in ordered)
    return next(value for (value, _), reached in zip(ordered, running, strict=True) if reached >= q * total)


_REMOVALS = {"row-level delete": "row-level deletes", "overwrite": "an overwrite"}


def _removal(operation: str) -> str:
    """What removed rows, in words: ``row-level deletes``, ``an overwrite``, ``a delete``,
    ``a replace``."""
    return _REMOVALS.get(operation, f"a {operation}")


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


def _fate_counts(facts: Facts) -> dict[Key, dict[object, int]]:
    """Each followed checkpoint's fate in whole rows: ``readable``, ``untraceable`` and the
    rows each removal removed ((snapshot, operation)). Rows of live files no checkpoint
    added (a compaction's) that position deletes remove are removed by them, shared among
    the checkpoints whose rows the file holds in proportion to those rows. Rounded so that
    each checkpoint's counts add up to its rows and each column (readable, each removal)
    to its exact total over all checkpoints (:func:`rounded_table`)."""
    records = {path_key(live.path): live.records for live in facts.live_files}
    cells: dict[Key, dict[object, Fraction]] = {}
    for key, fate in facts.fates.items():
        parts: dict[object, Fraction] = {"readable": fate.readable, "untraceable": fate.untraceable}
        for by, gone in fate.removed.items():
            parts[by] = gone
        for path, held in fate.held.items():
            for by, rows in facts.rewritten_row_deletes.get(path, {}).items():
                share = rows * held / max(records.get(path, 1), 1)
                parts["readable"] -= share
                parts[by] = parts.get(by, Fraction(0)) + share
        cells[key] = parts
    return rounded_table(cells, group=lambda col: col if col in ("readable", "untraceable") else "removed")


#: A checkpoint whose rows more snapshots than this removed or superseded gets one note and
#: one finding for each kind, naming the largest few (a change stream's checkpoint loses a
#: row or two to each of hundreds of later upserts).
_LISTED_REMOVALS = 3


def _removals(
    state: CheckpointState,
    removed: Mapping[tuple[int, str], int],
    overwrites: Mapping[int, Overwrite],
    notes: list[str],
    problems: list[Problem],
) -> None:
    """Notes and findings (information, not loss) for the rows of ``state`` that later
    snapshots superseded (an overwrite or an upsert) or removed on purpose."""
    where = f"checkpoint {state.checkpoint_id} of job {state.job_id}"
    superseded = {s: (rows, overwrites[s]) for (s, _), rows in removed.items() if s in overwrites}
    deleted = {(s, op): rows for (s, op), rows in removed.items() if s not in overwrites}
    if len(superseded) > _LISTED_REMOVALS:
        total = sum(rows for rows, _ in superseded.values())
        largest = sorted(superseded.items(), key=lambda item: (-item[1][0], item[0]))[:_LISTED_REMOVALS]
        named = ", ".join(f"checkpoint {over.by[1]} of job {over.by[0]} {rows:,}" for _, (rows, over) in largest)
        notes.append(f"{total:,} superseded by {len(superseded)} later checkpoints")
        problems.append(
            Problem("superseded", f"{where}: {total:,} of its rows were superseded by {len(superseded)} later "
                    f"checkpoints that upserted their keys or overwrote their partitions (the most: {named}); "
                    "information, not loss", state.job_id, state.checkpoint_id, severity="info")
        )  # fmt: skip
    else:
        for snapshot_id, (rows, over) in sorted(superseded.items()):  # a rerun's rows took their place
            notes.append(f"{rows:,} superseded by checkpoint {over.by[1]} of job {over.by[0]}")
            problems.append(
                Problem("superseded", f"{where}: {rows:,} of its rows were superseded by checkpoint {over.by[1]} of "
                        f"job {over.by[0]}, which "
                        f"{'upserted their keys' if over.mode == 'upsert' else 'overwrote their partitions'} "
                        f"(snapshot {snapshot_id}); information, not loss",
                        state.job_id, state.checkpoint_id, severity="info")
            )  # fmt: skip
    if len(deleted) > _LISTED_REMOVALS:
        total = sum(deleted.values())
        kinds = sorted({_removal(op) for _, op in deleted})
        most = sorted(deleted.items(), key=lambda item: (-item[1], item[0]))[:_LISTED_REMOVALS]
        named = ", ".join(f"snapshot {snapshot} {rows:,}" for (snapshot, _), rows in most)
        notes.append(f"{total:,} removed by {len(deleted)} snapshots ({', '.join(kinds)})")
        problems.append(
            Problem("removed", f"{where}: {total:,} of its rows were removed on purpose by {len(deleted)} snapshots "
                    f"({', '.join(kinds)}; the most: {named}); information, not loss",
                    state.job_id, state.checkpoint_id, severity="info")
        )  # fmt: skip
        return
    for (snapshot_id, operation), rows in sorted(deleted.items()):
        notes.append(f"{rows:,} removed by snapshot {snapshot_id} ({operation})")
        problems.append(
            Problem("removed", f"{where}: {rows:,} of its rows were removed on purpose by snapshot {snapshot_id} "
                    f"({_removal(operation)}); information, not loss", state.job_id, state.checkpoint_id,
                    severity="info")
        )  # fmt: skip


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

    fate_counts = _fate_counts(facts)
    lines: list[CheckpointLine] = []
    held: list[CheckpointLine] = []
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
        checks = checks_of(state)
        if state.status == HELD or (state.status == PREPARED and state.audit_branch is not None):
            problems.extend(failed_checks(facts.table, state, checks, written))
        if state.status == HELD:
            # on its job's audit branch, waiting for a release: not on this branch by design
            # (neither loss nor pending); shown apart, kept out of the windows until released
            held.append(
                gated(CheckpointLine(state.job_id, state.checkpoint_id, HELD, state.snapshot_id, state.committed_at,
                                     source, written, 0, 0, 0.0, 0.0, True, held_note(state, checks)), state, checks)
            )  # fmt: skip
            continue
        if state.status in (ROLLED_BACK, ABANDONED) or key in facts.off_branch or key in facts.gone:
            # removed on purpose: shown, never counted as loss, kept out of the windows
            abandoned = state.status == ABANDONED
            why = "abandoned by an operator" if abandoned else "removed by a rollback"
            if abandoned and state.audit_branch is not None:
                why = f"discarded from audit branch {state.audit_branch}: its rows never reached this branch"
            if key in facts.gone and state.status not in (ROLLED_BACK, ABANDONED):
                why = ("no longer in the table: its snapshot was expired and none of its files are live, "
                       "and no retained snapshot removed them (another tool's rollback, or a rewrite whose "
                       "snapshot was expired too)")  # fmt: skip
            lines.append(
                gated(CheckpointLine(state.job_id, state.checkpoint_id, ABANDONED if abandoned else ROLLED_BACK,
                                      state.snapshot_id, state.committed_at, source, written, 0, 0, 0.0, 0.0, True,
                                      f"{why} (information, not loss)"), state, checks)
            )  # fmt: skip
            if abandoned and state.audit_branch is not None:
                problems.append(discarded(state, checks, written))
            elif abandoned:
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
            bound = f" to audit branch {state.audit_branch}" if state.audit_branch is not None else ""
            pending.append(
                gated(CheckpointLine(state.job_id, state.checkpoint_id, "stuck" if stuck else "pending", None, None,
                                      source, written, 0, 0, 0.0, 0.0, not stuck,
                                      f"prepared, not committed{bound} yet (pending, not loss)" if not stuck else
                                      f"prepared {pending_for} ago and still not committed{bound}"), state, checks)
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
        landed = state.snapshot_id is not None or state.has_changes
        committed = sum(committed_windows.values()) if committed_windows else (state.records if landed else 0)
        readable = readable_by_key.get(key, 0) if state.snapshot_id is not None else 0
        fate = facts.fates.get(key)
        whole = fate_counts.get(key, {})
        # of its rows now in files another snapshot rewrote, those still readable there (its
        # readable rows in whole rows, less those still in its own live files)
        compacted = max(whole["readable"] - readable, 0) if fate is not None else 0
        if fate is not None:  # its files' rows followed through rewrites and removals
            readable = max(readable, whole["readable"])
        if facts.deep_counts is not None and landed:
            # rows rewritten into files that are missing on storage are not readable
            lost_with = sum(
                (_rewritten_rows_in(facts, path_key(p)).get(key, Fraction(0)) for p in facts.missing_paths),
                Fraction(0),
            )
            readable = sum(facts.deep_counts.get(key, {}).values()) + compacted - rounded(lost_with)
        removed: dict[tuple[int, str], int] = {by: rows for by, rows in whole.items() if isinstance(by, tuple) and rows}
        for by, rows in facts.row_deletes.get(key, {}).items():  # still in its files, deleted by position
            removed[by] = removed.get(by, 0) + rows
            readable -= rows
        untraceable = whole.get("untraceable", 0)
        accounted = readable + sum(removed.values()) + untraceable  # removed on purpose is not lost
        notes = []
        query = facts.query_input.get(key)
        over = facts.overwrites.get(state.snapshot_id or -1)
        # an upsert's rows that by design were not written (deleted keys, superseded rows)
        consumed = over.consumed if over is not None else 0
        if over is not None and over.received is not None:
            source = over.received[0]  # the rows the upsert received, before one per key was kept
        if query is not None and query[1]:
            source = query[0]  # every row the query read must land: the source is the query's input
        expected = source - consumed
        loss, dup = _line_numbers(expected, (written, committed, accounted))
        if query is not None and not query[1] and query[0] != written + consumed:
            notes.append(f"query input {query[0]:,}")
            problems.append(
                Problem("query-input", f"checkpoint {state.checkpoint_id} of job {state.job_id}: the streaming "
                        f"query's source reported {query[0]:,} row(s) and it wrote {written:,}"
                        + (f" and deleted or superseded {consumed:,} by key" if consumed else "")
                        + f" ({query[0] - written - consumed:+,} the query itself did not write: a filter, an "
                        "aggregation); information (declare streaming_sink(..., preserves_rows=True) to count them "
                        "as loss)", state.job_id, state.checkpoint_id, severity="info")
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
                            severity="error" if kept and total < read else "info",
                            stage=SOURCE_WRITTEN if kept and total < read else None)
                )  # fmt: skip
        elif query is None and state.query_id is not None:
            notes.append("source count not recorded")
        if over is not None and over.received is not None:
            rows, keys, deleted = over.received
            notes.append(f"received {rows:,}: {written:,} written, {deleted:,} deleted by their change type, "
                         f"{rows - keys:,} superseded in the checkpoint by a later row of their key")  # fmt: skip
        if written != expected:
            notes.append(f"written {written - expected:+,} vs source")
        if committed != written:
            notes.append(f"committed {committed - written:+,} vs written")
        if compacted:
            notes.append(f"{compacted:,} readable in files another snapshot rewrote")
        _removals(state, removed, facts.overwrites, notes, problems)
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
        # what it did before its tasks wrote (its rows count as any other's)
        notes.extend({"table-create": "created the table", "schema-change": "changed the schema"}.get(f, f)
                     for f in state.features if f not in ("overwrite-partitions", "upsert"))  # fmt: skip
        if state.published_by is not None:
            failed = ", ".join(r.check for r in checks if not r.ok)
            notes.append(f"published from {state.audit_branch} by {state.published_by}"
                         + (f", forced past failed checks ({failed}): {state.publish_reason}" if state.publish_forced
                            else ""))  # fmt: skip
        if over is not None and over.mode == "upsert":
            inserted, updated, deleted = over.changes
            notes.append(f"upsert: {inserted:,} inserted, {updated:,} updated, {deleted:,} deleted "
                         f"({over.records:,} earlier row(s) of its keys replaced or deleted)")  # fmt: skip
        elif over is not None:
            notes.append(f"overwrote {over.partitions:,} partition(s): replaced {over.records:,} row(s) in "
                         f"{over.files:,} file(s)")  # fmt: skip
        ok = loss <= thresholds.max_loss_pct and dup <= thresholds.max_duplication_pct
        status = "committed" if landed else "empty"
        lines.append(
            gated(CheckpointLine(state.job_id, state.checkpoint_id, status, state.snapshot_id, state.committed_at,
                                  source, written, committed, readable, loss, dup, ok, "; ".join(notes),
                                  sum(removed.values()), source - expected), state, checks)
        )  # fmt: skip
        if not ok:
            kind = "loss" if loss > thresholds.max_loss_pct else "duplication"
            stage = parting_stage(expected, written, committed, accounted)
            problems.append(
                Problem(kind, f"checkpoint {state.checkpoint_id} of job {state.job_id}: source {source:,}, written "
                        f"{written:,}, committed {committed:,}, readable {readable:,}; the counts part between "
                        f"{stage.replace('-', ' and ')}", state.job_id, state.checkpoint_id, stage=stage)
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
        held=tuple(held),
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
