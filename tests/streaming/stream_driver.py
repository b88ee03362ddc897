"""A streaming query over a folder of JSON files into an Iceberg table, run as a process
that tests kill (SIGKILL on its process group, JVM included) and restart.

It prints one line per event on stdout, ``@@stream {json}``, flushed at once:

- ``resume``: before Spark starts, what the previous run left behind: the Spark batches
  whose offsets were logged without a commit (Spark replays them) and the checkpoints
  prepared in the checkpoint table and not committed (the sink's recovery commits them);
- ``started``: the query is running;
- ``start`` / ``done``: a micro-batch entered the sink / its commit result;
- ``finished``: the query stopped by itself (``--drain``: trigger availableNow);
- ``kill``: with ``--kill-at POINT``, the driver is about to SIGKILL its own process group
  (JVM included) at POINT of the first batch that reaches it: ``sink-entry`` (the batch
  entered the sink, nothing written), ``after-prepare`` (staged and recorded as prepared,
  not committed) or ``after-commit`` (in the table, not yet in Spark's commit log); with
  ``--evolving``, also ``after-schema-change`` (a batch's new columns are in the table, none
  of its rows).

``--evolving``: the files are JSON lines parsed per batch (a field the events gain is a new
column of the batch) and the sink writes under ``schema_mode="add-columns"``.

    python -m tests.streaming.stream_driver --uri URI --warehouse WH --catalog-name NAME \
        --table NS.T --job J --source DIR --checkpoint-location DIR [--drain]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from pyiceberg.catalog.sql import SqlCatalog
from pyspark.sql import DataFrame

import icecommit as ic
from icecommit.committer import CommitResult, GlobalCommitter
from icecommit.state import PREPARED
from icecommit.writers.session import local_session

PREFIX = "@@stream "
SPARK_SCHEMA = "id BIGINT, ts TIMESTAMP"
TRIGGER_INTERVAL = "300 milliseconds"
_LAUNCHED = time.monotonic()


def emit(event: str, **fields: Any) -> None:
    """One progress line for the test, flushed before anything else can happen."""
    elapsed = round(time.monotonic() - _LAUNCHED, 2)
    sys.stdout.write(PREFIX + json.dumps({"event": event, **fields, "t": elapsed}) + "\n")
    sys.stdout.flush()


def _batch_ids(folder: Path) -> set[int]:
    if not folder.is_dir():
        return set()
    return {int(p.name) for p in folder.iterdir() if p.name.isdigit()}


def spark_pending_batches(checkpoint_location: Path) -> list[int]:
    """Batches whose offsets Spark logged and whose commit it did not: replayed on restart."""
    offsets = _batch_ids(checkpoint_location / "offsets")
    commits = _batch_ids(checkpoint_location / "commits")
    return sorted(offsets - commits)


def spark_committed_batches(checkpoint_location: Path) -> list[int]:
    """Batches Spark completed (their sink returned), in order."""
    return sorted(_batch_ids(checkpoint_location / "commits"))


KILL_POINTS = ("sink-entry", "after-prepare", "after-commit", "after-schema-change")


def kill_here(point: str, batch: int) -> None:
    """Say where, then SIGKILL this process group: the Python driver, its JVM, its workers."""
    emit("kill", point=point, batch=batch)
    os.killpg(0, signal.SIGKILL)


def _kill_after_prepare() -> None:
    # ic.write prepares through prepare_planned (prepare is its public wrapper)
    prepare = GlobalCommitter.prepare_planned

    def prepare_then_die(self: GlobalCommitter, checkpoint_id: int, results: Any, **options: Any) -> Any:
        plan = prepare(self, checkpoint_id, results, **options)
        kill_here("after-prepare", checkpoint_id)
        return plan

    GlobalCommitter.prepare_planned = prepare_then_die  # type: ignore[method-assign]


def _kill_after_schema_change() -> None:
    from icecommit import pipeline

    evolve = pipeline.evolve

    def evolve_then_die(table: Any, **arguments: Any) -> Any:
        evolved = evolve(table, **arguments)
        if evolved.schema().schema_id != table.schema().schema_id:
            kill_here("after-schema-change", arguments["checkpoint_id"])
        return evolved

    pipeline.evolve = evolve_then_die  # type: ignore[assignment]


def _fields(lines: list[str]) -> str:
    """The DDL of a batch's events: ``id`` and ``ts``, then the other fields the batch has
    (strings), in order of first appearance."""
    seen: dict[str, None] = {}
    for line in lines:
        seen.update(dict.fromkeys(k for k in json.loads(line) if k not in ("id", "ts")))
    return ", ".join([SPARK_SCHEMA, *(f"`{name}` STRING" for name in seen)])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--uri", required=True)
    parser.add_argument("--warehouse", required=True)
    parser.add_argument("--catalog-name", required=True)
    parser.add_argument("--table", required=True)
    parser.add_argument("--job", required=True)
    parser.add_argument("--source", type=Path, required=True)
    parser.add_argument("--checkpoint-location", type=Path, required=True)
    parser.add_argument("--spark-local-dir", type=Path)
    parser.add_argument("--drain", action="store_true", help="process what is there (availableNow), then exit")
    parser.add_argument("--kill-at", choices=KILL_POINTS, help="die at this point of the first batch reaching it")
    parser.add_argument("--max-seconds", type=float, default=600.0, help="stop waiting after this long")
    parser.add_argument("--evolving", action="store_true", help="JSON parsed per batch, written under add-columns")
    args = parser.parse_args()
    logging.basicConfig(
        level=logging.WARNING, stream=sys.stderr, format="%(asctime)s %(process)d %(name)s %(levelname)s %(message)s"
    )
    logging.getLogger("icecommit").setLevel(logging.INFO)

    catalog = SqlCatalog(args.catalog_name, uri=args.uri, warehouse=args.warehouse)
    committer = ic.GlobalCommitter(catalog, args.table, job_id=args.job)
    prepared = committer.store.list(committer.table_name, job_id=args.job, status=PREPARED)
    emit(
        "resume",
        spark_pending=spark_pending_batches(args.checkpoint_location),
        prepared=[s.checkpoint_id for s in prepared],
    )

    # a short-lived JVM, started many times: C1 only and the serial collector start it faster
    config = {"spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"}
    if args.spark_local_dir:
        config["spark.local.dir"] = str(args.spark_local_dir)
    spark = local_session("icecommit-stream-kills", master="local[2]", config=config)
    emit("spark")

    if args.kill_at == "after-prepare":
        _kill_after_prepare()
    if args.kill_at == "after-schema-change":
        _kill_after_schema_change()

    def on_commit(result: CommitResult) -> None:
        emit("done", batch=result.checkpoint_id, status=result.status, records=result.records)
        if args.kill_at == "after-commit":
            kill_here("after-commit", result.checkpoint_id)

    mode = "add-columns" if args.evolving else None
    sink = ic.streaming_sink(args.table, catalog=catalog, job_id=args.job, on_commit=on_commit, schema_mode=mode)

    def traced_sink(batch: DataFrame, batch_id: int) -> None:
        emit("start", batch=batch_id)
        if args.kill_at == "sink-entry":
            kill_here("sink-entry", batch_id)
        if args.evolving:  # each batch's JSON parsed on its own: its fields are its columns
            lines = [row.value for row in batch.collect()]
            batch = spark.read.schema(_fields(lines)).json(spark.sparkContext.parallelize(lines))
        sink(batch, batch_id)

    if args.evolving:
        stream = spark.readStream.option("maxFilesPerTrigger", 1).text(str(args.source))
    else:
        stream = spark.readStream.schema(SPARK_SCHEMA).option("maxFilesPerTrigger", 1).json(str(args.source))
    writer = stream.writeStream.foreachBatch(traced_sink).option("checkpointLocation", str(args.checkpoint_location))
    writer = writer.trigger(availableNow=True) if args.drain else writer.trigger(processingTime=TRIGGER_INTERVAL)
    query = writer.start()
    emit("started")
    query.awaitTermination(args.max_seconds)
    if query.isActive:
        query.stop()
        raise SystemExit(f"the query was still running after {args.max_seconds} s")
    if query.exception() is not None:
        raise SystemExit(f"the query failed: {query.exception()}")
    emit("finished")
    spark.stop()


if __name__ == "__main__":
    main()
