"""Commit latency over 1,000 small checkpoints: does the 1,000th cost what the 10th did?

One job commits ``--checkpoints`` tiny checkpoints (one 20-row file each) into one table
through ``GlobalCommitter`` on SQLite and on PostgreSQL: with manifest merging (the
icecommit default, as in Iceberg) and snapshots expired every 100 commits (keeping the last
100, as ``icecommit expire --retain-last 100`` would); with merging and every snapshot kept;
and, for comparison, pyiceberg's default fast append that never merges. The time of each
``commit()`` call is recorded; reported are the medians of commits 6-15 ("the 10th"), of
the last ten, and of the last hundred (one full manifest-merge cycle: with Iceberg's
``commit.manifest.min-count-to-merge`` of 100 the manifest count climbs from 1 to 100 and
is merged back, so any ten consecutive commits sit at one phase of that cycle).

    .venv/bin/python -m bench.commit_latency [--checkpoints 1000] [--expiring-only]
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import statistics
import tempfile
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import psutil
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table.locations import load_location_provider

import icecommit as ic
from bench.databases import PG_URI, postgres_available
from icecommit.maintenance import apply_expire, plan_expire
from icecommit.state.database import dispose_state_engines
from icecommit.writers.files import TaskFileWriter
from tests.helpers import EVENTS_SCHEMA, events

OUT = Path(__file__).resolve().parent / "out"


def run(backend: str, merge: bool, checkpoints: int, work: Path, expire_every: int = 0) -> list[float]:
    uri = f"sqlite:///{work / f'{backend}-{merge}-{expire_every}.db'}" if backend == "sqlite" else PG_URI
    warehouse = work / f"wh-{backend}-{merge}-{expire_every}"
    warehouse.mkdir()
    catalog = SqlCatalog(f"lat{uuid.uuid4().hex[:8]}", uri=uri, warehouse=warehouse.as_uri())
    name = f"{catalog.name}.events"
    props = {"commit.manifest-merge.enabled": str(merge).lower()}
    table = ic.create_table(catalog, name, EVENTS_SCHEMA, partition_by=["event"], properties=props)
    committer = ic.GlobalCommitter(catalog, name, job_id="latency")
    locations = load_location_provider(table.metadata.location, table.metadata.properties)
    latencies = []
    for checkpoint_id in range(1, checkpoints + 1):
        start = checkpoint_id * 100
        writer = TaskFileWriter(
            table.metadata, table.io, job_id="latency", checkpoint_id=checkpoint_id, location_provider=locations
        )
        result = writer.write_batches(events(start, start + 20, days=1).to_batches())
        committer.prepare(checkpoint_id, [result])
        began = time.perf_counter()
        committer.commit(checkpoint_id)
        latencies.append(time.perf_counter() - began)
        if expire_every and checkpoint_id % expire_every == 0:
            apply_expire(catalog, plan_expire(catalog, name, older_than=timedelta(0), retain_last=expire_every))
    loaded = catalog.load_table(name)
    assert sum(b.num_rows for b in loaded.scan().to_arrow_batch_reader()) == 20 * checkpoints
    catalog.engine.dispose()
    dispose_state_engines()
    return latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoints", type=int, default=1000)
    parser.add_argument(
        "--expiring-only",
        action="store_true",
        help="only the configurations that expire snapshots (the latency icecommit keeps flat)",
    )
    args = parser.parse_args()
    backends = ["sqlite"] + (["postgres"] if postgres_available() else [])
    work = Path(tempfile.mkdtemp(prefix="icecommit-latency-"))
    rows = []
    raw = {}
    try:
        configs = [(b, True, 100) for b in backends]
        if not args.expiring_only:
            configs += [("sqlite", True, 0), ("sqlite", False, 0)]
        for backend, merge, expire_every in configs:
            latencies = run(backend, merge, args.checkpoints, work, expire_every)
            raw[f"{backend}-merge={merge}-expire={expire_every}"] = latencies
            early = statistics.median(latencies[5:15])
            late = statistics.median(latencies[-10:])
            cycle = statistics.median(latencies[-100:])
            second = statistics.median(latencies[100:200] or latencies)
            rows.append((backend, merge, expire_every, early, second, late, cycle))
            print(f"{backend} merge={merge} expire={expire_every}: 10th {early * 1000:.1f} ms, "
                  f"last {late * 1000:.1f} ms", flush=True)  # fmt: skip
    finally:
        shutil.rmtree(work, ignore_errors=True)
    OUT.mkdir(exist_ok=True)
    (OUT / "commit_latency.json").write_text(json.dumps(raw))
    print(
        f"Machine: {platform.node()}, {psutil.cpu_count()} cores, {psutil.virtual_memory().total / 2**30:.0f} GiB, "
        f"Python {platform.python_version()}; run {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; "
        f"{args.checkpoints} checkpoints"
    )
    print(
        "| catalog | manifests | snapshots | commits 6-15 | commits 101-200 | last 100 | last 10 "
        "| last 10 vs 6-15 | last 100 vs 101-200 |"
    )
    print("|---|---|---|---:|---:|---:|---:|---:|---:|")
    for backend, merge, expire_every, early, second, late, cycle in rows:
        label = "merged (icecommit default)" if merge else "fast append, never merged"
        kept = f"expired every {expire_every}, last {expire_every} kept" if expire_every else "all kept"
        print(
            f"| {backend} | {label} | {kept} | {early * 1000:.1f} | {second * 1000:.1f} | {cycle * 1000:.1f} "
            f"| {late * 1000:.1f} | {late / early:.2f}x | {cycle / second:.2f}x |"
        )


if __name__ == "__main__":
    main()
