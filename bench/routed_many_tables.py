"""A routed write into many tables: 1M rows into 1,000 tables, timed, with its time per table.

One DataFrame of ``--rows`` rows (an id, a shard, a payload) is routed by its shard to
``--tables`` tables (``shard % tables``), each checkpoint committed to all of them: in one
catalog commit (``atomic=True``, on SQLite) and table by table (``atomic=False``), on
tables of their own, alternating checkpoint by checkpoint. The first checkpoint of each
mode creates the tables (``create=True``) and is timed apart; the ones after it write
into tables that exist.

    .venv/bin/python -m bench.routed_many_tables [--rows 1000000] [--tables 1000] [--checkpoints 2]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from pyspark.sql import functions as F

import icecommit as ic
from icecommit.writers import local_session

OUT = Path(__file__).resolve().parent / "out"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--tables", type=int, default=1000)
    parser.add_argument("--checkpoints", type=int, default=2, help="timed checkpoints after the creating one")
    args = parser.parse_args()
    spark = local_session()
    df = (
        spark.range(args.rows)
        .select("id", (F.col("id") % args.tables).cast("int").alias("shard"), (F.col("id") * 7 % 1000).alias("v"))
        .cache()
    )
    df.count()
    seconds: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory() as home:
        catalog = ic.connect(uri=f"sqlite:///{home}/catalog.db", warehouse=f"file://{home}/warehouse")
        for mode in ("one-commit", "table-by-table"):
            catalog.create_namespace(mode.replace("-", "_"))
        for checkpoint in range(0, args.checkpoints + 1):
            modes = ["one-commit", "table-by-table"] if checkpoint % 2 == 0 else ["table-by-table", "one-commit"]
            for mode in modes:
                namespace = mode.replace("-", "_")
                routes = {shard: f"{namespace}.t{shard}" for shard in range(args.tables)}
                started = time.perf_counter()
                result = ic.write(df, routes, route_by="shard", catalog=catalog, job_id=mode, checkpoint_id=checkpoint,
                                  create=checkpoint == 0, atomic=mode == "one-commit")  # fmt: skip
                elapsed = time.perf_counter() - started
                assert {r.status for r in result.results.values()} == {"committed"}
                kind = "creating" if checkpoint == 0 else "writing"
                seconds.setdefault(mode, {}).setdefault(kind, []).append(elapsed)
                per_table = 1000 * elapsed / args.tables
                print(f"checkpoint {checkpoint} {mode}: {elapsed:.1f} s, {per_table:.0f} ms per table", flush=True)
    for mode, kinds in seconds.items():
        writing = statistics.median(kinds["writing"])
        print(f"{mode}: creating {kinds['creating'][0]:.1f} s; writing median {writing:.1f} s, "
              f"{1000 * writing / args.tables:.0f} ms per table")  # fmt: skip
    OUT.mkdir(exist_ok=True)
    document = {
        "rows": args.rows, "tables": args.tables, "seconds": seconds, "machine": platform.platform(),
        "cpus": os.cpu_count(), "at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }  # fmt: skip
    (OUT / "routed_many_tables.json").write_text(json.dumps(document, indent=2))
    print(f"written to {OUT / 'routed_many_tables.json'}")


if __name__ == "__main__":
    main()
