"""RoutedSparkWriter: one read of a source, each row written into the table its route names.

One Spark job reads the source once. Every task splits its Arrow batches by the routing
column and feeds one :class:`~icecommit.writers.files.TaskFileWriter` per target table, so
each table gets the same kind of :class:`~icecommit.core.datafiles.WriteResult` a plain
:class:`~icecommit.writers.spark.SparkWriter` would give it. Rows whose routing value maps
to no table go to the dead-letter table when there is one, and are otherwise counted (with
a few sample values) so the driver can refuse the checkpoint: a row never vanishes.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.table import Table
from pyspark.sql import Column, DataFrame, Row
from pyspark.sql import functions as F

from icecommit.core.datafiles import WriteResult
from icecommit.core.errors import InvalidArgumentError, SchemaMismatchError
from icecommit.core.identifiers import checked_file_size
from icecommit.writers.distribution import (
    advisory_bytes,
    bin_packing,
    distributed,
    distribution_mode,
    partition_keys,
    quoted_path,
)
from icecommit.writers.files import target_file_size
from icecommit.writers.schema import aligned_columns, quoted
from icecommit.writers.spark import ShippedTable, TaskHook, current_attempt
from icecommit.writers.writer_options import WriterOptions

logger = logging.getLogger(__name__)

ROUTE_COLUMN = "__icecommit_route"
#: The task output row that carries the counts of rows no table took.
_UNROUTED = "__unrouted"
#: Distinct unrouted values a task reports (enough to name the problem in an error).
SAMPLE_VALUES = 5


@dataclass(frozen=True)
class RoutedWrite:
    """What one routed Spark job wrote.

    Attributes:
        results: per target table name, the results of its successful task attempts.
        unrouted_records: rows whose route maps to no table (only when there is no
            dead-letter table); unrouted_values: a few of their routing values.
        skipped_records: per table, rows routed to a table this job did not write
            (its checkpoint was already committed or prepared).
    """

    results: dict[str, list[WriteResult]]
    unrouted_records: int = 0
    unrouted_values: tuple[str | None, ...] = ()
    skipped_records: dict[str, int] = field(default_factory=dict)


def route_key(value: object) -> str:
    """The routing value as the routing column carries it (Spark casts it to a string)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class RoutedSparkWriter:
    """Writes one DataFrame into several tables, routed by the value of one column.

    Args:
        tables: every target table by its dotted name (the dead-letter table included).
        routes: routing value to target table name; several values may share a table.
        route_by: the routing column; it is written into a table only if that table's
            schema has a column of that name.
        dead_letter: name of the table (in ``tables``) that takes rows with an unknown or
            null route; None to count them so the caller can refuse the checkpoint.
        job_id / target_file_size / task_hook: as for :class:`SparkWriter`.
        distribution: as for :class:`SparkWriter`, over (table, partition) pairs; None
            takes the tables' ``write.distribution-mode`` when they agree, else ``hash``.
        options: the write's options (``icecommit.WriteOptions``): its ``route_by``,
            ``dead_letter``, ``target_file_size`` and ``distribution`` where the keywords
            leave them unset.
    """

    def __init__(
        self,
        tables: Mapping[str, Table],
        routes: Mapping[str, str],
        *,
        route_by: str | None = None,
        dead_letter: str | None = None,
        job_id: str | None = None,
        target_file_size: int | None = None,
        task_hook: TaskHook | None = None,
        distribution: str | None = None,
        options: WriterOptions | None = None,
    ) -> None:
        if options is not None:  # the keywords win where given
            route_by = route_by or options.route_by
            dead_letter = dead_letter or options.dead_letter
            target_file_size = target_file_size if target_file_size is not None else options.target_file_size
            distribution = distribution or options.distribution
        if route_by is None:
            raise InvalidArgumentError("route_by", None, "the column whose value names each row's table")
        unknown = sorted({name for name in routes.values() if name not in tables})
        if dead_letter is not None and dead_letter not in tables:
            unknown.append(dead_letter)
        if unknown:
            raise InvalidArgumentError("routes", unknown, "tables among those given")
        self._tables = dict(tables)
        self._routes = {route_key(k): v for k, v in routes.items()}
        self._route_by = route_by
        self._dead_letter = dead_letter
        self._job_id = job_id
        self._target_file_size = checked_file_size(target_file_size)
        self._task_hook = task_hook
        modes = {distribution_mode(t.metadata, distribution) for t in tables.values()}
        #: the distribution mode the writes use
        self.distribution = modes.pop() if len(modes) == 1 else "hash"

    def _projection(self, df: DataFrame) -> tuple[list[Column], dict[str, list[str]]]:
        """One select for every target: the route, then each table's aligned columns."""
        routed = {name: t for name, t in self._tables.items() if name != self._dead_letter}
        check_routed_frame(df, routed, self._route_by)
        shared = {self._route_by} | {c for t in routed.values() for c in t.schema().column_names}
        columns = [F.col(quoted(self._route_by)).cast("string").alias(ROUTE_COLUMN)]
        names: dict[str, list[str]] = {}
        for i, (name, table) in enumerate(self._tables.items()):
            # the dead-letter table keeps what it has columns for and ignores the rest
            ignore = df.columns if name == self._dead_letter else shared
            aligned = aligned_columns(df, table.schema(), name, ignore=ignore)
            # transport names by position: mapInArrow parses names, and a table's own may hold
            # a backtick or a dot; the task gives each table its names back
            names[name] = [f"__t{i}__{j}" for j in range(len(table.schema().fields))]
            columns.extend(c.alias(alias) for c, alias in zip(aligned, names[name], strict=True))
        return columns, names

    def write(self, df: DataFrame, checkpoint_id: int, *, targets: Collection[str] | None = None) -> RoutedWrite:
        """Run one Spark job that routes and writes ``df``.

        Args:
            targets: the tables to write (all when None); rows routed to the others are
                counted as skipped, not written.

        Raises:
            SchemaMismatchError: the DataFrame does not fit a table, or lacks the routing
                column (before any task runs).
        """
        columns, names = self._projection(df)
        projected = df.select(*columns)
        plain = {name: [f.name for f in table.schema().fields] for name, table in self._tables.items()}
        wanted = set(self._tables) if targets is None else set(targets)
        specs = {name: ShippedTable.of(table) for name, table in self._tables.items() if name in wanted}
        # each routing value's table, by the value's position among the sorted values: a task
        # finds every row's table with one look-up per batch, whatever the number of tables
        ordered_keys = sorted(self._routes)
        all_keys = pa.array(ordered_keys, pa.string())
        targets_in_order = sorted(set(self._routes.values()))
        table_of_key = np.array([targets_in_order.index(self._routes[k]) for k in ordered_keys], dtype=np.int64)
        dead_letter = self._dead_letter
        job_id, target_size, hook = self._job_id, self._target_file_size, self._task_hook

        def route_task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            attempt = current_attempt()
            writers = {
                name: shipped.file_writer(
                    job_id=job_id, checkpoint_id=checkpoint_id, attempt=attempt, target_size=target_size
                )
                for name, shipped in specs.items()
            }
            unrouted = 0
            samples: list[str | None] = []
            skipped: Counter[str] = Counter()

            def take(name: str, batch: pa.RecordBatch, rows: pa.Array) -> None:
                """Rows ``rows`` (positions) of ``batch`` to table ``name``: its columns only (the
                batch carries every table's)."""
                writer = writers.get(name)
                if writer is None:
                    skipped[name] += len(rows)
                    return
                wanted_columns = [batch.column(c).take(rows) for c in names[name]]
                writer.add(pa.RecordBatch.from_arrays(wanted_columns, names=plain[name]))

            for batch in batches:
                if batch.num_rows == 0:
                    continue
                route = batch.column(ROUTE_COLUMN)
                found = pc.fill_null(pc.index_in(route, value_set=all_keys), -1).to_numpy(zero_copy_only=False)
                table = np.where(found >= 0, table_of_key[np.maximum(found, 0)], -1)  # -1: no table's value
                order = np.argsort(table, kind="stable")  # each table's rows together, in their order
                by_table = table[order]
                starts = np.concatenate(([0], np.flatnonzero(np.diff(by_table)) + 1))
                lost = pa.array([], pa.int64())
                for start, end in zip(starts, [*starts[1:], len(order)], strict=True):
                    rows = pa.array(order[start:end])
                    if by_table[start] < 0:
                        lost = rows
                    else:
                        take(targets_in_order[by_table[start]], batch, rows)
                if not len(lost):
                    continue
                if dead_letter is not None:
                    take(dead_letter, batch, lost)
                    continue
                unrouted += len(lost)
                for value in pc.unique(route.take(lost)).to_pylist():
                    if len(samples) < SAMPLE_VALUES and value not in samples:
                        samples.append(value)
            out_targets, out_results = [], []
            for name, writer in writers.items():
                result = writer.close()
                if hook is not None:
                    hook(attempt, result)
                out_targets.append(name)
                out_results.append(result.to_json())
            out_targets.append(_UNROUTED)
            out_results.append(json.dumps({"records": unrouted, "values": samples, "skipped": dict(skipped)}))
            yield pa.RecordBatch.from_pydict({"target": out_targets, "result": out_results})

        with distributed(projected, self._keys(names), self.distribution) as spread:
            job = spread.mapInArrow(route_task, "target string, result string")
            if self.distribution == "bin-pack":
                sizes = [self._target_file_size or target_file_size(t.metadata) for t in self._tables.values()]
                with bin_packing(df.sparkSession, advisory_bytes(min(sizes), None)):
                    rows = job.collect()
            else:
                rows = job.collect()
        return _gather(rows, specs)

    def _keys(self, names: dict[str, list[str]]) -> list[Column]:
        """Distribution keys over (table, partition) pairs: the table a row goes to, then
        each table's partition keys where the row goes to that table."""
        route = F.col(ROUTE_COLUMN)
        target = F.lit(-1)
        keys: list[Column] = []
        for index, (name, table) in enumerate(self._tables.items()):
            values = [value for value, routed in self._routes.items() if routed == name]
            if not values:
                continue
            mine = route.isin(values)
            target = F.when(mine, F.lit(index)).otherwise(target)
            top = {field.name: alias for field, alias in zip(table.schema().fields, names[name], strict=True)}

            def resolve(path: list[str], top: dict[str, str] = top) -> Column:
                return F.col(quoted_path([top[path[0]], *path[1:]]))

            keys.extend(F.when(mine, key) for key in partition_keys(table.metadata, resolve))
        return [target, *keys]

    @property
    def tables(self) -> dict[str, Table]:
        """The target tables by name."""
        return dict(self._tables)


def check_routed_frame(df: DataFrame, tables: Mapping[str, Table], route_by: str) -> None:
    """Check, before anything runs, that ``df`` has the routing column and fits every
    routed table; a column that no table has is refused as a likely typo.

    Raises:
        SchemaMismatchError: names the column (and the table) at fault.
    """
    if route_by not in df.columns:
        raise SchemaMismatchError(route_by, "routing column is missing from the DataFrame")
    shared = {route_by} | {c for t in tables.values() for c in t.schema().column_names}
    for name, table in tables.items():
        aligned_columns(df, table.schema(), name, ignore=shared)
    unknown = [c for c in df.columns if c not in shared]
    if unknown:
        raise SchemaMismatchError(
            unknown[0],
            "no routed table has this column (and it is not the routing column); schema_mode='add-columns' adds it",
        )


def _gather(rows: Sequence[Row], written: Collection[str]) -> RoutedWrite:
    results: dict[str, list[WriteResult]] = {name: [] for name in written}
    unrouted = 0
    values: list[str | None] = []
    skipped: Counter[str] = Counter()
    for row in rows:
        target, text = row["target"], row["result"]
        if target != _UNROUTED:
            results[target].append(WriteResult.from_json(text))
            continue
        counts = json.loads(text)
        unrouted += int(counts["records"])
        values.extend(v for v in counts["values"] if v not in values)
        skipped.update({k: int(v) for k, v in counts["skipped"].items()})
    for name, task_results in results.items():
        logger.info(
            "routed write to %s: %d task(s), %d records in %d files",
            name,
            len(task_results),
            sum(r.records for r in task_results),
            sum(len(r.data_files) for r in task_results),
        )
    return RoutedWrite(results, unrouted, tuple(values[:SAMPLE_VALUES]), dict(skipped))


__all__ = ["RoutedSparkWriter", "RoutedWrite", "check_routed_frame", "route_key"]
