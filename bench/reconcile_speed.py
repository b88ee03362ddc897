"""How long does reconciling 10,000 checkpoints and 100,000 data files take?

Builds a table whose ancestry holds ``--checkpoints`` icecommit snapshots of
``--files-per-checkpoint`` data files each (every file a hard link to one small real
Parquet file, so the storage look-ups are real), with the checkpoint table, accepted task
attempts and per-window metrics that the committer would have written, on SQLite and, when
it is running, PostgreSQL. The table metadata is written directly (committing 10,000
snapshots one by one would take hours here). Then times ``ic.reconcile`` (median of
``--repeats``).

    .venv/bin/python -m bench.reconcile_speed [--checkpoints 10000] [--files-per-checkpoint 10]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import tempfile
import time
import uuid
from contextlib import nullcontext
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

import psutil
from click.testing import CliRunner
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.manifest import ManifestEntry, ManifestEntryStatus, write_manifest, write_manifest_list
from pyiceberg.serializers import ToOutputFile
from pyiceberg.table.locations import load_location_provider
from pyiceberg.table.refs import SnapshotRef, SnapshotRefType
from pyiceberg.table.snapshots import Operation, Snapshot, Summary
from sqlalchemy import delete, insert

import icecommit as ic
from bench.databases import PG_URI, postgres_available
from bench.lifecycle_soak import soak_database
from icecommit.cli.main import cli
from icecommit.state import state_engine, state_uri
from icecommit.state.database import dispose_state_engines
from icecommit.state.manifests import to_data_file
from icecommit.state.models import CheckpointRow, CheckpointTaskRow, MetricRow, ReconcileRunRow
from icecommit.writers.files import TaskFileWriter
from tests.helpers import EVENTS_SCHEMA, events

JOB = "speed"
ROWS_PER_FILE = 10


def build(
    backend: str, checkpoints: int, files_per_checkpoint: int, work: Path, pg_uri: str | None = None
) -> tuple[SqlCatalog, str]:
    """Write the table's metadata directly: one snapshot per checkpoint, the current one's
    manifests holding every file with the snapshot that added it (older snapshots share the
    final manifest list; reconciliation reads only the current one's)."""
    uri = f"sqlite:///{work / 'catalog.db'}" if backend == "sqlite" else pg_uri or PG_URI
    (work / "wh").mkdir(exist_ok=True)
    catalog = SqlCatalog(f"speed{uuid.uuid4().hex[:8]}", uri=uri, warehouse=(work / "wh").as_uri())
    seed = ic.create_table(
        catalog, f"{catalog.name}.seed", EVENTS_SCHEMA, properties={"icecommit.event-time-column": "ts"}
    )
    locations = load_location_provider(seed.metadata.location, seed.metadata.properties)
    template = TaskFileWriter(
        seed.metadata, seed.io, job_id=JOB, checkpoint_id=0, location_provider=locations
    ).write_batches(events(0, ROWS_PER_FILE, days=1).to_batches())
    record = template.data_files[0]
    source = Path(record.path.removeprefix("file://"))
    started = time.perf_counter()
    version = seed.metadata.format_version
    base_ms = int(datetime(2026, 1, 1, tzinfo=timezone.utc).timestamp() * 1000)
    snapshot_ids = {c: 10_000_000 + c for c in range(1, checkpoints + 1)}
    last = snapshot_ids[checkpoints]
    # the layout of a merge-append table: the older checkpoints' files merged into large
    # manifests (each written by the snapshot of its newest checkpoint, the older entries
    # EXISTING), the newest checkpoint's files in the manifest its own snapshot wrote
    manifests = []
    per_manifest = 1000
    groups = [range(first, min(first + per_manifest, checkpoints)) for first in range(1, checkpoints, per_manifest)]
    origin, linked = source, 0
    for group in [g for g in groups if len(g)] + [range(checkpoints, checkpoints + 1)]:
        writer_id = snapshot_ids[group[-1]]
        path = seed.location_provider().new_metadata_location(f"speed-{group[0]:06d}-m0.avro")
        with write_manifest(
            version, seed.spec(), seed.schema(), seed.io.new_output(path), writer_id, "deflate"
        ) as writer:
            for checkpoint_id in group:
                for n in range(files_per_checkpoint):
                    link = source.parent / f"speed-{checkpoint_id:06d}-{n:03d}.parquet"
                    linked += 1
                    if linked % 50_000 == 0:  # a file system allows only so many links to one file
                        origin = source.parent / f"speed-origin-{linked}.parquet"
                        shutil.copyfile(source, origin)
                    os.link(origin, link)
                    data_file = to_data_file(replace(record, path=f"file://{link}"), version)
                    status = ManifestEntryStatus.ADDED if checkpoint_id == group[-1] else ManifestEntryStatus.EXISTING
                    writer.add_entry(ManifestEntry.from_args(
                        status=status,
                        snapshot_id=snapshot_ids[checkpoint_id],
                        sequence_number=checkpoint_id, file_sequence_number=checkpoint_id, data_file=data_file,
                    ))  # fmt: skip
        manifest = writer.to_manifest_file()
        manifest.sequence_number = group[-1]  # written by that checkpoint's snapshot
        manifests.append(manifest)
    manifest_list = seed.location_provider().new_metadata_location(f"snap-{last}-speed.avro")
    with write_manifest_list(version, seed.io.new_output(manifest_list), last, last - 1, checkpoints, "deflate") as ml:
        ml.add_manifests(manifests)
    records = ROWS_PER_FILE * files_per_checkpoint
    snapshots = [
        Snapshot(
            snapshot_id=snapshot_ids[c],
            parent_snapshot_id=snapshot_ids[c - 1] if c > 1 else None,
            sequence_number=c,
            timestamp_ms=base_ms + c * 60_000,
            manifest_list=manifest_list,
            summary=Summary(
                Operation.APPEND,
                **{
                    "icecommit.job-id": JOB,
                    "icecommit.checkpoint-id": str(c),
                    "icecommit.records": str(records),
                    "added-records": str(records),
                    "added-data-files": str(files_per_checkpoint),
                },
            ),
            schema_id=seed.schema().schema_id,
        )
        for c in range(1, checkpoints + 1)
    ]
    metadata = seed.metadata.model_copy(
        update={
            "snapshots": snapshots,
            "current_snapshot_id": last,
            "last_sequence_number": checkpoints,
            "refs": {"main": SnapshotRef(snapshot_id=last, snapshot_ref_type=SnapshotRefType.BRANCH)},
        }
    )
    metadata_path = seed.location_provider().new_metadata_location("00001-speed.metadata.json")
    ToOutputFile.table_metadata(metadata, seed.io.new_output(metadata_path))
    name = f"{catalog.name}.events"
    catalog.register_table(name, metadata_path)

    engine = state_engine(state_uri(catalog))
    base = datetime(2026, 1, 1, tzinfo=timezone.utc)
    rows, tasks, metrics = [], [], []
    for checkpoint_id in range(1, checkpoints + 1):
        when = base + timedelta(minutes=checkpoint_id)
        rows.append({
            "job_id": JOB, "table_name": name, "checkpoint_id": checkpoint_id, "status": "committed",
            "manifest_path": None, "files_digest": "-", "source_records": records, "records": records,
            "files": files_per_checkpoint, "bytes": 0, "max_event_time_us": None,
            "snapshot_id": snapshot_ids[checkpoint_id], "attempts": 1, "retries": 0,
            "files_created": files_per_checkpoint, "files_committed": files_per_checkpoint,
            "files_skipped": 0, "files_missing": 0, "unknown_outcomes": 0,
            "prepared_at": when, "committed_at": when + timedelta(seconds=30),
        })  # fmt: skip
        tasks.append({"job_id": JOB, "table_name": name, "checkpoint_id": checkpoint_id, "task_id": 0, "attempt": 0})
        for stage, task in (("source", 0), ("written", 0), ("committed", None)):
            metrics.append({
                "job_id": JOB, "table_name": name, "checkpoint_id": checkpoint_id, "stage": stage,
                "task_id": task, "attempt": 0 if task is not None else None, "window_start": when,
                "records": records, "bytes": 0, "files": 0, "recorded_at": when,
            })  # fmt: skip
    with engine.begin() as conn:
        conn.execute(insert(CheckpointRow), rows)
        conn.execute(insert(CheckpointTaskRow), tasks)
        conn.execute(insert(MetricRow), metrics)
    print(f"{backend}: built {checkpoints} checkpoints in {time.perf_counter() - started:.0f}s", flush=True)
    return catalog, name


def since_last(catalog: SqlCatalog, uri: str, name: str, checkpoints: int, work: Path) -> float:
    """A scheduled run: the last stored run ended just before the newest checkpoint was
    prepared, so ``--since last`` has one checkpoint to reconcile. Runs the CLI command
    in this process (what a scheduler's process does after start-up), storing its run."""
    engine = state_engine(state_uri(catalog))
    newest = datetime(2026, 1, 1, tzinfo=timezone.utc) + timedelta(minutes=checkpoints)
    with engine.begin() as conn:
        conn.execute(delete(ReconcileRunRow).where(ReconcileRunRow.table_name == name))
        conn.execute(insert(ReconcileRunRow), [{
            "table_name": name, "job_id": JOB, "ran_at": newest - timedelta(seconds=30), "since": None,
            "until": newest - timedelta(seconds=30), "ok": True, "summary": "{}",
        }])  # fmt: skip
    out = work / "since-last.json"
    args = ["--catalog", catalog.name, "--uri", uri, "--output", "json", "reconcile", name, "--job", JOB,
            "--since", "last", "--format", "json", "--out", str(out)]  # fmt: skip
    began = time.perf_counter()
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    elapsed = time.perf_counter() - began
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert len(report["checkpoints"]) == 1, len(report["checkpoints"])
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoints", type=int, default=10_000)
    parser.add_argument("--files-per-checkpoint", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    backends = ["sqlite"] + (["postgres"] if postgres_available() else [])
    results = []
    for backend in backends:
        work = Path(tempfile.mkdtemp(prefix="icecommit-reconcile-"))
        # PostgreSQL: a database of the run's own, dropped at the end
        with soak_database(PG_URI) if backend == "postgres" else nullcontext() as pg_uri:
            try:
                catalog, name = build(backend, args.checkpoints, args.files_per_checkpoint, work, pg_uri)
                uri = str(catalog.engine.url.render_as_string(hide_password=False))
                full, scheduled = [], []
                for _ in range(args.repeats):
                    began = time.perf_counter()
                    report = ic.reconcile(catalog, name, job_id=JOB)
                    full.append(time.perf_counter() - began)
                    assert report.ok, report.problems[:3]
                    assert len(report.checkpoints) == args.checkpoints
                    scheduled.append(since_last(catalog, uri, name, args.checkpoints, work))
                results.append((backend, full, scheduled))
                print(f"{backend}: full median {statistics.median(full):.2f}s, "
                      f"--since last median {statistics.median(scheduled):.2f}s", flush=True)  # fmt: skip
                catalog.engine.dispose()
                dispose_state_engines()
            finally:
                shutil.rmtree(work, ignore_errors=True)
    files = args.checkpoints * args.files_per_checkpoint
    print(
        f"Machine: {platform.node()}, {psutil.cpu_count()} cores, {psutil.virtual_memory().total / 2**30:.0f} GiB; "
        f"run {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; {args.checkpoints:,} checkpoints, {files:,} data files"
    )
    print("| catalog + metrics database | run | median s | min s | max s | runs |")
    print("|---|---|---:|---:|---:|---:|")
    for backend, full, scheduled in results:
        for label, times in (("full (`ic.reconcile`)", full), ("`icecommit reconcile --since last`", scheduled)):
            print(f"| {backend} | {label} | {statistics.median(times):.2f} | {min(times):.2f} | {max(times):.2f} "
                  f"| {len(times)} |")  # fmt: skip


if __name__ == "__main__":
    main()
