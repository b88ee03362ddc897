"""A change stream landing by key: the commit latency of ``--batches`` small upserts in a
row (BENCHMARKS.md §12).

The table is ``bench.upsert``'s layout (``id`` key, ``ts`` timestamptz over 30 days,
partitioned by ``day(ts)``, so the key is not a partition source column), loaded with
``--rows`` rows. Each batch holds ``--changes`` changes (89% updates of existing keys with a
new ``ts``, 10% new keys, 1% deletes); one writer writes its rows in this process (as one
Spark task would), then the committer prepares and commits it as an upsert: the latency
measured is prepare + commit (staging the keys, resolving them to positions on the head,
writing the position delete files, the catalog commit). Every ``--maintain-every`` batches
the maintenance policy runs as the streaming sink runs it (compaction of partitions whose
files have at least ``--delete-ratio`` of their rows deleted, and of small files); its time
is reported apart. At the end: the table holds exactly the source's rows by key, and
reconciliation is ok.

    .venv/bin/python -m bench.change_stream [--rows 1000000] [--batches 1000] [--changes 500]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import pyarrow.compute as pc
from pyiceberg.catalog.sql import SqlCatalog

import icecommit as ic
from bench.upsert import SCHEMA, base_rows, change_rows
from icecommit.core.upsert import UPSERT
from icecommit.maintenance.policy import MaintenancePolicy, maintain
from icecommit.writers.arrow import write_arrow


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--batches", type=int, default=1_000)
    parser.add_argument("--changes", type=int, default=500)
    parser.add_argument("--maintain-every", type=int, default=100)
    parser.add_argument("--delete-ratio", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=20261127)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="icecommit-stream-"))
    (work / "warehouse").mkdir()
    catalog = SqlCatalog("bench", uri=f"sqlite:///{work / 'catalog.db'}", warehouse=(work / "warehouse").as_uri())
    name = "ns.stream"
    ic.create_table(catalog, name, SCHEMA, partition_by=["day(ts)"], identifier_fields=["id"])
    committer = ic.GlobalCommitter(catalog, name, job_id="cdc")
    base = base_rows(args.rows, args.seed)
    committer.prepare(0, [write_arrow(committer.load_table(), base, job_id="cdc", checkpoint_id=0)])
    committer.commit(0)
    expected = dict(zip(base.column("id").to_pylist(), base.column("name").to_pylist(), strict=True))
    # as a stream runs it: compaction, and expiry (without it every commit rewrites the
    # metadata of every snapshot so far, and the commits slow down as the stream goes on)
    policy = MaintenancePolicy(compact_delete_ratio=args.delete_ratio, only_complete=False,
                               expire_older_than=timedelta(0), retain_last=args.maintain_every,
                               budget=timedelta(minutes=5), lease=timedelta(minutes=10))  # fmt: skip
    latencies: list[float] = []
    writes: list[float] = []
    maintenance: list[float] = []
    new = args.changes // 10
    for batch in range(1, args.batches + 1):
        changes = change_rows(args.rows, args.changes, args.seed + batch, new_from=args.rows + batch * new)
        deleted = pc.equal(changes.column("op"), "d")
        rows = changes.filter(pc.invert(deleted)).drop(["op"]).cast(SCHEMA)
        began = time.perf_counter()
        written = write_arrow(committer.load_table(), rows, job_id="cdc", checkpoint_id=batch)
        writes.append(time.perf_counter() - began)
        began = time.perf_counter()
        committer.prepare(batch, [written], mode=UPSERT, keys=changes.select(["id"]))
        result = committer.commit(batch)
        latencies.append(time.perf_counter() - began)
        assert result.committed, result
        for key in changes.filter(deleted).column("id").to_pylist():
            expected.pop(key, None)
        expected.update(zip(rows.column("id").to_pylist(), rows.column("name").to_pylist(), strict=True))
        if batch % 100 == 0:
            print(f"batch {batch}: commit p50 so far {statistics.median(latencies):.3f} s, p95 "
                  f"{_quantile(latencies, 0.95):.3f} s; last 100: p50 {statistics.median(latencies[-100:]):.3f} s, "
                  f"p95 {_quantile(latencies[-100:], 0.95):.3f} s", flush=True)  # fmt: skip
        if batch % args.maintain_every == 0:
            began = time.perf_counter()
            maintain(catalog, name, policy)
            maintenance.append(time.perf_counter() - began)
    table = catalog.load_table(name)
    found = table.scan(selected_fields=("id", "name")).to_arrow()
    ids = found.column("id").to_numpy()
    files = table.inspect.files().to_pylist()
    results: dict[str, Any] = {
        "commit-p50": statistics.median(latencies),
        "commit-p95": _quantile(latencies, 0.95),
        "commit-max": max(latencies),
        "commit-p50-first-100": statistics.median(latencies[:100]),
        "commit-p50-last-100": statistics.median(latencies[-100:]),
        "write-p50": statistics.median(writes),
        "maintenance-runs": len(maintenance),
        "maintenance-median": statistics.median(maintenance) if maintenance else None,
        "rows": found.num_rows,
        "keys-unique": len(np.unique(ids)) == len(ids),
        "same-rows-by-key": dict(zip(ids.tolist(), found.column("name").to_pylist(), strict=True)) == expected,
        "data-files": sum(1 for f in files if f["content"] == 0),
        "delete-files": sum(1 for f in files if f["content"] == 1),
    }
    print("before reconciliation:", json.dumps(results), flush=True)
    began = time.perf_counter()
    report = ic.reconcile(catalog, name)
    results["reconcile-seconds"], results["reconciles"] = time.perf_counter() - began, report.ok
    print(
        f"Machine: {platform.node()}, {psutil.cpu_count()} cores, {psutil.virtual_memory().total / 2**30:.0f} GiB; "
        f"run {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; {args.rows:,} rows, {args.batches:,} batches of "
        f"{args.changes:,} changes"
    )
    print(json.dumps(results, indent=2))
    assert results["same-rows-by-key"] and results["keys-unique"] and results["reconciles"], report.to_markdown()


if __name__ == "__main__":
    main()
