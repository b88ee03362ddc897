"""One representative test per area on an ``s3://`` warehouse (moto's server behind the
tests' proxy, reached through the catalog properties a user sets): a crash at each step
boundary then the replay, two jobs committing at once, a rollback, expiry (its deletions
reach the bucket), and compaction; each ends reconciled, shallow and deep. The write path
with replays, reconciliation and the orphan sweep are in ``tests/catalog/test_s3_store.py``,
the store's faults in ``test_store_faults.py``."""

from __future__ import annotations

import threading
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest
from pyiceberg.catalog import Catalog

import icecommit as ic
from icecommit.committer import FAULT_POINTS, RetryPolicy, committed_checkpoints
from icecommit.maintenance import apply_expire, apply_rollback, plan_expire, plan_rollback
from icecommit.maintenance.compaction import compact
from tests.helpers import EVENTS_SCHEMA, events, write_arrow
from tests.s3proxy import S3FaultProxy

PATIENT = RetryPolicy(max_attempts=20, max_seconds=120, min_wait_s=0.005, max_wait_s=0.05)


class Crash(Exception):
    """A driver dying at a step."""


def _rows(job: str, checkpoint_id: int) -> range:
    base = 100_000 if job == "b" else 0
    return range(base + checkpoint_id * 1000, base + checkpoint_id * 1000 + 60)


def _commit(committer: ic.GlobalCommitter, checkpoint_id: int) -> ic.CommitResult:
    table = committer.load_table()
    rows = _rows(committer.job_id, checkpoint_id)
    results = [write_arrow(table, events(rows.start, rows.stop), job_id=committer.job_id, checkpoint_id=checkpoint_id)]
    plan = committer.prepare_planned(checkpoint_id, results, table=table)
    return committer.commit(checkpoint_id, plan=plan)


def _table(catalog: Catalog) -> str:
    name = f"{catalog.name}.events"
    ic.create_table(catalog, name, EVENTS_SCHEMA, partition_by=["event"])
    return name


def _assert_once(catalog: Catalog, name: str, landed: dict[str, list[int]], *, expired: bool = False) -> None:
    table = catalog.load_table(name)
    ids = Counter(table.scan(selected_fields=("id",)).to_arrow().column("id").to_pylist())
    assert ids == Counter(i for job, cps in landed.items() for c in cps for i in _rows(job, c))
    if not expired:  # each snapshot of the branch carries its key once
        assert Counter((k.job_id, k.checkpoint_id) for k in committed_checkpoints(table.metadata)) == Counter(
            (job, c) for job, cps in landed.items() for c in cps
        )
    for job, checkpoints in landed.items():  # and, expired or not, the table still knows them
        committer = ic.GlobalCommitter(catalog, name, job_id=job)
        assert all(committer.is_committed(c) for c in checkpoints)
    for job in landed:
        for deep in (False, True):
            report = ic.reconcile(catalog, name, job_id=job, deep=deep)
            assert report.ok, report.to_markdown()


@pytest.mark.parametrize("point", FAULT_POINTS)
def test_a_crash_at_each_step_then_the_replay_lands_once(s3_catalog: Catalog, point: str) -> None:
    name = _table(s3_catalog)
    _commit(ic.GlobalCommitter(s3_catalog, name, job_id="a"), 1)

    def crash(at: str, checkpoint_id: int) -> None:
        if at == point:
            raise Crash(at)

    with pytest.raises((Crash, ic.CommitStateUnknownError)):
        _commit(ic.GlobalCommitter(s3_catalog, name, job_id="a", fault=crash), 2)
    restarted = ic.GlobalCommitter(s3_catalog, name, job_id="a")
    restarted.recover()
    if not restarted.is_committed(2):
        assert _commit(restarted, 2).status == "committed"
    _assert_once(s3_catalog, name, {"a": [1, 2]})


def test_two_jobs_committing_at_once_both_land_once(s3_catalog: Catalog) -> None:
    name = _table(s3_catalog)
    errors: list[BaseException] = []

    def job(job_id: str) -> None:
        try:
            committer = ic.GlobalCommitter(s3_catalog, name, job_id=job_id, retry_policy=PATIENT)
            for checkpoint_id in (1, 2, 3):
                _commit(committer, checkpoint_id)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=job, args=(j,)) for j in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    _assert_once(s3_catalog, name, {"a": [1, 2, 3], "b": [1, 2, 3]})


def test_rollback_expiry_and_compaction_on_the_bucket(
    s3_catalog: Catalog, s3_proxy: S3FaultProxy, bucket: tuple[Any, str]
) -> None:
    client, bucket_name = bucket
    name = _table(s3_catalog)
    committer = ic.GlobalCommitter(s3_catalog, name, job_id="a")
    first = _commit(committer, 1)
    for checkpoint_id in (2, 3):
        _commit(committer, checkpoint_id)
    # a rollback hides checkpoints 2 and 3, and records them so
    apply_rollback(s3_catalog, plan_rollback(s3_catalog, name, to_snapshot=first.snapshot_id))
    assert [s.status for s in committer.store.list(name, job_id="a")] == ["committed", "rolled-back", "rolled-back"]
    _assert_once(s3_catalog, name, {"a": [1]})
    for checkpoint_id in (4, 5, 6):
        _commit(committer, checkpoint_id)

    def keys() -> set[str]:
        return {o["Key"] for o in client.list_objects_v2(Bucket=bucket_name).get("Contents", [])}

    before = keys()
    plan = apply_expire(s3_catalog, plan_expire(s3_catalog, name, older_than=timedelta(0), retain_last=1))
    assert plan.deleted_files > 0 and len(plan.expired_snapshot_ids) >= 3
    gone = before - keys()
    assert len(gone) == plan.deleted_files  # deleted from the bucket, nothing else
    assert all(key.removeprefix("wh/") in " ".join(plan.files_to_delete) for key in gone)
    _assert_once(s3_catalog, name, {"a": [1, 4, 5, 6]}, expired=True)

    files = len(list(s3_catalog.load_table(name).scan().plan_files()))
    compacted = compact(s3_catalog, name, min_input_files=2)
    assert any(g.status == "committed" for g in compacted.groups)
    assert len(list(s3_catalog.load_table(name).scan().plan_files())) < files
    _assert_once(s3_catalog, name, {"a": [1, 4, 5, 6]}, expired=True)
    assert s3_proxy.counts["ListObjects"] == 0  # nothing here lists; only the orphan sweep does
