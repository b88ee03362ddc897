"""Spark DataFrame -> committed, readable Iceberg snapshot: icecommit against the alternatives.

Compared in the same run, on the same cached DataFrame (the demo clickstream):

- ``spark-parquet``: Spark's own ``df.write.parquet`` (the floor for Spark; no table, no commit);
- ``arrow-handoff``: ``mapInArrow`` with a task that only counts rows (the floor for any
  writer that runs Python in the tasks, icecommit included);
- ``icecommit``: ``ic.write`` into a table partitioned by ``day(ts), event``;
- ``pyiceberg-append``: what a notebook user does today, ``table.append(df.toArrow())``.

Every approach writes zstd Parquet (the Iceberg default codec). Each run happens in a fresh
driver process that first builds and caches the DataFrame and warms up the same approach on
200,000 rows (neither is timed); the run is timed from
the call to a committed snapshot (or Spark's job end). Peak resident memory is sampled every
100 ms for the driver's Python process, the Spark JVM and the Python workers.

    .venv/bin/python -m bench.write_throughput [--sizes 5000000 20000000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

import psutil
import pyarrow as pa
import pyspark
from pyspark.sql import DataFrame

import icecommit as ic
from icecommit.demo.clickstream import PARTITION_BY, SCHEMA, clickstream
from icecommit.writers import local_session

OUT = Path(__file__).resolve().parent / "out"
APPROACHES = ["spark-parquet", "arrow-handoff", "icecommit", "pyiceberg-append"]


@dataclass(frozen=True)
class Run:
    approach: str
    rows: int
    seconds: float
    driver_peak_mib: float
    jvm_peak_mib: float
    workers_peak_mib: float


class PeakMemory:
    """Samples RSS of this process, the JVM child, and Python workers under the JVM."""

    def __init__(self, interval: float = 0.1) -> None:
        self.interval = interval
        self.driver = self.jvm = self.workers = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _sample(self) -> None:
        me = psutil.Process()
        self.driver = max(self.driver, me.memory_info().rss)
        jvm_rss = workers_rss = 0
        for child in me.children(recursive=True):
            try:
                name = child.name()
                rss = child.memory_info().rss
            except psutil.Error:
                continue
            if name.startswith("java"):
                jvm_rss += rss
            elif name.startswith("python"):
                workers_rss += rss
        self.jvm = max(self.jvm, jvm_rss)
        self.workers = max(self.workers, workers_rss)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._sample()
            time.sleep(self.interval)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()


def timed(approach: str, rows: int, action: Callable[[], None]) -> Run:
    mib = 1024 * 1024
    with PeakMemory() as peak:
        start = time.perf_counter()
        action()
        seconds = time.perf_counter() - start
    return Run(approach, rows, seconds, peak.driver / mib, peak.jvm / mib, peak.workers / mib)


def spark_parquet(df: DataFrame, path: Path) -> Callable[[], None]:
    def run() -> None:
        df.write.mode("overwrite").option("compression", "zstd").parquet(str(path))

    return run


def _count_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    rows = sum(batch.num_rows for batch in batches)
    yield pa.RecordBatch.from_pydict({"rows": [rows]})


def arrow_handoff(df: DataFrame) -> Callable[[], None]:
    """The floor of any Python-side writer: Spark hands every row to Python as Arrow, and
    Python does nothing with it."""

    def run() -> None:
        df.mapInArrow(_count_batches, "rows long").collect()

    return run


def icecommit_write(df: DataFrame, catalog: object, table: str, checkpoint: list[int]) -> Callable[[], None]:
    def run() -> None:
        checkpoint[0] += 1
        result = ic.write(df, table, catalog=catalog, job_id="bench", checkpoint_id=checkpoint[0])  # type: ignore[arg-type]
        assert result.committed

    return run


def pyiceberg_append(df: DataFrame, catalog: object, table: str) -> Callable[[], None]:
    def run() -> None:
        loaded = catalog.load_table(table)  # type: ignore[attr-defined]
        loaded.append(df.toArrow().cast(SCHEMA))

    return run


def run_one(approach: str, rows: int, work: Path) -> Run:
    """One measured run in this (fresh) process: build and cache the data, then write it."""
    spark = local_session(
        "icecommit-bench",
        config={"spark.driver.memory": "8g", "spark.driver.maxResultSize": "0"},
    )
    df = clickstream(spark, 0, rows, partitions=4).cache()
    assert df.count() == rows
    catalog = ic.connect(uri=f"sqlite:///{work / 'catalog.db'}", warehouse=str(work / "warehouse"))
    for name in ("bench.t", "bench.warmup"):
        ic.create_table(catalog, name, SCHEMA, partition_by=list(PARTITION_BY))

    def actions(frame: DataFrame, table: str, path: Path) -> dict[str, Callable[[], None]]:
        return {
            "spark-parquet": spark_parquet(frame, path),
            "arrow-handoff": arrow_handoff(frame),
            "icecommit": icecommit_write(frame, catalog, table, [0]),
            "pyiceberg-append": pyiceberg_append(frame, catalog, table),
        }

    # warm the JVM and the Python workers on the same code path, untimed
    warmup = clickstream(spark, 0, 200_000, partitions=4)
    actions(warmup, "bench.warmup", work / "warmup")[approach]()
    run = timed(approach, rows, actions(df, "bench.t", work / "parquet")[approach])
    if approach in ("icecommit", "pyiceberg-append"):
        scan = catalog.load_table("bench.t").scan(selected_fields=("event_id",))
        count = sum(b.num_rows for b in scan.to_arrow_batch_reader())
        assert count == rows, (approach, count)
    spark.stop()
    return run


def bench_size(rows: int, repeats: int, approaches: list[str] = APPROACHES) -> list[Run]:
    """Every approach ``repeats`` times, each run in a fresh driver process (so peak
    memory is that run's own), the order rotated between repeats."""
    runs: list[Run] = []
    for repeat in range(repeats):
        turn = repeat % len(approaches)
        for approach in approaches[turn:] + approaches[:turn]:
            work = Path(tempfile.mkdtemp(prefix="icecommit-bench-"))
            try:
                out = subprocess.run(
                    [sys.executable, "-m", "bench.write_throughput", "--one", approach, str(rows), str(work)],
                    check=True,
                    capture_output=True,
                    text=True,
                )
            finally:
                shutil.rmtree(work, ignore_errors=True)
            run = Run(**json.loads(out.stdout.strip().splitlines()[-1]))
            runs.append(run)
            print(json.dumps(asdict(run)), file=sys.stderr, flush=True)
    return runs


def summarise(runs: list[Run]) -> str:
    sizes = sorted({r.rows for r in runs})
    approaches = APPROACHES
    lines = [
        "| rows | approach | median s | rows/s | vs spark-parquet | driver peak MiB | JVM peak MiB "
        "| workers peak MiB | runs |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for size in sizes:
        medians = {}
        for approach in approaches:
            chosen = [r for r in runs if r.rows == size and r.approach == approach]
            if not chosen:
                continue
            median = statistics.median(r.seconds for r in chosen)
            medians[approach] = median
            floor = medians.get("spark-parquet")
            lines.append(
                f"| {size:,} | {approach} | {median:.1f} | {size / median:,.0f} | "
                f"{f'{median / floor:.2f}x' if floor else '-'} | {max(r.driver_peak_mib for r in chosen):,.0f} | "
                f"{max(r.jvm_peak_mib for r in chosen):,.0f} | {max(r.workers_peak_mib for r in chosen):,.0f} | "
                f"{len(chosen)} |"
            )
        if "pyiceberg-append" in medians:
            lines.append(
                f"| {size:,} | *icecommit vs pyiceberg-append* | | | "
                f"{medians['pyiceberg-append'] / medians['icecommit']:.2f}x faster | | | | |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[5_000_000, 20_000_000])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--approaches", nargs="+", choices=APPROACHES, default=APPROACHES, help="a subset (default: all)"
    )
    parser.add_argument("--one", nargs=3, metavar=("APPROACH", "ROWS", "WORKDIR"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        approach, rows, work = args.one
        print(json.dumps(asdict(run_one(approach, int(rows), Path(work)))))
        return
    runs: list[Run] = []
    for size in args.sizes:
        runs.extend(bench_size(size, args.repeats, [a for a in APPROACHES if a in args.approaches]))
    OUT.mkdir(exist_ok=True)
    (OUT / "write_throughput.json").write_text(json.dumps([asdict(r) for r in runs], indent=2))
    header = (
        f"Machine: {platform.node()}, {psutil.cpu_count()} cores, "
        f"{psutil.virtual_memory().total / 2**30:.0f} GiB, Python {platform.python_version()}, "
        f"pyspark {pyspark.__version__}; run {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC"
    )
    print(header)
    print(summarise(runs))


if __name__ == "__main__":
    main()
