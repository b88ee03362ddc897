"""Small files: how many, and how big, each distribution mode writes for a skewed checkpoint.

One checkpoint of 400,000 rows over 24 hourly partitions x 5 event types, one partition
holding half of the rows, read from 8 input partitions, into a table partitioned by
``hour(ts), event`` with a target file size of 256 KiB (small, so that it runs on 2 cores).
Each mode (``none``, ``hash``, ``bin-pack``) writes the same cached frame as checkpoints
0..N of its own table; checkpoint 0 of ``bin-pack`` packs with the default shuffle ratio
(cold), the later ones with the ratio the earlier ones showed (kept in icecommit's state).

Reported per mode: files per checkpoint against the ideal (the sum over partitions of
ceil(partition bytes / target), a partition's bytes being the sizes of the files written
for it), the median and p10 file size as a fraction of the target, the median size of the
files of partitions larger than the target, and the wall time of ``ic.write``; medians over
the warm checkpoints.

The streaming part calls the streaming sink's function as ``foreachBatch`` does, over 20
micro-batches of 20,000 of the same rows, with the maintenance policy running after every
5th batch (compacting partitions that hold more than 4 small files), then compacts each
table once more with ``ic.compact``.

    .venv/bin/python -m bench.distribution [--rows 400000] [--checkpoints 4] [--batches 20]
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import shutil
import statistics
import tempfile
import time
from collections import defaultdict
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

import psutil
import pyarrow as pa
import pyspark
from pyiceberg.manifest import ManifestEntryStatus
from pyiceberg.table import Table

import icecommit as ic
from icecommit.core.ancestry import find_checkpoint
from icecommit.writers import local_session

OUT = Path(__file__).resolve().parent / "out"
MODES = ("none", "hash", "bin-pack")
TARGET = 256 * 1024
SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("ts", pa.timestamp("us", tz="UTC")),
        pa.field("event", pa.string()),
        pa.field("user_id", pa.int64()),
        pa.field("url", pa.string()),
    ]
)


@dataclass(frozen=True)
class Checkpoint:
    mode: str
    checkpoint: int
    seconds: float
    files: int
    ideal: int
    median_fraction: float
    p10_fraction: float
    large_median_fraction: float | None


def _source(spark: object, rows: int) -> object:
    """Half of the rows in partition (00:00, click); the rest spread over 24 x 5."""
    return spark.range(0, rows, numPartitions=8).selectExpr(  # type: ignore[attr-defined]
        "id",
        "CASE WHEN id % 2 = 0 THEN timestamp_micros(1777593600000000 + (id % 3600) * 1000000) "
        "ELSE timestamp_micros(1777593600000000 + ((id DIV 2) % 24) * 3600000000 + (id % 3600) * 1000000) END AS ts",
        "CASE WHEN id % 2 = 0 THEN 'click' "
        "ELSE element_at(array('click','view','scroll','buy','share'), CAST((id DIV 48) % 5 + 1 AS INT)) END AS event",
        "(id * 7919) % 100000 AS user_id",
        "concat('https://example.com/', sha2(CAST(id % 50000 AS STRING), 256)) AS url",
    )


def _added(table: Table, snapshot_id: int) -> list[tuple[tuple[object, ...], int]]:
    """(partition, size) of the data files one snapshot added."""
    snapshot = table.metadata.snapshot_by_id(snapshot_id)
    assert snapshot is not None
    files = []
    for manifest in snapshot.manifests(table.io):
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
            if entry.snapshot_id == snapshot_id and entry.status == ManifestEntryStatus.ADDED:
                files.append((tuple(entry.data_file.partition), entry.data_file.file_size_in_bytes))
    return files


def _measure(mode: str, checkpoint: int, seconds: float, files: list[tuple[tuple[object, ...], int]]) -> Checkpoint:
    per_partition: dict[tuple[object, ...], list[int]] = defaultdict(list)
    for partition, size in files:
        per_partition[partition].append(size)
    ideal = sum(math.ceil(sum(sizes) / TARGET) for sizes in per_partition.values())
    sizes = sorted(size for _, size in files)
    large = sorted(s for sizes_ in per_partition.values() if sum(sizes_) > TARGET for s in sizes_)
    return Checkpoint(
        mode=mode,
        checkpoint=checkpoint,
        seconds=seconds,
        files=len(files),
        ideal=ideal,
        median_fraction=statistics.median(sizes) / TARGET,
        p10_fraction=sizes[max(0, len(sizes) // 10 - 1)] / TARGET if len(sizes) >= 10 else sizes[0] / TARGET,
        large_median_fraction=statistics.median(large) / TARGET if large else None,
    )


def run(rows: int, checkpoints: int) -> list[Checkpoint]:
    work = Path(tempfile.mkdtemp(prefix="icecommit-distribution-"))
    spark = local_session("bench-distribution", master="local[2]")
    try:
        catalog = ic.connect(uri=f"sqlite:///{work / 'catalog.db'}", warehouse=str(work / "wh"))
        source = _source(spark, rows).cache()  # type: ignore[attr-defined]
        assert source.count() == rows
        results = []
        for mode in MODES:
            name = f"bench.{mode.replace('-', '_')}"
            ic.create_table(
                catalog, name, SCHEMA, partition_by=["hour(ts)", "event"],
                properties={"write.target-file-size-bytes": str(TARGET), "write.distribution-mode": mode},
            )  # fmt: skip
            for checkpoint in range(checkpoints):
                began = time.perf_counter()
                result = ic.write(source, name, catalog=catalog, job_id="bench", checkpoint_id=checkpoint)
                seconds = time.perf_counter() - began
                assert result.records == rows and result.snapshot_id is not None
                measured = _measure(mode, checkpoint, seconds, _added(catalog.load_table(name), result.snapshot_id))
                results.append(measured)
                print(json.dumps(asdict(measured)), flush=True)
        return results
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)


@dataclass(frozen=True)
class Stream:
    mode: str
    batches: int
    files_per_batch: float
    ideal_per_batch: float
    seconds_per_batch: float
    p95_seconds_per_batch: float
    maintenance_runs: int
    files_after: int
    files_after_compaction: int
    ideal_after_compaction: int


#: The policy the streaming sink runs: partitions with more than 4 small files compacted
#: after every 5th batch (every partition of these tables takes rows from every batch, and
#: no completeness is published, so complete partitions are not waited for).
POLICY = ic.MaintenancePolicy(compact_min_files=4, only_complete=False, every=5)


def run_stream(rows: int, batches: int) -> list[Stream]:
    """The streaming sink's function over ``batches`` micro-batches of the skewed rows
    (called as Structured Streaming's ``foreachBatch`` calls it) with :data:`POLICY`, then
    ``ic.compact``."""
    work = Path(tempfile.mkdtemp(prefix="icecommit-distribution-stream-"))
    spark = local_session("bench-distribution-stream", master="local[2]")
    try:
        catalog = ic.connect(uri=f"sqlite:///{work / 'catalog.db'}", warehouse=str(work / "wh"))
        source = _source(spark, rows * batches).cache()  # type: ignore[attr-defined]
        assert source.count() == rows * batches
        streams = []
        for mode in MODES:
            name = f"stream.{mode.replace('-', '_')}"
            ic.create_table(
                catalog, name, SCHEMA, partition_by=["hour(ts)", "event"],
                properties={"write.target-file-size-bytes": str(TARGET), "write.distribution-mode": mode},
            )  # fmt: skip
            job = f"stream-{mode}"
            sink = ic.streaming_sink(name, catalog=catalog, job_id=job, maintenance=POLICY)
            counts, ideals, seconds = [], [], []
            for batch in range(batches):
                frame = source.where(f"pmod(xxhash64(id), {batches}) = {batch}").repartition(8)
                began = time.perf_counter()
                sink(frame, batch)
                seconds.append(time.perf_counter() - began)
                table = catalog.load_table(name)
                own = find_checkpoint(table.metadata, job, batch)  # the head may be maintenance's
                assert own is not None
                measured = _measure(mode, batch, seconds[-1], _added(table, own.snapshot_id))
                counts.append(measured.files)
                ideals.append(measured.ideal)
            table = catalog.load_table(name)
            before = len(table.inspect.files())
            ic.compact(catalog, name)
            files = catalog.load_table(name).inspect.files().to_pylist()
            per_partition: dict[tuple[object, ...], int] = defaultdict(int)
            for f in files:
                per_partition[tuple(sorted(f["partition"].items()))] += f["file_size_in_bytes"]
            stream = Stream(
                mode=mode,
                batches=batches,
                files_per_batch=statistics.median(counts),
                ideal_per_batch=statistics.median(ideals),
                seconds_per_batch=statistics.median(seconds[1:]),
                p95_seconds_per_batch=statistics.quantiles(seconds[1:], n=20)[-1],
                maintenance_runs=sum(
                    1 for s in table.snapshots() if s.summary and s.summary.operation.value == "replace"
                ),
                files_after=before,
                files_after_compaction=len(files),
                ideal_after_compaction=sum(math.ceil(b / TARGET) for b in per_partition.values()),
            )
            streams.append(stream)
            print(json.dumps(asdict(stream)), flush=True)
        return streams
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)


def _replaces(table: Table) -> int:
    return sum(1 for s in table.snapshots() if s.summary is not None and s.summary.operation.value == "replace")


def summarise_stream(streams: list[Stream]) -> str:
    lines = [
        "| mode | batches | files per batch (median) | ideal per batch | s per batch (median, p95) "
        "| compactions by the policy | files after | after ic.compact | ideal after |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in streams:
        lines.append(
            f"| {s.mode} | {s.batches} | {s.files_per_batch:.0f} | {s.ideal_per_batch:.0f} "
            f"| {s.seconds_per_batch:.2f}, {s.p95_seconds_per_batch:.2f} | {s.maintenance_runs} | {s.files_after} "
            f"| {s.files_after_compaction} | {s.ideal_after_compaction} |"
        )
    return "\n".join(lines)


def summarise(results: list[Checkpoint]) -> str:
    lines = [
        "| mode | checkpoints | files | ideal | files / ideal | median size / target | p10 / target "
        "| large partitions' median / target | seconds (median) | time / none |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    none_time = statistics.median(r.seconds for r in results if r.mode == "none" and r.checkpoint > 0)
    for mode in MODES:
        for label, chosen in (("0 (cold)", lambda r: r.checkpoint == 0), ("1+ (warm)", lambda r: r.checkpoint > 0)):
            picked = [r for r in results if r.mode == mode and chosen(r)]
            if not picked:
                continue
            files = statistics.median(r.files for r in picked)
            ideal = statistics.median(r.ideal for r in picked)
            large = [r.large_median_fraction for r in picked if r.large_median_fraction is not None]
            seconds = statistics.median(r.seconds for r in picked)
            lines.append(
                f"| {mode} | {label} | {files:.0f} | {ideal:.0f} | {files / ideal:.2f} "
                f"| {statistics.median(r.median_fraction for r in picked):.2f} "
                f"| {statistics.median(r.p10_fraction for r in picked):.2f} "
                f"| {statistics.median(large):.2f} | {seconds:.2f} | {seconds / none_time:.2f} |"
                if large
                else f"| {mode} | {label} | {files:.0f} | {ideal:.0f} | {files / ideal:.2f} | | | | {seconds:.2f} | |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=400_000)
    parser.add_argument("--checkpoints", type=int, default=4)
    parser.add_argument("--batches", type=int, default=20, help="micro-batches of the streaming part (0: none)")
    args = parser.parse_args()
    results = run(args.rows, args.checkpoints) if args.checkpoints else []
    streams = run_stream(args.rows // max(1, args.batches), args.batches) if args.batches else []
    OUT.mkdir(exist_ok=True)
    (OUT / "distribution.json").write_text(json.dumps([asdict(r) for r in results], indent=2))
    print(
        f"Machine: {platform.node()}, {psutil.cpu_count()} cores, "
        f"{psutil.virtual_memory().total / 2**30:.0f} GiB, Python {platform.python_version()}, "
        f"pyspark {pyspark.__version__}; run {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC"
    )
    if results:
        print(summarise(results))
    if streams:
        print()
        print(summarise_stream(streams))


if __name__ == "__main__":
    main()
