"""The fakes several test modules share: a catalog that runs a script around its commits,
another writer's concurrent append, a crash at a named step, and the inputs, tables and
command-line calls more than one module's tests start from. Each says in one line what it
stands in for; a test module imports them from here, never from another test module."""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table import Table
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import icecommit as ic
import icecommit.committer.commit_group as commit_group
import icecommit.committer.planning as planning
import icecommit.core.ancestry as ancestry
from icecommit.catalog.connect import DEFAULT_CATALOG_NAME
from tests.cli.runner import invoke
from tests.helpers import EVENTS_SCHEMA, events, write_arrow

# -- counting what a call reads ----------------------------------------------------------


class Counted:
    """Counts what a call reads: checkpoint decisions, walks of a branch's lineage and table
    loads per table (the catalog's own reads inside a commit left out)."""

    def __init__(self, catalog: SqlCatalog, monkeypatch: pytest.MonkeyPatch) -> None:
        self.decisions = 0
        self.walks = 0
        self.loads: Counter[str] = Counter()
        decide, ancestors_of, load_table = planning.decide, ancestry.ancestors_of, catalog.load_table
        commit_table, together = catalog.commit_table, commit_group.commit_together
        committing = False

        def counted_decide(*args: Any, **kwargs: Any) -> Any:
            self.decisions += 1
            return decide(*args, **kwargs)

        def counted_walk(*args: Any, **kwargs: Any) -> Any:
            self.walks += 1
            return ancestors_of(*args, **kwargs)

        def counted_load(identifier: str | tuple[str, ...]) -> Table:
            name = identifier if isinstance(identifier, str) else ".".join(identifier)
            self.loads[name] += not committing  # the SQL catalog's own read inside a commit is not the caller's
            return load_table(identifier)

        def commit(*args: Any, **kwargs: Any) -> Any:
            nonlocal committing
            committing = True
            try:
                return commit_table(*args, **kwargs)
            finally:
                committing = False

        def commit_together(*args: Any, **kwargs: Any) -> Any:  # several tables' commit: the same reads
            nonlocal committing
            committing = True
            try:
                return together(*args, **kwargs)
            finally:
                committing = False

        monkeypatch.setattr(planning, "decide", counted_decide)
        monkeypatch.setattr(ancestry, "ancestors_of", counted_walk)
        monkeypatch.setattr(catalog, "load_table", counted_load)
        monkeypatch.setattr(catalog, "commit_table", commit)
        monkeypatch.setattr(commit_group, "commit_together", commit_together)

    def reset(self) -> None:
        self.decisions, self.walks = 0, 0
        self.loads.clear()


# -- a catalog commit interrupted ---------------------------------------------------------


class ScriptedCatalog(SqlCatalog):
    """Fakes a catalog whose commits race others: the real SqlCatalog, a script run around each commit."""

    def __init__(self, name: str, **properties: str) -> None:
        super().__init__(name, **properties)
        self.before: list[Callable[[], None]] = []
        self.after: list[Callable[[], None]] = []
        self.calls = 0
        self.loads = 0  # the caller's reads, not the ones SqlCatalog.commit_table makes itself
        self._committing = False

    def load_table(self, identifier: Any) -> Table:
        self.loads += not self._committing
        return super().load_table(identifier)

    def commit_table(self, table: Table, requirements: Any, updates: Any) -> Any:
        self.calls += 1
        if self.before:
            self.before.pop(0)()
        self._committing = True
        try:
            response = super().commit_table(table, requirements, updates)
        finally:
            self._committing = False
        if self.after:
            self.after.pop(0)()
        return response


def concurrent_append(catalog: SqlCatalog, name: str) -> Callable[[], None]:
    """Fakes another writer: a step that appends one row to ``name`` through a catalog of its own."""

    def append() -> None:
        other = SqlCatalog(catalog.name, **catalog.properties)
        other.load_table(name).append(events(10_000, 10_001))
        other.engine.dispose()

    return append


# -- a crash at a named step --------------------------------------------------------------


class Crash(Exception):
    """Fakes the committer's process dying here (raised from a fault hook)."""


def crash_at(point: str, at: int) -> Callable[[str, int], None]:
    """Fakes a crash: a fault hook that raises ``Crash`` at ``point`` of checkpoint ``at``."""

    def fault(where: str, checkpoint_id: int) -> None:
        if where == point and checkpoint_id == at:
            raise Crash(f"{where} of checkpoint {checkpoint_id}")

    return fault


# -- event-time rows and commits ----------------------------------------------------------

#: The start of the event-time tests' day (their hourly partitions count from it).
T0 = dt.datetime(2026, 5, 1, tzinfo=dt.timezone.utc)


def events_at(*minutes: int, first_id: int = 0) -> pa.Table:
    """Fakes a job's input by event time: one row per offset in minutes after T0 (ids from ``first_id``)."""
    ids = list(range(first_id, first_id + len(minutes)))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "ts": pa.array([T0 + timedelta(minutes=m) for m in minutes], pa.timestamp("us", tz="UTC")),
            "event": pa.array(["pv"] * len(ids)),
            "score": pa.array([1.0] * len(ids)),
        },
        schema=EVENTS_SCHEMA,
    )


def commit_checkpoint(
    catalog: SqlCatalog, table: Table, job: str, checkpoint: int, data: pa.Table, **kwargs: object
) -> None:
    """Fakes one checkpoint of a job without Spark: ``data`` written, prepared and committed."""
    committer = ic.GlobalCommitter(catalog, table, job_id=job, **kwargs)  # type: ignore[arg-type]
    committer.prepare(checkpoint, [write_arrow(table, data, job_id=job, checkpoint_id=checkpoint)])
    committer.commit(checkpoint)


# -- small files to compact ---------------------------------------------------------------

#: The target file size of the tables compaction tests make (``write.target-file-size-bytes``).
TARGET = 64 * 1024


def small_checkpoints(catalog: SqlCatalog, name: str, checkpoints: int, *, job: str = "job", first: int = 0) -> Table:
    """Fakes a job's small commits: ``checkpoints`` commits of 60 rows, one small file per event value each."""
    committer = ic.GlobalCommitter(catalog, name, job_id=job)
    for checkpoint in range(first, first + checkpoints):
        rows = events(checkpoint * 60, checkpoint * 60 + 60)
        committer.prepare(checkpoint, [write_arrow(committer.load_table(), rows, job_id=job, checkpoint_id=checkpoint)])
        committer.commit(checkpoint)
    return catalog.load_table(name)


# -- Spark input --------------------------------------------------------------------------

#: 2026-01-01T00:00:00Z in microseconds: the first of ``spark_events``'s three days.
DAY0_US = 1_767_225_600_000_000


def spark_events(spark: SparkSession, start: int, end: int, partitions: int = 3) -> DataFrame:
    """Fakes a Spark job's input: events with nulls (event, score), NaNs (score) and times over three days."""
    i = F.col("id")
    return spark.range(start, end, numPartitions=partitions).select(
        i.alias("id"),
        F.timestamp_micros(F.lit(DAY0_US) + (i * 7_000_003_001) % (3 * 86_400_000_000)).alias("ts"),
        F.when(i % 11 == 0, F.lit(None))
        .otherwise(F.element_at(F.array(F.lit("pv"), F.lit("show"), F.lit("click")), (i % 3 + 1).cast("int")))
        .alias("event"),
        F.when(i % 13 == 0, F.lit(float("nan"))).when(i % 17 == 0, F.lit(None)).otherwise(i / 4).alias("score"),
    )


# -- routed Spark input (one read, many tables) -------------------------------------------

#: The schema of the table a routed write lands ``click`` and ``tap`` rows in.
CLICKS = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("ts", pa.timestamp("us", tz="UTC")),
        pa.field("x", pa.int32()),
    ]
)
#: The schema of the table a routed write lands ``view`` rows in.
VIEWS = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("ts", pa.timestamp("us", tz="UTC")),
        pa.field("page", pa.string()),
    ]
)
#: The routing column's values of ``routed_source``, by id modulo 5.
KINDS = ("click", "tap", "view", "scroll", None)


def routed_source(spark: SparkSession, start: int, end: int) -> DataFrame:
    """Fakes a routed job's input: rows whose kind cycles click, tap, view, scroll (unknown), null."""
    return spark.range(start, end).selectExpr(
        "id",
        "TIMESTAMP '2026-05-01 00:00:00' + make_interval(0, 0, 0, 0, 0, CAST(id % 240 AS INT), 0) AS ts",
        "element_at(array('click', 'tap', 'view', 'scroll', NULL), CAST(id % 5 AS INT) + 1) AS kind",
        "CAST(id % 7 AS INT) AS x",
        "concat('/p/', CAST(id % 3 AS STRING)) AS page",
    )


def sorted_ids(catalog: SqlCatalog, name: str) -> list[int]:
    """The ids a table holds, sorted (duplicates kept)."""
    return sorted(catalog.load_table(name).scan().to_arrow().column("id").to_pylist())


def ids_of_kinds(start: int, end: int, *kinds: str | None) -> list[int]:
    """The ids of ``routed_source(spark, start, end)`` whose kind is one of ``kinds``."""
    return [i for i in range(start, end) if KINDS[i % 5] in kinds]


# -- the command line on a home folder ----------------------------------------------------


def catalog_of(home: Path) -> SqlCatalog:
    """The catalog the command line uses in ``home`` (SQLite, warehouse in ``home``)."""
    return SqlCatalog(DEFAULT_CATALOG_NAME, uri=f"sqlite:///{home / 'catalog.db'}", warehouse=home.as_uri())


def cli_json(home: Path, *args: str) -> Any:
    """What ``icecommit --output json ARGS`` prints in ``home``, parsed (asserts it exits 0)."""
    result = invoke(home, "--output", "json", *args)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


# -- a prepared checkpoint ----------------------------------------------------------------


def prepared_committer(
    catalog: SqlCatalog, properties: dict[str, str] | None = None, **kwargs: object
) -> ic.GlobalCommitter:
    """Fakes a job mid-checkpoint: job A's committer on a new events table, its checkpoint 1 of 20 rows prepared."""
    name = f"{catalog.name}.events"
    ic.create_table(catalog, name, EVENTS_SCHEMA, partition_by=["event"], properties=properties)
    committer = ic.GlobalCommitter(catalog, name, job_id="A", **kwargs)  # type: ignore[arg-type]
    committer.prepare(1, [write_arrow(committer.load_table(), events(0, 20), job_id="A", checkpoint_id=1)])
    return committer


def tables_committed_together(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The tables of each several-table catalog commit from now on (sorted names, one list
    per commit)."""
    together: list[list[str]] = []
    commit = commit_group.commit_together

    def spied(catalog: Any, changes: Any, **kwargs: Any) -> Any:
        together.append(sorted(".".join(c.table.name()) for c in changes))
        return commit(catalog, changes, **kwargs)

    monkeypatch.setattr(commit_group, "commit_together", spied)
    return together
