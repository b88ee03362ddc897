"""An S3-compatible server on loopback (moto's) behind the tests' fault-injecting proxy,
and catalogs whose warehouse is a bucket of it, reached through the catalog properties a
user sets (``s3.endpoint``, ``s3.access-key-id``, ...)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto.server import ThreadedMotoServer
from pyiceberg.catalog import Catalog

import icecommit as ic
from tests.s3proxy import S3FaultProxy

CREDENTIALS = {"s3.access-key-id": "testing", "s3.secret-access-key": "testing", "s3.region": "us-east-1"}


@pytest.fixture(scope="module")
def s3_server() -> Iterator[tuple[str, int]]:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield host, port
    server.stop()


@pytest.fixture
def s3_proxy(s3_server: tuple[str, int]) -> Iterator[S3FaultProxy]:
    proxy = S3FaultProxy(s3_server, seed=7).start()
    yield proxy
    proxy.stop()


@pytest.fixture
def bucket(s3_server: tuple[str, int]) -> tuple[Any, str]:
    host, port = s3_server
    client = boto3.client(
        "s3", endpoint_url=f"http://{host}:{port}", aws_access_key_id="testing", aws_secret_access_key="testing",
        region_name="us-east-1",
    )  # fmt: skip
    name = f"lake-{uuid.uuid4().hex[:8]}"
    client.create_bucket(Bucket=name)
    return client, name


@pytest.fixture
def s3_catalog(s3_proxy: S3FaultProxy, bucket: tuple[Any, str], tmp_path: Path) -> Iterator[Catalog]:
    """``ic.connect`` with a SQLite catalog and an ``s3://`` warehouse behind the proxy."""
    _, name = bucket
    catalog = ic.connect(
        f"s{uuid.uuid4().hex[:10]}",
        uri=f"sqlite:///{tmp_path / 'catalog.db'}",
        warehouse=f"s3://{name}/wh",
        **{"s3.endpoint": s3_proxy.endpoint, **CREDENTIALS},
    )
    yield catalog
    catalog.engine.dispose()  # type: ignore[attr-defined]
