"""How the CLI shows results: a rich text implementation and a JSON one.

Commands hand typed results to one method of :class:`Output`; they format nothing
themselves. ``--output json`` prints exactly one JSON document on stdout.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from icecommit.catalog.event_time_versions import EventTimeVersion
from icecommit.catalog.inspect import CheckpointInfo, SnapshotInfo, TableInfo
from icecommit.committer.results import CommitResult
from icecommit.core.cuts import Cut
from icecommit.core.timeparse import format_duration
from icecommit.demo.report import DemoReport
from icecommit.maintenance.expire import ExpirePlan
from icecommit.maintenance.orphans import OrphanSweep
from icecommit.maintenance.rollback import RollbackPlan
from icecommit.metrics.report_model import ReconciliationReport
from icecommit.state.checkpoints import CheckpointState
from icecommit.state.partitions import PartitionStatus

if TYPE_CHECKING:
    from icecommit.maintenance.compaction import CompactionPlan


class Output(Protocol):
    """One method per view; each prints the whole result of a command."""

    def snapshots(self, table: str, rows: list[SnapshotInfo]) -> None: ...

    def checkpoints(self, table: str, rows: list[CheckpointInfo]) -> None: ...

    def tables(self, namespace: str | None, rows: list[TableInfo]) -> None: ...

    def partitions(self, table: str, rows: list[PartitionStatus]) -> None: ...

    def waited(self, table: str, label: str, status: PartitionStatus | None, timeout: timedelta) -> None: ...

    def versions(self, table: str, event_time: datetime, found: list[EventTimeVersion | str]) -> None: ...

    def demo(self, report: DemoReport) -> None: ...

    def reconcile(
        self, report: ReconciliationReport, rendered: str, out: Path | None, changes: str | None = None
    ) -> None: ...

    def rollback(self, plan: RollbackPlan) -> None: ...

    def expire(self, plan: ExpirePlan) -> None: ...

    def orphans(self, sweep: OrphanSweep) -> None: ...

    def compacted(self, plan: CompactionPlan) -> None: ...

    def abandoned(self, state: CheckpointState) -> None: ...

    def held(self, table: str, rows: list[CheckpointState]) -> None: ...

    def cut(self, job: str, cut: Cut) -> None: ...

    def recovered(self, table: str, job: str, results: list[CommitResult]) -> None: ...

    def error(self, message: str, code: int) -> None: ...


def _console() -> Console:
    """A console for the text views: on a terminal, its width; under a pipe or in a log,
    no width limit, so that no cell (a snapshot id, a path) is ever cut."""
    console = Console()
    return console if console.is_terminal else Console(width=100_000)


#: JSON numbers above 2**53 are rounded by common readers (jq 1.6, JavaScript): every
#: snapshot id also goes out as a string, under the same key with ``_str`` appended.
_ID_KEYS = ("snapshot_id", "parent_id", "target_snapshot_id", "current_snapshot_id")


def _with_id_strings(data: dict[str, Any]) -> dict[str, Any]:
    for key in list(data):
        if (key in _ID_KEYS or key.endswith("_snapshot_id")) and isinstance(data[key], int):
            data[f"{key}_str"] = str(data[key])
        elif key.endswith("_snapshot_ids") and isinstance(data[key], list):  # expired, hidden
            data[f"{key}_str"] = [str(i) for i in data[key]]
    return data


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        data = _with_id_strings({f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)})
        if hasattr(value, "committed") and "committed" not in data:
            data["committed"] = value.committed
        return data
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat()
    return value


#: how ``checkpoints`` names a checkpoint's features
_CHANGED = {
    "table-create": "created the table",
    "schema-change": "changed the schema",
    "overwrite-partitions": "overwrote partitions",
    "upsert": "upserted by key",
}


class JsonOutput:
    """One JSON document on stdout per command."""

    def _emit(self, document: dict[str, Any]) -> None:
        sys.stdout.write(json.dumps(document, indent=2, default=str) + "\n")

    def snapshots(self, table: str, rows: list[SnapshotInfo]) -> None:
        self._emit({"table": table, "snapshots": _plain(rows)})

    def checkpoints(self, table: str, rows: list[CheckpointInfo]) -> None:
        documents = []
        for row in rows:
            document = _plain(row)
            document["checks_failed"] = row.checks_failed
            documents.append(document)
        self._emit({"table": table, "checkpoints": documents})

    def tables(self, namespace: str | None, rows: list[TableInfo]) -> None:
        self._emit({"namespace": namespace, "tables": _plain(rows)})

    def partitions(self, table: str, rows: list[PartitionStatus]) -> None:
        documents = []
        for row in rows:
            document = _plain(row)
            document["lateness"] = row.lateness.total_seconds()
            document["late_records"] = row.late_records
            documents.append(document)
        self._emit({"table": table, "partitions": documents})

    def versions(self, table: str, event_time: datetime, found: list[EventTimeVersion | str]) -> None:
        documents = []
        for kind, item in zip(("complete", "no-data-after"), found, strict=True):
            if isinstance(item, str):
                documents.append({"kind": kind, "error": item})
            else:
                document = _plain(item)
                document["kind"] = kind
                document["snapshot_id"] = str(item.snapshot_id)  # above 2**53: a string, as JSON readers round
                documents.append(document)
        self._emit({"table": table, "event_time": event_time.isoformat(), "versions": documents})

    def waited(self, table: str, label: str, status: PartitionStatus | None, timeout: timedelta) -> None:
        document: dict[str, Any] = {"table": table, "partition": label, "published": status is not None}
        if status is None:
            document["timeout_s"] = timeout.total_seconds()
        else:
            document["completed_at"] = status.completed_at.isoformat()
            document["records_at_completion"] = status.records_at_completion
            document["late_records"] = status.late_records
        self._emit(document)

    def demo(self, report: DemoReport) -> None:
        self._emit(_plain(report))

    def reconcile(
        self, report: ReconciliationReport, rendered: str, out: Path | None, changes: str | None = None
    ) -> None:
        document = report.to_dict(changes=changes)
        if out is not None:
            document["written_to"] = str(out)
        self._emit(document)

    def rollback(self, plan: RollbackPlan) -> None:
        self._emit(_plain(plan))

    def expire(self, plan: ExpirePlan) -> None:
        self._emit(_plain(plan))

    def orphans(self, sweep: OrphanSweep) -> None:
        self._emit(_plain(sweep))

    def compacted(self, plan: CompactionPlan) -> None:
        document = _plain(plan)
        document["committed_groups"], document["aborted_groups"] = plan.committed, plan.aborted
        self._emit(document)

    def abandoned(self, state: CheckpointState) -> None:
        self._emit(_plain(state))

    def held(self, table: str, rows: list[CheckpointState]) -> None:
        held = []
        for state in rows:
            document = _plain(state)
            document["check_results"] = json.loads(state.check_results) if state.check_results else []
            held.append(document)
        self._emit({"table": table, "held": held})

    def cut(self, job: str, cut: Cut) -> None:
        tables = {
            name: {"snapshot_id": None if snapshot is None else str(snapshot), "highest_checkpoint": cut.marks[name]}
            for name, snapshot in cut.snapshots.items()
        }
        self._emit({"job": job, "checkpoint_id": cut.checkpoint_id, "tables": tables})

    def recovered(self, table: str, job: str, results: list[CommitResult]) -> None:
        checkpoints = []
        for result in results:
            document = _plain(result)
            document["snapshot_id"] = str(result.snapshot_id) if result.snapshot_id is not None else None
            checkpoints.append(document)
        self._emit({"table": table, "job": job, "checkpoints": checkpoints})

    def error(self, message: str, code: int) -> None:
        self._emit({"error": message, "exit_code": code})


def _age(milliseconds: int) -> str:
    """An age in milliseconds as a duration (``30d``); one too long for a timedelta (Long.MAX
    is a common way to say "forever") in milliseconds."""
    try:
        return format_duration(timedelta(milliseconds=milliseconds))
    except OverflowError:
        return f"{milliseconds:,} ms"


def _time(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S") if value else ""


def _release(row: CheckpointInfo) -> str:
    """What a checkpoint's checks said and where they sent it: held (why, on which audit
    branch, the checks that failed), published (by whom, forced or not) or discarded."""
    failed = [r.check for r in row.checks if not r.ok]
    checks = f"failed {', '.join(failed)}" if failed else f"{len(row.checks)} check(s) passed" if row.checks else ""
    branch = row.audit_branch
    if branch is None:
        return checks
    if row.status in ("held", "prepared"):
        waits = "queued behind an earlier one" if row.hold_reason == "queued" else f"held ({row.hold_reason})"
        said = f"{waits} on {branch}" + ("" if row.status == "held" else ", not committed to it yet")
    elif row.published_by is not None:
        why = f": {row.publish_reason}" if row.publish_reason else ""
        said = f"published from {branch} by {row.published_by} {_time(row.published_at)}" + (
            f" (forced{why})" if row.publish_forced else why
        )
    elif row.status == "abandoned":
        said = f"discarded from {branch}"
    else:
        said = f"{row.status}, held ({row.hold_reason}) on {branch} before"
    return f"{said}; {checks}" if checks else said


class TextOutput:
    """Tables for a terminal (rich)."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or _console()

    def _table(self, title: str, headers: Sequence[str], rows: Sequence[Sequence[str]], ids: Sequence[str]) -> None:
        """A table whose id columns (``ids``: snapshot ids, paths) are printed whole at any
        width: other columns wrap first; where even that cannot fit the terminal (an
        80-column one for a table with two snapshot ids), one record per row instead
        (``header: value`` lines, never cut)."""
        widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]
        # ids whole; other columns squeezed to their header or 12 characters, whichever is wider
        needed = sum(w if h in ids else min(w, max(len(h), 12)) for h, w in zip(headers, widths, strict=True))
        needed += 3 * len(headers) + 1  # borders and padding
        if needed > self.console.width:
            self.console.print(f"[bold]{title}[/bold]", highlight=False, soft_wrap=True)
            for row in rows:
                self.console.print("", soft_wrap=True)
                for header, value in zip(headers, row, strict=True):
                    if value:
                        self.console.print(f"  {header or 'current'}: {value}", highlight=False, soft_wrap=True,
                                           markup=False)  # fmt: skip
            return
        # under a pipe or in a log: plain rows (a header rule, no box), the title on the left
        plain = not self.console.is_terminal
        view = Table(
            title=title, box=box.SIMPLE_HEAD if plain else box.HEAVY_HEAD, title_justify="left" if plain else "center"
        )
        for header, width in zip(headers, widths, strict=True):
            if header in ids:
                view.add_column(header, no_wrap=True, min_width=width)
            else:
                view.add_column(header, overflow="fold")
        for row in rows:
            view.add_row(*row)
        if not plain:
            self.console.print(view)
            return
        with self.console.capture() as captured:  # a table pads its cells: no trailing spaces under a pipe
            self.console.print(view)
        trimmed = "\n".join(line.rstrip() for line in captured.get().splitlines())
        self.console.print(trimmed, highlight=False, soft_wrap=True, markup=False)

    def snapshots(self, table: str, rows: list[SnapshotInfo]) -> None:
        headers = ["", "snapshot", "parent", "committed at (UTC)", "operation", "job", "checkpoint", "records added",
                   "files added", "max event time", "schema"]  # fmt: skip
        cells = [
            ["*" if row.is_current else "", str(row.snapshot_id), str(row.parent_id or ""), _time(row.committed_at),
             row.operation, row.job_id or "", "" if row.checkpoint_id is None else str(row.checkpoint_id),
             f"{row.added_records:,}", str(row.added_files), _time(row.max_event_time),
             "" if row.schema_id is None else str(row.schema_id)]
            for row in rows
        ]  # fmt: skip
        self._table(f"snapshots of {table}", headers, cells, ids=("snapshot", "parent"))

    def tables(self, namespace: str | None, rows: list[TableInfo]) -> None:
        if not rows:
            where = f"namespace {namespace}" if namespace else "the catalog"
            self.console.print(f"no tables in {where}", highlight=False, soft_wrap=True)
            return
        headers = ["table", "format", "snapshots", "current snapshot", "records", "data files", "delete files",
                   "last commit (UTC)", "last checkpoint"]  # fmt: skip
        cells = [
            [row.name, f"v{row.format_version}", str(row.snapshots), str(row.current_snapshot_id or ""),
             f"{row.records:,}", f"{row.data_files:,}", f"{row.delete_files:,}", _time(row.last_commit),
             f"{row.last_checkpoint[0]}#{row.last_checkpoint[1]}" if row.last_checkpoint else ""]
            for row in rows
        ]  # fmt: skip
        self._table(f"tables in {namespace}" if namespace else "tables", headers, cells, ids=("current snapshot",))

    def checkpoints(self, table: str, rows: list[CheckpointInfo]) -> None:
        headers = ["job", "checkpoint", "status", "snapshot", "records", "files", "published", "attempts"]
        streamed = any(row.source_offsets for row in rows)
        changed = any(row.features for row in rows)
        gated = any(row.checks or row.audit_branch for row in rows)
        if gated:
            headers.append("checks and release")
        if changed:
            headers.append("changed")
        if streamed:
            headers.append("source offsets")
        cells = []
        for row in rows:
            published = (
                f"{row.files_committed} new, {row.files_skipped} skipped, {row.files_missing} missing"
                if row.files_committed is not None
                else ""
            )
            attempts = f"{row.attempts} ({row.retries} retries)" if row.attempts is not None else ""
            cell = [row.job_id, str(row.checkpoint_id), row.status, str(row.snapshot_id or ""), f"{row.records:,}",
                    str(row.files), published, attempts]  # fmt: skip
            if gated:
                cell.append(_release(row))
            if changed:  # what it did before its tasks wrote: created the table, changed its schema
                said = [_CHANGED.get(f, f) for f in row.features]
                if row.changed_schema_id is not None and "changed the schema" in said:
                    said[said.index("changed the schema")] = f"changed the schema (to schema {row.changed_schema_id})"
                cell.append(", ".join(said))
            if streamed:
                cell.append("; ".join(f"{r.start} -> {r.end}" for r in row.source_offsets))
            cells.append(cell)
        self._table(f"checkpoints of {table}", headers, cells, ids=("snapshot", "job"))

    def partitions(self, table: str, rows: list[PartitionStatus]) -> None:
        if not rows:
            self.console.print(
                f"{table}: no time partition is complete yet. A partition of hour/day/month/year of the "
                "event-time column is published once every writer's watermark (the latest event time it "
                "committed) has passed its end by the table's lateness; a table without such a partition "
                "field, or whose writers have not got that far, has none.",
                highlight=False, soft_wrap=True,
            )  # fmt: skip
            return
        headers = ["partition", "records when complete", "late records", "completed at (UTC)", "watermark",
                   "lateness", "writers", "notified"]  # fmt: skip
        cells = [
            [row.label, f"{row.records_at_completion:,}", f"{row.late_records:,}", _time(row.completed_at),
             _time(row.watermark), str(row.lateness), ", ".join(row.writers),
             _time(row.notified_at) or "no callback yet"]
            for row in rows
        ]  # fmt: skip
        self._table(f"complete time partitions of {table}", headers, cells, ids=("partition",))

    def versions(self, table: str, event_time: datetime, found: list[EventTimeVersion | str]) -> None:
        titles = (
            "complete (everything up to it had arrived; late rows are not in it)",
            "no data after it (what rollback --to-event-time uses)",
        )
        self.console.print(f"{table} as of event time {event_time.isoformat()}:", soft_wrap=True, highlight=False)
        for title, item in zip(titles, found, strict=True):
            if isinstance(item, str):
                shown = f"none: {item}"
            else:
                late = f"; {item.late_records:,} late row(s) not in it" if item.late_records else ""
                where = f" ({item.partition} published)" if item.partition else ""
                shown = f"snapshot {item.snapshot_id}, committed {_time(item.committed_at)} UTC{where}{late}"
            self.console.print(f"  {title}: {shown}", soft_wrap=True, highlight=False)

    def waited(self, table: str, label: str, status: PartitionStatus | None, timeout: timedelta) -> None:
        if status is None:
            self.console.print(f"{label} of {table} was not published within {timeout}", soft_wrap=True)
        else:
            self.console.print(
                f"{label} of {table} is complete: published {_time(status.completed_at)} UTC with "
                f"{status.records_at_completion:,} records ({status.late_records:,} late since)",
                soft_wrap=True,
                highlight=False,
            )

    def demo(self, report: DemoReport) -> None:
        self.snapshots(report.table, list(report.snapshots))
        new = sum(1 for c in report.checkpoints if c.committed)
        skipped = sum(1 for c in report.checkpoints if c.status == "already-committed")
        once = report.rows_read_back == report.distinct_read_back == report.rows
        landed = (
            f"[bold]{report.rows:,}[/bold] rows landed exactly once"
            if once
            else f"[red]{report.rows:,} source rows but {report.rows_read_back:,} read back, "
            f"{report.distinct_read_back:,} distinct[/red]"
        )
        span = ""
        if report.event_time_from is not None and report.event_time_to is not None:
            span = (
                f"; event time {report.event_time_from:%Y-%m-%d %H:%M} to {report.event_time_to:%H:%M} UTC, "
                f"{report.late_rows:,} row(s) late (in a checkpoint after their event time's), "
                f"{report.late_after_published:,} of them after their hour was published complete "
                "(the late records of icecommit partitions)"
            )
        self.console.print(
            f"[bold]{report.table}[/bold]: {landed} ({report.rows_read_back:,} read back, "
            f"{report.distinct_read_back:,} distinct event ids) in {len(report.checkpoints)} checkpoints "
            f"({new} committed now, {skipped} already committed){span}; {report.seconds:.1f} s.",
            highlight=False, soft_wrap=True,
        )  # fmt: skip
        if report.continued:
            self.console.print(
                f"This run continued the table an earlier run made; `{report.reset_command}` starts over.",
                highlight=False, soft_wrap=True, markup=False,
            )  # fmt: skip
        if report.location:
            self.console.print(
                f"The table lives in {report.location} (catalog {report.catalog}).",
                highlight=False, soft_wrap=True, markup=False,
            )  # fmt: skip
        if report.try_next:
            self.console.print("Try next:", highlight=False, soft_wrap=True)
            for command in report.try_next:
                self.console.print(f"  {command}", highlight=False, soft_wrap=True, markup=False)

    def reconcile(
        self, report: ReconciliationReport, rendered: str, out: Path | None, changes: str | None = None
    ) -> None:
        if out is None:
            sys.stdout.write(rendered + ("" if rendered.endswith("\n") else "\n"))
            return
        verdict = "[green]reconciles[/green]" if report.ok else "[red]does not reconcile[/red]"
        notes = sum(1 for p in report.problems if p.severity == "info")
        found = f"{len(report.problems) - notes} problem(s), {notes} note(s)"
        self.console.print(f"{report.table} {verdict}: {found}; report written to {out}", soft_wrap=True)

    def rollback(self, plan: RollbackPlan) -> None:
        verb = "rolled back" if plan.applied else "would roll back (dry run)"
        checkpoints = ", ".join(f"{job}#{cp}" for job, cp in plan.hidden_checkpoints) or "none"
        self.console.print(
            f"{plan.table} {verb} to snapshot {plan.target_snapshot_id} ({plan.selector}); "
            f"{len(plan.hidden_snapshot_ids)} snapshot(s) and {plan.hidden_records:,} rows "
            f"{'are' if plan.applied else 'would become'} invisible; checkpoints: {checkpoints}",
            highlight=False,
            soft_wrap=True,
        )
        if plan.lacking_up_to_event_time:
            self.console.print(
                f"  the target lacks {plan.lacking_up_to_event_time:,} row(s) at or before that event time "
                "(checkpoints that straddle it go whole; to read the table as of it instead: "
                "icecommit snapshots --at-event-time)",
                highlight=False,
                soft_wrap=True,
            )
        if plan.reappearing_records:
            replaced_by = ", ".join(f"{job}#{cp}" for job, cp in plan.reappearing_checkpoints) or "not icecommit's"
            self.console.print(
                f"  and {plan.reappearing_records:,} row(s) that overwrites or upserts replaced or deleted "
                f"{'are' if plan.applied else 'would be'} visible again (checkpoints: {replaced_by})",
                highlight=False,
                soft_wrap=True,
            )
        for snapshot_id in plan.hidden_snapshot_ids:
            self.console.print(f"  hidden: {snapshot_id}", highlight=False, soft_wrap=True)

    def expire(self, plan: ExpirePlan) -> None:
        verb = "expired" if plan.applied else "would expire (dry run)"
        self.console.print(
            f"{plan.table}{f' (branch {plan.branch})' if plan.branch is not None else ''}: "
            f"{verb} {len(plan.expired_snapshot_ids)} snapshot(s); "
            f"{plan.deleted_files if plan.applied else len(plan.files_to_delete)} file(s) "
            f"{'deleted' if plan.applied else 'to delete'}",
            highlight=False,
            soft_wrap=True,
        )
        for rule in plan.retention:
            age_from, count_from = rule.source.split()
            self.console.print(
                f"  branch {rule.branch} keeps its newest {rule.min_snapshots_to_keep} snapshot(s) ({count_from}) "
                f"and those younger than {_age(rule.max_snapshot_age_ms)} "
                f"({age_from})",
                highlight=False,
                soft_wrap=True,
            )
        for job, checkpoint_id in plan.rolled_back_checkpoints:
            self.console.print(
                f"  checkpoint {checkpoint_id} of job {job}: rolled back earlier; recorded as rolled back",
                highlight=False,
                soft_wrap=True,
            )
        for path in plan.files_to_delete:
            self.console.print(
                f"  {'deleted' if plan.applied else 'would delete'}: {path}", highlight=False, soft_wrap=True
            )
        self._unreadable(plan.unreadable_tables, plan.ignored_tables)

    def _unreadable(self, unreadable: dict[str, str], ignored: Sequence[str]) -> None:
        """Other tables of the catalog that could not be read (a deletion refuses while one
        is left that --ignore-unreadable does not name)."""
        for name, why in sorted(unreadable.items()):
            self.console.print(
                f"  could not read table {name} ({why}): deleting needs --ignore-unreadable {name}",
                highlight=False,
                soft_wrap=True,
            )
        for name in ignored:
            self.console.print(f"  could not read table {name}: ignored as asked", highlight=False, soft_wrap=True)

    def held(self, table: str, rows: list[CheckpointState]) -> None:
        if not rows:
            self.console.print(f"{table}: no checkpoint is held", highlight=False)
        for state in rows:
            waiting = "queued behind an earlier one" if state.hold_reason == "queued" else f"held ({state.hold_reason})"
            if state.status != "held":
                waiting += ", not committed to the branch yet (recover commits it)"
            self.console.print(
                f"{table}: checkpoint {state.checkpoint_id} of job {state.job_id} {waiting} on branch "
                f"{state.audit_branch}: {state.records:,} records",
                highlight=False, soft_wrap=True,
            )  # fmt: skip
            for result in json.loads(state.check_results) if state.check_results else []:
                verdict = "ok  " if result["ok"] else "FAIL"
                self.console.print(
                    f"  {verdict} {result['check']}: {result['detail']}", highlight=False, soft_wrap=True
                )

    def cut(self, job: str, cut: Cut) -> None:
        newest = "no checkpoint is" if cut.checkpoint_id is None else f"checkpoint {cut.checkpoint_id} is the newest"
        self.console.print(f"job {job}: {newest} in all of these tables", highlight=False)
        for name, snapshot in cut.snapshots.items():
            ahead = cut.marks[name]
            further = f" (has up to checkpoint {ahead})" if ahead is not None and ahead != cut.checkpoint_id else ""
            at = f"snapshot {snapshot}" if snapshot is not None else "no snapshot of the job"
            self.console.print(f"  {name}: {at}{further}", highlight=False, soft_wrap=True)

    def abandoned(self, state: CheckpointState) -> None:
        acked = f"; acknowledged by {state.acknowledged_by}" if state.acknowledged_at else ""
        self.console.print(
            f"{state.table_name}: checkpoint {state.checkpoint_id} of job {state.job_id} is {state.status} "
            f"(by {state.abandoned_by}: {state.abandon_reason}){acked}",
            highlight=False,
            soft_wrap=True,
        )

    def recovered(self, table: str, job: str, results: list[CommitResult]) -> None:
        if not results:
            self.console.print(f"{table}: job {job} has no prepared checkpoint to commit", highlight=False)
        for result in results:
            landed = f" as snapshot {result.snapshot_id}" if result.snapshot_id is not None else ""
            self.console.print(
                f"{table}: checkpoint {result.checkpoint_id} of job {job} {result.status}{landed} "
                f"({result.records:,} records)",
                highlight=False,
                soft_wrap=True,
            )

    def orphans(self, sweep: OrphanSweep) -> None:
        verb = "deleted" if sweep.deleted else "found (nothing deleted; --delete removes them)"
        total = sum(o.size for o in sweep.orphans)
        self.console.print(
            f"{sweep.table}: {len(sweep.orphans)} orphan file(s), {total:,} bytes, older than "
            f"{sweep.older_than.isoformat()}, {verb}",
            highlight=False,
            soft_wrap=True,
        )
        for orphan in sweep.orphans:
            self.console.print(
                f"  {orphan.path} ({orphan.size:,} bytes, {_time(orphan.modified)})", highlight=False, soft_wrap=True
            )
        self._unreadable(sweep.unreadable_tables, sweep.ignored_tables)

    def error(self, message: str, code: int) -> None:
        # the message as it is: a value in square brackets (``icecommit[metrics]``, a column's
        # ``a[0]``) is not markup
        Console(stderr=True).print(f"[red]error:[/red] {escape(message)}", highlight=False, soft_wrap=True)

    def compacted(self, plan: CompactionPlan) -> None:
        files = sum(g.input_files for g in plan.groups)
        size = sum(g.input_bytes for g in plan.groups)
        if not plan.applied:
            head = f"{plan.table}: would rewrite {files} small file(s), {size:,} bytes, in {len(plan.groups)} commit(s)"
        else:
            head = (
                f"{plan.table}: {plan.committed} commit(s) rewrote small files into "
                f"{sum(g.output_files for g in plan.groups)}; {plan.aborted} aborted"
            )
        self.console.print(f"{head} (target {plan.target_file_size:,} bytes)", highlight=False, soft_wrap=True)
        for group in plan.groups:
            for partition in group.partitions:
                deletes = (
                    f", {partition.deleted_records:,} deleted row(s) left out ({partition.delete_files} delete file(s))"
                    if partition.delete_files
                    else ""
                )
                self.console.print(
                    f"  {partition.label}: {len(partition.files)} file(s), {partition.input_bytes:,} bytes "
                    f"-> about {partition.expected_files}{deletes}",
                    highlight=False,
                    soft_wrap=True,
                )
            if group.status == "committed":
                dropped = f"; {group.removed_delete_files} delete file(s) dropped" if group.removed_delete_files else ""
                self.console.print(
                    f"  committed as snapshot {group.snapshot_id}{dropped}", highlight=False, soft_wrap=True
                )
            elif group.status == "aborted":
                self.console.print(f"  aborted, nothing committed: {group.reason}", highlight=False, soft_wrap=True)
        for values, reason in plan.skipped:
            self.console.print(f"  skipped {values}: {reason}", highlight=False, soft_wrap=True)
