"""A warehouse in an S3-compatible store whose endpoint and credentials are catalog
properties (moto's server, started on loopback by the fixture): writing, replaying,
reconciling and the orphan sweep all reach storage through the table's FileIO."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import boto3
import pytest
from moto.server import ThreadedMotoServer
from pyiceberg.catalog.sql import SqlCatalog

import icecommit as ic
from icecommit.maintenance import find_orphans
from tests.conftest import pg_uri
from tests.helpers import EVENTS_SCHEMA, events, write_arrow

# the store under test is S3
pytestmark = pytest.mark.database_independent

CREDENTIALS = {"s3.access-key-id": "testing", "s3.secret-access-key": "testing", "s3.region": "us-east-1"}


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def s3_catalog(request: pytest.FixtureRequest, s3_endpoint: str, tmp_path: Any) -> Iterator[tuple[SqlCatalog, Any]]:
    client = boto3.client(
        "s3", endpoint_url=s3_endpoint, aws_access_key_id="testing", aws_secret_access_key="testing",
        region_name="us-east-1",
    )  # fmt: skip
    bucket = f"lake-{uuid.uuid4().hex[:8]}"
    client.create_bucket(Bucket=bucket)
    uri = f"sqlite:///{tmp_path / 'catalog.db'}" if request.param == "sqlite" else pg_uri()
    catalog = SqlCatalog(
        f"s{uuid.uuid4().hex[:10]}",
        uri=uri,
        warehouse=f"s3://{bucket}/wh",
        **{"s3.endpoint": s3_endpoint},
        **CREDENTIALS,
    )
    yield catalog, (client, bucket)
    catalog.engine.dispose()


def test_write_replay_reconcile_and_sweep_on_an_s3_store(s3_catalog: tuple[SqlCatalog, Any]) -> None:
    catalog, (client, bucket) = s3_catalog
    name = f"{catalog.name}.events"
    ic.create_table(catalog, name, EVENTS_SCHEMA, partition_by=["event"])
    committer = ic.GlobalCommitter(catalog, name, job_id="j")
    for checkpoint_id in (1, 2):
        table = committer.load_table()
        rows = events(checkpoint_id * 100, checkpoint_id * 100 + 50)
        committer.prepare(checkpoint_id, [write_arrow(table, rows, job_id="j", checkpoint_id=checkpoint_id)])
        assert committer.commit(checkpoint_id).status == "committed"
    assert committer.commit(1).status == "already-committed"
    for deep in (False, True):
        report = ic.reconcile(catalog, name, job_id="j", deep=deep)
        assert report.ok, report.to_markdown()
        assert [c.readable for c in report.checkpoints] == [50, 50]

    location = catalog.load_table(name).metadata.location
    prefix = location.removeprefix(f"s3://{bucket}/")
    client.put_object(Bucket=bucket, Key=f"{prefix}/data/stray.parquet", Body=b"not the table's")
    client.put_object(Bucket=bucket, Key="elsewhere/keep.txt", Body=b"not under the table")
    listed = find_orphans(catalog, name, older_than=timedelta(0))
    assert [o.path for o in listed.orphans] == [f"{location}/data/stray.parquet"]
    find_orphans(catalog, name, older_than=timedelta(0), delete=True)
    keys = {o["Key"] for o in client.list_objects_v2(Bucket=bucket)["Contents"]}
    assert f"{prefix}/data/stray.parquet" not in keys and "elsewhere/keep.txt" in keys
    assert catalog.load_table(name).scan().to_arrow().num_rows == 100

    # a data object deleted behind the table's back is named by the shallow check
    victim = next(iter(catalog.load_table(name).scan().plan_files())).file.file_path
    client.delete_object(Bucket=bucket, Key=victim.removeprefix(f"s3://{bucket}/"))
    report = ic.reconcile(catalog, name, job_id="j")
    assert not report.ok and [p.path for p in report.problems if p.kind == "missing-file"] == [victim]
