"""Where the time of one ``ic.write`` goes, stage by stage.

One cached DataFrame (the demo clickstream) is written with ``ic.write`` into a table
partitioned by ``day(ts), event`` (the distribution mode given, ``hash`` by default, as for
any partitioned table), after an untimed warm-up. Reported:

- **Spark actions**: every Spark job the write runs (from Spark's status tracker, under a job
  group of its own), with its stages, their names and how many of their tasks ran: a second
  pass over the input would show as a second stage reading it with all its tasks run (with
  adaptive execution, a shuffle's map stage runs as a job of its own and shows again,
  skipped, in the job that reads its output);
- **driver stages** (wall seconds, in order): ``recover`` (commit what an earlier run
  prepared), ``decide`` (is the checkpoint already in?), ``align`` (fit the frame to the
  table), ``spark-job`` (the writers' job, from submit to the last result), ``prepare``
  (validation, storage checks, the staged manifest, the state row), ``commit`` (decision,
  the catalog commit, the state update, publication), and the rest;
- **task stages** (task-seconds summed over the tasks, from each task's result): ``arrow-in``
  (waiting for rows from Spark's JVM: the hand-off), ``split`` (rows by partition),
  ``encode`` (Parquet), ``file-stats`` (NaN counts, event-time maxima, window counts of
  the written rows), ``close`` (footers and column statistics), ``window-counts`` (per
  minute counts of the received rows);
- the round trips to the catalog and the state database (SQL statements, by table).

    .venv/bin/python -m bench.write_breakdown [--sizes 1000000 5000000] [--distribution hash]
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import psutil
import pyspark
from pyspark.sql import SparkSession
from sqlalchemy import event
from sqlalchemy.engine import Engine

import icecommit as ic
import icecommit.pipeline as pipeline
from bench.databases import PG_URI
from bench.lifecycle_soak import soak_database
from icecommit.committer import GlobalCommitter
from icecommit.demo.clickstream import PARTITION_BY, SCHEMA, clickstream
from icecommit.writers import SparkWriter, local_session

OUT = Path(__file__).resolve().parent / "out"
DRIVER_STAGES = ("recover", "decide", "align", "spark-job", "prepare", "commit")
TASK_STAGES = ("arrow-in", "split", "encode", "file-stats", "close", "window-counts")


class Timings:
    """Seconds per driver stage, results of the Spark job, and SQL statements, for one write."""

    def __init__(self) -> None:
        self.driver: defaultdict[str, float] = defaultdict(float)
        self.tasks: defaultdict[str, float] = defaultdict(float)
        self.task_count = 0
        self.statements: Counter[str] = Counter()


@contextmanager
def instrumented(timings: Timings) -> Iterator[None]:
    """Time the driver's stages by wrapping the functions ``ic.write`` calls (restored after)."""
    patches: list[tuple[object, str, Any]] = []

    def wrap(owner: object, name: str, stage: str, after: Callable[[Any], None] | None = None) -> None:
        original = getattr(owner, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            began = time.perf_counter()
            try:
                value = original(*args, **kwargs)
            finally:
                timings.driver[stage] += time.perf_counter() - began
            if after is not None:
                after(value)
            return value

        patches.append((owner, name, original))
        setattr(owner, name, timed)

    def results(value: Any) -> None:
        for result in value:
            timings.task_count += 1
            for stage, seconds in result.stage_seconds:
                timings.tasks[stage] += seconds

    def statement(conn: Any, cursor: Any, text: str, params: Any, context: Any, many: bool) -> None:
        words = text.split()
        table = words[words.index("FROM") + 1] if "FROM" in words else (words[2] if len(words) > 2 else "")
        timings.statements[f"{words[0].upper()} {table.strip(chr(34))}"] += 1

    wrap(GlobalCommitter, "recover", "recover")
    wrap(GlobalCommitter, "decide", "decide")
    wrap(SparkWriter, "prepare_frame", "align")
    wrap(SparkWriter, "write", "spark-job+align", results)
    wrap(GlobalCommitter, "prepare", "prepare")
    wrap(GlobalCommitter, "commit", "commit")
    event.listen(Engine, "before_cursor_execute", statement)
    try:
        yield
    finally:
        event.remove(Engine, "before_cursor_execute", statement)
        for owner, name, original in reversed(patches):
            setattr(owner, name, original)


def spark_actions(spark: SparkSession, group: str) -> list[str]:
    """The jobs of a job group, each with its stages' names."""
    tracker = spark.sparkContext.statusTracker()
    described = []
    for job_id in sorted(tracker.getJobIdsForGroup(group)):
        job = tracker.getJobInfo(job_id)
        if job is None:
            continue
        stages = [tracker.getStageInfo(s) for s in job.stageIds]
        names = ", ".join(
            f"stage {s.stageId} {s.name.split(' at ')[0]} ({s.numCompletedTasks} of {s.numTasks} tasks run"
            + (": skipped, its shuffle output reused)" if s.numCompletedTasks == 0 and s.numTasks else ")")
            for s in stages
            if s is not None
        )
        described.append(f"job {job_id}: {names}")
    return described


def measure(spark: SparkSession, rows: int, distribution: str, work: Path, uri: str | None = None) -> dict[str, Any]:
    """One timed ``ic.write`` of ``rows`` rows; the catalog and state on SQLite, or at ``uri``."""
    df = clickstream(spark, 0, rows, partitions=4).cache()
    assert df.count() == rows
    work.mkdir(parents=True, exist_ok=True)
    suffix = uuid.uuid4().hex[:6]
    catalog = ic.connect(uri=uri or f"sqlite:///{work / f'catalog-{rows}.db'}", warehouse=str(work / f"wh-{rows}"))
    catalog.create_namespace_if_not_exists("bench")
    for name in (f"bench.t_{suffix}", f"bench.warmup_{suffix}"):
        ic.create_table(catalog, name, SCHEMA, partition_by=list(PARTITION_BY))
    warmup = clickstream(spark, 0, 200_000, partitions=4)
    ic.write(
        warmup, f"bench.warmup_{suffix}", catalog=catalog, job_id="warmup", checkpoint_id=0, distribution=distribution
    )
    timings = Timings()
    group = f"breakdown-{rows}"
    spark.sparkContext.setJobGroup(group, f"ic.write of {rows} rows")
    began = time.perf_counter()
    with instrumented(timings):
        result = pipeline.write(df, f"bench.t_{suffix}", catalog=catalog, job_id="bench", checkpoint_id=0,
                                distribution=distribution)  # fmt: skip
    total = time.perf_counter() - began
    spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    assert result.records == rows, result
    driver = dict(timings.driver)
    driver["spark-job"] = driver.pop("spark-job+align") - driver.get("align", 0.0)
    driver["other"] = total - sum(driver[s] for s in DRIVER_STAGES if s in driver)
    df.unpersist()
    return {
        "rows": rows,
        "distribution": distribution,
        "catalog": "sqlite" if uri is None else "postgres",
        "total_s": total,
        "driver_s": driver,
        "tasks": timings.task_count,
        "task_s": dict(timings.tasks),
        "spark_actions": spark_actions(spark, group),
        "sql_statements": dict(timings.statements.most_common()),
        "files": result.files,
    }


def summarise(found: list[dict[str, Any]]) -> str:
    lines = []
    for m in found:
        lines.append(f"**{m['rows']:,} rows** (`distribution={m['distribution']}`, catalog and state on "
                     f"{m.get('catalog', 'sqlite')}, Arrow batches of {m['arrow_batch']:,} rows): "
                     f"{m['total_s']:.2f} s in all, {m['files']} files, {m['tasks']} writer tasks")  # fmt: skip
        lines.append("")
        lines.append("| driver stage | s | share |")
        lines.append("|---|---:|---:|")
        for stage in (*DRIVER_STAGES, "other"):
            seconds = m["driver_s"].get(stage, 0.0)
            lines.append(f"| {stage} | {seconds:.3f} | {seconds / m['total_s']:.0%} |")
        task_total = sum(m["task_s"].values())
        lines.append("")
        lines.append("| task stage (summed over tasks) | task-s | share |")
        lines.append("|---|---:|---:|")
        for stage in TASK_STAGES:
            seconds = m["task_s"].get(stage, 0.0)
            lines.append(f"| {stage} | {seconds:.2f} | {seconds / task_total:.0%} |")
        lines.append("")
        lines.append("Spark actions: " + "; ".join(m["spark_actions"]))
        lines.append("")
        lines.append("SQL statements: " + ", ".join(f"{k} x{v}" for k, v in m["sql_statements"].items()))
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 5_000_000])
    parser.add_argument("--distribution", default="hash", choices=["none", "hash", "bin-pack"])
    parser.add_argument(
        "--arrow-batch", type=int, nargs="+", default=[10_000],
        help="spark.sql.execution.arrow.maxRecordsPerBatch values to measure in turn (Spark's default: 10000)",
    )  # fmt: skip
    parser.add_argument(
        "--catalog", choices=["sqlite", "postgres"], default="sqlite",
        help="where the catalog and the state live (postgres: a database of the run's own at ICECOMMIT_TEST_PG_URI)",
    )  # fmt: skip
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="icecommit-breakdown-"))
    spark = local_session(
        "icecommit-breakdown", config={"spark.driver.memory": "8g", "spark.driver.maxResultSize": "0"}
    )
    try:
        found = []
        with soak_database(PG_URI) if args.catalog == "postgres" else nullcontext() as uri:
            for turn, batch in enumerate(args.arrow_batch):
                spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", str(batch))
                for rows in args.sizes:
                    measured = measure(spark, rows, args.distribution, work / f"{turn}-{batch}", uri)
                    found.append({**measured, "arrow_batch": batch})
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    OUT.mkdir(exist_ok=True)
    (OUT / "write_breakdown.json").write_text(json.dumps(found, indent=2))
    print(
        f"Machine: {platform.node()}, {psutil.cpu_count()} cores, {psutil.virtual_memory().total / 2**30:.0f} GiB; "
        f"pyspark {pyspark.__version__}; run {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC"
    )
    print(summarise(found))


if __name__ == "__main__":
    main()
