"""``icecommit checkpoints`` and ``icecommit reconcile`` agree on checkpoints that met
checks: held and queued ones are listed (with their audit branch, why they wait and the
checks that failed), published ones with who published them and whether forced, discarded
ones as abandoned; reconciliation holds while they wait."""

from __future__ import annotations

import json
from pathlib import Path

import icecommit as ic
from icecommit import checks
from icecommit.committer.holding import Gate
from tests.cli.runner import invoke
from tests.fakes import catalog_of, cli_json
from tests.helpers import EVENTS_SCHEMA, events, write_arrow

TABLE = "ns.events"
AUDIT = "icecommit-audit-job"


def _held(home: Path) -> None:
    """Checkpoint 1 committed, 2 held (5 rows, fewer than 10), 3 queued behind it."""
    catalog = catalog_of(home)
    catalog.create_namespace("ns")
    ic.create_table(catalog, TABLE, EVENTS_SCHEMA)
    gate = Gate(checks=(checks.row_count(min=10),), on_check_failure="queue")
    committer = ic.GlobalCommitter(catalog, TABLE, job_id="job", gate=gate)
    for n, rows in ((1, events(0, 20)), (2, events(100, 105)), (3, events(200, 220))):
        committer.prepare(n, [write_arrow(committer.load_table(), rows, job_id="job", checkpoint_id=n)])
        committer.commit(n)


def _rows(stdout: str) -> dict[str, str]:
    """Each checkpoint's line of the text table, by checkpoint id."""
    return {line.split()[1]: line for line in stdout.splitlines() if line.strip().startswith("job ")}


def test_held_and_queued_checkpoints_are_listed_then_published_by_whom_and_forced(tmp_path: Path) -> None:
    _held(tmp_path)
    listed = invoke(tmp_path, "checkpoints", TABLE)
    assert listed.returncode == 0 and "checks and release" in listed.stdout
    rows = _rows(listed.stdout)
    assert rows["1"].split()[2] == "committed" and rows["1"].endswith("1 check(s) passed")
    assert rows["2"].split()[2] == "held" and rows["2"].endswith(f"held (checks) on {AUDIT}; failed row_count(min=10)")
    assert rows["3"].split()[2] == "held"
    assert rows["3"].endswith(f"queued behind an earlier one on {AUDIT}; 1 check(s) passed")
    document = cli_json(tmp_path, "checkpoints", TABLE)["checkpoints"]
    assert [(c["checkpoint_id"], c["status"], c["hold_reason"], c["checks_failed"]) for c in document] == [
        (1, "committed", None, False), (2, "held", "checks", True), (3, "held", "queued", False)
    ]  # fmt: skip
    assert document[1]["audit_branch"] == AUDIT and document[1]["checks"][0]["observed"] == 5
    assert not document[1]["in_ancestry"]  # not on main
    on_audit = cli_json(tmp_path, "checkpoints", TABLE, "--branch", AUDIT)["checkpoints"]
    assert [(c["checkpoint_id"], c["status"], c["in_ancestry"]) for c in on_audit] == [
        (1, "committed", True), (2, "held", True), (3, "held", True)
    ]  # fmt: skip

    reconciled = invoke(tmp_path, "reconcile", TABLE)
    assert reconciled.returncode == 0, reconciled.stdout  # held is not lost
    assert "- **Held**: 2 checkpoint(s) with 25 row(s)" in reconciled.stdout
    assert f"| job | 2 | {AUDIT} | checks | row_count(min=10) | no | 5 | 5 rows, fewer than min 10 |" in (
        reconciled.stdout
    )
    assert json.loads(invoke(tmp_path, "--output", "json", "reconcile", TABLE).stdout)["summary"]["held"] == {
        "checkpoints": 2, "rows": 25, "failed_checks": 1
    }  # fmt: skip

    invoke(tmp_path, "publish", TABLE, "--job", "job", "--checkpoint", "2", "--force", "--reason", "a short hour")
    rows = _rows(invoke(tmp_path, "checkpoints", TABLE).stdout)
    assert rows["2"].split()[2] == "committed" and f"published from {AUDIT} by " in rows["2"]
    assert "(forced: a short hour); failed row_count(min=10)" in rows["2"]
    assert "(forced" not in rows["3"] and f"published from {AUDIT} by " in rows["3"]
    document = cli_json(tmp_path, "checkpoints", TABLE)["checkpoints"]
    assert [(c["status"], c["publish_forced"], c["publish_reason"]) for c in document[1:]] == [
        ("committed", True, "a short hour"), ("committed", False, None)
    ]  # fmt: skip
    assert document[1]["published_by"] and document[1]["published_at"] and document[1]["in_ancestry"]


def test_a_discarded_checkpoint_is_listed_abandoned(tmp_path: Path) -> None:
    _held(tmp_path)
    invoke(tmp_path, "discard", TABLE, "--job", "job", "--checkpoint", "2", "--reason", "duplicated upstream")
    rows = _rows(invoke(tmp_path, "checkpoints", TABLE).stdout)
    assert rows["2"].split()[2] == "abandoned" and rows["2"].endswith(
        f"discarded from {AUDIT}; failed row_count(min=10)"
    )
    assert rows["3"].split()[2] == "committed"
    reconciled = invoke(tmp_path, "reconcile", TABLE)
    assert reconciled.returncode == 0 and "### discarded (info, 1)" in reconciled.stdout
