"""``icecommit held / publish / discard``: a held checkpoint is listed with its check results
(exit 1 while any is held), published once (a failed check needs --force and --reason), or
discarded; ``recover`` of a job whose checks fail exits with the held code, 5."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import icecommit as ic
from icecommit import checks
from icecommit.cli.context import EXIT_HELD
from icecommit.committer.holding import Gate
from icecommit.errors import CheckpointHeldError
from icecommit.writers import write_arrow
from tests.cli.runner import invoke
from tests.fakes import catalog_of, cli_json
from tests.helpers import EVENTS_SCHEMA, events

TABLE = "ns.events"
GATE = Gate(checks=(checks.row_count(min=10),), on_check_failure="queue")


def _held(home: Path) -> ic.GlobalCommitter:
    """Checkpoint 1 committed, 2 held (5 rows, fewer than 10), 3 queued behind it."""
    catalog = catalog_of(home)
    catalog.create_namespace("ns")
    ic.create_table(catalog, TABLE, EVENTS_SCHEMA)
    committer = ic.GlobalCommitter(catalog, TABLE, job_id="job", gate=GATE)
    for n, rows in ((1, events(0, 20)), (2, events(100, 105)), (3, events(200, 220))):
        committer.prepare(n, [write_arrow(committer.load_table(), rows, job_id="job", checkpoint_id=n)])
        committer.commit(n)
    return committer


def test_held_lists_the_held_and_queued_checkpoints_with_their_checks(tmp_path: Path) -> None:
    _held(tmp_path)
    listed = invoke(tmp_path, "held", TABLE, "--job", "job")
    assert listed.returncode == 1
    assert "checkpoint 2 of job job held (checks) on branch icecommit-audit-job" in listed.stdout
    assert "FAIL row_count(min=10): 5 rows, fewer than min 10" in listed.stdout
    assert "checkpoint 3 of job job queued behind an earlier one" in listed.stdout
    shown = invoke(tmp_path, "--output", "json", "held", TABLE)
    assert shown.returncode == 1
    document = json.loads(shown.stdout)
    assert [(h["checkpoint_id"], h["hold_reason"]) for h in document["held"]] == [(2, "checks"), (3, "queued")]
    assert document["held"][0]["check_results"][0]["observed"] == 5


def test_publish_needs_force_for_a_failed_check_then_brings_the_queue(tmp_path: Path) -> None:
    committer = _held(tmp_path)
    refused = invoke(tmp_path, "publish", TABLE, "--job", "job", "--checkpoint", "2")
    assert refused.returncode == 2 and "force" in refused.stderr and "Traceback" not in refused.stderr
    out_of_order = invoke(tmp_path, "publish", TABLE, "--job", "job", "--checkpoint", "3")
    assert out_of_order.returncode == 2 and "checkpoint 2 of job 'job' in ns.events first" in out_of_order.stderr
    done = cli_json(tmp_path, "publish", TABLE, "--job", "job", "--checkpoint", "2", "--force", "--reason", "ok")
    assert [(c["checkpoint_id"], c["status"]) for c in done["checkpoints"]] == [(2, "committed"), (3, "committed")]
    assert committer.load_table().scan().to_arrow().num_rows == 45
    assert invoke(tmp_path, "held", TABLE).returncode == 0


def test_discard_gives_it_up_and_publishes_the_queue(tmp_path: Path) -> None:
    committer = _held(tmp_path)
    done = invoke(tmp_path, "discard", TABLE, "--job", "job", "--checkpoint", "2", "--reason", "bad batch")
    assert done.returncode == 0 and "is abandoned" in done.stdout
    assert committer.load_table().scan().to_arrow().num_rows == 40  # 1 and 3, not 2


def test_a_held_checkpoint_exits_with_its_own_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    catalog = catalog_of(tmp_path)
    catalog.create_namespace("ns")
    ic.create_table(catalog, TABLE, EVENTS_SCHEMA)
    gate = Gate(checks=(checks.row_count(min=10),))
    committer = ic.GlobalCommitter(catalog, TABLE, job_id="job", gate=gate)
    # prepared with its checks' verdict: whoever commits it (here the CLI's recover, which
    # knows no checks) sends it to the audit branch, never to main
    committer.prepare(1, [write_arrow(committer.load_table(), events(0, 3), job_id="job", checkpoint_id=1)])
    recovered = invoke(tmp_path, "recover", TABLE, "--job", "job")
    assert recovered.returncode == EXIT_HELD == 5
    assert "held on branch icecommit-audit-job" in recovered.stderr and "Traceback" not in recovered.stderr
    assert (
        committer.load_table().metadata.refs["main"].snapshot_id
        != committer.load_table().metadata.refs["icecommit-audit-job"].snapshot_id
    )
    assert committer.load_table().scan().to_arrow().num_rows == 0  # main: nothing of it
    with pytest.raises(CheckpointHeldError):
        committer.commit(1)
