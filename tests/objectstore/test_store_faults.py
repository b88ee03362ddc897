"""Store faults on an ``s3://`` warehouse (the tests' proxy in front of moto's server):
503 SlowDown, connection resets and responses dropped after the request was carried out,
at a seeded rate over every request (multipart parts and completes included), and bursts
aimed at one kind of object. Nothing is lost or committed twice, every referenced object
reads back whole, an error from the store is never taken for success, and a failed upload
of new table metadata is reported as not landed."""

from __future__ import annotations

from collections import Counter

import pytest
from pyiceberg.catalog import Catalog

import icecommit as ic
from icecommit.committer import RetryPolicy, committed_checkpoints
from icecommit.core.errors import IcecommitError, TableMetadataWriteError
from tests.helpers import EVENTS_SCHEMA, events, write_arrow
from tests.s3proxy import S3FaultProxy

FAST = RetryPolicy(max_attempts=4, max_seconds=60, min_wait_s=0.01, max_wait_s=0.05)
WRITES = frozenset({"PutObject", "CreateMultipartUpload", "UploadPart", "CompleteMultipartUpload"})


def _rows(checkpoint_id: int) -> range:
    return range(checkpoint_id * 1000, checkpoint_id * 1000 + 200)


def _land(catalog: Catalog, name: str, checkpoint_id: int, tries: int = 12) -> int:
    """Run one checkpoint as a job would until it lands: a failure (a task's upload, a
    prepare, a commit) is followed by a restart that recovers and replays the checkpoint
    from its source. Returns the failures met."""
    failures = 0
    for _ in range(tries):
        committer = ic.GlobalCommitter(catalog, name, job_id="j", retry_policy=FAST)
        try:
            committer.recover()
            if committer.is_committed(checkpoint_id):
                return failures
            table = committer.load_table()
            rows = events(_rows(checkpoint_id).start, _rows(checkpoint_id).stop)
            results = [write_arrow(table, rows, job_id="j", checkpoint_id=checkpoint_id)]
            plan = committer.prepare_planned(checkpoint_id, results, table=table)
            committer.commit(checkpoint_id, plan=plan)
            return failures
        except (IcecommitError, OSError) as e:  # never a success: the loop goes on
            assert not isinstance(e, AssertionError)
            failures += 1
    raise AssertionError(f"checkpoint {checkpoint_id} did not land in {tries} tries")


def _assert_exactly_once(catalog: Catalog, name: str, checkpoints: list[int]) -> None:
    table = catalog.load_table(name)
    ids = Counter(table.scan(selected_fields=("id",)).to_arrow().column("id").to_pylist())  # every object read whole
    assert ids == Counter(i for c in checkpoints for i in _rows(c)), "rows lost or duplicated"
    assert Counter(k.checkpoint_id for k in committed_checkpoints(table.metadata)) == Counter(checkpoints)
    report = ic.reconcile(catalog, name, job_id="j", deep=True)
    assert report.ok, report.to_markdown()


def test_faults_on_every_kind_of_request_lose_and_duplicate_nothing(
    s3_catalog: Catalog, s3_proxy: S3FaultProxy
) -> None:
    name = f"{s3_catalog.name}.events"
    ic.create_table(s3_catalog, name, EVENTS_SCHEMA, partition_by=["event"])
    s3_proxy.rate = 0.05
    failures = sum(_land(s3_catalog, name, c) for c in range(1, 9))
    injected = sum(s3_proxy.faults.values())
    s3_proxy.calm()
    assert injected >= 6 and len(s3_proxy.faults) >= 2, s3_proxy.faults
    multipart = {"CreateMultipartUpload", "UploadPart", "CompleteMultipartUpload"}
    assert multipart & set(s3_proxy.faulted) and {"GetObject", "HeadObject"} & set(s3_proxy.faulted), s3_proxy.faulted
    _assert_exactly_once(s3_catalog, name, list(range(1, 9)))
    assert failures <= injected  # most are ridden out by the S3 client's and icecommit's retries


def test_a_failed_upload_of_new_table_metadata_is_reported_as_not_landed(
    s3_catalog: Catalog, s3_proxy: S3FaultProxy
) -> None:
    name = f"{s3_catalog.name}.events"
    ic.create_table(s3_catalog, name, EVENTS_SCHEMA)
    committer = ic.GlobalCommitter(s3_catalog, name, job_id="j", retry_policy=FAST)
    table = committer.load_table()
    results = [write_arrow(table, events(1000, 1200), job_id="j", checkpoint_id=1)]
    committer.prepare(1, results)  # the table's claim of its state database happened here
    s3_proxy.only, s3_proxy.aim, s3_proxy.burst = WRITES, ".metadata.json", 10_000  # every metadata upload fails
    with pytest.raises(TableMetadataWriteError, match="nothing of it landed") as raised:
        committer.commit(1)
    assert raised.value.attempts == FAST.max_attempts  # each retried, none taken for an unknown outcome
    assert "SLOW_DOWN" in str(raised.value).upper().replace(" ", "_") or "503" in str(raised.value)
    s3_proxy.calm()
    state = committer.store.get("j", name, 1)
    assert state is not None and (state.status, state.unknown_outcomes) == ("prepared", 0)  # not an unknown outcome
    assert s3_catalog.load_table(name).metadata.snapshots == []
    # a short burst is ridden out by the retries, and the commit lands once
    s3_proxy.burst = 3
    assert committer.commit(1).status == "committed"
    s3_proxy.calm()
    _assert_exactly_once(s3_catalog, name, [1])
