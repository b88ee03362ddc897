"""Writing to object storage: ``ic.write`` against pyiceberg's ``append`` of the same frame
collected to the driver, into an ``s3://`` warehouse on moto's S3 server (loopback), in the
same run, alternating. Every request goes through the tests' counting proxy.

    .venv/bin/python -m bench.object_store [--sizes 1000000 10000000] [--rounds 3]

Both are warmed up first on 10,000 rows (not timed). For each size and approach: wall
time from the call to a committed snapshot, rows/s, requests per checkpoint and per data
file by S3 operation, and the commit's own latency (``GlobalCommitter.commit`` for
``ic.write``; for ``append``, its catalog commit). Prints a JSON line per run and a
Markdown table of the medians.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import boto3
import pyarrow as pa
from moto.server import ThreadedMotoServer

import icecommit as ic
from icecommit.committer.committer import GlobalCommitter
from icecommit.writers.session import local_session
from tests.s3proxy import S3FaultProxy

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("ts", pa.timestamp("us", tz="UTC")),
        pa.field("event", pa.string()),
        pa.field("score", pa.float64()),
    ]
)


def _frame(spark: Any, rows: int) -> Any:
    return spark.range(0, rows, numPartitions=8).selectExpr(
        "id",
        "timestamp_micros(1777593600000000 + id * 1000) AS ts",
        "element_at(array('click', 'view', 'buy', 'share'), CAST(id % 4 AS INT) + 1) AS event",
        "CAST(id % 1000 AS DOUBLE) / 7 AS score",
    )


def _timed_commit(spent: list[float]) -> Any:
    original = GlobalCommitter.commit

    def commit(self: GlobalCommitter, *args: Any, **kwargs: Any) -> Any:
        began = time.perf_counter()
        try:
            return original(self, *args, **kwargs)
        finally:
            spent.append(time.perf_counter() - began)

    return original, commit


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    proxy = S3FaultProxy((host, port)).start()
    boto3.client(
        "s3", endpoint_url=f"http://{host}:{port}", aws_access_key_id="t", aws_secret_access_key="t",
        region_name="us-east-1",
    ).create_bucket(Bucket="bench")  # fmt: skip
    work = Path(tempfile.mkdtemp())
    catalog = ic.connect(
        "bench", uri=f"sqlite:///{work / 'catalog.db'}", warehouse="s3://bench/wh",
        **{"s3.endpoint": proxy.endpoint, "s3.access-key-id": "t", "s3.secret-access-key": "t",
           "s3.region": "us-east-1"},
    )  # fmt: skip
    spark = local_session("bench-object-store", master="local[2]")
    runs: list[dict[str, Any]] = []
    # warm up both (Spark's Python workers, imports, the first S3 connections): not timed
    warm = _frame(spark, 10_000)
    ic.create_table(catalog, "ns.warm_ic", SCHEMA)
    ic.write(warm, "ns.warm_ic", catalog=catalog, job_id="warm", checkpoint_id=1)
    catalog.load_table(ic.create_table(catalog, "ns.warm_append", SCHEMA).name()).append(warm.toArrow().cast(SCHEMA))
    for rows in args.sizes:
        frame = _frame(spark, rows).cache()
        frame.count()
        for round_ in range(args.rounds):
            for approach in ("icecommit", "pyiceberg-append"):
                name = f"ns.t{uuid.uuid4().hex[:8]}"
                ic.create_table(catalog, name, SCHEMA)
                proxy.reset_counts()
                commits: list[float] = []
                began = time.perf_counter()
                if approach == "icecommit":
                    original, timed = _timed_commit(commits)
                    GlobalCommitter.commit = timed  # type: ignore[method-assign]
                    try:
                        ic.write(frame, name, catalog=catalog, job_id="bench", checkpoint_id=1)
                    finally:
                        GlobalCommitter.commit = original  # type: ignore[method-assign]
                else:
                    table = catalog.load_table(name)
                    arrow = frame.toArrow().cast(SCHEMA)
                    original_commit = type(catalog).commit_table

                    def commit_table(
                        self: Any, *a: Any, _o: Any = original_commit, _spent: list[float] = commits, **k: Any
                    ) -> Any:
                        t = time.perf_counter()
                        try:
                            return _o(self, *a, **k)
                        finally:
                            _spent.append(time.perf_counter() - t)

                    type(catalog).commit_table = commit_table  # type: ignore[method-assign]
                    try:
                        table.append(arrow)
                    finally:
                        type(catalog).commit_table = original_commit  # type: ignore[method-assign]
                seconds = time.perf_counter() - began
                counts = Counter(proxy.counts)
                files = len(list(catalog.load_table(name).scan().plan_files()))
                run = {
                    "rows": rows, "round": round_, "approach": approach, "seconds": round(seconds, 3),
                    "rows_per_s": round(rows / seconds), "files": files, "requests": dict(counts),
                    "requests_total": sum(counts.values()), "commit_s": round(sum(commits), 4),
                }  # fmt: skip
                runs.append(run)
                print(json.dumps(run), flush=True)
        frame.unpersist()
    spark.stop()
    proxy.stop()
    server.stop()

    print(f"\n{platform.node()} · {platform.processor() or platform.machine()} · {time.strftime('%Y-%m-%d %H:%M')}\n")
    print("| rows | approach | median s | rows/s | data files | requests | per file | LIST | commit s |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for rows in args.sizes:
        medians = {}
        for approach in ("icecommit", "pyiceberg-append"):
            mine = [r for r in runs if r["rows"] == rows and r["approach"] == approach]
            seconds = statistics.median(r["seconds"] for r in mine)
            medians[approach] = seconds
            total = statistics.median(r["requests_total"] for r in mine)
            files = statistics.median(r["files"] for r in mine)
            lists = statistics.median(r["requests"].get("ListObjects", 0) for r in mine)
            commit = statistics.median(r["commit_s"] for r in mine)
            print(
                f"| {rows:,} | {approach} | {seconds:.2f} | {rows / seconds:,.0f} | {files:.0f} | {total:.0f} | "
                f"{total / files:.1f} | {lists:.0f} | {commit:.3f} |"
            )
        ratio = medians["icecommit"] / medians["pyiceberg-append"]
        print(f"| {rows:,} | ratio ic.write / append | {ratio:.2f}x | | | | | | |")


if __name__ == "__main__":
    main()
