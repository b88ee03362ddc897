"""A streaming batch's source count is its source's, whatever the sink does with the batch,
and the last batch of a query counts too.

Spark's progress counts every read of a ``foreachBatch`` DataFrame as rows of its source;
an upsert reads its batch several times (the key checks, the keys, the write). The query
here reads 4 rows per file, one file per batch (``maxFilesPerTrigger=1``), so every batch's
source count must be 4 and the reconciliation must account for each of those rows: written,
deleted by its change type, or superseded in its batch by a later row of its key."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyspark.sql import SparkSession

import icecommit as ic
from tests.helpers import run_to_end

pytestmark = pytest.mark.spark
ROOT = Path(__file__).resolve().parents[2]

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("part", pa.string()),
                    pa.field("v", pa.string())])  # fmt: skip
SPARK_SCHEMA = "id BIGINT, part STRING, v STRING, op STRING, lsn BIGINT"
#: Three batches of four changes: several rows of one key in a batch, deletes, and a key
#: created and deleted in one batch. Per batch: (rows written, keys deleted, superseded).
CHANGES = [
    [(1, "c"), (2, "c"), (3, "c"), (1, "u")],
    [(2, "d"), (4, "c"), (4, "u"), (5, "c")],
    [(1, "d"), (3, "u"), (6, "c"), (6, "d")],
]
ACCOUNT = [(3, 0, 1), (2, 1, 1), (1, 2, 1)]


def _source(folder: Path) -> Path:
    """One JSON file per batch, in the order the file source takes them (by modification time)."""
    folder.mkdir()
    lsn = 0
    for n, batch in enumerate(CHANGES):
        lines = []
        for key, op in batch:
            lsn += 1
            lines.append(json.dumps({"id": key, "part": f"p{key % 2}", "v": f"v{lsn}", "op": op, "lsn": lsn}))
        path = folder / f"batch{n}.json"
        path.write_text("\n".join(lines) + "\n")
        os.utime(path, (1_000_000 + n, 1_000_000 + n))
    return folder


def _run(spark: SparkSession, catalog: SqlCatalog, tmp_path: Path, *, mode: str, preserves: bool, trigger: str) -> None:
    stream = spark.readStream.schema(SPARK_SCHEMA).option("maxFilesPerTrigger", 1).json(str(_source(tmp_path / "in")))
    if mode == "upsert":
        options = dict(mode="upsert", key=["id"], change_column="op", order_by=["lsn"])
    else:  # the same rows as plain data (one per change)
        stream = stream.drop("op", "lsn")
        options = dict(mode=mode)
    sink = ic.streaming_sink("ns.t", catalog=catalog, job_id="j", preserves_rows=preserves, **options)
    writer = stream.writeStream.foreachBatch(sink).option("checkpointLocation", str(tmp_path / "chk"))
    run_to_end((writer.trigger(once=True) if trigger == "once" else writer.trigger(availableNow=True)).start())


@pytest.mark.parametrize(
    ("mode", "preserves", "trigger"),
    [
        ("append", True, "availableNow"),
        ("overwrite-partitions", True, "availableNow"),
        ("upsert", True, "availableNow"),
        ("upsert", False, "availableNow"),
    ],
)
def test_each_batch_counts_its_source_once_and_the_report_accounts_for_every_row(
    spark: SparkSession, sqlite_catalog: SqlCatalog, tmp_path: Path, mode: str, preserves: bool, trigger: str
) -> None:
    ic.create_table(sqlite_catalog, "ns.t", SCHEMA, partition_by=["part"])
    _run(spark, sqlite_catalog, tmp_path, mode=mode, preserves=preserves, trigger=trigger)
    # reconciled at once: the last batch's count, reported after awaitTermination, is in
    report = ic.reconcile(sqlite_catalog, "ns.t")
    lines = sorted(report.checkpoints, key=lambda line: line.checkpoint_id)
    assert [line.checkpoint_id for line in lines] == [0, 1, 2]
    assert [line.source for line in lines] == [4, 4, 4], [line.note for line in lines]
    assert report.ok, report.problems
    assert not [p for p in report.problems if p.kind in ("loss", "query-input") or p.severity == "error"]
    assert not any("not recorded" in line.note for line in lines)
    rows = sqlite_catalog.load_table("ns.t").scan().to_arrow()
    if mode == "upsert":
        for line, (written, deleted, superseded) in zip(lines, ACCOUNT, strict=True):
            assert line.written == written
            assert written + deleted + superseded == line.source
            assert (f"received 4: {written} written, {deleted} deleted by their change type, {superseded} superseded "
                    "in the checkpoint") in line.note  # fmt: skip
        assert sorted(rows.column("id").to_pylist()) == [3, 4, 5]
        assert rows.column_names == ["id", "part", "v"]  # neither op nor lsn is stored
    else:
        assert [line.written for line in lines] == [4, 4, 4]


def test_a_once_trigger_counts_its_batch(spark: SparkSession, sqlite_catalog: SqlCatalog, tmp_path: Path) -> None:
    ic.create_table(sqlite_catalog, "ns.t", SCHEMA)
    _run(spark, sqlite_catalog, tmp_path, mode="append", preserves=True, trigger="once")
    [line] = ic.reconcile(sqlite_catalog, "ns.t").checkpoints
    assert (line.source, line.written) == (12, 12)  # once takes every file


DRIVER = """
import json, sys
import icecommit as ic
from icecommit.writers.session import local_session
source, location, name, uri, warehouse = sys.argv[1:6]
spark = local_session()
catalog = ic.connect(name, uri=uri, warehouse=warehouse)
sink = ic.streaming_sink("ns.t", catalog=catalog, job_id="j", preserves_rows=True)
stream = spark.readStream.schema("id BIGINT, part STRING, v STRING").option("maxFilesPerTrigger", 1).json(source)
query = stream.writeStream.foreachBatch(sink).option("checkpointLocation", location).trigger(availableNow=True).start()
query.awaitTermination()
# pyspark 3.5 gives the reports as dicts, 4.x as objects
batches = [p["batchId"] if isinstance(p, dict) else p.batchId for p in query.recentProgress]
print("@@done", json.dumps(batches), flush=True)
if sys.argv[6] == "stop":
    spark.stop()
    sys.exit(0)
# a query whose batch icecommit refuses (a column the table does not have): its error comes first
bad = spark.readStream.schema("id BIGINT, part STRING, v STRING").json(source).selectExpr("*", "1 as extra")
refusing = ic.streaming_sink("ns.t", catalog=catalog, job_id="bad")
failing = bad.writeStream.foreachBatch(refusing).option("checkpointLocation", location + "-bad").start()
try:
    failing.awaitTermination()
except Exception as e:
    print("@@failed", type(e).__name__, flush=True)
"""


@pytest.mark.parametrize("end", ["exit", "stop"])
def test_a_query_that_ends_with_its_process_has_every_count_recorded_and_prints_no_listener_error(
    sqlite_catalog: SqlCatalog, tmp_path: Path, end: str
) -> None:
    """The driver exits (or stops its session) as soon as ``awaitTermination()`` returns:
    nothing reconciles in that process, Spark's last progress report is still on its way."""
    ic.create_table(sqlite_catalog, "ns.t", SCHEMA)
    source = _source(tmp_path / "in")
    props = sqlite_catalog.properties
    # a process of its own, not a fork of this one: a forked child ends without running the
    # exit handlers a driver's interpreter runs
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, str(source), str(tmp_path / "chk"), sqlite_catalog.name, str(props["uri"]),
         str(props["warehouse"]), end],
        capture_output=True, text=True, timeout=240, cwd=ROOT, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "@@done [0, 1, 2]" in done.stdout
    listener_errors = ("StreamingQueryListenerBus", "PythonStreamingQueryListenerWrapper")
    assert not any(e in done.stderr for e in listener_errors), done.stderr[-3000:]
    lines = ic.reconcile(sqlite_catalog, "ns.t").checkpoints
    assert sorted((line.checkpoint_id, line.source) for line in lines) == [(0, 4), (1, 4), (2, 4)]
    if end == "exit":  # a failing batch: icecommit's one line before Spark's wrapper and traces
        assert "@@failed StreamingQueryException" in done.stdout
        errors = done.stderr.splitlines()
        first = "batch 0 of job bad failed: SchemaMismatchError: column 'extra'"
        mine = [n for n, line in enumerate(errors) if first in line]
        spark = [n for n, line in enumerate(errors) if "Traceback" in line or "FOREACH_BATCH" in line]
        assert mine and spark and mine[0] < spark[0], done.stderr[-3000:]
