"""Everything that reads a table agrees on a checkpoint held on its job's audit branch:
reconciliation counts it as held (never lost, whatever the range) with its check results,
and as committed once published; the Prometheus exporter counts it as held and its failed
check by name, and its rows as committed only once they reach main. Written without Spark
(``write_arrow``, as a task writes); SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import timedelta

import pyarrow as pa
from pyiceberg.catalog.sql import SqlCatalog

import icecommit as ic
from icecommit import checks
from icecommit.committer.holding import Gate
from icecommit.metrics.exporter import StateMetrics, exposition
from icecommit.state import state_engine, state_uri
from tests.conftest import unique_table
from tests.helpers import EVENTS_SCHEMA, events, write_arrow
from tests.metrics.test_exporter import Samples, parsed, value

AUDIT = "icecommit-audit-j"
GATE = Gate(checks=(checks.row_count(min=10),), on_check_failure="queue")


def _held(catalog: SqlCatalog) -> tuple[str, ic.GlobalCommitter]:
    """Checkpoint 1 committed (20 rows), 2 held (3 rows, fewer than 10), 3 queued behind it."""
    name = unique_table()
    ic.create_table(catalog, name, EVENTS_SCHEMA)
    committer = ic.GlobalCommitter(catalog, name, job_id="j", gate=GATE, sleep=lambda _: None)
    rows: tuple[pa.Table, ...] = (events(0, 20), events(100, 103), events(200, 220))
    for n, batch in enumerate(rows, start=1):
        committer.prepare(n, [write_arrow(committer.load_table(), batch, job_id="j", checkpoint_id=n)])
        committer.commit(n)
    return name, committer


def _metrics(catalog: SqlCatalog, name: str) -> Samples:
    return parsed(exposition(StateMetrics(state_engine(state_uri(catalog)), tables=[name])))


def test_a_held_checkpoint_is_held_everywhere_until_published(catalog: SqlCatalog) -> None:
    name, committer = _held(catalog)
    report = ic.reconcile(catalog, name)
    assert report.ok and [c.checkpoint_id for c in report.checkpoints] == [1] and report.pending == ()
    assert [(c.checkpoint_id, c.hold_reason, c.audit_branch, [r.ok for r in c.checks]) for c in report.held] == [
        (2, "checks", AUDIT, [False]), (3, "queued", AUDIT, [True])
    ]  # fmt: skip
    assert report.held[0].checks[0].observed == 3 and report.held[0].written == 3
    assert [(p.kind, p.checkpoint_id, p.severity) for p in report.problems] == [("failed-checks", 2, "info")]
    assert report.to_dict()["summary"]["held"] == {"checkpoints": 2, "rows": 23, "failed_checks": 1}
    # whatever the range: they wait for a person
    later = ic.reconcile(catalog, name, since=committer.store.clock() + timedelta(hours=1),
                         until=committer.store.clock() + timedelta(hours=2))  # fmt: skip
    assert later.checkpoints == () and [c.checkpoint_id for c in later.held] == [2, 3]
    # on the audit branch itself they are committed, and reconcile there
    audit = ic.reconcile(catalog, name, branch=AUDIT)
    assert audit.ok and audit.held == () and [(c.checkpoint_id, c.readable) for c in audit.checkpoints] == [
        (1, 20), (2, 3), (3, 20)
    ]  # fmt: skip

    samples = _metrics(catalog, name)
    assert value(samples, "icecommit_checkpoints_held", table=name, job="j") == 2
    assert value(samples, "icecommit_checks_failed_total", table=name, job="j", check="row_count(min=10)") == 1
    assert value(samples, "icecommit_checkpoints", table=name, job="j", status="held") == 2
    assert value(samples, "icecommit_rows_committed_total", table=name, job="j") == 20  # main's only

    ic.publish(catalog, name, job_id="j", checkpoint_id=2, force=True, reason="a short hour", by="alice")
    published = ic.reconcile(catalog, name)
    assert published.ok and published.held == () and published.problems == ()
    assert [(c.checkpoint_id, c.readable, c.published_by, c.publish_forced) for c in published.checkpoints] == [
        (1, 20, None, False), (2, 3, "alice", True), (3, 20, "alice", False)
    ]  # fmt: skip
    assert published.checkpoints[1].note.endswith("forced past failed checks (row_count(min=10)): a short hour")
    samples = _metrics(catalog, name)
    assert value(samples, "icecommit_checkpoints_held", table=name, job="j") == 0
    assert value(samples, "icecommit_checks_failed_total", table=name, job="j", check="row_count(min=10)") == 1
    assert value(samples, "icecommit_rows_committed_total", table=name, job="j") == 43


def test_a_discarded_checkpoint_is_information_and_never_counted_as_committed(catalog: SqlCatalog) -> None:
    name, _ = _held(catalog)
    ic.discard(catalog, name, job_id="j", checkpoint_id=2, reason="duplicated upstream", by="bob")
    report = ic.reconcile(catalog, name)
    assert report.ok and report.held == ()
    assert [(c.checkpoint_id, c.status, c.readable) for c in report.checkpoints] == [
        (1, "committed", 20), (2, "abandoned", 0), (3, "committed", 20)
    ]  # fmt: skip
    assert [(p.kind, p.checkpoint_id, p.severity) for p in report.problems] == [("discarded", 2, "info")]
    assert "by bob" in report.problems[0].message and "duplicated upstream" in report.problems[0].message
    samples = _metrics(catalog, name)
    assert value(samples, "icecommit_checkpoints_held", table=name, job="j") == 0
    assert value(samples, "icecommit_rows_committed_total", table=name, job="j") == 40  # 1 and 3, never 2
