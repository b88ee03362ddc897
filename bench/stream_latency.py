"""Micro-batch latency of the streaming sink: from a batch's trigger to its committed snapshot.

One local Spark session (local[2]) runs the same streaming query, 10,000 rows per
micro-batch from Spark's ``rate-micro-batch`` source (exactly ``--rows`` rows per batch,
event times one second apart per batch, as fast as the query can go), into:

- ``icecommit``: ``foreachBatch(ic.streaming_sink(...))`` into a table partitioned by
  ``day(ts), event``, its catalog and state on SQLite, then on PostgreSQL (a database of
  the run's own at ``ICECOMMIT_TEST_PG_URI``'s server, dropped at the end; skipped when it
  does not answer), with the default ``hash`` distribution (a shuffle per batch), and on
  SQLite once more with ``distribution="none"`` (no shuffle);
- ``foreachBatch-parquet``: ``foreachBatch`` writing each batch as Parquet files into a
  folder (``batch.write.mode("append").parquet``), no table and no commit: the floor.

For each batch, from Spark's progress: ``triggerExecution`` (the whole trigger: offsets,
planning, the batch function, the offset log's commit), and for icecommit also the time
from the trigger's start to the snapshot's commit (the snapshot's ``timestamp-ms`` minus
the progress ``timestamp``), which is what a reader of the table waits. The first
``--warmup`` batches are left out; then ``--batches`` (100) batches are measured, and the
distribution (p50, p95, max) is printed with the machine and the date. At the end each
table's row count is checked against the batches (every row once).

    .venv/bin/python -m bench.stream_latency [--batches 100] [--rows 10000]
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import psutil
import pyarrow as pa
import pyspark
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import icecommit as ic
from bench.databases import PG_URI, postgres_available
from bench.lifecycle_soak import soak_database
from icecommit.writers import local_session

OUT = Path(__file__).resolve().parent / "out"
SCHEMA = pa.schema(
    [
        pa.field("event_id", pa.int64(), nullable=False),
        pa.field("ts", pa.timestamp("us", tz="UTC"), nullable=False),
        pa.field("event", pa.string(), nullable=False),
        pa.field("user_id", pa.int64()),
        pa.field("price", pa.float64()),
    ]
)
EVENTS = ("pv", "show", "click", "cart", "buy")


@dataclass(frozen=True)
class Batch:
    approach: str
    batch_id: int
    rows: int
    trigger_ms: float
    to_snapshot_ms: float | None


def source(spark: SparkSession, rows: int) -> DataFrame:
    """``rows`` rows per micro-batch with the demo's shape (event ids are the rate's values)."""
    rate = (
        spark.readStream.format("rate-micro-batch")
        .option("rowsPerBatch", rows)
        .option("numPartitions", 2)
        .option("startTimestamp", int(datetime(2026, 11, 20, tzinfo=timezone.utc).timestamp() * 1000))
        .load()
    )
    event = F.element_at(F.array(*[F.lit(e) for e in EVENTS]), (F.col("value") % len(EVENTS) + 1).cast("int"))
    return rate.select(
        F.col("value").alias("event_id"),
        F.col("timestamp").alias("ts"),
        event.alias("event"),
        (F.col("value") % 50_000).alias("user_id"),
        (F.col("value") % 1000 / 10.0).alias("price"),
    )


def run_query(
    spark: SparkSession, approach: str, sink: Callable[[DataFrame, int], None], work: Path, args: argparse.Namespace
) -> list[dict[str, Any]]:
    """Run the query until ``warmup + batches`` batches completed; their progress reports."""
    wanted = args.warmup + args.batches
    query = (
        source(spark, args.rows)
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(work / f"checkpoint-{approach}"))
        .trigger(processingTime="0 seconds")
        .start()
    )
    try:
        while True:
            progress = query.lastProgress
            if progress is not None and progress["batchId"] >= wanted - 1:
                break
            if query.exception() is not None:
                raise RuntimeError(f"{approach}: the query failed: {query.exception()}")
            time.sleep(0.2)
    finally:
        query.stop()
    if not query.awaitTermination(60):
        raise RuntimeError(f"{approach}: the query did not stop within 60 s")
    reports = [p for p in query.recentProgress if p["numInputRows"] > 0]
    return [p for p in reports if args.warmup <= p["batchId"] < wanted]


def _trigger_start_ms(progress: dict[str, Any]) -> float:
    moment = datetime.strptime(progress["timestamp"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)
    return moment.timestamp() * 1000


def measure_icecommit(
    spark: SparkSession, name: str, uri: str, work: Path, args: argparse.Namespace, distribution: str = "hash"
) -> list[Batch]:
    label = f"{name}-{distribution}"
    catalog = ic.connect(uri=uri, warehouse=str(work / f"warehouse-{label}"))
    table = f"bench.stream_{label.replace('-', '_')}"
    ic.create_table(catalog, table, SCHEMA, ["day(ts)", "event"])
    sink = ic.streaming_sink(table, catalog=catalog, job_id="latency", distribution=distribution)
    reports = run_query(spark, f"icecommit-{label}", sink, work, args)
    loaded = catalog.load_table(table)
    committed_at = {
        int(s.summary["icecommit.checkpoint-id"]): s.timestamp_ms
        for s in loaded.snapshots()
        if s.summary is not None and "icecommit.checkpoint-id" in s.summary.additional_properties
    }
    rows = loaded.scan(selected_fields=("event_id",)).to_arrow()
    if rows.num_rows != len(set(rows.column("event_id").to_pylist())) or rows.num_rows % args.rows:
        raise AssertionError(f"icecommit-{label}: {rows.num_rows} rows are not whole batches each once")
    return [
        Batch(
            f"icecommit ({name}, distribution {distribution})",
            p["batchId"],
            p["numInputRows"],
            p["durationMs"]["triggerExecution"],
            committed_at[p["batchId"]] - _trigger_start_ms(p),
        )
        for p in reports
    ]


def measure_parquet(spark: SparkSession, work: Path, args: argparse.Namespace) -> list[Batch]:
    folder = work / "parquet"

    def write_batch(batch: DataFrame, batch_id: int) -> None:
        batch.write.mode("append").option("compression", "zstd").parquet(str(folder))

    reports = run_query(spark, "parquet", write_batch, work, args)
    return [
        Batch("foreachBatch-parquet", p["batchId"], p["numInputRows"], p["durationMs"]["triggerExecution"], None)
        for p in reports
    ]


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def summarise(batches: list[Batch]) -> str:
    lines = [
        "| approach | batches | rows per batch | trigger p50 ms | p95 ms | max ms "
        "| trigger to snapshot p50 ms | p95 ms |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for approach in dict.fromkeys(b.approach for b in batches):
        chosen = [b for b in batches if b.approach == approach]
        triggers = [b.trigger_ms for b in chosen]
        snapshots = [b.to_snapshot_ms for b in chosen if b.to_snapshot_ms is not None]
        rows = sorted({b.rows for b in chosen})
        to_snapshot = (
            f"{statistics.median(snapshots):,.0f} | {_percentile(snapshots, 0.95):,.0f}" if snapshots else "- | -"
        )
        lines.append(
            f"| {approach} | {len(chosen)} | {'/'.join(f'{r:,}' for r in rows)} | {statistics.median(triggers):,.0f} | "
            f"{_percentile(triggers, 0.95):,.0f} | {max(triggers):,.0f} | {to_snapshot} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--rows", type=int, default=10_000)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="icecommit-stream-latency-"))
    started = time.perf_counter()
    spark = local_session(
        "icecommit-stream-latency", config={"spark.sql.streaming.numRecentProgressUpdates": str(args.batches * 2)}
    )
    batches: list[Batch] = []
    try:
        batches += measure_parquet(spark, work, args)
        batches += measure_icecommit(spark, "sqlite", f"sqlite:///{work / 'catalog.db'}", work, args)
        batches += measure_icecommit(spark, "sqlite", f"sqlite:///{work / 'catalog.db'}", work, args, "none")
        with soak_database(PG_URI) if postgres_available() else nullcontext() as pg:
            if pg is not None:
                batches += measure_icecommit(spark, "postgres", pg, work, args)
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    OUT.mkdir(exist_ok=True)
    (OUT / "stream_latency.json").write_text(json.dumps([asdict(b) for b in batches], indent=2))
    print(
        f"Machine: {platform.node()}, {psutil.cpu_count()} cores, {psutil.virtual_memory().total / 2**30:.0f} GiB, "
        f"Python {platform.python_version()}, pyspark {pyspark.__version__}, local[2]; "
        f"run {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; {time.perf_counter() - started:.0f} s"
    )
    print(summarise(batches))


if __name__ == "__main__":
    main()
