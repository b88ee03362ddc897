"""Upserting changed rows into a table, side by side in one run (BENCHMARKS.md §12).

The layout: a table of ``--rows`` rows (``id`` long, ``ts`` timestamptz over 30 days,
``name`` string, ``amount`` double), partitioned by ``day(ts)``, keyed by ``id``, which is
NOT a partition source column: every data file's ``id`` bounds overlap the changes' keys, so
the look-up reads every file's key column. The changes: ``--changes`` rows, 10% new keys,
1% deletes (a Debezium-like ``op`` column), the rest updates of existing keys, each row
with a new ``ts`` (so an update may move its row to another day).

Three contenders, each on its own copy of the table (built the same way):

- icecommit: ``ic.write(changes, mode="upsert", key=["id"], change_column="op")`` with
  Spark ``local[2]`` (the writers) and the driver's key look-up (position deletes);
- pyiceberg 0.12: ``Table.upsert`` (copy-on-write, one process) for the inserts and
  updates, and ``Table.delete`` for the deletes, in a process of its own, stopped at
  ``--pyiceberg-cap`` seconds (then reported as a lower bound);
- Spark ``MERGE INTO`` with Iceberg 1.10.2's runtime (merge-on-read, pyspark 3.5 in the
  environment of ``scripts/java_iceberg/setup.sh``, named by ``ICECOMMIT_JAVA_ICEBERG``;
  skipped where absent), the statement's own time.

Then each table's read time (a full pyiceberg scan), and a check that the three tables hold
the same rows. With ``--checkpoints N``, icecommit's table then takes N - 1 more such
upserts, and its read time is measured before and after a compaction that applies the
position delete files.

    .venv/bin/python -m bench.upsert [--rows 20000000] [--changes 1000000] [--pyiceberg-cap 1800]
        [--checkpoints 10]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import platform
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.expressions import In

import icecommit as ic
from icecommit.maintenance.compaction import compact
from icecommit.writers.session import local_session
from tests import java_iceberg

CATALOG = "bench"
DAY0_US = 1_767_225_600_000_000  # 2026-01-01
DAY_US = 86_400_000_000
SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("ts", pa.timestamp("us", tz="UTC")),
        pa.field("name", pa.string()),
        pa.field("amount", pa.float64()),
    ]
)


def base_rows(rows: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    ids = np.arange(rows, dtype=np.int64)
    return pa.table(
        {
            "id": ids,
            "ts": pa.array(DAY0_US + rng.integers(0, 30 * DAY_US, rows), pa.timestamp("us", tz="UTC")),
            "name": pa.array(np.char.add("n", (ids % 100_000).astype(str))),
            "amount": rng.random(rows),
        },
        schema=SCHEMA,
    )


def change_rows(rows: int, changes: int, seed: int, new_from: int | None = None) -> pa.Table:
    """The changes, with their ``op``: updates of keys among the first ``rows``, deletes, and
    new keys from ``new_from`` (default: ``rows``) on."""
    rng = np.random.default_rng(seed + 1)
    new = changes // 10
    deleted = changes // 100
    existing = rng.choice(rows, changes - new, replace=False).astype(np.int64)
    first_new = rows if new_from is None else new_from
    ids = np.concatenate([existing, np.arange(first_new, first_new + new, dtype=np.int64)])
    ops = np.array(["u"] * (changes - new - deleted) + ["d"] * deleted + ["c"] * new)
    table = pa.table(
        {
            "id": ids,
            "ts": pa.array(DAY0_US + rng.integers(0, 30 * DAY_US, changes), pa.timestamp("us", tz="UTC")),
            "name": pa.array(np.char.add("changed", (ids % 1000).astype(str))),
            "amount": rng.random(changes),
            "op": ops,
        }
    )
    return table


def _catalog(work: Path) -> SqlCatalog:
    warehouse = work / "warehouse"
    warehouse.mkdir(exist_ok=True)
    return SqlCatalog(CATALOG, uri=f"sqlite:///{work / 'catalog.db'}", warehouse=warehouse.as_uri())


def build(catalog: SqlCatalog, name: str, data: Path) -> float:
    """The table, written from the base rows by icecommit (Spark ``local[2]``)."""
    spark = local_session()
    began = time.perf_counter()
    ic.create_table(catalog, name, SCHEMA, partition_by=["day(ts)"], identifier_fields=["id"], properties={
        "write.merge.mode": "merge-on-read", "write.update.mode": "merge-on-read", "write.delete.mode": "merge-on-read",
    })  # fmt: skip
    ic.write(spark.read.parquet(str(data)), name, catalog=catalog, job_id="load", checkpoint_id=1)
    return time.perf_counter() - began


def icecommit_upsert(catalog: SqlCatalog, name: str, changes: Path, checkpoint: int = 1) -> float:
    spark = local_session()
    frame = spark.read.parquet(str(changes))
    began = time.perf_counter()
    result = ic.write(frame, name, catalog=catalog, job_id="cdc", checkpoint_id=checkpoint, mode="upsert",
                      key=["id"], change_column="op")  # fmt: skip
    assert result.committed
    return time.perf_counter() - began


def _pyiceberg(uri: str, warehouse: str, name: str, changes: str, out: Any) -> None:
    catalog = SqlCatalog(CATALOG, uri=uri, warehouse=warehouse)
    table = catalog.load_table(name)
    rows = pq.read_table(changes)
    began = time.perf_counter()
    kept = rows.filter(pa.compute.not_equal(rows.column("op"), "d")).drop(["op"]).cast(SCHEMA)
    table.upsert(kept, join_cols=["id"])
    gone = rows.filter(pa.compute.equal(rows.column("op"), "d")).column("id").to_pylist()
    table.delete(In("id", gone))
    out.put(time.perf_counter() - began)


def pyiceberg_upsert(catalog: SqlCatalog, name: str, changes: Path, cap: float) -> tuple[float, bool]:
    """(seconds, finished): pyiceberg's own upsert in a process of its own, stopped at ``cap``."""
    context = multiprocessing.get_context("spawn")
    out = context.Queue()
    process = context.Process(
        target=_pyiceberg,
        args=(catalog.properties["uri"], catalog.properties["warehouse"], name, str(changes), out),
    )
    began = time.perf_counter()
    process.start()
    process.join(cap)
    if process.is_alive():
        process.kill()
        process.join()
        return time.perf_counter() - began, False
    return float(out.get(timeout=10)), True


def merge_into(java: java_iceberg.JavaIceberg, work: Path, name: str, changes: Path) -> float:
    sql = (
        f"MERGE INTO {{table}} t USING (SELECT * FROM parquet.`{changes}`) s ON t.id = s.id "
        "WHEN MATCHED AND s.op = 'd' THEN DELETE "
        "WHEN MATCHED THEN UPDATE SET t.ts = s.ts, t.name = s.name, t.amount = s.amount "
        "WHEN NOT MATCHED AND s.op <> 'd' THEN INSERT (id, ts, name, amount) VALUES (s.id, s.ts, s.name, s.amount)"
    )
    out = java.run(
        "--driver-memory", "6g", "alter", "--catalog-name", CATALOG, "--catalog-db", str(work / "catalog.db"),
        "--warehouse", (work / "warehouse").as_uri(), "--table", name, "--sql", sql, sqlite_jdbc=True,
        timeout_s=3_600,
    )  # fmt: skip
    return float(json.loads(out.strip().splitlines()[-1])["seconds"])


def read_seconds(catalog: SqlCatalog, name: str) -> tuple[float, pa.Table]:
    table = catalog.load_table(name)
    began = time.perf_counter()
    rows = table.scan().to_arrow()
    return time.perf_counter() - began, rows


def after_checkpoints(catalog: SqlCatalog, name: str, work: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Checkpoints 2..``--checkpoints`` of the same size on icecommit's table, then the read
    time before and after a compaction (Spark ``local[2]``) that applies the delete files."""
    found: dict[str, Any] = {"checkpoint-seconds": []}
    new = args.changes // 10
    for checkpoint in range(2, args.checkpoints + 1):
        path = work / f"changes-{checkpoint}.parquet"
        pq.write_table(change_rows(args.rows, args.changes, args.seed + checkpoint,
                                   new_from=args.rows + (checkpoint - 1) * new), path)  # fmt: skip
        found["checkpoint-seconds"].append(icecommit_upsert(catalog, name, path, checkpoint))
    table = catalog.load_table(name)
    found["delete-files-before"] = sum(1 for f in table.inspect.files().to_pylist() if f["content"] == 1)
    found["data-files-before"] = sum(1 for f in table.inspect.files().to_pylist() if f["content"] == 0)
    found["read-before"], before = read_seconds(catalog, name)
    began = time.perf_counter()
    done = compact(catalog, name, spark=local_session())
    found["compaction-seconds"] = time.perf_counter() - began
    found["compaction-groups"] = (done.committed, done.aborted)
    table = catalog.load_table(name)
    found["delete-files-after"] = sum(1 for f in table.inspect.files().to_pylist() if f["content"] == 1)
    found["data-files-after"] = sum(1 for f in table.inspect.files().to_pylist() if f["content"] == 0)
    found["read-after"], after = read_seconds(catalog, name)
    found["same-rows-after-compaction"] = before.sort_by("id").equals(after.sort_by("id"))
    found["rows"] = after.num_rows
    found["reconciles"] = ic.reconcile(catalog, name).ok
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=20_000_000)
    parser.add_argument("--changes", type=int, default=1_000_000)
    parser.add_argument("--pyiceberg-cap", type=float, default=1_800.0)
    parser.add_argument("--seed", type=int, default=20261127)
    parser.add_argument("--contenders", nargs="+", default=["icecommit", "pyiceberg", "merge"],
                        choices=["icecommit", "pyiceberg", "merge"])  # fmt: skip
    parser.add_argument("--checkpoints", type=int, default=1, help="then this many upserts on icecommit's table "
                        "in all, and its read time before and after compaction")  # fmt: skip
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="icecommit-upsert-"))
    data, changes = work / "base.parquet", work / "changes.parquet"
    pq.write_table(base_rows(args.rows, args.seed), data)
    pq.write_table(change_rows(args.rows, args.changes, args.seed), changes)
    catalog = _catalog(work)
    results: dict[str, Any] = {}
    for contender in args.contenders:
        results[f"build-{contender}"] = build(catalog, f"ns.{contender}", data)
    if "icecommit" in args.contenders:
        results["icecommit"] = icecommit_upsert(catalog, "ns.icecommit", changes)
    java = java_iceberg.find()
    if "merge" not in args.contenders:
        pass
    elif isinstance(java, str) or java.sqlite_jdbc is None:
        results["merge"] = None
        results["merge-note"] = java if isinstance(java, str) else f"no SQLite JDBC driver in {java.root / 'jdbc'}"
    else:
        results["merge"] = merge_into(java, work, "ns.merge", changes)
    reads = {}
    for contender in ("icecommit", "merge"):
        if results.get(contender) is not None:
            results[f"read-{contender}"], reads[contender] = read_seconds(catalog, f"ns.{contender}")
    keyed = {c: t.sort_by("id").select(["id", "name"]) for c, t in reads.items()}
    del reads
    if args.checkpoints > 1 and "icecommit" in args.contenders:
        results["after-checkpoints"] = after_checkpoints(catalog, "ns.icecommit", work, args)
    # pyiceberg last: its copy-on-write upsert may run for the whole cap, and every other figure
    # is measured by then (so work beside this run can only slow pyiceberg, never the others).
    if "pyiceberg" in args.contenders:
        print("before pyiceberg:", json.dumps(results), flush=True)
        results["pyiceberg"], results["pyiceberg-finished"] = pyiceberg_upsert(
            catalog, "ns.pyiceberg", changes, args.pyiceberg_cap
        )
        if results["pyiceberg-finished"]:
            results["read-pyiceberg"], read = read_seconds(catalog, "ns.pyiceberg")
            keyed["pyiceberg"] = read.sort_by("id").select(["id", "name"])
    results["same-rows"] = len({t.num_rows for t in keyed.values()}) <= 1 and all(
        t.equals(next(iter(keyed.values()))) for t in keyed.values()
    )
    results["rows-after"] = {c: t.num_rows for c, t in keyed.items()}
    print(
        f"Machine: {platform.node()}, {psutil.cpu_count()} cores, {psutil.virtual_memory().total / 2**30:.0f} GiB; "
        f"run {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; {args.rows:,} rows, {args.changes:,} changes"
    )
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
