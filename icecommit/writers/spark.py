"""SparkWriter: one Spark job whose tasks write Iceberg data files and report them.

Each task receives its rows as Arrow batches (``mapInArrow``), writes them with a
:class:`~icecommit.writers.files.TaskFileWriter`, and returns one row holding its
:class:`~icecommit.core.datafiles.WriteResult` as JSON. The driver collects those rows; Spark
returns the output of exactly one successful attempt per task, so the files of failed or
retried attempts never reach the committer (they stay on storage as orphans for the
sweeper, never referenced by the table).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

import pyarrow as pa
from pyiceberg.io import load_file_io
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.table.locations import load_location_provider
from pyiceberg.table.metadata import TableMetadataUtil
from pyspark import TaskContext
from pyspark.sql import DataFrame, SparkSession

from icecommit.core.datafiles import WriteResult
from icecommit.core.errors import InvalidArgumentError
from icecommit.core.evolution import STRICT, checked_mode, plan_changes
from icecommit.core.identifiers import checked_file_size
from icecommit.writers.arrow import write_with
from icecommit.writers.distribution import (
    advisory_bytes,
    bin_packing,
    distributed,
    distribution_mode,
    partition_keys,
)
from icecommit.writers.files import TaskFileWriter, target_file_size
from icecommit.writers.schema import align_to_schema, iceberg_struct
from icecommit.writers.writer_options import WriterOptions

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TaskAttempt:
    """Which Spark task attempt is running (handed to task hooks)."""

    partition_id: int
    attempt: int
    stage_id: int


def current_attempt() -> TaskAttempt:
    """The Spark task attempt this code runs in (zeros outside a task)."""
    context = TaskContext.get()
    if context is None:
        return TaskAttempt(0, 0, 0)
    return TaskAttempt(context.partitionId(), context.attemptNumber(), context.stageId())


@dataclass(frozen=True)
class ShippedTable:
    """What a task needs of a table to write its data files, as plain values."""

    metadata_json: str
    io_properties: dict[str, str]
    location: str

    @classmethod
    def of(cls, table: Table) -> ShippedTable:
        """The table's current metadata, FileIO properties and location."""
        return cls(table.metadata.model_dump_json(), dict(table.io.properties), table.metadata.location)

    def file_writer(
        self, *, job_id: str | None, checkpoint_id: int, attempt: TaskAttempt, target_size: int | None
    ) -> TaskFileWriter:
        """A task file writer for this table, in the task (parses the metadata there)."""
        metadata = TableMetadataUtil.parse_raw(self.metadata_json)
        return TaskFileWriter(
            metadata,
            load_file_io(self.io_properties, self.location),
            job_id=job_id,
            checkpoint_id=checkpoint_id,
            task_id=attempt.partition_id,
            attempt=attempt.attempt,
            location_provider=load_location_provider(metadata.location, metadata.properties),
            target_size=target_size,
        )


def ipc_bytes(table: pa.Table) -> bytes:
    """An Arrow table as IPC stream bytes (what tasks and the driver send each other)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def ipc_table(data: bytes) -> pa.Table:
    """The Arrow table of :func:`ipc_bytes`."""
    return pa.ipc.open_stream(pa.BufferReader(data)).read_all()


def parallelism(spark: SparkSession) -> int:
    """How many tasks the session's cluster runs at once (its shuffle partitions on Spark
    Connect, which has no SparkContext)."""
    try:
        return int(spark.sparkContext.defaultParallelism)
    except Exception:  # Spark Connect has no SparkContext
        return int(spark.conf.get("spark.sql.shuffle.partitions") or 8)


#: Called in each task after its files are closed and before its result is returned;
#: tests use it to fail an attempt after it has written files.
TaskHook = Callable[[TaskAttempt, WriteResult], None]


class SchemaEvolution(Protocol):
    """Commits, as checkpoint ``checkpoint_id`` of ``job_id``, the schema change that rows
    of ``incoming`` need in ``table`` under ``schema_mode``, and returns the table as it is
    then (:class:`icecommit.committer.SchemaEvolver` is one: the writers cannot commit)."""

    def __call__(
        self, table: Table, incoming: Schema, *, job_id: str, checkpoint_id: int, schema_mode: str
    ) -> Table: ...


class SparkWriter:
    """Writes a DataFrame into a table's data location as Iceberg data files.

    The writer never commits: it returns one :class:`WriteResult` per task for the
    global committer. It never lists or deletes anything.

    Args:
        table: the target table (its schema, spec, properties and FileIO are used).
        job_id: recorded in the results and in file names.
        target_file_size: roll files at this many bytes; defaults to the table's
            ``write.target-file-size-bytes`` (512 MiB).
        task_hook: called in every task attempt after it has written its files.
        distribution: ``"none"``, ``"hash"`` or ``"bin-pack"``: how rows reach the tasks
            (see :mod:`icecommit.writers.distribution`); None takes the table's
            ``write.distribution-mode``, else ``hash`` for a partitioned table.
        shuffle_ratio: for ``bin-pack``, shuffle bytes per Parquet byte (what earlier
            writes of the table showed; ``ic.write`` keeps it in icecommit's state).
        schema_mode: ``strict``, ``add-columns`` or ``merge`` (None: the table's
            ``icecommit.schema-mode``, else ``strict``): columns the table lacks, or wider
            types, are added by ``evolve`` before any task writes, and the tasks write with
            the resulting schema's field ids (:attr:`table`). Nulls in a required column
            are refused at prepare (``ic.write`` makes it optional and writes again).
        evolve: commits the schema change (``icecommit.committer.SchemaEvolver(catalog)``);
            needs ``job_id``. Without it, a write that needs a change is refused.
        options: the write's options (``icecommit.WriteOptions``): its ``target_file_size``
            and ``distribution`` where the keywords above leave them unset (its schema mode
            is the caller's: ``ic.write`` evolves the table before the tasks write).
    """

    def __init__(
        self,
        table: Table,
        *,
        job_id: str | None = None,
        target_file_size: int | None = None,
        task_hook: TaskHook | None = None,
        distribution: str | None = None,
        shuffle_ratio: float | None = None,
        schema_mode: str | None = None,
        evolve: SchemaEvolution | None = None,
        options: WriterOptions | None = None,
    ) -> None:
        if options is not None:
            target_file_size = target_file_size if target_file_size is not None else options.target_file_size
            distribution = distribution or options.distribution
        self._table = table
        self._schema_mode = checked_mode(schema_mode, table.metadata.properties)
        self._evolve = evolve
        self._job_id = job_id
        self._target_file_size = checked_file_size(target_file_size)
        self._task_hook = task_hook
        #: the distribution mode the writes use
        self.distribution = distribution_mode(table.metadata, distribution)
        #: for ``bin-pack``: the shuffle bytes per Parquet byte it packs with (None: the default)
        self.shuffle_ratio = shuffle_ratio
        #: for ``bin-pack``: the advisory shuffle bytes per task of the last write
        self.advisory_bytes: int | None = None

    @property
    def table(self) -> Table:
        """The table the writes use (after a schema change, the table as the change left it)."""
        return self._table

    def _evolved(self, df: DataFrame, checkpoint_id: int) -> None:
        """Commit the change the rows of ``df`` need under the writer's schema mode, first."""
        if self._schema_mode == STRICT:
            return
        name = ".".join(self._table.name())
        incoming = iceberg_struct(df.schema, name, known=self._table.schema().column_names)
        changes = plan_changes(self._table.schema(), incoming, self._schema_mode, table=name)  # refuses
        if not changes:
            return
        missing = "evolve" if self._evolve is None else "job_id" if self._job_id is None else None
        if missing is not None:
            raise InvalidArgumentError(
                missing, None, f"{'a SchemaEvolution' if missing == 'evolve' else 'the job id'}: "
                f"schema_mode={self._schema_mode!r} commits {', '.join(str(c) for c in changes)} before the tasks "
                "write (SparkWriter(table, job_id=..., evolve=icecommit.committer.SchemaEvolver(catalog)))",
            )  # fmt: skip
        assert self._evolve is not None and self._job_id is not None
        self._table = self._evolve(
            self._table, Schema(*incoming.fields), job_id=self._job_id, checkpoint_id=checkpoint_id,
            schema_mode=self._schema_mode,
        )  # fmt: skip

    def prepare_frame(self, df: DataFrame) -> DataFrame:
        """The DataFrame projected onto the table's schema.

        Raises:
            SchemaMismatchError: the DataFrame does not fit the table.
        """
        return align_to_schema(df, self._table.schema(), ".".join(self._table.name()))

    def write(self, df: DataFrame, checkpoint_id: int) -> list[WriteResult]:
        """Run one Spark job that writes ``df``; return the results of successful attempts.

        Raises:
            SchemaMismatchError: the DataFrame does not fit the table under the schema
                mode (before any task runs, and before any change).
            InvalidArgumentError: a change is needed and the writer has no ``evolve``.
        """
        self._evolved(df, checkpoint_id)
        aligned = self.prepare_frame(df)
        metadata = self._table.metadata
        # transport names by position: mapInArrow parses column names, and a table's own may
        # hold a backtick; each task gives the columns their names back
        names = list(aligned.columns)
        shipped = ShippedTable.of(self._table)
        job_id = self._job_id
        target_size = self._target_file_size
        hook = self._task_hook

        def write_task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            attempt = current_attempt()
            writer = shipped.file_writer(
                job_id=job_id, checkpoint_id=checkpoint_id, attempt=attempt, target_size=target_size
            )
            result = write_with(writer, (pa.RecordBatch.from_arrays(b.columns, names=names) for b in batches))
            if hook is not None:
                hook(attempt, result)
            yield pa.RecordBatch.from_pydict({"result": [result.to_json()]})

        with distributed(aligned, partition_keys(metadata), self.distribution) as spread:
            job = spread.toDF(*[f"_c{i}" for i in range(len(names))]).mapInArrow(write_task, "result string")
            if self.distribution == "bin-pack":
                self.advisory_bytes = advisory_bytes(target_size or target_file_size(metadata), self.shuffle_ratio)
                with bin_packing(df.sparkSession, self.advisory_bytes):
                    rows = job.collect()
            else:
                rows = job.collect()
        results = [WriteResult.from_json(row["result"]) for row in rows]
        logger.info(
            "checkpoint %d (%s): %d task(s) wrote %d records in %d files",
            checkpoint_id,
            self.distribution,
            len(results),
            sum(r.records for r in results),
            sum(len(r.data_files) for r in results),
        )
        return results
