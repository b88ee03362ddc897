"""A checkpoint's checks read its rows in Spark tasks (a
:data:`~icecommit.committer.holding.RowSummaries`).

The staged data files are spread over the cluster's task slots, largest first. A check
whose rows may be cut anywhere (``not_null``, ``accepted_values``, ``in_range``,
``freshness`` where the statistics cannot answer) is summarized by each task over its
files, reading only the columns it judges, and the driver merges the tasks' summaries. A
:class:`~icecommit.core.checks.KeyedCheck` (``unique``) is cut by key: each task reads its
files' key columns and sends every key to the task its hash names (a shuffle of the keys
alone, as Arrow IPC bytes), and each of those tasks summarizes the keys it received; keys
with equal values always meet in one task, so duplicates across files are found. A user's
``custom`` function sees every row at once and runs on the driver.

Small checkpoints (staged files below the table's ``icecommit.checks.cluster-min-bytes``,
256 MiB when unset) are judged on the driver, where a Spark job would cost more than the
reading. Summaries come back pickled; nothing is broadcast (Spark Connect lacks it): the
checks and the table's metadata travel in the tasks' closure.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.io import load_file_io
from pyiceberg.manifest import DataFile
from pyiceberg.table import Table
from pyiceberg.table.metadata import TableMetadataUtil

from icecommit.catalog.data_file_rows import read_columns
from icecommit.core.checks import Check, KeyedCheck
from icecommit.core.tableprops import CLUSTER_CHECKS_PROPERTY, DEFAULT_CLUSTER_CHECKS_BYTES, whole_number
from icecommit.writers.spark import ShippedTable, ipc_bytes, ipc_table, parallelism

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_SUMMARY = "check string, summary binary"
_KEYS = "part int, keys binary"


@dataclass(frozen=True)
class SparkRowChecks:
    """Summarizes a checkpoint's rows for its checks in Spark tasks of ``spark`` (see the
    module).

    Attributes:
        spark: the session whose cluster reads the rows (classic or Spark Connect).
        min_bytes: staged files smaller than this in all are read on the driver (default:
            the table's ``icecommit.checks.cluster-min-bytes``).
        tasks: how many tasks share the files and the keys (default: the session's
            default parallelism, or its shuffle partitions on Spark Connect).
    """

    spark: SparkSession
    min_bytes: int | None = None
    tasks: int | None = None

    def __call__(self, table: Table, files: Sequence[DataFile], checks: Sequence[Check]) -> dict[str, Any]:
        """Summaries by check name of ``checks`` (each reads rows and splits) on the rows of
        ``files``; empty when the files are small (the driver reads them)."""
        least = self.min_bytes
        if least is None:
            least = whole_number(table.metadata.properties, CLUSTER_CHECKS_PROPERTY, DEFAULT_CLUSTER_CHECKS_BYTES)
        if not files or not checks or sum(f.file_size_in_bytes for f in files) < least:
            return {}
        tasks = self.tasks or parallelism(self.spark)
        shipped = ShippedTable.of(table)
        paths = [f.file_path for f in sorted(files, key=lambda f: -f.file_size_in_bytes)]
        frame = self.spark.createDataFrame([(p,) for p in paths], "path string").repartition(min(len(paths), tasks))
        found: dict[str, Any] = {}
        anywhere = [c for c in checks if not isinstance(c, KeyedCheck)]
        if anywhere:
            parts: dict[str, list[Any]] = {c.name: [] for c in anywhere}
            for row in frame.mapInArrow(_by_file(shipped, anywhere), _SUMMARY).collect():
                parts[row["check"]].append(pickle.loads(row["summary"]))
            found.update({c.name: c.merge(parts[c.name]) for c in anywhere})
        for check in checks:
            if isinstance(check, KeyedCheck):
                # more parts than tasks: two parts' hashes landing in one task are spread thinner
                keyed = frame.mapInArrow(_keys_by_part(shipped, check, tasks * 4), _KEYS).repartition(tasks, "part")
                summaries = keyed.mapInArrow(_by_key(shipped, check), _SUMMARY).collect()
                found[check.name] = check.merge([pickle.loads(row["summary"]) for row in summaries])
        return found


def _by_file(shipped: ShippedTable, checks: Sequence[Check]) -> Any:
    """A task's work for checks that cut anywhere: one summary per check of its files."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        metadata = TableMetadataUtil.parse_raw(shipped.metadata_json)
        schema, io = metadata.schema(), load_file_io(shipped.io_properties, shipped.location)
        wanted = _columns(checks, schema)
        parts: dict[str, list[Any]] = {c.name: [] for c in checks}
        for batch in batches:
            for path in batch.column(0).to_pylist():
                rows = pa.Table.from_batches(list(read_columns(io, path, wanted)))  # one file, its columns
                for check in checks:
                    parts[check.name].append(check.summarize(schema, iter(rows.to_batches())))
        read = [c for c in checks if parts[c.name]]  # a task given no file sends nothing
        if read:
            summaries = pa.array([pickle.dumps(c.merge(parts[c.name])) for c in read], pa.binary())
            yield pa.RecordBatch.from_pydict({"check": [c.name for c in read], "summary": summaries})

    return run


def _keys_by_part(shipped: ShippedTable, check: KeyedCheck, parts: int) -> Any:
    """A task's first step for a keyed check: its files' keys, cut by hash into ``parts``."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pandas as pd  # Spark's mapInArrow needs pandas: it is there in every task

        metadata = TableMetadataUtil.parse_raw(shipped.metadata_json)
        schema, io = metadata.schema(), load_file_io(shipped.io_properties, shipped.location)
        wanted = check.columns_read(schema)
        for batch in batches:
            for path in batch.column(0).to_pylist():
                keys = check.keys(schema, read_columns(io, path, wanted))
                if len(keys) == 0:
                    continue
                hashes = pd.util.hash_pandas_object(keys.to_pandas(), index=False).to_numpy()
                part = pa.array(hashes % parts, pa.uint64()).cast(pa.int32())
                for number in pc.unique(part).to_pylist():
                    chosen = ipc_bytes(keys.filter(pc.equal(part, number)))
                    yield pa.RecordBatch.from_pydict(
                        {"part": pa.array([number], pa.int32()), "keys": pa.array([chosen], pa.binary())}
                    )

    return run


def _by_key(shipped: ShippedTable, check: KeyedCheck) -> Any:
    """A task's second step for a keyed check: the summary of every key sent to it."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        received = [ipc_table(blob) for batch in batches for blob in batch.column(1).to_pylist()]
        if not received:
            return
        keys = pa.concat_tables(received, promote_options="permissive")
        summary = pickle.dumps(check.summarize_keys(keys))
        yield pa.RecordBatch.from_pydict({"check": [check.name], "summary": pa.array([summary], pa.binary())})

    return run


def _columns(checks: Sequence[Check], schema: Any) -> tuple[str, ...] | None:
    """The top-level columns any of ``checks`` reads (None: all)."""
    wanted: list[str] = []
    for check in checks:
        columns = check.columns_read(schema)
        if columns is None:
            return None
        wanted.extend(columns)
    return tuple(dict.fromkeys(wanted))


__all__ = ["SparkRowChecks"]
