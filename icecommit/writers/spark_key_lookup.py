"""An upsert's keys looked up by Spark tasks (a :class:`~icecommit.core.key_lookup.KeyLookup`).

The committer chooses the candidate data files (their partition and key column bounds can
hold a key) on the driver; this runs the look-up itself in one Spark job: the candidate
files are spread over the cluster's task slots, each task reads its files' key columns,
joins them at once with the checkpoint's keys (shipped to the tasks as Arrow IPC bytes, in the
task's closure: no broadcast, which Spark Connect lacks) and returns, per file that holds
a key, the positions and the keys found. Small look-ups (candidate files below the table's
``icecommit.upsert.cluster-lookup-min-bytes``, 256 MiB when unset) run on the driver, where
a Spark job would cost more than the reading.

A look-up that fails in a task (a file without field ids and without the key column's
name) returns its error as a value, raised on the driver as the same
:class:`~icecommit.errors.ValidationError` the driver's look-up raises.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
from pyiceberg.io import load_file_io
from pyiceberg.manifest import DataFile
from pyiceberg.table import Table
from pyiceberg.table.metadata import TableMetadataUtil

from icecommit.catalog.data_file_keys import look_up_here, match_files
from icecommit.core.errors import ValidationError
from icecommit.core.key_lookup import Match
from icecommit.core.tableprops import CLUSTER_LOOKUP_PROPERTY, DEFAULT_CLUSTER_LOOKUP_BYTES, whole_number
from icecommit.writers.spark import ShippedTable, ipc_bytes, ipc_table, parallelism

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_RESULT = "path string, positions array<bigint>, keys binary, error string"


@dataclass(frozen=True)
class SparkKeyLookup:
    """Looks an upsert's keys up in Spark tasks of ``spark`` (see the module).

    Attributes:
        spark: the session whose cluster runs the look-up (classic or Spark Connect).
        min_bytes: candidate files smaller than this in all are read on the driver
            (default: the table's ``icecommit.upsert.cluster-lookup-min-bytes``).
        tasks: how many tasks share the files (default: the session's default
            parallelism, or its shuffle partitions on Spark Connect).
    """

    spark: SparkSession
    min_bytes: int | None = None
    tasks: int | None = None

    def __call__(
        self, table: Table, files: Sequence[DataFile], keys: pa.Table, deleted: Mapping[str, Collection[int]]
    ) -> dict[str, Match]:
        least = self.min_bytes
        if least is None:
            least = whole_number(table.metadata.properties, CLUSTER_LOOKUP_PROPERTY, DEFAULT_CLUSTER_LOOKUP_BYTES)
        if not files or sum(f.file_size_in_bytes for f in files) < least:
            return look_up_here(table, files, keys, deleted)
        shipped = ShippedTable.of(table)
        shipped_keys = ipc_bytes(keys)

        def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            metadata = TableMetadataUtil.parse_raw(shipped.metadata_json)
            io = load_file_io(shipped.io_properties, shipped.location)
            wanted = ipc_table(shipped_keys)
            paths: list[str] = []
            deleted_here: dict[str, list[int]] = {}
            for batch in batches:
                for path, gone in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist(), strict=True):
                    paths.append(path)
                    deleted_here[path] = gone or []
            try:
                matches = match_files(metadata, io, paths, wanted, deleted_here)
            except ValidationError as e:
                yield _row(paths[0] if paths else "", [], None, str(e))
                return
            for path, (positions, found) in matches.items():
                yield _row(path, positions, ipc_bytes(found), None)

        largest_first = sorted(files, key=lambda f: -f.file_size_in_bytes)
        units = [(f.file_path, sorted(int(p) for p in deleted.get(f.file_path, ()))) for f in largest_first]
        frame = self.spark.createDataFrame(units, "path string, deleted array<bigint>")
        rows = frame.repartition(min(len(units), self.tasks or parallelism(self.spark))).mapInArrow(run, _RESULT)
        found: dict[str, Match] = {}
        for row in rows.collect():
            if row["error"] is not None:
                raise ValidationError(row["error"])
            found[row["path"]] = (list(row["positions"]), ipc_table(row["keys"]))
        return found


def _row(path: str, positions: list[int], keys: bytes | None, error: str | None) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict(
        {
            "path": pa.array([path], pa.string()),
            "positions": pa.array([positions], pa.list_(pa.int64())),
            "keys": pa.array([keys], pa.binary()),
            "error": pa.array([error], pa.string()),
        }
    )


__all__ = ["SparkKeyLookup"]
