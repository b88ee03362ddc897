"""No credential of the store appears where people look: the logs of a write, replay and
recovery at DEBUG, the snapshot summaries and table properties icecommit writes, a
streaming sink's repr, and icecommit's errors."""

from __future__ import annotations

import logging
import uuid
from pathlib import Path

import pytest

import icecommit as ic
from tests.helpers import EVENTS_SCHEMA, events, write_arrow
from tests.objectstore.conftest import CREDENTIALS
from tests.s3proxy import S3FaultProxy


def test_no_secret_in_logs_summaries_properties_or_reprs(
    s3_proxy: S3FaultProxy, bucket: tuple[object, str], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    secret = CREDENTIALS["s3.secret-access-key"] + "-" + uuid.uuid4().hex  # moto takes any secret
    catalog = ic.connect(
        "lake", uri=f"sqlite:///{tmp_path / 'catalog.db'}", warehouse=f"s3://{bucket[1]}/wh",
        **{**CREDENTIALS, "s3.secret-access-key": secret, "s3.endpoint": s3_proxy.endpoint},
    )  # fmt: skip
    name = "ns.events"
    ic.create_table(catalog, name, EVENTS_SCHEMA)
    caplog.set_level(logging.DEBUG)
    committer = ic.GlobalCommitter(catalog, name, job_id="j")
    for checkpoint_id in (1, 2):
        rows = events(checkpoint_id * 100, checkpoint_id * 100 + 10)
        committer.prepare(
            checkpoint_id, [write_arrow(committer.load_table(), rows, job_id="j", checkpoint_id=checkpoint_id)]
        )
    committer.commit(2)
    ic.GlobalCommitter(catalog, name, job_id="j").recover()
    with pytest.raises(ic.IcecommitError) as raised:
        ic.GlobalCommitter(catalog, "ns.missing", job_id="j").commit(1)
    sink = ic.streaming_sink(name, catalog=catalog, job_id="s")
    table = catalog.load_table(name)
    seen = [
        caplog.text,
        str(raised.value),
        repr(sink),
        repr(table.metadata.properties),
        *(repr(s.summary) for s in table.metadata.snapshots),
    ]
    assert all(secret not in text for text in seen)
    assert "***" in repr(sink)
