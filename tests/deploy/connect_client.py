"""A Spark Connect client, run as a process of its own by the tests: ``ic.write`` (and its
replay), a routed write, upserts, and a streaming query through ``ic.streaming_sink``, against a
Connect server on loopback. Prints a JSON line with what each returned."""

from __future__ import annotations

import argparse
import json
import sys

from pyspark.sql import SparkSession

import icecommit as ic


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--remote", required=True)
    parser.add_argument("--uri", required=True)
    parser.add_argument("--warehouse", required=True)
    parser.add_argument("--step", choices=("writes", "stream"), required=True)
    parser.add_argument("--source")
    parser.add_argument("--checkpoints")
    args = parser.parse_args(argv)
    spark = SparkSession.builder.remote(args.remote).getOrCreate()
    catalog = ic.connect("lake", uri=args.uri, warehouse=args.warehouse)
    out: dict[str, object] = {}
    if args.step == "writes":
        frame = spark.range(0, 100).selectExpr("id", "IF(id % 2 = 0, 'a', 'b') AS kind")
        first = ic.write(frame, "ns.events", catalog=catalog, job_id="w", checkpoint_id=1)
        again = ic.write(frame, "ns.events", catalog=catalog, job_id="w", checkpoint_id=1)
        routed = ic.write(
            frame, {"a": "ns.a", "b": "ns.b"}, catalog=catalog, job_id="r", checkpoint_id=1, route_by="kind"
        )
        # upserts by key, their keys looked up by tasks of the Connect server's cluster
        keyed = dict(catalog=catalog, job_id="u", mode="upsert")
        ic.write(spark.range(0, 50).selectExpr("id", "'a' AS kind"), "ns.users", checkpoint_id=1, **keyed)
        upserted = ic.write(spark.range(40, 60).selectExpr("id", "'b' AS kind"), "ns.users", checkpoint_id=2, **keyed)
        out = {"first": first.status, "again": again.status, "routed": routed.records, "upserted": upserted.records}
    else:
        sink = ic.streaming_sink("ns.stream", catalog=catalog, job_id="s", checkpoint_location=args.checkpoints)
        stream = spark.readStream.schema("id BIGINT").option("maxFilesPerTrigger", 1).json(args.source)
        query = (
            stream.writeStream.foreachBatch(sink)
            .option("checkpointLocation", args.checkpoints)
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(240)
        out = {"exception": str(query.exception()) if query.exception() else None, "sink": repr(sink)}
    print(json.dumps(out))
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
