"""A Spark driver for the standalone-cluster tests, run as a process of its own (one
SparkContext per process): ``ic.write`` (with a task that, on its first attempt, announces
itself and waits to be killed), a routed write, and a streaming query through the sink,
against an ``s3://`` warehouse. Prints a JSON line with what each returned."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from pyspark.sql import SparkSession

import icecommit as ic
from icecommit.core.datafiles import WriteResult
from icecommit.writers.spark import TaskAttempt

#: where a task announces itself (set in the workers' environment by the test)
MARKERS = "ICECOMMIT_TEST_MARKERS"


def announce_and_wait(task: TaskAttempt, result: WriteResult) -> None:
    """Task 0's first attempt, having written its files: say which process it is, then
    wait for the test to kill its executor (or its worker)."""
    folder = os.environ.get(MARKERS)
    if folder and task.partition_id == 0 and task.attempt == 0:
        (Path(folder) / f"task-{os.getpid()}").write_text(str(os.getpid()))
        time.sleep(120)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--master", required=True)
    parser.add_argument("--catalog", required=True)
    parser.add_argument("--uri", required=True)
    parser.add_argument("--warehouse", required=True)
    parser.add_argument("--s3", required=True, help="the S3 endpoint")
    parser.add_argument("--step", choices=("write", "routed-and-stream"), required=True)
    parser.add_argument("--source")
    parser.add_argument("--checkpoints")
    args = parser.parse_args(argv)
    spark = (
        SparkSession.builder.master(args.master)
        .appName("icecommit-cluster-test")
        .config("spark.executor.cores", "1")
        .config("spark.executor.memory", "512m")
        .config("spark.cores.max", "2")
        .config("spark.task.maxFailures", "4")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    properties = {
        "s3.endpoint": args.s3, "s3.access-key-id": "testing", "s3.secret-access-key": "testing",
        "s3.region": "us-east-1",
    }  # fmt: skip
    catalog = ic.connect(args.catalog, uri=args.uri, warehouse=args.warehouse, **properties)
    frame = spark.range(0, 4000, numPartitions=4).selectExpr("id", "IF(id % 2 = 0, 'a', 'b') AS kind")
    if args.step == "write":
        result = ic.write(frame, "ns.events", catalog=catalog, job_id="w", checkpoint_id=1, task_hook=announce_and_wait)
        out: dict[str, object] = {"status": result.status, "records": result.records}
    else:
        routed = ic.write(
            frame, {"a": "ns.a", "b": "ns.b"}, catalog=catalog, job_id="r", checkpoint_id=1, route_by="kind"
        )
        sink = ic.streaming_sink("ns.stream", catalog=catalog, job_id="s")
        query = (
            spark.readStream.schema("id BIGINT").option("maxFilesPerTrigger", 1).json(args.source)
            .writeStream.foreachBatch(sink).option("checkpointLocation", args.checkpoints)
            .trigger(availableNow=True).start()
        )  # fmt: skip
        query.awaitTermination(240)
        out = {"routed": routed.records, "exception": str(query.exception()) if query.exception() else None}
    print(json.dumps(out))
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
