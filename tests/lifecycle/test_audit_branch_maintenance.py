"""Maintenance beside an audit branch: a held checkpoint's files are never swept, expiring
main keeps the branch's snapshots, a rollback of main leaves the branch (and what waits on
it) alone, and the held checkpoint is still published once afterwards; a discarded
checkpoint's files go with the orphan sweep once nothing references them. Time is
injected (``now``), never waited for."""

from __future__ import annotations

import os
from collections import Counter
from datetime import datetime, timedelta, timezone

import pytest
from pyiceberg.catalog.sql import SqlCatalog

import icecommit as ic
from icecommit import checks
from icecommit.committer import committed_checkpoints
from icecommit.committer.holding import Gate
from icecommit.maintenance import apply_expire, apply_rollback, find_orphans, plan_expire, plan_rollback
from tests.helpers import EVENTS_SCHEMA, events, write_arrow

pytestmark = pytest.mark.database_independent

AUDIT = "icecommit-audit-j"
GATE = Gate(checks=(checks.row_count(min=10),), on_check_failure="queue")


def _land(committer: ic.GlobalCommitter, checkpoint_id: int, start: int, rows: int) -> ic.CommitResult:
    data = events(start, start + rows)
    committer.prepare(checkpoint_id, [write_arrow(committer.load_table(), data, job_id=committer.job_id,
                                                  checkpoint_id=checkpoint_id)])  # fmt: skip
    return committer.commit(checkpoint_id)


def _ids(catalog: SqlCatalog, name: str, branch: str = "main") -> list[int]:
    table = catalog.load_table(name)
    ref = table.metadata.refs[branch]
    return sorted(table.scan(snapshot_id=ref.snapshot_id, selected_fields=("id",)).to_arrow().column("id").to_pylist())


def _files(catalog: SqlCatalog, name: str, branch: str) -> set[str]:
    table = catalog.load_table(name)
    return {t.file.file_path for t in table.scan(snapshot_id=table.metadata.refs[branch].snapshot_id).plan_files()}


def _local(path: str) -> str:
    return path.removeprefix("file://").removeprefix("file:")


def test_expiry_the_orphan_sweep_and_a_rollback_leave_a_held_checkpoint_publishable(catalog: SqlCatalog) -> None:
    name = f"{catalog.name}.events"
    ic.create_table(catalog, name, EVENTS_SCHEMA, partition_by=["event"])
    other = ic.GlobalCommitter(catalog, name, job_id="other", sleep=lambda _: None)
    for checkpoint in (1, 2, 3):
        assert _land(other, checkpoint, checkpoint * 100, 10).committed
    held = _land(ic.GlobalCommitter(catalog, name, job_id="j", gate=GATE, sleep=lambda _: None), 1, 1000, 5)
    assert held.status == "held"
    waiting = _files(catalog, name, AUDIT) - _files(catalog, name, "main")
    assert len(waiting) >= 1
    later = datetime.now(timezone.utc) + timedelta(days=30)

    apply_rollback(catalog, plan_rollback(catalog, name, to_checkpoint=2, job_id="other"))
    assert catalog.load_table(name).metadata.refs[AUDIT].snapshot_id == held.snapshot_id  # main's rollback only
    assert _ids(catalog, name) == list(range(100, 110)) + list(range(200, 210))

    expired = apply_expire(catalog, plan_expire(catalog, name, older_than=timedelta(0), retain_last=1, now=later))
    assert expired.expired_snapshot_ids  # main's older snapshots went
    metadata = catalog.load_table(name).metadata
    assert metadata.snapshot_by_id(metadata.refs[AUDIT].snapshot_id) is not None  # the branch's head stays
    assert held.snapshot_id == metadata.refs[AUDIT].snapshot_id

    sweep = find_orphans(catalog, name, older_than=timedelta(0), delete=True, now=later)
    assert not {_local(o.path) for o in sweep.orphans} & {_local(p) for p in waiting}
    assert all(os.path.exists(_local(p)) for p in waiting)  # a held checkpoint's files are never swept

    published = ic.publish(catalog, name, job_id="j", checkpoint_id=1, force=True, reason="a short batch, known")
    assert [r.status for r in published] == ["committed"]  # main moved since: applied again, once
    assert _ids(catalog, name) == list(range(100, 110)) + list(range(200, 210)) + list(range(1000, 1005))
    on_main = Counter((s.job_id, s.checkpoint_id) for s in committed_checkpoints(catalog.load_table(name).metadata))
    assert on_main[("j", 1)] == 1


def test_a_discarded_checkpoints_snapshot_hangs_on_no_branch_and_its_files_go_with_expiry(
    catalog: SqlCatalog,
) -> None:
    name = f"{catalog.name}.events"
    ic.create_table(catalog, name, EVENTS_SCHEMA, partition_by=["event"])
    committer = ic.GlobalCommitter(catalog, name, job_id="j", gate=GATE, sleep=lambda _: None)
    assert _land(committer, 1, 0, 10).committed
    held = _land(committer, 2, 100, 5)
    assert held.status == "held"
    discarded = {_local(p) for p in _files(catalog, name, AUDIT) - _files(catalog, name, "main")}
    ic.discard(catalog, name, job_id="j", checkpoint_id=2, reason="a broken batch")
    refs = catalog.load_table(name).metadata.refs
    assert refs[AUDIT].snapshot_id == refs["main"].snapshot_id != held.snapshot_id  # nothing waits there now
    assert _land(committer, 3, 200, 10).committed  # the job goes on
    later = datetime.now(timezone.utc) + timedelta(days=30)
    expired = apply_expire(catalog, plan_expire(catalog, name, older_than=timedelta(0), retain_last=1, now=later))
    assert held.snapshot_id in expired.expired_snapshot_ids
    assert not any(os.path.exists(p) for p in discarded)  # only that snapshot held them: they went with it
    sweep = find_orphans(catalog, name, older_than=timedelta(0), now=later)
    assert not {_local(o.path) for o in sweep.orphans} & discarded
    assert _ids(catalog, name) == list(range(0, 10)) + list(range(200, 210))
