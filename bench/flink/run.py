"""Flink's Iceberg sink beside icecommit: the same rows, the same kind of catalog, one run.

The Flink side is ``FlinkIcebergBench.java`` (this folder's Maven project): Flink 2.1 on a
MiniCluster with ``iceberg-flink-runtime-2.1`` (see ``pom.xml`` for the pinned versions),
built once with ``mvn -q package`` into ``bench/out/flink-target`` with its own Maven
repository under ``bench/out/m2``. The icecommit side is ``ic.write`` and
``ic.streaming_sink`` on Spark ``local[2]``. Both sides run with parallelism 2, write into a
SQL catalog on SQLite (Iceberg's ``JdbcCatalog`` for Flink, pyiceberg's ``SqlCatalog``
under icecommit: the same tables layout) and a local warehouse, a fresh one per run, into
tables partitioned by ``day(ts), event`` with ``write.distribution-mode=hash`` (icecommit's
default for a partitioned table; Flink's sink follows the property).

Row ``i`` is the same on both sides: ``event_id = i``, ``ts = 2026-11-20 + i * 20 ms``,
``event = EVENTS[i % 5]``, ``user_id = i % 50,000``, ``price = (i % 1000) / 10``; each side
generates it inside its job (Flink ``fromSequence``, Spark ``range`` or ``rate-micro-batch``),
nothing is cached.

Parts (each measurement in a fresh JVM or Python process; the order of the sides
alternates between repeats):

- ``throughput``: N rows, one untimed warm-up write of 200,000 rows first. Flink:
  ``IcebergSink`` in streaming mode with exactly-once checkpoints every
  ``--flink-checkpoint-ms`` (a bounded job ends with a final checkpoint and commit), and in
  batch mode (one commit at the end). icecommit: one ``ic.write``. Wall time of the job or
  of the call, to the committed snapshot.
- ``latency``: ``--checkpoints`` checkpoints of ``--rows-per-checkpoint`` rows. Flink: a
  throttled stream with a checkpoint every ``--latency-checkpoint-ms``; per checkpoint, from
  its barrier passing the source to the snapshot's ``timestamp-ms``. icecommit:
  ``foreachBatch(ic.streaming_sink)``, micro-batches back to back; per batch, from the
  trigger's start to the snapshot's ``timestamp-ms`` (as ``bench.stream_latency``).
- ``route``: one read of ``--route-rows`` rows routed by ``event_id % --tables`` into that
  many tables. Flink: ``DynamicIcebergSink`` (streaming, same checkpoints as throughput).
  icecommit: ``ic.write(df, routes, route_by=...)``.
- ``kill``: ``--kill-batches`` checkpoints of ``--kill-batch-rows`` rows; while checkpoint
  ``--kill-at`` is in flight a writer dies. Flink: a MiniCluster of two TaskManagers, one
  terminated from inside the checkpoint (a replacement started), the job restarts from its
  last completed checkpoint. icecommit: Spark ``local[2,4]``, the Python workers that write
  the data files are SIGKILLed a moment into the batch and Spark retries the tasks. Rows
  lost and duplicated are counted by reading the table back against the generated ids.

    .venv/bin/python -m bench.flink.run [--parts throughput latency route kill]
        [--sizes 5000000 20000000] [--repeats 3] [--checkpoints 300] [--distribution hash|none]
    .venv/bin/python -m bench.flink.run --summarise bench/out/flink*.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import psutil

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
OUT = ROOT / "bench" / "out"
TARGET = OUT / "flink-target"
JAR = TARGET / "flink-iceberg-bench-0.1.0.jar"
BASE_US = 1_795_132_800_000_000  # 2026-11-20T00:00:00Z
STEP_US = 20_000
EVENTS = ("pv", "show", "click", "cart", "buy")
PARTITION_BY = ["day(ts)", "event"]
WARMUP_ROWS = 200_000
ROUTE_WARMUP_ROWS = 20_000


# ---------------------------------------------------------------- the Flink side


def build(force: bool = False) -> None:
    """``mvn -q package`` once, with a Maven repository of its own under bench/out."""
    if JAR.exists() and not force:
        return
    subprocess.run(["mvn", "-B", "-q", f"-Dmaven.repo.local={OUT / 'm2'}", "package"], cwd=HERE, check=True)


def flink(mode: str, work: Path, **options: Any) -> dict[str, Any]:
    """One run of FlinkIcebergBench in a fresh JVM; its RESULT line."""
    (work / "wh").mkdir(parents=True, exist_ok=True)
    argv = [
        "java",
        "-Xmx6g",
        "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
        "-cp",
        f"{JAR}:{TARGET / 'lib'}/*",
        "icecommit.bench.FlinkIcebergBench",
        "--mode",
        mode,
        "--catalog-uri",
        f"jdbc:sqlite:{work / 'catalog.db'}",
        "--warehouse",
        str(work / "wh"),
        "--work",
        str(work),
    ]
    for key, value in options.items():
        argv += [f"--{key.replace('_', '-')}", str(value)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=3600)
    (work / "flink.log").write_text(done.stderr)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        tail = "\n".join(done.stderr.splitlines()[-20:])
        raise RuntimeError(f"flink {mode} failed ({done.returncode}):\n{tail}")
    return json.loads(lines[-1].removeprefix("RESULT "))


def read_ids(work: Path, table: str) -> tuple[int, int]:
    """(rows, distinct event ids) of a table in the run's SQLite catalog, read with pyiceberg."""
    import logging

    import pyarrow.compute as pc

    # Iceberg's JdbcCatalog keeps the v0 tables layout, which pyiceberg reads as it is
    logging.getLogger("pyiceberg.catalog.sql").setLevel(logging.ERROR)
    from pyiceberg.catalog.sql import SqlCatalog

    catalog = SqlCatalog("bench", uri=f"sqlite:///{work / 'catalog.db'}", warehouse=(work / "wh").as_uri())
    ids = catalog.load_table(table).scan(selected_fields=("event_id",)).to_arrow().column("event_id")
    distinct = pc.count_distinct(ids).as_py()
    catalog.engine.dispose()
    return len(ids), distinct


# ---------------------------------------------------------------- the icecommit side


def _schema() -> Any:
    import pyarrow as pa

    return pa.schema(
        [
            pa.field("event_id", pa.int64(), nullable=False),
            pa.field("ts", pa.timestamp("us", tz="UTC"), nullable=False),
            pa.field("event", pa.string(), nullable=False),
            pa.field("user_id", pa.int64()),
            pa.field("price", pa.float64()),
        ]
    )


def _columns(id_column: Any) -> list[Any]:
    """Row ``i`` as a list of Spark columns over the column that holds ``i``."""
    from pyspark.sql import functions as F

    event = F.element_at(F.array(*[F.lit(e) for e in EVENTS]), (id_column % len(EVENTS) + 1).cast("int"))
    return [
        id_column.alias("event_id"),
        F.timestamp_micros(F.lit(BASE_US) + id_column * STEP_US).alias("ts"),
        event.alias("event"),
        (id_column % 50_000).alias("user_id"),
        (id_column % 1000 / 10.0).alias("price"),
    ]


def _session(master: str = "local[2]", **config: str) -> Any:
    from icecommit.writers import local_session

    return local_session("icecommit-vs-flink", master=master, config={"spark.driver.memory": "6g", **config})


def _catalog(work: Path) -> Any:
    import icecommit as ic

    return ic.connect(uri=f"sqlite:///{work / 'catalog.db'}", warehouse=str(work / "wh"))


def _create(catalog: Any, name: str, distribution: str = "hash") -> None:
    import icecommit as ic

    ic.create_table(catalog, name, _schema(), PARTITION_BY, properties={"write.distribution-mode": distribution})


def _ids(catalog: Any, table: str) -> tuple[int, int]:
    import pyarrow.compute as pc

    ids = catalog.load_table(table).scan(selected_fields=("event_id",)).to_arrow().column("event_id")
    return len(ids), pc.count_distinct(ids).as_py()


def icecommit_throughput(work: Path, rows: int, distribution: str = "hash") -> dict[str, Any]:
    import icecommit as ic

    spark = _session()
    catalog = _catalog(work)
    for name in ("bench.warmup", "bench.t"):
        _create(catalog, name, distribution)

    def frame(n: int) -> Any:
        base = spark.range(0, n, numPartitions=2)
        return base.select(*_columns(base.id))

    ic.write(frame(WARMUP_ROWS), "bench.warmup", catalog=catalog, job_id="warmup", checkpoint_id=1)
    started = time.perf_counter()
    result = ic.write(frame(rows), "bench.t", catalog=catalog, job_id="bench", checkpoint_id=1)
    seconds = time.perf_counter() - started
    assert result.committed
    count, distinct = _ids(catalog, "bench.t")
    spark.stop()
    return {"seconds": seconds, "snapshots": 1, "read_rows": count, "read_distinct": distinct}


def icecommit_route(work: Path, rows: int, tables: int) -> dict[str, Any]:
    from pyspark.sql import functions as F

    import icecommit as ic

    spark = _session()
    catalog = _catalog(work)
    for k in range(tables):
        _create(catalog, f"bench.w{k}")
        _create(catalog, f"bench.r{k}")

    def frame(n: int) -> Any:
        base = spark.range(0, n, numPartitions=2)
        return base.select(*_columns(base.id), F.concat(F.lit("t"), (base.id % tables).cast("string")).alias("route"))

    def routes(prefix: str) -> dict[str, str]:
        return {f"t{k}": f"bench.{prefix}{k}" for k in range(tables)}

    ic.write(frame(ROUTE_WARMUP_ROWS), routes("w"), route_by="route", catalog=catalog, job_id="w", checkpoint_id=1)
    started = time.perf_counter()
    ic.write(frame(rows), routes("r"), route_by="route", catalog=catalog, job_id="r", checkpoint_id=1)
    seconds = time.perf_counter() - started
    count = distinct = 0
    for k in range(tables):
        c, d = _ids(catalog, f"bench.r{k}")
        count, distinct = count + c, distinct + d
    spark.stop()
    return {"seconds": seconds, "snapshots": tables, "read_rows": count, "read_distinct": distinct}


def _stream(spark: Any, rows_per_batch: int) -> Any:
    from pyspark.sql import functions as F

    rate = (
        spark.readStream.format("rate-micro-batch")
        .option("rowsPerBatch", rows_per_batch)
        .option("numPartitions", 2)
        .load()
    )
    return rate.select(*_columns(F.col("value")))


def _run_stream(spark: Any, sink: Any, work: Path, rows_per_batch: int, batches: int) -> Any:
    query = (
        _stream(spark, rows_per_batch)
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(work / "stream-checkpoint"))
        .trigger(processingTime="0 seconds")
        .start()
    )
    try:
        while True:
            progress = query.lastProgress
            if progress is not None and progress["batchId"] >= batches - 1:
                break
            if query.exception() is not None:
                raise RuntimeError(f"the query failed: {query.exception()}")
            time.sleep(0.1)
    finally:
        query.stop()
    return query


def icecommit_latency(work: Path, batches: int, warmup: int, rows_per_batch: int) -> dict[str, Any]:
    import icecommit as ic

    spark = _session(**{"spark.sql.streaming.numRecentProgressUpdates": str(batches + warmup + 10)})
    catalog = _catalog(work)
    _create(catalog, "bench.lat")
    sink = ic.streaming_sink("bench.lat", catalog=catalog, job_id="latency")
    started = time.perf_counter()
    query = _run_stream(spark, sink, work, rows_per_batch, batches + warmup)
    seconds = time.perf_counter() - started
    committed = {
        int(s.summary["icecommit.checkpoint-id"]): s.timestamp_ms
        for s in catalog.load_table("bench.lat").snapshots()
        if s.summary is not None and "icecommit.checkpoint-id" in s.summary.additional_properties
    }
    latencies = []
    for p in query.recentProgress:
        if p["numInputRows"] > 0 and warmup <= p["batchId"] < warmup + batches and p["batchId"] in committed:
            moment = datetime.strptime(p["timestamp"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)
            latencies.append([p["batchId"], committed[p["batchId"]] - moment.timestamp() * 1000, p["numInputRows"]])
    count, distinct = _ids(catalog, "bench.lat")
    spark.stop()
    return {"seconds": seconds, "checkpoints": latencies, "read_rows": count, "read_distinct": distinct}


def _kill_python_workers() -> int:
    """SIGKILL the Python workers (and their daemon) under this driver's JVM."""
    killed = 0
    for child in psutil.Process().children(recursive=True):
        try:
            if child.name().startswith("python"):
                child.send_signal(signal.SIGKILL)
                killed += 1
        except psutil.Error:
            continue
    return killed


def icecommit_kill(work: Path, batches: int, rows_per_batch: int, kill_at: int, delay_s: float) -> dict[str, Any]:
    import icecommit as ic

    # local[2,4]: a task may fail up to 4 times, as an executor loss would be retried
    spark = _session(master="local[2,4]")
    catalog = _catalog(work)
    _create(catalog, "bench.kill")
    inner = ic.streaming_sink("bench.kill", catalog=catalog, job_id="kill")
    kills: list[int] = []

    def sink(df: Any, batch_id: int) -> None:
        if batch_id == kill_at and not kills:
            timer = threading.Timer(delay_s, lambda: kills.append(_kill_python_workers()))
            timer.start()
        inner(df, batch_id)

    started = time.perf_counter()
    _run_stream(spark, sink, work, rows_per_batch, batches)
    seconds = time.perf_counter() - started
    count, distinct = _ids(catalog, "bench.kill")
    failed = _failed_tasks(spark)
    spark.stop()
    facts = {"workers_killed": kills[0] if kills else 0, "failed_tasks": failed, "delay_s": delay_s}
    with (OUT / "flink-kill-icecommit.jsonl").open("a") as log:
        log.write(json.dumps(facts) + "\n")
    # a kill "landed" when it made at least one task attempt fail (idle workers may be hit)
    return {
        "seconds": seconds,
        "killed": bool(facts["workers_killed"] and failed),
        **facts,
        "read_rows": count,
        "read_distinct": distinct,
    }


def _failed_tasks(spark: Any) -> int:
    """Task attempts that failed in this session (Spark's status tracker)."""
    tracker = spark.sparkContext.statusTracker()
    failed = missing = job = 0
    # job ids count up from 0; the stream's jobs run under job groups of their own
    while missing < 50:
        info = tracker.getJobInfo(job)
        job += 1
        if info is None:
            missing += 1
            continue
        missing = 0
        for stage in info.stageIds:
            stage_info = tracker.getStageInfo(stage)
            failed += stage_info.numFailedTasks if stage_info is not None else 0
    return failed


def icecommit(mode: str, work: Path, **options: Any) -> dict[str, Any]:
    """One icecommit run in a fresh Python process (its own Spark driver); its RESULT line."""
    argv = [sys.executable, "-m", "bench.flink.run", "--one", mode, str(work), json.dumps(options)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=3600, cwd=ROOT)
    (work / "icecommit.log").write_text(done.stderr)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        tail = "\n".join(done.stderr.splitlines()[-20:])
        raise RuntimeError(f"icecommit {mode} failed ({done.returncode}):\n{tail}")
    return json.loads(lines[-1].removeprefix("RESULT "))


ONE = {
    "throughput": icecommit_throughput,
    "route": icecommit_route,
    "latency": icecommit_latency,
    "kill": icecommit_kill,
}


# ---------------------------------------------------------------- the comparison


def _work() -> Path:
    return Path(tempfile.mkdtemp(prefix="icecommit-flink-"))


RAW = OUT / "flink.json"


def _record(results: list[dict[str, Any]], entry: dict[str, Any]) -> None:
    """Keep a measurement, and write all so far (a cut-short run keeps what it measured)."""
    results.append(entry)
    brief = {k: v for k, v in entry.items() if k != "checkpoints"}
    print(json.dumps(brief), file=sys.stderr, flush=True)
    RAW.parent.mkdir(parents=True, exist_ok=True)
    RAW.write_text(json.dumps(results, indent=1))


def run_throughput(args: argparse.Namespace, results: list[dict[str, Any]]) -> None:
    sides = args.throughput_sides
    for rows in args.sizes:
        for repeat in range(args.repeats):
            turn = repeat % len(sides)
            for side in sides[turn:] + sides[:turn]:
                work = _work()
                try:
                    if side == "icecommit":
                        got = icecommit("throughput", work, rows=rows, distribution=args.distribution)
                    else:
                        runtime = side.removeprefix("flink-")
                        got = flink(
                            "throughput",
                            work,
                            rows=rows,
                            warmup_rows=WARMUP_ROWS,
                            runtime=runtime,
                            checkpoint_ms=args.flink_checkpoint_ms,
                            distribution=args.distribution,
                        )
                        got["read_rows"], got["read_distinct"] = read_ids(work, "bench.t")
                finally:
                    shutil.rmtree(work, ignore_errors=True)
                _record(
                    results,
                    {
                        "part": "throughput",
                        "side": side,
                        "rows": rows,
                        "repeat": repeat,
                        "distribution": args.distribution,
                        "seconds": got["seconds"],
                        "snapshots": got["snapshots"],
                        "read_rows": got["read_rows"],
                        "read_distinct": got["read_distinct"],
                    },
                )


def run_route(args: argparse.Namespace, results: list[dict[str, Any]]) -> None:
    sides = ["flink-dynamic", "icecommit"]
    for repeat in range(args.route_repeats):
        for side in sides if repeat % 2 == 0 else sides[::-1]:
            work = _work()
            try:
                if side == "icecommit":
                    got = icecommit("route", work, rows=args.route_rows, tables=args.tables)
                else:
                    got = flink(
                        "route",
                        work,
                        rows=args.route_rows,
                        tables=args.tables,
                        warmup_rows=ROUTE_WARMUP_ROWS,
                        checkpoint_ms=args.flink_checkpoint_ms,
                    )
                    count = distinct = 0
                    for k in range(args.tables):
                        c, d = read_ids(work, f"bench.r{k}")
                        count, distinct = count + c, distinct + d
                    got["read_rows"], got["read_distinct"] = count, distinct
            finally:
                shutil.rmtree(work, ignore_errors=True)
            _record(
                results,
                {
                    "part": "route",
                    "side": side,
                    "rows": args.route_rows,
                    "tables": args.tables,
                    "repeat": repeat,
                    "seconds": got["seconds"],
                    "snapshots": got["snapshots"],
                    "read_rows": got["read_rows"],
                    "read_distinct": got["read_distinct"],
                },
            )


def run_latency(args: argparse.Namespace, results: list[dict[str, Any]]) -> None:
    sides = ["flink", "icecommit"]
    for repeat in range(args.latency_repeats):
        for side in sides if repeat % 2 == 0 else sides[::-1]:
            work = _work()
            try:
                if side == "icecommit":
                    got = icecommit(
                        "latency", work, batches=args.checkpoints, warmup=5, rows_per_batch=args.rows_per_checkpoint
                    )
                else:
                    got = flink(
                        "latency",
                        work,
                        checkpoints=args.checkpoints,
                        warmup=5,
                        rows_per_checkpoint=args.rows_per_checkpoint,
                        checkpoint_ms=args.latency_checkpoint_ms,
                    )
                    got["read_rows"], got["read_distinct"] = read_ids(work, "bench.lat")
            finally:
                shutil.rmtree(work, ignore_errors=True)
            checkpoints = got["checkpoints"][: args.checkpoints]
            _record(
                results,
                {
                    "part": "latency",
                    "side": side,
                    "repeat": repeat,
                    "seconds": got["seconds"],
                    "checkpoints": checkpoints,
                    "measured": len(checkpoints),
                    "read_rows": got["read_rows"],
                    "read_distinct": got["read_distinct"],
                },
            )


def run_kill(args: argparse.Namespace, results: list[dict[str, Any]]) -> None:
    sides = ["flink", "icecommit"]
    expected = args.kill_batches * args.kill_batch_rows
    draw = random.Random(20261128)
    for repeat in range(args.kill_repeats):
        for side in sides if repeat % 2 == 0 else sides[::-1]:
            work = _work()
            try:
                if side == "icecommit":
                    got = icecommit(
                        "kill",
                        work,
                        batches=args.kill_batches,
                        rows_per_batch=args.kill_batch_rows,
                        kill_at=args.kill_at,
                        delay_s=round(draw.uniform(0.1, 0.6), 2),
                    )
                else:
                    rate = args.kill_batch_rows * 1000 // args.kill_checkpoint_ms
                    got = flink(
                        "kill",
                        work,
                        rows=expected,
                        rows_per_second=rate,
                        checkpoint_ms=args.kill_checkpoint_ms,
                        kill_at_checkpoint=args.kill_at,
                    )
                    got["read_rows"], got["read_distinct"] = read_ids(work, "bench.kill")
            finally:
                shutil.rmtree(work, ignore_errors=True)
            _record(
                results,
                {
                    "part": "kill",
                    "side": side,
                    "repeat": repeat,
                    "expected": expected,
                    "killed": got["killed"],
                    "seconds": got["seconds"],
                    "lost": expected - got["read_distinct"],
                    "duplicated": got["read_rows"] - got["read_distinct"],
                    "read_rows": got["read_rows"],
                },
            )


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def summarise(results: list[dict[str, Any]]) -> str:
    lines: list[str] = []
    throughput = [r for r in results if r["part"] == "throughput"]
    if throughput:
        lines += [
            "| rows | side | runs | median s | rows/s | vs icecommit | snapshots | read back |",
            "|---:|---|---:|---:|---:|---:|---:|---|",
        ]
        groups = sorted({(r["rows"], r.get("distribution", "hash")) for r in throughput})
        for rows, distribution in groups:
            chosen = [r for r in throughput if r["rows"] == rows and r.get("distribution", "hash") == distribution]
            ours = (
                statistics.median(r["seconds"] for r in chosen if r["side"] == "icecommit")
                if any(r["side"] == "icecommit" for r in chosen)
                else None
            )
            for side in dict.fromkeys(r["side"] for r in chosen):
                runs = [r for r in chosen if r["side"] == side]
                median = statistics.median(r["seconds"] for r in runs)
                ok = all(r["read_rows"] == rows == r["read_distinct"] for r in runs)
                ratio = f"{median / ours:.2f}x" if ours else "-"
                snapshots = statistics.median(r["snapshots"] for r in runs)
                lines.append(
                    f"| {rows:,} | {side} ({distribution}) | {len(runs)} | {median:.2f} | {rows / median:,.0f} | "
                    f"{ratio} | {snapshots:.0f} | {'every id once' if ok else 'MISMATCH'} |"
                )
    route = [r for r in results if r["part"] == "route"]
    if route:
        ours = [r["seconds"] for r in route if r["side"] == "icecommit"]
        lines += [
            "",
            "| routed rows | tables | side | runs | median s | vs icecommit | snapshots | read back |",
            "|---:|---:|---|---:|---:|---:|---:|---|",
        ]
        for side in dict.fromkeys(r["side"] for r in route):
            runs = [r for r in route if r["side"] == side]
            median = statistics.median(r["seconds"] for r in runs)
            ok = all(r["read_rows"] == r["rows"] == r["read_distinct"] for r in runs)
            ratio = f"{median / statistics.median(ours):.2f}x" if ours else "-"
            lines.append(
                f"| {runs[0]['rows']:,} | {runs[0]['tables']} | {side} | {len(runs)} | {median:.2f} | {ratio} "
                f"| {statistics.median(r['snapshots'] for r in runs):.0f} | {'every id once' if ok else 'MISMATCH'} |"
            )
    latency = [r for r in results if r["part"] == "latency"]
    if latency:
        lines += [
            "",
            "| side | runs | checkpoints measured | rows per checkpoint | p50 ms | p95 ms | max ms "
            "| checkpoints per minute | read back |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---|",
        ]
        for side in dict.fromkeys(r["side"] for r in latency):
            runs = [r for r in latency if r["side"] == side]
            values = [c[1] for r in runs for c in r["checkpoints"]]
            rows = sorted({int(c[2]) for r in runs for c in r["checkpoints"]})
            per_minute = statistics.median(60 * len(r["checkpoints"]) / r["seconds"] for r in runs)
            ok = all(r["read_rows"] == r["read_distinct"] for r in runs)
            lines.append(
                f"| {side} | {len(runs)} | {len(values)} | {rows[0]:,}-{rows[-1]:,} | {statistics.median(values):,.0f} "
                f"| {_pct(values, 0.95):,.0f} | {max(values):,.0f} | {per_minute:.0f} | "
                f"{'every id once' if ok else 'DUPLICATES'} |"
            )
    kill = [r for r in results if r["part"] == "kill"]
    if kill:
        lines += [
            "",
            "| side | runs | rows | kills that landed | rows lost | rows duplicated | median s |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for side in dict.fromkeys(r["side"] for r in kill):
            runs = [r for r in kill if r["side"] == side]
            lines.append(
                f"| {side} | {len(runs)} | {runs[0]['expected']:,} | {sum(r['killed'] for r in runs)} "
                f"| {sum(r['lost'] for r in runs)} | {sum(r['duplicated'] for r in runs)} "
                f"| {statistics.median(r['seconds'] for r in runs):.1f} |"
            )
    return "\n".join(lines)


def main() -> None:
    global RAW
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--parts",
        nargs="+",
        default=["throughput", "latency", "route", "kill"],
        choices=["throughput", "latency", "route", "kill"],
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[5_000_000, 20_000_000])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--flink-checkpoint-ms", type=int, default=1000)
    parser.add_argument(
        "--distribution",
        choices=["hash", "none"],
        default="hash",
        help="write.distribution-mode of the throughput tables, on both sides",
    )
    parser.add_argument(
        "--throughput-sides",
        nargs="+",
        default=["flink-streaming", "flink-batch", "icecommit"],
        choices=["flink-streaming", "flink-batch", "icecommit"],
    )
    parser.add_argument("--checkpoints", type=int, default=300)
    parser.add_argument("--rows-per-checkpoint", type=int, default=1000)
    parser.add_argument("--latency-checkpoint-ms", type=int, default=500)
    parser.add_argument("--latency-repeats", type=int, default=1)
    parser.add_argument("--route-rows", type=int, default=1_000_000)
    parser.add_argument("--tables", type=int, default=100)
    parser.add_argument("--route-repeats", type=int, default=3)
    parser.add_argument("--kill-batches", type=int, default=12)
    parser.add_argument("--kill-batch-rows", type=int, default=20_000)
    parser.add_argument("--kill-checkpoint-ms", type=int, default=1000)
    parser.add_argument("--kill-at", type=int, default=4)
    parser.add_argument("--kill-repeats", type=int, default=2)
    parser.add_argument("--out", type=Path, default=RAW, help="where the raw figures go (JSON)")
    parser.add_argument(
        "--summarise", type=Path, nargs="+", metavar="JSON", help="only print the tables of earlier runs"
    )
    parser.add_argument("--rebuild", action="store_true", help="run mvn package even when the jar exists")
    parser.add_argument("--one", nargs=3, metavar=("MODE", "WORKDIR", "OPTIONS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        mode, work, options = args.one
        print("RESULT " + json.dumps(ONE[mode](Path(work), **json.loads(options))), flush=True)
        return
    if args.summarise:
        print(summarise([entry for path in args.summarise for entry in json.loads(path.read_text())]))
        return
    RAW = args.out
    build(force=args.rebuild)
    started = datetime.now(timezone.utc)
    results: list[dict[str, Any]] = []
    runners = {"throughput": run_throughput, "latency": run_latency, "route": run_route, "kill": run_kill}
    for part in args.parts:
        runners[part](args, results)
    print(
        f"Machine: {platform.node()}, {psutil.cpu_count()} cores, {psutil.virtual_memory().total / 2**30:.0f} GiB, "
        f"Python {platform.python_version()}; run {started:%Y-%m-%d %H:%M}-{datetime.now(timezone.utc):%H:%M} UTC; "
        f"{' '.join(sys.argv[1:])}"
    )
    print(summarise(results))


if __name__ == "__main__":
    os.environ.setdefault("PYTHONPATH", str(ROOT))
    main()
