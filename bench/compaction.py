"""Compaction of many small files: ``ic.compact`` against Spark's ``rewrite_data_files``.

A table partitioned by ``hour(ts)`` (24 partitions) gets ``--files`` data files of about
100 KB each (10,000 by default: about 1 GB, 33 million rows), written in this process by
icecommit's task writer and appended in commits of about 1,000 files (set-up, not timed).
Before anything is compacted the table is registered again in the same catalog under
another name per approach, on the same metadata file: identical copies that share the data
files. Each approach then compacts its own copy to the same target file size
(``--target-mb``, also the table's ``write.target-file-size-bytes``) and codec (zstd, set
as ``write.parquet.compression-codec``: without it Java falls back to gzip, pyiceberg not):

- ``icecommit``: ``ic.compact(catalog, table)``, in this process;
- ``icecommit-spark``: ``ic.compact(..., spark=session)`` on a local[2] session of this
  process's pyspark, where ``compact`` takes a ``spark`` argument (session start untimed);
- ``spark-rewrite``: Apache Iceberg's ``CALL system.rewrite_data_files`` (Spark 3.5.9,
  iceberg-spark-runtime 1.10.2, local[2]) through Java's JdbcCatalog on the same SQLite
  catalog, where the environment of ``scripts/java_iceberg/setup.sh`` is named by
  ``ICECOMMIT_JAVA_ICEBERG`` (its ``DIR/jdbc`` holds the SQLite JDBC driver from Maven
  Central; the procedure's call is timed, not the JVM's start).

Both Spark approaches run cold (their session's first job); no warm-up round.

Reported per approach: wall time, files before and after, whether every partition ends
with at most ceil(its input bytes / target) + 1 files, rows/s and MB/s (input), output
bytes and replace snapshots. Afterwards every copy must hold the same rows (count and sum
of ids, per partition record counts) with a ``replace`` snapshot at its head.

    .venv/bin/python -m bench.compaction [--files 10000] [--target-mb 16] [--seed 20261123]
    .venv/bin/python -m bench.compaction --files 480        # a quick run
"""

from __future__ import annotations

import argparse
import inspect
import json
import math
import platform
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import pyarrow as pa
import pyarrow.compute as pc
import pyspark
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.manifest import DataFile
from pyiceberg.table import Table

import icecommit as ic
from icecommit.maintenance.compaction import compact
from icecommit.state.manifests import to_data_file
from icecommit.writers import local_session
from tests import java_iceberg
from tests.helpers import write_arrow

OUT = Path(__file__).resolve().parent / "out"
PARTITIONS = 24
ROWS_PER_FILE = 3_300  # about 100 KB of zstd Parquet with the columns below
FILES_PER_COMMIT = 1_000
CATALOG = "bench"
APPROACHES = ("icecommit", "icecommit-spark", "spark-rewrite")
T0_MICROS = 1_777_593_600_000_000  # 2026-05-01 00:00 UTC
HOUR = 3_600_000_000  # microseconds
EVENTS = pa.array(["click", "view", "scroll", "buy", "share"])
SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("ts", pa.timestamp("us", tz="UTC")),
        pa.field("event", pa.string()),
        pa.field("user_id", pa.int64()),
        pa.field("url", pa.string()),
        pa.field("score", pa.float64()),
    ]
)


@dataclass(frozen=True)
class Run:
    approach: str
    seconds: float
    files_before: int
    files_after: int
    bound: int
    partitions_over_bound: int
    rows: int
    input_bytes: int
    output_bytes: int
    replace_snapshots: int

    @property
    def bound_holds(self) -> bool:
        return self.partitions_over_bound == 0


def _block(rng: np.random.Generator, first_id: int) -> pa.Table:
    """One file's worth of rows in each of the 24 hourly partitions."""
    n = ROWS_PER_FILE * PARTITIONS
    hours = np.repeat(np.arange(PARTITIONS, dtype=np.int64), ROWS_PER_FILE)
    pages = pc.cast(pa.array(rng.integers(0, 2**32, n)), pa.string())
    return pa.table(
        {
            "id": pa.array(np.arange(first_id, first_id + n, dtype=np.int64)),
            "ts": pa.array(T0_MICROS + hours * HOUR + rng.integers(0, HOUR, n), pa.timestamp("us", tz="UTC")),
            "event": EVENTS.take(pa.array(rng.integers(0, len(EVENTS), n))),
            "user_id": pa.array(rng.integers(0, 1_000_000, n)),
            "url": pc.binary_join_element_wise("https://example.com/p/", pages, ""),
            "score": pa.array(rng.random(n)),
        },
        schema=SCHEMA,
    )


def build(catalog: SqlCatalog, name: str, files: int, target: int, seed: int) -> tuple[int, float]:
    """The small-file table: ``files`` rounded up to a multiple of 24, appended in commits of
    about 1,000 files (plain fast appends: a checkpoint's state rows would cost more than the
    files). Returns (files, seconds)."""
    began = time.perf_counter()
    ic.create_table(
        catalog, name, SCHEMA, partition_by=["hour(ts)"],
        properties={"write.target-file-size-bytes": str(target), "write.parquet.compression-codec": "zstd"},
    )  # fmt: skip
    rng = np.random.default_rng(seed)
    blocks = math.ceil(files / PARTITIONS)
    per_commit = max(1, FILES_PER_COMMIT // PARTITIONS)
    for commit, start in enumerate(range(0, blocks, per_commit)):
        table = catalog.load_table(name)
        written: list[DataFile] = []
        for task in range(start, min(blocks, start + per_commit)):
            rows = _block(rng, task * ROWS_PER_FILE * PARTITIONS)
            result = write_arrow(table, rows, job_id="bench-setup", checkpoint_id=commit, task_id=task)
            written.extend(to_data_file(r, table.metadata.format_version) for r in result.data_files)
        with table.transaction() as tx, tx.update_snapshot().fast_append() as append:
            for data_file in written:
                append.append_data_file(data_file)
        print(f"set-up: commit {commit}: {min(blocks, start + per_commit) * PARTITIONS} files", flush=True)
    return blocks * PARTITIONS, time.perf_counter() - began


def _files(table: Table) -> list[dict[str, Any]]:
    return [
        {"partition": json.dumps(f["partition"], default=str, sort_keys=True), "bytes": f["file_size_in_bytes"],
         "records": f["record_count"]}
        for f in table.inspect.files().to_pylist()
    ]  # fmt: skip


def _contents(table: Table) -> tuple[int, int, Counter[str]]:
    """(rows, sum of ids, records per partition): what must not change."""
    ids = table.scan(selected_fields=("id",)).to_arrow().column("id")
    per_partition: Counter[str] = Counter()
    for f in _files(table):
        per_partition[f["partition"]] += f["records"]
    return len(ids), int(pc.sum(ids).as_py() or 0), per_partition


def measure(approach: str, seconds: float, before: list[dict[str, Any]], after: Table, target: int) -> Run:
    input_bytes: Counter[str] = Counter()
    for f in before:
        input_bytes[f["partition"]] += f["bytes"]
    bound = {p: math.ceil(b / target) + 1 for p, b in input_bytes.items()}
    files_after = _files(after)
    count = Counter(f["partition"] for f in files_after)
    head = after.current_snapshot()
    assert head is not None and head.summary is not None
    assert head.summary.operation.value == "replace", (approach, head.summary.operation)
    replaces = sum(1 for s in after.snapshots() if s.summary is not None and s.summary.operation.value == "replace")
    return Run(
        approach=approach,
        seconds=seconds,
        files_before=len(before),
        files_after=len(files_after),
        bound=sum(bound.values()),
        partitions_over_bound=sum(1 for p, n in count.items() if n > bound.get(p, 1)),
        rows=sum(f["records"] for f in before),
        input_bytes=sum(input_bytes.values()),
        output_bytes=sum(f["bytes"] for f in files_after),
        replace_snapshots=replaces,
    )


def spark_rewrite(
    java: java_iceberg.JavaIceberg, work: Path, warehouse: str, name: str, target: int
) -> tuple[float, dict[str, Any]]:
    """Iceberg's own procedure in the Java environment; (seconds of the call, its result)."""
    out = java.run(
        "--driver-memory", "4g", "rewrite", "--catalog-name", CATALOG, "--catalog-db", str(work / "catalog.db"),
        "--warehouse", warehouse, "--table", name, "--target-file-size", str(target),
        sqlite_jdbc=True, timeout_s=3_600,
    )  # fmt: skip
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return float(result["seconds"]), result


def run(files: int, target: int, seed: int, work: Path) -> tuple[list[Run], dict[str, Any]]:
    warehouse = (work / "wh").as_uri()
    (work / "wh").mkdir(parents=True)
    catalog = SqlCatalog(CATALOG, uri=f"sqlite:///{work / 'catalog.db'}", warehouse=warehouse)
    _, setup_seconds = build(catalog, "bench.icecommit", files, target, seed)
    source = catalog.load_table("bench.icecommit")
    before = _files(source)
    expected = _contents(source)
    print(f"set-up: {len(before)} files, {sum(f['bytes'] for f in before) / 1e6:,.0f} MB in {setup_seconds:.0f} s")

    approaches: dict[str, Callable[[str], float]] = {}

    def local(name: str) -> float:
        began = time.perf_counter()
        done = compact(catalog, name)
        seconds = time.perf_counter() - began
        assert (done.committed, done.aborted) == (len(done.groups), 0), done
        return seconds

    approaches["icecommit"] = local
    notes: dict[str, Any] = {"setup_seconds": setup_seconds}
    if "spark" in inspect.signature(compact).parameters:

        def on_spark(name: str) -> float:
            session = local_session("bench-compaction", master="local[2]", config={"spark.driver.memory": "4g"})
            try:
                on_session: dict[str, Any] = {"spark": session}  # a keyword older trees' compact lacks
                began = time.perf_counter()
                done = compact(catalog, name, **on_session)
                seconds = time.perf_counter() - began
            finally:
                session.stop()  # its JVM gone before the next approach runs
            assert (done.committed, done.aborted) == (len(done.groups), 0), done
            return seconds

        approaches["icecommit-spark"] = on_spark
    else:
        notes["icecommit-spark"] = "skipped: ic.compact takes no spark= argument in this tree"
    java = java_iceberg.find()
    if isinstance(java, str):
        notes["spark-rewrite"] = f"skipped: {java}"
    elif java.sqlite_jdbc is None:
        notes["spark-rewrite"] = (
            f"skipped: no SQLite JDBC driver in {java.root / 'jdbc'} (scripts/java_iceberg/setup.sh DIR)"
        )
    else:
        found = java

        def rewrite(name: str) -> float:
            catalog.engine.dispose()  # no pooled SQLite connection of ours beside Java's commit
            seconds, result = spark_rewrite(found, work, warehouse, name, target)
            notes["spark-rewrite-result"] = result
            return seconds

        approaches["spark-rewrite"] = rewrite
    for approach in approaches:
        if approach != "icecommit":
            catalog.register_table(f"bench.{approach.replace('-', '_')}", source.metadata_location)

    runs = []
    for approach, action in approaches.items():
        name = f"bench.{approach.replace('-', '_')}"
        print(f"{approach}: compacting {name}", flush=True)
        try:
            seconds = action(name)
        except Exception as e:  # one approach failing leaves the others to measure
            notes[approach] = f"failed: {type(e).__name__}: {str(e)[:2000]}"
            continue
        after = catalog.load_table(name)
        assert _contents(after) == expected, f"{approach}: the rows changed"
        measured = measure(approach, seconds, before, after, target)
        runs.append(measured)
        print(json.dumps({**asdict(measured), "bound_holds": measured.bound_holds}), flush=True)
    for approach, note in notes.items():
        if approach in APPROACHES:
            print(f"{approach}: {note}")
    return runs, notes


def summarise(runs: list[Run]) -> str:
    lines = [
        "| approach | s | files before | files after | bound (sum over partitions) | within bound | rows/s "
        "| MB/s in | output MB | replace snapshots |",
        "|---|---:|---:|---:|---:|---|---:|---:|---:|---:|",
    ]
    for r in runs:
        lines.append(
            f"| {r.approach} | {r.seconds:.1f} | {r.files_before:,} | {r.files_after:,} | {r.bound:,} "
            f"| {'yes' if r.bound_holds else f'no ({r.partitions_over_bound} partitions over)'} "
            f"| {r.rows / r.seconds:,.0f} | {r.input_bytes / 1e6 / r.seconds:,.1f} | {r.output_bytes / 1e6:,.1f} "
            f"| {r.replace_snapshots} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=10_000, help="small files to compact (rounded up to 24s)")
    parser.add_argument("--target-mb", type=float, default=16.0, help="target file size in MiB")
    parser.add_argument("--seed", type=int, default=20261123)
    parser.add_argument("--work", type=Path, help="work folder (default: a temporary one, removed at the end)")
    args = parser.parse_args()
    if args.files < 5 * PARTITIONS:
        parser.error(f"--files must be at least {5 * PARTITIONS}: fewer than 5 files a partition are left alone")
    target = int(args.target_mb * 1024 * 1024)
    print(f"seed: {args.seed}; files: {args.files}; target: {target} bytes", flush=True)
    started = time.perf_counter()
    work = args.work or Path(tempfile.mkdtemp(prefix="icecommit-bench-compaction-"))
    try:
        runs, notes = run(args.files, target, args.seed, work)
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    if not runs:
        raise SystemExit("no approach finished: see above")
    OUT.mkdir(exist_ok=True)
    (OUT / "compaction.json").write_text(
        json.dumps({"seed": args.seed, "target": target, "runs": [asdict(r) for r in runs], "notes": notes}, indent=2)
    )
    print(
        f"Machine: {platform.node()}, {psutil.cpu_count()} cores, "
        f"{psutil.virtual_memory().total / 2**30:.0f} GiB, Python {platform.python_version()}, "
        f"pyspark {pyspark.__version__}; run {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; "
        f"seed {args.seed}; {runs[0].files_before:,} files over {PARTITIONS} partitions, "
        f"target {target / 2**20:g} MiB; whole run {time.perf_counter() - started:.0f} s"
    )
    print(summarise(runs))


if __name__ == "__main__":
    main()
