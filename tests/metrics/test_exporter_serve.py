"""``icecommit metrics serve`` scraped over HTTP while a Structured Streaming query commits:
each scrape reads the state afresh, so the numbers follow the stream batch by batch."""

from __future__ import annotations

import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyspark.sql import SparkSession

import icecommit as ic
from tests.helpers import drop_json, run_to_end
from tests.metrics.test_exporter import parsed, served_url, value

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("ts", pa.timestamp("us", tz="UTC"))])


@pytest.fixture
def endpoint(sqlite_catalog: SqlCatalog) -> Iterator[str]:
    """``icecommit metrics serve --port 0`` on the catalog, as a process of its own."""
    command = [sys.executable, "-m", "icecommit.cli", "--uri", sqlite_catalog.properties["uri"],
               "--warehouse", sqlite_catalog.properties["warehouse"], "metrics", "serve", "--port", "0"]  # fmt: skip
    server = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    try:
        yield served_url(server)
    finally:
        server.terminate()
        server.communicate(timeout=30)  # reaps it and closes its pipe


def _scrape(url: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    with urllib.request.urlopen(url, timeout=30) as response:
        assert response.status == 200
        return parsed(response.read().decode())


def test_a_scrape_after_each_batch_reads_that_batchs_commit(
    spark: SparkSession, sqlite_catalog: SqlCatalog, endpoint: str, tmp_path: Path
) -> None:
    ic.create_table(sqlite_catalog, "ns.watched", SCHEMA, partition_by=["hour(ts)"])
    source = tmp_path / "in"
    source.mkdir()
    sizes = [40, 25, 10]
    first = 0
    for n, size in enumerate(sizes):
        drop_json(source, f"{n}.json", [{"id": i, "ts": f"2026-05-01T00:{i % 60:02d}:00Z"}
                                        for i in range(first, first + size)])  # fmt: skip
        first += size
    seen: list[dict[tuple[str, frozenset[tuple[str, str]]], float]] = []
    sink = ic.streaming_sink("ns.watched", catalog=sqlite_catalog, job_id="watched",
                             on_commit=lambda _result: seen.append(_scrape(endpoint)))  # fmt: skip
    stream = spark.readStream.schema("id BIGINT, ts TIMESTAMP").option("maxFilesPerTrigger", 1).json(str(source))
    query = stream.writeStream.foreachBatch(sink).option("checkpointLocation", str(tmp_path / "chk"))
    run_to_end(query.trigger(availableNow=True).start())

    labels = {"table": "ns.watched", "job": "watched"}
    assert [value(s, "icecommit_rows_committed_total", **labels) for s in seen] == [40, 65, 75]
    assert [value(s, "icecommit_checkpoints", status="committed", **labels) for s in seen] == [1, 2, 3]
    assert all(value(s, "icecommit_seconds_since_last_commit", **labels) < 60 for s in seen)
    assert all(value(s, "icecommit_checkpoints_stuck", **labels) == 0 for s in seen)
    assert all(value(s, "icecommit_unknown_outcomes_total", **labels) == 0 for s in seen)
    # the event-time lag is measured from the newest event committed (2026-05-01T00:59 at most)
    assert value(seen[-1], "icecommit_event_time_max_timestamp_seconds", **labels) == pytest.approx(
        1_777_593_540, abs=3600
    )
