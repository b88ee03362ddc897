"""icecommit against Spark's own Iceberg writer, in one SparkSession (PySpark 3.5, local[2]).

One cached DataFrame (the demo clickstream, 10 columns; built as ``bench.write_throughput``
builds it) is written, in the same run and the same session, into tables partitioned by
``day(ts), event`` with the same codec (zstd) and target file size:

- ``spark-iceberg``: Apache Iceberg's Spark writer, ``df.writeTo("j.db.t").append()`` through
  Iceberg's ``SparkCatalog`` (a Hadoop catalog on a local warehouse), the table's
  ``write.distribution-mode`` set to the mode measured;
- ``icecommit``: ``ic.write(df, table, catalog=..., distribution=mode)`` into a SQLite
  ``SqlCatalog`` table;
- ``spark-parquet``: ``df.write.parquet`` (no table, no commit): Spark's floor;
- ``pyiceberg-append``: ``table.append(df.toArrow())`` into a SQLite ``SqlCatalog`` table,
  at sizes up to ``--pyiceberg-max-rows`` only (it collects the whole frame to the driver).
- ``jvm-parquet`` (a prototype, ``--prototype``): no Python in the tasks. Spark's own JVM
  Parquet writer writes the files, with Iceberg field ids (``parquet.field.id`` column
  metadata), timestamps as micros, the partition values computed in the JVM as extra
  columns (``partitionBy``, so the table's own columns stay in the files with their
  statistics) and ``maxRecordsPerFile`` set from the bytes per row of a sample; then the
  driver lists the write's own folder, reads each file's footer for the column statistics
  and commits them through ``GlobalCommitter`` (prepare, commit) as ``ic.write`` does. It
  answers what the hand-off costs; it does not keep the invariants (it lists a folder to
  learn what to commit, and counts no per-minute windows), see ``BENCHMARKS.md``.

Both distribution modes are measured for the two table writers: ``hash`` (one shuffle on
the partition values; the default of both for a partitioned table) and ``none`` (Iceberg's
Spark writer then still sorts each task's rows by partition, unless fanout is enabled;
icecommit's writer splits them by partition without sorting).

Each approach warms up once per size (icecommit before the prototype, whose files are rolled
by row counts derived from icecommit's bytes per row) on 200,000 rows (untimed), then runs ``--repeats``
times, the order rotated between rounds; each timed run writes a fresh table (or folder),
from the call to a committed snapshot (or the end of Spark's job). After each run the
output is read back (pyiceberg, or pyarrow for the folder): every row must be there once
(row count and distinct ``event_id`` count), and the data files are counted and measured;
then the output is deleted. Peak resident memory of the driver's Python process, the JVM
and the Python workers is sampled every 100 ms (``write_throughput.PeakMemory``); in one
session the JVM's heap and idle Python workers carry over from one approach to the next,
so each run also records the memory at its start.

Then the fixed cost of a small write: ``--small-rows`` (10,000) rows of the same cached
frame, ``ic.write`` (one checkpoint each, same table) against ``df.write.parquet`` and
Iceberg's ``writeTo().append()``, medians of ``--small-repeats`` (7) after a warm-up, with
icecommit's catalog and state on SQLite and on PostgreSQL (a database of the run's own at
``ICECOMMIT_TEST_PG_URI``'s server, dropped at the end; skipped when it does not answer).

The interpreter must be a pyspark 3.5 environment with icecommit's dependencies (CI's
``.venv-spark35``: ``scripts/setup.sh .venv-spark35 "pyspark>=3.5,<3.6" ...``), because
Iceberg's Spark runtime jar is built for Spark 3.5; ``scripts/java_iceberg/setup.sh DIR``
builds the jars (``DIR/jars``), named by ``--java DIR`` or ``ICECOMMIT_JAVA_ICEBERG``:

    PYTHONPATH=. .venv-spark35/bin/python -m bench.native_write --java /tmp/java-iceberg
    PYTHONPATH=. .venv-spark35/bin/python -m bench.native_write --java /tmp/java-iceberg --quick
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

import psutil
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pyspark
from pyiceberg.catalog import Catalog
from pyiceberg.table import StaticTable, Table
from pyspark.sql import DataFrame, SparkSession

import icecommit as ic
from bench.write_throughput import PeakMemory, spark_parquet
from icecommit.demo.clickstream import PARTITION_BY, SCHEMA, clickstream
from icecommit.writers import local_session
from tests import java_iceberg

OUT = Path(__file__).resolve().parent / "out"
MODES = ("hash", "none")
#: (approach, distribution mode); the mode is "" where there is no table
APPROACHES = (
    ("spark-iceberg", "hash"),
    ("icecommit", "hash"),
    ("spark-iceberg", "none"),
    ("icecommit", "none"),
    ("spark-parquet", ""),
    ("pyiceberg-append", ""),
    ("jvm-parquet", "hash"),
    ("jvm-parquet", "none"),
)
WARMUP_ROWS = 200_000
SPARK_CATALOG = "j"
MIB = 1024 * 1024
#: Spark SQL types of the demo schema's Arrow types
SQL_TYPES = {
    pa.int64(): "BIGINT",
    pa.float64(): "DOUBLE",
    pa.string(): "STRING",
    pa.timestamp("us", tz="UTC"): "TIMESTAMP",
}


@dataclass(frozen=True)
class Run:
    approach: str
    mode: str
    rows: int
    seconds: float
    rows_read: int
    distinct_ids: int
    files: int
    median_file_bytes: float
    driver_peak_mib: float
    jvm_peak_mib: float
    workers_peak_mib: float
    jvm_start_mib: float
    workers_start_mib: float


@dataclass(frozen=True)
class SmallRun:
    backend: str
    approach: str
    rows: int
    seconds: float


@dataclass(frozen=True)
class Output:
    """What a write left behind: its row and id counts, its data files' sizes."""

    rows: int
    distinct_ids: int
    file_sizes: list[int]


class Bench:
    """The session, the catalogs and a fresh table (or folder) per write."""

    def __init__(self, spark: SparkSession, work: Path, target_bytes: int) -> None:
        self.spark = spark
        self.work = work
        self.target_bytes = target_bytes
        self.catalog = ic.connect(uri=f"sqlite:///{work / 'catalog.db'}", warehouse=str(work / "warehouse"))
        self.serial = 0
        #: Parquet bytes per row of icecommit's files of the frame (set by its first write)
        self.bytes_per_row: float | None = None

    def _name(self, approach: str) -> str:
        self.serial += 1
        return f"{approach.replace('-', '_')}_{self.serial}"

    def properties(self, mode: str = "") -> dict[str, str]:
        props = {"write.target-file-size-bytes": str(self.target_bytes), "write.parquet.compression-codec": "zstd"}
        if mode:
            props["write.distribution-mode"] = mode
        return props

    def spark_table(self, mode: str) -> str:
        """A new Iceberg table in Spark's catalog, with the demo schema and spec."""
        name = f"{SPARK_CATALOG}.db.{self._name('spark')}"
        columns = ", ".join(f"{f.name} {SQL_TYPES[f.type]}{'' if f.nullable else ' NOT NULL'}" for f in SCHEMA)
        props = ", ".join(f"'{k}' = '{v}'" for k, v in {"format-version": "2", **self.properties(mode)}.items())
        self.spark.sql(
            f"CREATE TABLE {name} ({columns}) USING iceberg PARTITIONED BY (days(ts), event) TBLPROPERTIES ({props})"
        )
        return name

    def spark_location(self, name: str) -> Path:
        return self.work / "spark-warehouse" / Path(*name.split(".")[1:])

    def ic_table(self, catalog: Catalog | None = None) -> str:
        name = f"bench.{self._name('ic')}"
        ic.create_table(catalog or self.catalog, name, SCHEMA, list(PARTITION_BY), properties=self.properties())
        return name

    def prepare(self, approach: str, mode: str, df: DataFrame) -> tuple[Callable[[], None], Callable[[], Output]]:
        """(the write to time, then what reads its output back and deletes it)."""
        if approach == "spark-iceberg":
            name = self.spark_table(mode)
            location = self.spark_location(name)

            def spark_iceberg() -> None:
                df.writeTo(name).append()

            def read_spark_table() -> Output:
                output = _read_table(StaticTable.from_metadata(str(location)))
                self.spark.sql(f"DROP TABLE {name}")
                shutil.rmtree(location, ignore_errors=True)
                return output

            return spark_iceberg, read_spark_table
        if approach in ("icecommit", "pyiceberg-append"):
            name = self.ic_table()

            def icecommit_write() -> None:
                result = ic.write(df, name, catalog=self.catalog, job_id="bench", checkpoint_id=1, distribution=mode)
                assert result.committed

            def read_ic_table() -> Output:
                table = self.catalog.load_table(name)
                output = _read_table(table)
                self.catalog.drop_table(name)
                shutil.rmtree(table.location().removeprefix("file://"), ignore_errors=True)
                return output

            def pyiceberg_append() -> None:
                self.catalog.load_table(name).append(_to_arrow(df).cast(SCHEMA))

            return (icecommit_write if approach == "icecommit" else pyiceberg_append), read_ic_table
        if approach == "jvm-parquet":
            name = self.ic_table()
            self.serial += 1
            serial = self.serial

            def jvm_write() -> None:
                assert self.bytes_per_row, "icecommit's warm-up write measures the bytes per row first"
                jvm_parquet(self.catalog, name, df, mode, self.target_bytes, self.bytes_per_row, serial)

            def read_jvm_table() -> Output:
                table = self.catalog.load_table(name)
                output = _read_table(table)
                self.catalog.drop_table(name)
                shutil.rmtree(table.location().removeprefix("file://"), ignore_errors=True)
                return output

            return jvm_write, read_jvm_table
        if approach == "spark-parquet":
            folder = self.work / self._name("parquet")

            def read_folder() -> Output:
                files = sorted(folder.glob("*.parquet"))
                ids = ds.dataset([str(f) for f in files], format="parquet").to_table(columns=["event_id"])
                output = Output(ids.num_rows, _distinct(ids), [f.stat().st_size for f in files])
                shutil.rmtree(folder)
                return output

            return spark_parquet(df, folder), read_folder
        raise ValueError(approach)


def jvm_parquet(
    catalog: Catalog, name: str, df: DataFrame, mode: str, target_bytes: int, bytes_per_row: float, serial: int
) -> None:
    """The prototype: Spark's JVM Parquet writer, then footers and a commit on the driver."""
    from pyiceberg.io.pyarrow import (
        compute_statistics_plan,
        data_file_statistics_from_parquet_metadata,
        parquet_path_to_id_mapping,
    )
    from pyspark.sql import functions as F

    from icecommit.committer import GlobalCommitter
    from icecommit.core.datafiles import DataFileRecord, WriteResult

    table = catalog.load_table(name)
    schema = table.schema()
    columns = [F.col(f.name).alias(f.name, metadata={"parquet.field.id": f.field_id}) for f in schema.fields]
    day = F.floor(F.unix_micros(F.col("ts")) / F.lit(86_400_000_000)).cast("int")
    out = df.select(*columns, day.alias("__p0"), F.col("event").alias("__p1"))
    if mode == "hash":
        out = out.repartition("__p0", "__p1")
    # Spark rolls files by rows only: rows per file from the Parquet bytes per row that
    # icecommit's own files of the same frame showed (its warm-up write)
    rows_per_file = max(1, int(target_bytes / bytes_per_row))
    folder = f"{table.location().removeprefix('file://')}/data/jvm-{serial:05d}-{time.time_ns()}"
    spark = df.sparkSession
    spark.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
    spark.conf.set("spark.sql.parquet.fieldId.write.enabled", "true")
    (
        out.write.option("compression", "zstd")
        .option("maxRecordsPerFile", rows_per_file)
        .partitionBy("__p0", "__p1")
        .parquet(folder)
    )
    plan = compute_statistics_plan(schema, table.metadata.properties)
    mapping = parquet_path_to_id_mapping(schema)
    records = []
    for path in sorted(Path(folder).glob("__p0=*/__p1=*/*.parquet")):  # the listing: prototype only
        metadata = pq.read_metadata(path)
        stats = data_file_statistics_from_parquet_metadata(
            parquet_metadata=metadata, stats_columns=plan, parquet_column_mapping=mapping
        ).to_serialized_dict()
        day_value = int(path.parent.parent.name.split("=", 1)[1])
        event = path.parent.name.split("=", 1)[1]
        records.append(
            DataFileRecord(
                path=f"file://{path}",
                file_size_in_bytes=path.stat().st_size,
                record_count=int(stats["record_count"]),
                spec_id=table.spec().spec_id,
                partition=(day_value, event),
                column_sizes=dict(stats["column_sizes"]),
                value_counts=dict(stats["value_counts"]),
                null_value_counts=dict(stats["null_value_counts"]),
                lower_bounds={k: v.hex() for k, v in stats["lower_bounds"].items()},
                upper_bounds={k: v.hex() for k, v in stats["upper_bounds"].items()},
                split_offsets=tuple(stats["split_offsets"] or ()),
            )
        )
    rows = sum(r.record_count for r in records)
    result = WriteResult(
        job_id="bench", checkpoint_id=1, task_id=0, attempt=0, source_records=rows, records=rows,
        bytes=sum(r.file_size_in_bytes for r in records), data_files=tuple(records),
    )  # fmt: skip
    committer = GlobalCommitter(catalog, name, job_id="bench")
    committer.prepare(1, [result])
    assert committer.commit(1).committed


def _to_arrow(df: DataFrame) -> pa.Table:
    """``df.toArrow()`` (pyspark 4) on pyspark 3.5: the private call it makes there."""
    batches: list[pa.RecordBatch] = df._collect_as_arrow()  # type: ignore[operator,unused-ignore]
    return pa.Table.from_batches(batches)


def _distinct(ids: pa.Table) -> int:
    return int(pc.count_distinct(ids.column("event_id")).as_py())


def _read_table(table: Table) -> Output:
    sizes = [task.file.file_size_in_bytes for task in table.scan().plan_files()]
    ids = table.scan(selected_fields=("event_id",)).to_arrow()
    return Output(ids.num_rows, _distinct(ids), sizes)


def _rss_now() -> tuple[float, float]:
    """(JVM, Python workers) resident MiB at this moment."""
    with PeakMemory() as now:
        pass
    return now.jvm / MIB, now.workers / MIB


def measure(bench: Bench, approach: str, mode: str, df: DataFrame, rows: int) -> Run:
    write, read_back = bench.prepare(approach, mode, df)
    jvm_start, workers_start = _rss_now()
    with PeakMemory() as peak:
        started = time.perf_counter()
        write()
        seconds = time.perf_counter() - started
    output = read_back()
    if approach == "icecommit" and bench.bytes_per_row is None:
        bench.bytes_per_row = sum(output.file_sizes) / max(1, output.rows)
    if output.rows != rows or output.distinct_ids != rows:
        raise AssertionError(f"{approach} {mode}: {output.rows} rows, {output.distinct_ids} ids; wrote {rows}")
    return Run(
        approach, mode, rows, seconds, output.rows, output.distinct_ids, len(output.file_sizes),
        statistics.median(output.file_sizes), peak.driver / MIB, peak.jvm / MIB, peak.workers / MIB,
        jvm_start, workers_start,
    )  # fmt: skip


def bench_size(bench: Bench, rows: int, repeats: int, pyiceberg_max_rows: int) -> list[Run]:
    spark = bench.spark
    approaches = [a for a in APPROACHES if a[0] != "pyiceberg-append" or rows <= pyiceberg_max_rows]
    warmup = clickstream(spark, 0, WARMUP_ROWS, partitions=4).cache()
    warmup.count()
    for approach, mode in approaches:
        measure(bench, approach, mode, warmup, WARMUP_ROWS)
    warmup.unpersist()
    df = clickstream(spark, 0, rows, partitions=4).cache()
    assert df.count() == rows
    runs: list[Run] = []
    for repeat in range(repeats):
        shift = repeat % len(approaches)
        for approach, mode in approaches[shift:] + approaches[:shift]:
            run = measure(bench, approach, mode, df, rows)
            runs.append(run)
            print(json.dumps(asdict(run)), file=sys.stderr, flush=True)
    df.unpersist()
    return runs


def small_writes(bench: Bench, rows: int, repeats: int, backends: dict[str, Catalog]) -> list[SmallRun]:
    """The fixed cost of a checkpoint: ``rows`` rows written again and again, warm."""
    spark = bench.spark
    df = clickstream(spark, 0, rows, partitions=4).cache()
    assert df.count() == rows
    folder = bench.work / "small-parquet"
    spark_name = bench.spark_table("hash")
    actions: dict[tuple[str, str], Callable[[], None]] = {
        ("spark", "spark-parquet"): spark_parquet(df, folder),
        ("spark", "spark-iceberg"): lambda: df.writeTo(spark_name).append(),
    }
    names = {backend: bench.ic_table(catalog) for backend, catalog in backends.items()}
    for backend, catalog in backends.items():
        name = names[backend]
        checkpoint = [0]

        def icecommit_write(catalog: Catalog = catalog, name: str = name, checkpoint: list[int] = checkpoint) -> None:
            checkpoint[0] += 1
            result = ic.write(df, name, catalog=catalog, job_id="small", checkpoint_id=checkpoint[0])
            assert result.committed

        actions[(backend, "icecommit")] = icecommit_write
    runs: list[SmallRun] = []
    for action in actions.values():  # warm-up, untimed
        action()
    for _ in range(repeats):
        for (backend, approach), action in actions.items():
            started = time.perf_counter()
            action()
            runs.append(SmallRun(backend, approach, rows, time.perf_counter() - started))
    for backend, catalog in backends.items():
        count = catalog.load_table(names[backend]).scan(selected_fields=("event_id",)).to_arrow().num_rows
        assert count == rows * (repeats + 1), (backend, count)
    assert spark.table(spark_name).count() == rows * (repeats + 1)
    df.unpersist()
    return runs


def _median(runs: list[Run], approach: str, mode: str) -> float | None:
    chosen = [r.seconds for r in runs if r.approach == approach and r.mode == mode]
    return statistics.median(chosen) if chosen else None


def summarise(runs: list[Run]) -> str:
    lines = [
        "| rows | approach | mode | median s | rows/s | icecommit / spark-iceberg | files | median file MiB "
        "| rows read (distinct ids) | driver peak MiB | JVM peak MiB (at start) | workers peak MiB (at start) | runs |",
        "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for size in sorted({r.rows for r in runs}):
        for approach, mode in APPROACHES:
            chosen = [r for r in runs if r.rows == size and r.approach == approach and r.mode == mode]
            if not chosen:
                continue
            median = statistics.median(r.seconds for r in chosen)
            native = _median([r for r in runs if r.rows == size], "spark-iceberg", mode)
            ratio = f"{median / native:.2f}x" if approach == "icecommit" and native else ""
            files = sorted({r.files for r in chosen})
            read = sorted({(r.rows_read, r.distinct_ids) for r in chosen})
            jvm = max(chosen, key=lambda r: r.jvm_peak_mib)
            workers = max(chosen, key=lambda r: r.workers_peak_mib)
            file_mib = statistics.median(r.median_file_bytes for r in chosen) / MIB
            lines.append(
                f"| {size:,} | {approach} | {mode or '-'} | {median:.2f} | {size / median:,.0f} | {ratio} | "
                f"{'/'.join(f'{f:,}' for f in files)} | {file_mib:.1f} | "
                f"{', '.join(f'{n:,} ({d:,})' for n, d in read)} | {max(r.driver_peak_mib for r in chosen):,.0f} | "
                f"{jvm.jvm_peak_mib:,.0f} ({jvm.jvm_start_mib:,.0f}) | "
                f"{workers.workers_peak_mib:,.0f} ({workers.workers_start_mib:,.0f}) | {len(chosen)} |"
            )
    return "\n".join(lines)


def summarise_small(runs: list[SmallRun]) -> str:
    medians = {(r.backend, r.approach): statistics.median(
        s.seconds for s in runs if (s.backend, s.approach) == (r.backend, r.approach)) for r in runs}  # fmt: skip
    parquet = medians[("spark", "spark-parquet")]
    lines = [
        "| catalog + state | approach | rows | median ms | min ms | max ms | minus spark-parquet, ms |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for (backend, approach), median in medians.items():
        chosen = [r.seconds for r in runs if (r.backend, r.approach) == (backend, approach)]
        extra = "" if approach == "spark-parquet" else f"{(median - parquet) * 1000:,.0f}"
        lines.append(
            f"| {backend} | {approach} | {runs[0].rows:,} | {median * 1000:,.0f} | {min(chosen) * 1000:,.0f} | "
            f"{max(chosen) * 1000:,.0f} | {extra} |"
        )
    return "\n".join(lines)


def session(jars: tuple[Path, ...], warehouse: Path) -> SparkSession:
    catalog = f"spark.sql.catalog.{SPARK_CATALOG}"
    return local_session(
        "icecommit-bench-native",
        config={
            "spark.driver.memory": "8g",
            "spark.driver.maxResultSize": "0",
            "spark.jars": ",".join(str(j) for j in jars),
            "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
            catalog: "org.apache.iceberg.spark.SparkCatalog",
            f"{catalog}.type": "hadoop",
            f"{catalog}.warehouse": warehouse.as_uri(),
        },
    )


def main() -> None:
    from bench.databases import PG_URI, postgres_available
    from bench.lifecycle_soak import soak_database

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--java", help=f"the java-iceberg environment (default: ${java_iceberg.ENV_VAR})")
    parser.add_argument("--sizes", type=int, nargs="+", default=[5_000_000, 20_000_000])
    parser.add_argument("--quick", action="store_true", help="one size of 200,000 rows")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--target-mb", type=int, default=128, help="write.target-file-size-bytes, in MiB")
    parser.add_argument("--pyiceberg-max-rows", type=int, default=5_000_000)
    parser.add_argument("--small-rows", type=int, default=10_000)
    parser.add_argument("--small-repeats", type=int, default=7)
    parser.add_argument("--skip-sizes", action="store_true", help="only the small writes")
    args = parser.parse_args()
    if not pyspark.__version__.startswith("3.5."):
        parser.error(f"Iceberg's runtime jar needs pyspark 3.5 (this interpreter has {pyspark.__version__})")
    if args.java:
        os.environ[java_iceberg.ENV_VAR] = args.java
    java = java_iceberg.find()
    if isinstance(java, str):
        parser.error(java)
    sizes = [200_000] if args.quick else args.sizes
    work = Path(tempfile.mkdtemp(prefix="icecommit-native-write-"))
    started = time.perf_counter()
    runs: list[Run] = []
    small: list[SmallRun] = []
    try:
        spark = session(java.jars, work / "spark-warehouse")
        bench = Bench(spark, work, args.target_mb * MIB)
        if not args.skip_sizes:
            for size in sizes:
                runs.extend(bench_size(bench, size, args.repeats, args.pyiceberg_max_rows))
        with soak_database(PG_URI) if postgres_available() else nullcontext() as pg:
            backends: dict[str, Catalog] = {"sqlite": bench.catalog}
            if pg is not None:
                backends["postgres"] = ic.connect(uri=pg, warehouse=str(work / "pg-warehouse"))
            small = small_writes(bench, args.small_rows, args.small_repeats, backends)
        spark.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    OUT.mkdir(exist_ok=True)
    (OUT / "native_write.json").write_text(
        json.dumps({"runs": [asdict(r) for r in runs], "small": [asdict(r) for r in small]}, indent=2)
    )
    runtime = next((j.name for j in java.jars if j.name.startswith("iceberg-spark-runtime")), "?")
    print(
        f"Machine: {platform.node()}, {psutil.cpu_count()} cores, {psutil.virtual_memory().total / 2**30:.0f} GiB, "
        f"Python {platform.python_version()}, pyspark {pyspark.__version__}, {runtime}, local[2]; "
        f"run {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; target {args.target_mb} MiB; "
        f"{time.perf_counter() - started:.0f} s"
    )
    if runs:
        print(summarise(runs))
        print()
    print(summarise_small(small))


if __name__ == "__main__":
    main()
