"""A compaction's rewrite: one partition's files read in order, their deleted rows left
out, and written again as files near the target size (in this process, or one Spark task
per partition), with the exact lineage of every row.

Position delete files that apply to an input are applied while it is read (pyiceberg's
scan does it); the rows they removed are not written again, and the lineage records them
as removed by the snapshot that deleted them, so that reconciliation still accounts for
them once the delete files are gone. The count is checked: the rows read plus the
distinct deleted positions must be the file's record count, else the group is aborted.
"""

from __future__ import annotations

import json
import logging
import pickle
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
from pyiceberg.expressions import AlwaysTrue
from pyiceberg.io import FileIO, load_file_io
from pyiceberg.io.pyarrow import ArrowScan
from pyiceberg.table import FileScanTask, Table
from pyiceberg.table.locations import load_location_provider
from pyiceberg.table.metadata import TableMetadata, TableMetadataUtil

from icecommit.catalog.position_deletes import deleted_positions
from icecommit.core.datafiles import DataFileRecord
from icecommit.core.lineage import deleted_by, deleting_snapshot, path_key
from icecommit.writers.arrow import fitted, write_with
from icecommit.writers.files import TaskFileWriter

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

logger = logging.getLogger(__name__)


class Aborted(Exception):
    """The group cannot be committed as planned; nothing of it lands."""


@dataclass(frozen=True)
class Written:
    """What rewriting one partition's files produced: the files, and how many rows of
    which input each holds (input path key, output path key, rows; the output is a
    :func:`~icecommit.core.lineage.deleted_by` marker for rows a position delete had
    removed), or why it failed."""

    outputs: tuple[DataFileRecord, ...] = ()
    rewritten: tuple[tuple[str, str, int], ...] = ()
    error: str | None = None

    @property
    def dropped(self) -> int:
        """Rows of its inputs not written again: position deletes had removed them."""
        return sum(n for _, output, n in self.rewritten if deleting_snapshot(output) is not None)

    def to_json(self) -> str:
        return json.dumps(
            {"outputs": [f.to_dict() for f in self.outputs], "rewritten": self.rewritten, "error": self.error}
        )

    @classmethod
    def from_json(cls, text: str) -> Written:
        data = json.loads(text)
        return cls(
            tuple(DataFileRecord.from_dict(f) for f in data["outputs"]),
            tuple((i, o, int(n)) for i, o, n in data["rewritten"]),
            data["error"],
        )


def rewrite_partition(
    metadata: TableMetadata,
    io: FileIO,
    tasks: Sequence[FileScanTask],
    *,
    target_size: int,
    task_id: int = 0,
    attempt: int = 0,
    added_by: Mapping[str, tuple[int, int]] | None = None,
) -> Written:
    """Read one partition's files, in order, a batch at a time, without the rows their
    position delete files remove, and write the rest again as files near ``target_size``
    (what one compaction task does). Rows keep their order, so the output files hold
    consecutive runs of the inputs: the lineage is exact.

    Args:
        added_by: each delete file the tasks carry (by path): its sequence number and the
            snapshot that added it (the lineage says which snapshot removed the rows left
            out; where several delete one row, the oldest).

    Returns:
        The files and the lineage; or, where it read another number of rows than it
        wrote, only why (its files removed).

    Raises:
        Aborted: a file holds another number of rows than its metadata and its delete
            files say (nothing is left behind).
    """
    writer = TaskFileWriter(
        metadata,
        io,
        job_id=None,
        checkpoint_id=0,
        task_id=task_id,
        attempt=attempt,
        location_provider=load_location_provider(metadata.location, metadata.properties),
        target_size=target_size,
    )
    read: list[tuple[str, int]] = []
    dropped: list[tuple[str, str, int]] = []
    sources = added_by or {}
    snapshots = {path: snapshot for path, (_, snapshot) in sources.items()}

    def batches() -> Iterator[pa.RecordBatch]:
        scan = ArrowScan(metadata, io, metadata.schema(), AlwaysTrue())
        for task in tasks:
            data = task.file
            unknown = sorted(d.file_path for d in task.delete_files if d.file_path not in sources)
            if unknown:
                raise Aborted(f"no snapshot is known to have added the delete file {unknown[0]}")
            deletes = sorted(task.delete_files, key=lambda d: sources[d.file_path])
            positions = deleted_positions(io, data.file_path, deletes, snapshots) if deletes else {}
            gone = Counter(s for pos, s in positions.items() if 0 <= pos < data.record_count)
            rows = 0
            for batch in scan.to_record_batches([task]):
                rows += batch.num_rows
                yield batch
            if rows + sum(gone.values()) != data.record_count:
                raise Aborted(
                    f"{data.file_path} holds {rows} rows after {sum(gone.values())} deleted ones, its metadata "
                    f"says {data.record_count}; the group is not rewritten"
                )
            read.append((data.file_path, rows))
            dropped.extend((path_key(data.file_path), deleted_by(s), n) for s, n in sorted(gone.items()))

    # files of one partition may come from different writers (icecommit's, pyiceberg's append,
    # another engine's), read back with different Arrow types for one column (string and
    # large_string): each batch is cast to the table's types before they are written together
    written = write_with(writer, fitted(batches(), metadata.schema(), metadata.location))
    outputs = written.data_files
    lineage = _rewritten(read, [(f.path, f.record_count) for f in outputs])
    if isinstance(lineage, str):  # its files are written: nothing else will remove them
        remove_uncommitted(io, [f.path for f in outputs])
        return Written(error=lineage)
    return Written(outputs, lineage + tuple(dropped))


def _rewritten(
    inputs: Sequence[tuple[str, int]], outputs: Sequence[tuple[str, int]]
) -> tuple[tuple[str, str, int], ...] | str:
    """Rows of consecutive inputs written to consecutive outputs: (input, output, rows) for
    every pair that shares rows (path keys); or, where the rows read and written do not add
    up, why the group is not committed."""
    if sum(n for _, n in inputs) != sum(n for _, n in outputs):
        return (
            f"the rewrite read {sum(n for _, n in inputs)} rows and wrote {sum(n for _, n in outputs)}; "
            "the group is not committed"
        )
    runs: list[tuple[str, str, int]] = []
    outs = iter(outputs)
    out_path, out_left = "", 0
    for in_path, in_left in inputs:
        while in_left:
            if not out_left:
                out_path, out_left = next(outs)
                continue
            take = min(in_left, out_left)
            runs.append((path_key(in_path), path_key(out_path), take))
            in_left -= take
            out_left -= take
    return tuple(runs)


def rewrite_locally(
    table: Table, target: int, partitions: Sequence[Sequence[FileScanTask]], added_by: Mapping[str, tuple[int, int]]
) -> list[Written]:
    """Each partition rewritten in this process, one after the other."""
    written: list[Written] = []
    try:
        for unit, tasks in enumerate(partitions):
            written.append(_rewrite_unit(table.metadata, table.io, tasks, target, unit, 0, added_by))
    except BaseException:  # interrupted: nothing of the group stays
        remove_uncommitted(table.io, [f.path for w in written for f in w.outputs])
        raise
    return written


def _rewrite_unit(
    metadata: TableMetadata,
    io: FileIO,
    tasks: Sequence[FileScanTask],
    target: int,
    unit: int,
    attempt: int,
    added_by: Mapping[str, tuple[int, int]],
) -> Written:
    """One partition rewritten, or why it could not be (its own files already removed)."""
    try:
        written = rewrite_partition(
            metadata, io, tasks, target_size=target, task_id=unit, attempt=attempt, added_by=added_by
        )
    except Exception as e:  # reported, so that the group is aborted
        logger.warning("compaction: rewriting partition %d failed: %r", unit, e)
        return Written(error=str(e) if isinstance(e, Aborted) else f"{type(e).__name__}: {e}")
    if written.error is not None:  # logged as an Aborted raised by the rewrite is
        logger.warning("compaction: rewriting partition %d failed: Aborted(%r)", unit, written.error)
    return written


def rewrite_with_spark(
    spark: SparkSession,
    table: Table,
    target: int,
    partitions: Sequence[Sequence[FileScanTask]],
    added_by: Mapping[str, tuple[int, int]],
) -> list[Written]:
    """One Spark job: each partition's files rewritten by one task. A task that fails
    removes its own files and reports why, so the group is aborted, not half-written."""
    from icecommit.writers.spark import ShippedTable, current_attempt

    shipped = ShippedTable.of(table)
    sources = dict(added_by)
    units = [(unit, pickle.dumps(list(tasks))) for unit, tasks in enumerate(partitions)]

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        attempt = current_attempt()
        metadata = TableMetadataUtil.parse_raw(shipped.metadata_json)
        io = load_file_io(shipped.io_properties, shipped.location)
        for batch in batches:
            for unit, blob in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist(), strict=True):
                result = _rewrite_unit(metadata, io, pickle.loads(blob), target, unit, attempt.attempt, sources)
                yield pa.RecordBatch.from_pydict(
                    {"unit": pa.array([unit], pa.int32()), "result": pa.array([result.to_json()], pa.string())}
                )

    frame = spark.createDataFrame(units, "unit int, tasks binary").repartition(len(units), "unit")
    rows = frame.mapInArrow(run, "unit int, result string").collect()
    by_unit = {row["unit"]: Written.from_json(row["result"]) for row in rows}
    return [by_unit[unit] for unit, _ in units]


def remove_uncommitted(io: FileIO, paths: Sequence[str]) -> None:
    """Delete files this compaction wrote and did not commit (nothing references them)."""
    for path in paths:
        try:
            io.delete(path)
        except OSError:
            logger.warning("could not remove uncommitted compaction output %s", path)


__all__ = ["Aborted", "Written", "remove_uncommitted", "rewrite_locally", "rewrite_partition", "rewrite_with_spark"]
