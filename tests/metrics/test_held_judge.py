"""Reconciliation's judgement of checkpoints that met checks, as facts in, report out: one
held on its job's audit branch counts as held (never lost, never pending) with its check
results, and one held for a failed check is noted; one discarded from there is information;
one published from there is committed, naming who published it and whether forced."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from icecommit.core.check_values import CheckResult
from icecommit.metrics import Thresholds
from icecommit.metrics.judge import LiveFile, judge
from icecommit.metrics.report_model import SCHEMA_VERSION, CheckpointLine, Problem
from tests.metrics.test_judge import COMMITTED_AT, NOW, W0, counted, facts, state

AUDIT = "icecommit-audit-j"
SHORT = CheckResult("row_count(min=10)", False, 3, "3 rows, fewer than min 10")
FULL = CheckResult("row_count(min=10)", True, 20, "20 rows")


def _checks(*results: CheckResult) -> str:
    return json.dumps([r.to_dict() for r in results])


def held(checkpoint_id: int, reason: str, *results: CheckResult, **fields: Any) -> Any:
    """A checkpoint committed to the audit branch (as :func:`icecommit.committer.holding.hold` records it)."""
    return state(
        checkpoint_id, "held", records=fields.pop("records", 3), source_records=fields.pop("source_records", 3),
        snapshot_id=900 + checkpoint_id, committed_at=COMMITTED_AT, manifest_path="m.avro",
        check_results=_checks(*results) if results else None, audit_branch=AUDIT, hold_reason=reason, **fields,
    )  # fmt: skip


def test_a_held_checkpoint_counts_as_held_with_its_checks_and_a_failed_check_is_noted() -> None:
    one = state(1, records=20, source_records=20, manifest_path="m.avro", check_results=_checks(FULL))
    two = held(2, "checks", SHORT)
    three = held(3, "queued", FULL, records=20, source_records=20)
    report = judge(
        facts(one, two, three, task_counts={("j", 2): counted({W0: 3}, {W0: 3}), ("j", 1): counted({W0: 20}, {W0: 20})},
              committed={("j", 1): {W0: 20}}, live_files=[LiveFile("a.parquet", 20, 101)],
              off_branch=frozenset({("j", 2), ("j", 3)})),
        Thresholds(),
    )  # fmt: skip
    assert report.ok  # not on main by design: neither loss nor pending (off the branch: not rolled back either)
    assert [c.checkpoint_id for c in report.checkpoints] == [1] and report.pending == ()
    assert report.checkpoints[0].checks == (FULL,) and report.checkpoints[0].audit_branch is None
    assert report.held == (
        CheckpointLine("j", 2, "held", 902, COMMITTED_AT, 3, 3, 0, 0, 0.0, 0.0, True,
                       f"held on audit branch {AUDIT}: its checks failed (row_count(min=10): 3 rows, fewer than min "
                       "10); not on this branch by design (held, not loss)",
                       checks=(SHORT,), audit_branch=AUDIT, hold_reason="checks"),
        CheckpointLine("j", 3, "held", 903, COMMITTED_AT, 20, 20, 0, 0, 0.0, 0.0, True,
                       f"held on audit branch {AUDIT}: queued behind an earlier held checkpoint of its job; not on "
                       "this branch by design (held, not loss)",
                       checks=(FULL,), audit_branch=AUDIT, hold_reason="queued"),
    )  # fmt: skip
    assert report.problems == (
        Problem("failed-checks", "checkpoint 2 of job j: its checks failed (row_count(min=10): 3 rows, fewer than min "
                f"10); it waits on audit branch {AUDIT} and its 3 rows are not on this branch: publish it anyway "
                "(icecommit publish ns.t --job j --checkpoint 2 --force --reason TEXT) or discard it (icecommit "
                "discard ns.t --job j --checkpoint 2 --reason TEXT)", "j", 2, severity="info"),
    )  # fmt: skip
    # its rows are in no stage's sum and no window: the minute holds checkpoint 1's alone
    assert [(w.source, w.written, w.committed, w.closed, w.ok) for w in report.windows] == [(20, 20, 20, True, True)]
    summary = report.to_dict()["summary"]
    assert summary["rows"]["source"] == 20 and summary["loss"] == 0
    assert summary["checkpoints"] == {"committed": 1, "held": 2}
    assert summary["held"] == {"checkpoints": 2, "rows": 23, "failed_checks": 1}


def test_a_manual_release_waits_without_a_note_and_one_prepared_for_the_branch_is_pending() -> None:
    manual = held(1, "manual", FULL)
    routed = state(2, "prepared", records=3, source_records=3, check_results=_checks(SHORT), audit_branch=AUDIT,
                   hold_reason="checks", prepared_at=NOW - timedelta(minutes=1))  # fmt: skip
    report = judge(facts(manual, routed), Thresholds())
    assert report.ok and [c.note.split(":")[1] for c in report.held] == [
        " every checkpoint of its job waits for a release (publish=manual); not on this branch by design (held, not "
        "loss)"
    ]  # fmt: skip
    assert [(c.status, c.note, c.audit_branch, c.checks) for c in report.pending] == [
        ("pending", f"prepared, not committed to audit branch {AUDIT} yet (pending, not loss)", AUDIT, (SHORT,))
    ]
    assert [(p.kind, p.checkpoint_id, p.severity) for p in report.problems] == [("failed-checks", 2, "info")]
    stuck = judge(facts(manual, routed, now=NOW + timedelta(days=1)), Thresholds())
    assert stuck.pending[0].note.endswith(f"still not committed to audit branch {AUDIT}") and not stuck.ok


def test_a_discarded_checkpoint_is_information_and_a_published_one_says_who_and_whether_forced() -> None:
    discarded = state(
        2, "abandoned", records=3, source_records=3, snapshot_id=902, check_results=_checks(SHORT), audit_branch=AUDIT,
        hold_reason="checks", abandon_reason="duplicated upstream", abandoned_by="bob", abandoned_at=COMMITTED_AT,
    )  # fmt: skip
    forced = state(3, records=3, source_records=3, manifest_path="m.avro", check_results=_checks(SHORT),
                   audit_branch=AUDIT, hold_reason="checks", published_by="alice", published_at=COMMITTED_AT,
                   publish_reason="a short hour, checked by hand", publish_forced=True)  # fmt: skip
    queued = state(4, records=20, source_records=20, manifest_path="m.avro", check_results=_checks(FULL),
                   audit_branch=AUDIT, hold_reason="queued", published_by="alice",
                   published_at=COMMITTED_AT)  # fmt: skip
    report = judge(
        facts(discarded, forced, queued, live_files=[LiveFile("b.parquet", 3, 103), LiveFile("c.parquet", 20, 104)]),
        Thresholds(),
    )  # fmt: skip
    assert report.ok  # an abandon needs acknowledging; a discard is the operator's verdict on held rows
    line = report.checkpoints[0]
    assert (line.status, line.committed, line.note, line.checks) == (
        "abandoned", 0, f"discarded from audit branch {AUDIT}: its rows never reached this branch (information, "
        "not loss)", (SHORT,),
    )  # fmt: skip
    assert report.problems[0] == Problem(
        "discarded", f"checkpoint 2 of job j: discarded from audit branch {AUDIT} by bob at "
        f"{COMMITTED_AT.isoformat()} (duplicated upstream); its 3 rows never reached this branch; its checks had "
        "failed (row_count(min=10): 3 rows, fewer than min 10); information, not loss", "j", 2, severity="info",
    )  # fmt: skip
    assert len(report.problems) == 1
    published = {c.checkpoint_id: c for c in report.checkpoints[1:]}
    assert published[3].status == "committed" and published[3].note == (
        f"published from {AUDIT} by alice, forced past failed checks (row_count(min=10)): a short hour, checked by hand"
    )
    assert (published[3].published_by, published[3].publish_forced, published[3].hold_reason) == (
        "alice", True, "checks"
    )  # fmt: skip
    assert published[4].note == f"published from {AUDIT} by alice" and not published[4].publish_forced


def test_the_forms_show_the_held_checkpoints_and_their_checks() -> None:
    report = judge(facts(held(2, "checks", SHORT, FULL), held(3, "manual")), Thresholds())
    document = json.loads(report.to_json())
    assert document["schema_version"] == SCHEMA_VERSION == 4
    assert [(h["checkpoint_id"], h["status"], h["hold_reason"]) for h in document["held"]] == [
        (2, "held", "checks"), (3, "held", "manual")
    ]  # fmt: skip
    assert document["held"][0]["checks"] == [SHORT.to_dict(), FULL.to_dict()]
    assert document["held"][0]["snapshot_id_str"] == "902" and document["held"][0]["audit_branch"] == AUDIT
    markdown = report.to_markdown()
    assert "- **Held**: 2 checkpoint(s) with 6 row(s) wait on audit branches (1 of them failed a check)" in markdown
    assert "| j | 2 | held | 902 | 3 | 3 | 0 | 0 | 0.00 | 0.00 | yes | held on audit branch" in markdown
    assert "## Held checkpoints and their checks" in markdown
    assert f"| j | 2 | {AUDIT} | checks | row_count(min=10) | no | 3 | 3 rows, fewer than min 10 |" in markdown
    assert f"| j | 3 | {AUDIT} | manual |  |  |  |  |" in markdown
    page = report.to_html()
    assert "<h2>Held checkpoints and their checks</h2>" in page and "3 rows, fewer than min 10" in page
    assert "0 committed checkpoints,\n2 held, 0 pending" in page
    clean = judge(facts(state(1)), Thresholds()).to_markdown()
    assert "## Held" not in clean and "**Held**" not in clean
