"""Reconciliation on SQLite and PostgreSQL: a clean pipeline reconciles, and every
sabotage is detected and named."""

from __future__ import annotations

import datetime as dt
import html
import json
from pathlib import Path

import pyiceberg.table.snapshots
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table import Table
from sqlalchemy.orm import Session

import icecommit as ic
from icecommit.errors import InvalidRangeError
from icecommit.maintenance import apply_expire, apply_rollback, plan_expire, plan_rollback
from icecommit.state import CheckpointStore, state_engine, state_uri
from icecommit.state.models import MetricRow
from tests.helpers import DAY0, EVENTS_SCHEMA, DistinctMillis, events, write_arrow

# reconciliation's judgement; its queries run on PostgreSQL in the kill, fault and foreign-writer tests
pytestmark = pytest.mark.database_independent

JOB = "ingest"
#: The committer's clock: a day after the last event time of ``events`` (three days from DAY0).
COMMIT_CLOCK = DAY0 + dt.timedelta(days=4)


def _pipeline(
    catalog: SqlCatalog, checkpoints: int = 3, *, commit_last: bool = True
) -> tuple[Table, ic.GlobalCommitter]:
    table = ic.create_table(
        catalog,
        f"{catalog.name}.events",
        EVENTS_SCHEMA,
        partition_by=["event"],
        properties={"icecommit.event-time-column": "ts"},
    )
    store = CheckpointStore(state_engine(state_uri(catalog)), clock=lambda: COMMIT_CLOCK)
    committer = ic.GlobalCommitter(catalog, table, job_id=JOB, store=store)
    for checkpoint_id in range(1, checkpoints + 1):
        loaded = committer.load_table()
        rows = events(checkpoint_id * 1000, checkpoint_id * 1000 + 300)
        results = [
            write_arrow(loaded, rows.slice(0, 150), job_id=JOB, checkpoint_id=checkpoint_id, task_id=0),
            write_arrow(loaded, rows.slice(150), job_id=JOB, checkpoint_id=checkpoint_id, task_id=1, attempt=1),
        ]
        committer.prepare(checkpoint_id, results)
        if commit_last or checkpoint_id < checkpoints:
            committer.commit(checkpoint_id)
    return committer.load_table(), committer


def _kinds(report: ic.ReconciliationReport) -> set[str]:
    return {p.kind for p in report.problems}


def test_a_clean_pipeline_reconciles(catalog: SqlCatalog) -> None:
    table, _ = _pipeline(catalog)
    report = ic.reconcile(catalog, table, job_id=JOB)
    assert report.ok, report.to_markdown()
    assert [(c.checkpoint_id, c.source, c.written, c.committed, c.readable) for c in report.checkpoints] == [
        (c, 300, 300, 300, 300) for c in (1, 2, 3)
    ]
    assert sum(w.source for w in report.windows) == 900
    assert all(w.window_start is None or w.window_start.second == 0 for w in report.windows)
    assert report.health.attempts == 3 and report.health.unknown_outcomes == 0
    # every window waited between one and four days for its commit (the injected clock)
    assert report.lag.p50_seconds is not None and report.lag.p99_seconds is not None
    assert 86_400 <= report.lag.p50_seconds <= report.lag.p99_seconds <= 4 * 86_400
    deep = ic.reconcile(catalog, table, job_id=JOB, deep=True)
    assert deep.ok and all(w.readable == w.committed for w in deep.windows)
    shown = deep._repr_html_()  # what a notebook displays: the page, isolated in an iframe
    assert shown.startswith("<div><iframe srcdoc=") and html.unescape(shown).count('<svg id="chart"') == 1


def test_a_deleted_data_file_is_named(catalog: SqlCatalog) -> None:
    table, _ = _pipeline(catalog)
    victim = next(iter(table.scan().plan_files())).file.file_path
    Path(victim.removeprefix("file://")).unlink()
    report = ic.reconcile(catalog, table, job_id=JOB)
    assert not report.ok
    assert any(p.kind == "missing-file" and p.path == victim for p in report.problems)
    # the deep scan reads the data: the missing file counts zero readable rows, and is named
    deep = ic.reconcile(catalog, table, job_id=JOB, deep=True)
    assert not deep.ok
    assert any(p.kind == "missing-file" and p.path == victim for p in deep.problems)
    assert sum(c.readable for c in deep.checkpoints) < sum(c.committed for c in deep.checkpoints)


def test_a_rollback_by_another_tool_is_reported_as_rolled_back_not_as_loss(catalog: SqlCatalog) -> None:
    table, _ = _pipeline(catalog)
    first = table.metadata.snapshots[0].snapshot_id
    table.manage_snapshots().rollback_to_snapshot(first).commit()  # pyiceberg, not icecommit
    for deep in (False, True):
        report = ic.reconcile(catalog, table, job_id=JOB, deep=deep)
        assert report.ok, report.to_markdown()
        lines = {c.checkpoint_id: c for c in report.checkpoints}
        assert [lines[c].status for c in (1, 2, 3)] == ["committed", "rolled-back", "rolled-back"]
        assert (lines[2].written, lines[2].readable) == (300, 0)
        rolled = [p for p in report.problems if p.kind == "rolled-back"]
        assert [(p.checkpoint_id, p.severity) for p in rolled] == [(2, "info"), (3, "info")]
        assert "loss" not in _kinds(report)
        # the windows count only what is meant to be in the table
        assert sum(w.source for w in report.windows) == 300


def test_checkpoints_whose_snapshots_were_expired_still_count_as_readable(catalog: SqlCatalog) -> None:
    table, _ = _pipeline(catalog, checkpoints=4)
    plan = plan_expire(catalog, table, older_than=dt.timedelta(0), retain_last=1)
    assert len(plan.expired_snapshot_ids) == 3
    apply_expire(catalog, plan)
    for deep in (False, True):
        report = ic.reconcile(catalog, table, job_id=JOB, deep=deep)
        assert report.ok, report.to_markdown()
        assert [(c.checkpoint_id, c.readable) for c in report.checkpoints] == [(c, 300) for c in (1, 2, 3, 4)]


def test_a_deleted_file_after_expiry_is_still_loss(catalog: SqlCatalog) -> None:
    table, _ = _pipeline(catalog, checkpoints=3)
    apply_expire(catalog, plan_expire(catalog, table, older_than=dt.timedelta(0), retain_last=1))
    victim = next(f.file for f in catalog.load_table(f"{catalog.name}.events").scan().plan_files())
    Path(victim.file_path.removeprefix("file://")).unlink()
    report = ic.reconcile(catalog, table, job_id=JOB, deep=True)
    assert not report.ok and "missing-file" in _kinds(report)


def test_files_committed_twice_by_another_writer_are_named(catalog: SqlCatalog) -> None:
    table, _ = _pipeline(catalog)
    entries = [
        e.data_file
        for m in table.current_snapshot().manifests(table.io)
        for e in m.fetch_manifest_entry(table.io)
        if e.snapshot_id == table.metadata.snapshots[0].snapshot_id
    ]
    with table.transaction() as tx, tx.update_snapshot().fast_append() as append:
        for data_file in entries:
            append.append_data_file(data_file)
    report = ic.reconcile(catalog, table, job_id=JOB)
    assert not report.ok
    duplicates = [p for p in report.problems if p.kind == "duplicate-file"]
    assert {p.path for p in duplicates} == {d.file_path for d in entries}


def test_metrics_of_a_failed_task_attempt_never_count(catalog: SqlCatalog) -> None:
    table, committer = _pipeline(catalog)
    with Session(state_engine(state_uri(catalog))) as session, session.begin():
        session.add(
            MetricRow(job_id=JOB, table_name=committer.table_name, checkpoint_id=2, stage="written", task_id=0,
                      attempt=3, window_start=None, records=999, bytes=0, files=0,
                      recorded_at=dt.datetime.now(dt.timezone.utc))
        )  # fmt: skip
    report = ic.reconcile(catalog, table, job_id=JOB)
    assert report.ok
    assert [c.written for c in report.checkpoints] == [300, 300, 300]
    ignored = [p for p in report.problems if p.kind == "ignored-metrics"]
    assert (
        len(ignored) == 1 and ignored[0].checkpoint_id == 2 and "task 0 attempt 3 (999 records)" in ignored[0].message
    )


def test_a_prepared_checkpoint_is_pending_not_loss(catalog: SqlCatalog) -> None:
    table, _ = _pipeline(catalog, commit_last=False)
    # prepared at the injected clock; pending rather than stuck while younger than max_pending
    patient = ic.Thresholds(max_pending=dt.datetime.now(dt.timezone.utc) - COMMIT_CLOCK + dt.timedelta(days=1))
    report = ic.reconcile(catalog, table, job_id=JOB, thresholds=patient)
    assert report.ok, report.to_markdown()
    assert [c.checkpoint_id for c in report.checkpoints] == [1, 2]
    assert [(c.checkpoint_id, c.status) for c in report.pending] == [(3, "pending")]
    stuck = ic.reconcile(catalog, table, job_id=JOB)  # the default: an hour
    assert not stuck.ok and [(c.checkpoint_id, c.status) for c in stuck.pending] == [(3, "stuck")]
    assert any(not w.closed for w in report.windows)


def test_a_window_whose_source_exceeds_what_was_written(catalog: SqlCatalog) -> None:
    table, committer = _pipeline(catalog, checkpoints=1)
    report = ic.reconcile(catalog, table, job_id=JOB)
    window = next(w.window_start for w in report.windows if w.window_start is not None)
    declared = {w.window_start: w.source for w in report.windows}
    declared[window] += 5
    committer.declare_source(1, declared)
    report = ic.reconcile(catalog, table, job_id=JOB)
    assert not report.ok
    bad = [w for w in report.windows if not w.ok]
    assert [w.window_start for w in bad] == [window] and bad[0].source == bad[0].written + 5
    assert "window-mismatch" in _kinds(report)
    assert window.isoformat() in next(p.message for p in report.problems if p.kind == "window-mismatch")


def test_a_checkpoint_committed_twice_in_the_ancestry_is_named(catalog: SqlCatalog) -> None:
    table, _ = _pipeline(catalog, checkpoints=1)
    # another process, unaware of icecommit's ancestry check, re-commits with the same summary
    summary = {"icecommit.job-id": JOB, "icecommit.checkpoint-id": "1", "icecommit.records": "300"}
    table.append(events(1000, 1300), snapshot_properties=summary)
    report = ic.reconcile(catalog, table, job_id=JOB)
    assert not report.ok
    assert "double-commit" in _kinds(report)


def test_thresholds_tolerate_small_differences(catalog: SqlCatalog) -> None:
    table, committer = _pipeline(catalog, checkpoints=1)
    declared = {w.window_start: w.source for w in ic.reconcile(catalog, table, job_id=JOB).windows}
    busiest = max(declared, key=lambda w: declared[w])
    declared[busiest] += 1  # one record the writers never saw
    committer.declare_source(1, declared)
    strict = ic.reconcile(catalog, table, job_id=JOB)
    assert not strict.ok
    lenient = ic.reconcile(catalog, table, job_id=JOB, thresholds=ic.Thresholds(max_loss_pct=50.0))
    assert lenient.ok


def test_outputs(catalog: SqlCatalog) -> None:
    table, _ = _pipeline(catalog, checkpoints=2)
    report = ic.reconcile(catalog, table, job_id=JOB)
    document = report.to_dict()
    assert document["schema_version"] == 4 and document["ok"] is True
    assert set(document) >= {"checkpoints", "held", "pending", "windows", "problems", "health", "lag", "thresholds",
                             "summary", "changes"}  # fmt: skip
    assert document["summary"]["verdict"] == "ok" and document["summary"]["rows"] == {
        "source": 600, "written": 600, "committed": 600, "readable": 600, "removed": 0, "consumed": 0}  # fmt: skip
    assert document["summary"]["checkpoints"] == {"committed": 2} and document["changes"] is None
    assert list(document)[:6] == ["schema_version", "table", "job_id", "ok", "summary", "changes"]  # answers first
    # snapshot ids also as strings: exact in every JSON tool (numbers above 2^53 are rounded by some)
    for line in document["checkpoints"]:
        assert line["snapshot_id_str"] == str(line["snapshot_id"]) and int(line["snapshot_id_str"]) > 0
    assert json.loads(report.to_json(changes="since the last run: x"))["changes"] == "since the last run: x"
    assert "# Reconciliation of" in report.to_markdown() and "| 2 | committed |" in report.to_markdown()
    page = report.to_html()
    assert page.startswith("<!doctype html>") and 'id="chart"' in page and "http" not in page.split("<svg")[0]


def test_since_and_until_select_checkpoints_by_prepare_time(catalog: SqlCatalog) -> None:
    table, _ = _pipeline(catalog, checkpoints=2)
    future = COMMIT_CLOCK + dt.timedelta(hours=1)  # both were prepared at COMMIT_CLOCK
    later = future + dt.timedelta(hours=1)
    assert ic.reconcile(catalog, table, job_id=JOB, since=future, until=later).checkpoints == ()
    past = COMMIT_CLOCK - dt.timedelta(hours=1)
    assert len(ic.reconcile(catalog, table, job_id=JOB, since=past, until=future).checkpoints) == 2
    assert ic.reconcile(catalog, table, job_id=JOB, since=past, until=COMMIT_CLOCK).checkpoints == ()
    with pytest.raises(InvalidRangeError):
        ic.reconcile(catalog, table, job_id=JOB, since=future, until=past)


def test_checkpoints_that_reached_the_table_out_of_order_are_flagged(
    catalog: SqlCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pyiceberg.table.snapshots, "time", DistinctMillis())  # distinct commit timestamps
    table, _ = _pipeline(catalog)
    ticks = iter(range(1, 100))
    store = CheckpointStore(
        state_engine(state_uri(catalog)), clock=lambda: COMMIT_CLOCK + dt.timedelta(minutes=next(ticks))
    )
    committer = ic.GlobalCommitter(catalog, table, job_id=JOB, store=store)
    apply_rollback(catalog, plan_rollback(catalog, table, to_checkpoint=1, job_id=JOB))
    assert ic.reconcile(catalog, table, job_id=JOB).ok
    committer.recommit(3)
    clean = ic.reconcile(catalog, table, job_id=JOB)
    assert "out-of-order" not in _kinds(clean), clean.to_markdown()
    committer.recommit(2)  # the user's choice: 2 lands after 3
    for deep in (False, True):
        report = ic.reconcile(catalog, table, job_id=JOB, deep=deep)
        [flag] = [p for p in report.problems if p.kind == "out-of-order"]
        assert (flag.job_id, flag.checkpoint_id, flag.severity) == (JOB, 2, "warning")
        assert "after checkpoint 3" in flag.message
        assert report.ok  # every row is in the table once: a warning, not a failure
    # after the snapshots are expired the state's commit times still tell the order
    apply_expire(catalog, plan_expire(catalog, table, older_than=dt.timedelta(0)))
    expired = ic.reconcile(catalog, table, job_id=JOB)
    assert [s.status for s in store.list(f"{catalog.name}.events")] == ["committed"] * 3
    assert [(p.kind, p.checkpoint_id) for p in expired.problems if p.kind == "out-of-order"] == [("out-of-order", 2)]


def test_the_markdown_answers_first_and_collapses_failing_windows_into_ranges(catalog: SqlCatalog) -> None:
    table, committer = _pipeline(catalog, checkpoints=1)
    clean = ic.reconcile(catalog, table, job_id=JOB)
    text = clean.to_markdown()
    summary, problems, details = text.index("## Summary"), text.find("## Problems"), text.index("## Checkpoints")
    assert text.index("**OK") < summary < details and problems == -1
    assert "| committed | 300 |" in text and "- **Loss**: 0 row(s)" in text
    assert "- **Checkpoints**: 1 committed" in text
    passing = [w for w in clean.windows if w.ok and w.closed]
    assert f"{len(passing):,} closed window(s) from" in text and "| window |" not in text  # summarised
    assert "| window |" in clean.to_markdown(all_windows=True)
    assert clean.to_markdown(all_windows=True).count("\n| 2026-") == len(clean.windows)

    # a consecutive run of windows where the source declares more than was written
    declared = {w.window_start: w.source for w in clean.windows}
    timed = sorted(w for w in declared if w is not None)
    start = next(i for i in range(len(timed) - 2) if timed[i + 2] - timed[i] == dt.timedelta(minutes=2))
    for window in timed[start : start + 3]:
        declared[window] += 4
    committer.declare_source(1, declared)
    bad = ic.reconcile(catalog, table, job_id=JOB)
    text = bad.to_markdown()
    assert (
        text.index("**MISMATCH") < text.index("## Summary") < text.index("## Problems") < text.index("## Checkpoints")
    )
    assert "### window-mismatch (error, 3 window(s))" in text
    first, last = timed[start].strftime("%Y-%m-%d %H:%M"), timed[start + 2].strftime("%Y-%m-%d %H:%M")
    line = next(li for li in text.splitlines() if li.startswith(f"- 3 windows {first} to {last}"))
    written = sum(w.written for w in bad.windows if w.window_start in timed[start : start + 3])
    assert f"source {written + 12:,}, written {written:,}" in line
    assert "What to do: the counts of these minutes of event time disagree" in text  # under the heading
    page = bad.to_html()  # the page answers first too: summary, then the grouped problems
    assert page.index('id="verdict"') < page.index('id="summary"') < page.index("id='problems'")
    assert f"3 windows {first} to {last}" in page and "What to do: the counts" in page
    # deep: the readable count of a failing window is in its message too
    deep = ic.reconcile(catalog, table, job_id=JOB, deep=True)
    message = next(p.message for p in deep.problems if p.kind == "window-mismatch")
    assert ", readable " in message and ", readable " not in next(
        p.message for p in bad.problems if p.kind == "window-mismatch"
    )


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(None, "n/a"), (3.25, "3.2 s"), (42.0, "42 s"), (208.0, "3 min 28 s"), (8280.0, "2 h 18 min"),
     (208_749.8, "2 d 9 h")],
)  # fmt: skip
def test_lag_is_shown_in_human_units(seconds: float | None, shown: str) -> None:
    from icecommit.metrics.render import duration

    assert duration(seconds) == shown
