"""A task's step, from any Python process: Arrow record batches in, Iceberg data files and a
:class:`~icecommit.core.datafiles.WriteResult` out.

:func:`write_arrow` is what every Spark task of :class:`~icecommit.writers.SparkWriter`
does with its rows, offered to any other Python process (another engine's workers, a
service, a test). Its results go to :meth:`GlobalCommitter.prepare
<icecommit.committer.GlobalCommitter.prepare>` like a Spark job's: nothing is committed
until the checkpoint is, and files of an attempt that is not reported are never committed.

The batches are fitted to the table's schema by name, as ``ic.write`` fits a DataFrame:
optional columns they lack are written as nulls, widening casts (int to long, float to
double, a wider decimal, another timestamp unit) are applied, and anything else (an unknown
column, a missing required one, a type that would lose values, an instant written to a
timestamp without zone or the reverse) is refused with the column named, before a file is
written. A failure while writing removes the files the call had written.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from typing import TypeAlias

import pyarrow as pa
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.table.locations import load_location_provider

from icecommit.core.datafiles import WriteResult
from icecommit.core.errors import InvalidArgumentError, SchemaMismatchError
from icecommit.core.identifiers import checked_file_size
from icecommit.writers.files import TaskFileWriter

#: What ``write_arrow`` takes as rows.
Batches: TypeAlias = pa.Table | pa.RecordBatch | pa.RecordBatchReader | Iterable[pa.RecordBatch]


def write_arrow(
    table: Table,
    batches: Batches,
    *,
    job_id: str | None,
    checkpoint_id: int,
    task_id: int = 0,
    attempt: int = 0,
    target_size: int | None = None,
) -> WriteResult:
    """Write Arrow rows as Iceberg data files of ``table`` and report them (see the module).

    Args:
        table: the table, as loaded from its catalog (its current schema, spec and
            properties decide the files).
        batches: record batches, a ``pyarrow.Table`` or a ``RecordBatchReader``; streamed,
            so the rows need not fit in memory at once.
        job_id / checkpoint_id: the checkpoint the files belong to (they name the files).
        task_id / attempt: this writer among the checkpoint's writers, and its retry number;
            together unique per checkpoint, so that two writers never pick one file name.
        target_size: roll files at this many bytes (default: the table's
            ``write.target-file-size-bytes``).

    Returns:
        The :class:`WriteResult` to hand to ``GlobalCommitter.prepare`` with the others
        of the checkpoint.

    Raises:
        SchemaMismatchError: the rows do not fit the table's schema (the column is named);
            no file is left behind.
        InvalidArgumentError: an argument of the wrong kind.
    """
    if not isinstance(table, Table):
        raise InvalidArgumentError("table", table, "a pyiceberg Table (catalog.load_table(name))")
    if job_id is not None and (not isinstance(job_id, str) or not job_id.strip()):
        raise InvalidArgumentError("job_id", job_id, "a non-empty string, or None")
    for argument, value in (("checkpoint_id", checkpoint_id), ("task_id", task_id), ("attempt", attempt)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InvalidArgumentError(argument, value, "a whole number of at least 0")
    writer = TaskFileWriter(
        table.metadata,
        table.io,
        job_id=job_id,
        checkpoint_id=checkpoint_id,
        task_id=task_id,
        attempt=attempt,
        location_provider=load_location_provider(table.metadata.location, table.metadata.properties),
        target_size=checked_file_size(target_size),
    )
    name = ".".join(table.name()) if table.name() else table.metadata.location
    return write_with(writer, fitted(_as_batches(batches), table.schema(), name))


def write_with(writer: TaskFileWriter, batches: Iterable[pa.RecordBatch]) -> WriteResult:
    """Write every batch with ``writer`` and close it; on any failure, remove what it wrote
    and raise (the step every task performs)."""
    try:
        rows = iter(batches)
        while True:
            began = time.perf_counter()
            batch = next(rows, None)
            writer.seconds["arrow-in"] += time.perf_counter() - began
            if batch is None:
                break
            writer.add(batch)
        return writer.close()
    except BaseException:
        writer.abort()
        raise


def fitted(batches: Iterable[pa.RecordBatch], schema: Schema, table: str) -> Iterator[pa.RecordBatch]:
    """Each batch projected onto the table's columns, in order, with the table's Arrow types.

    Raises:
        SchemaMismatchError: as :func:`write_arrow`, at the first batch that does not fit.
    """
    # every field nullable here: nulls in required columns (nested ones too) are the task
    # writer's to find and report by column, as they are for a Spark task's rows
    target = pa.schema(
        [pa.field(f.name, _nullable(f.type)) for f in schema_to_pyarrow(schema, include_field_ids=False)]
    )
    checked: dict[pa.Schema, bool] = {}
    for batch in batches:
        if not isinstance(batch, pa.RecordBatch):
            raise InvalidArgumentError("batches", type(batch).__name__, "pyarrow record batches")
        if batch.schema not in checked:
            checked[batch.schema] = _check_columns(batch.schema, schema, target, table)
        if checked[batch.schema]:
            # the table's columns and types already: only the schema object differs (a column's
            # nullability, metadata), and every batch leaves with the one target schema so that
            # batches of different sources can be written into one file
            yield batch if batch.schema == target else pa.RecordBatch.from_arrays(batch.columns, schema=target)
            continue
        columns = []
        for field in target:
            index = batch.schema.get_field_index(field.name)
            if index < 0:
                columns.append(pa.nulls(batch.num_rows, field.type))
                continue
            column = batch.column(index)
            try:
                columns.append(column if column.type == field.type else column.cast(field.type, safe=True))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                raise SchemaMismatchError(field.name, f"a value does not fit {field.type}: {e}", table=table) from e
        yield pa.RecordBatch.from_arrays(columns, schema=target)


def _nullable(data_type: pa.DataType) -> pa.DataType:
    """``data_type`` with every nested field nullable."""
    if pa.types.is_struct(data_type):
        return pa.struct([pa.field(f.name, _nullable(f.type)) for f in data_type])
    if pa.types.is_large_list(data_type):
        return pa.large_list(pa.field(data_type.value_field.name, _nullable(data_type.value_type)))
    if pa.types.is_list(data_type):
        return pa.list_(pa.field(data_type.value_field.name, _nullable(data_type.value_type)))
    if pa.types.is_map(data_type):
        return pa.map_(data_type.key_type, pa.field(data_type.item_field.name, _nullable(data_type.item_type)))
    return data_type


def _as_batches(batches: Batches) -> Iterable[pa.RecordBatch]:
    if isinstance(batches, pa.Table):
        return list(batches.to_batches())
    if isinstance(batches, pa.RecordBatch):
        return [batches]
    if isinstance(batches, (str, bytes)) or not isinstance(batches, Iterable):
        raise InvalidArgumentError(
            "batches", type(batches).__name__, "pyarrow record batches, a pyarrow Table or a RecordBatchReader"
        )
    return batches


def _check_columns(source: pa.Schema, schema: Schema, target: pa.Schema, table: str) -> bool:
    """Raise unless rows of ``source`` can be written to the table; True when they already
    have its exact columns and types (nothing to do per batch)."""
    known = set(target.names)
    if len(set(source.names)) != len(source.names):
        duplicate = next(n for n in source.names if source.names.count(n) > 1)
        raise SchemaMismatchError(duplicate, "appears more than once in the input", table=table)
    for name in source.names:
        if name not in known:
            raise SchemaMismatchError(
                name,
                f"not in the table's schema (unknown extra column; table columns: {', '.join(target.names)})",
                table=table,
            )
    for field, wanted in zip(schema.fields, target, strict=True):
        index = source.get_field_index(field.name)
        if index < 0:
            if field.required:
                raise SchemaMismatchError(field.name, "required column is missing", table=table)
            continue
        _check_type(source.field(index).type, wanted.type, field.name, table)
    return source.names == target.names and all(a.type == b.type for a, b in zip(source, target, strict=True))


def _check_type(source: pa.DataType, target: pa.DataType, path: str, table: str) -> None:
    """Raise unless values of ``source`` can be written as ``target`` without loss."""
    if source == target or pa.types.is_null(source):
        return
    if pa.types.is_struct(target):
        if not pa.types.is_struct(source):
            raise _incompatible(source, target, path, table)
        names = [source.field(i).name for i in range(source.num_fields)]
        wanted = [target.field(i).name for i in range(target.num_fields)]
        if names != wanted:
            raise SchemaMismatchError(
                path, f"struct fields {names} do not match the table's {wanted} (same names, same order)", table=table
            )
        for i in range(target.num_fields):
            _check_type(source.field(i).type, target.field(i).type, f"{path}.{wanted[i]}", table)
        return
    if pa.types.is_map(target):
        if not pa.types.is_map(source):
            raise _incompatible(source, target, path, table)
        _check_type(source.key_type, target.key_type, f"{path}.key", table)
        _check_type(source.item_type, target.item_type, f"{path}.value", table)
        return
    if pa.types.is_list(target) or pa.types.is_large_list(target):
        if not (pa.types.is_list(source) or pa.types.is_large_list(source)):
            raise _incompatible(source, target, path, table)
        _check_type(source.value_type, target.value_type, f"{path}.element", table)
        return
    if pa.types.is_timestamp(target):
        if not pa.types.is_timestamp(source):
            raise _incompatible(source, target, path, table)
        if target.tz is not None and source.tz is None:
            raise SchemaMismatchError(
                path, "a timestamp without time zone cannot be written to Iceberg timestamptz; give it a zone "
                "(an instant) first", table=table,
            )  # fmt: skip
        if target.tz is None and source.tz is not None:
            raise SchemaMismatchError(
                path, f"a timestamp with time zone {source.tz} (an instant) cannot be written to Iceberg "
                "timestamp (no time zone); drop the zone first", table=table,
            )  # fmt: skip
        return  # a finer unit is cast safely: a value that would lose precision is refused
    if _widens(source, target):
        return
    raise _incompatible(source, target, path, table)


def _widens(source: pa.DataType, target: pa.DataType) -> bool:
    types = pa.types
    if types.is_signed_integer(target) and (types.is_signed_integer(source) or types.is_unsigned_integer(source)):
        width = source.bit_width + (1 if types.is_unsigned_integer(source) else 0)
        return bool(width <= target.bit_width)
    if types.is_floating(target) and types.is_floating(source):
        return bool(source.bit_width <= target.bit_width)
    if types.is_decimal(target) and types.is_decimal(source):
        return bool(source.scale == target.scale and source.precision - source.scale <= target.precision - target.scale)
    if types.is_date32(target):
        return bool(types.is_date64(source))
    pairs = (
        (types.is_string, types.is_large_string),
        (types.is_binary, types.is_large_binary),
    )
    return any((a(target) or b(target)) and (a(source) or b(source)) for a, b in pairs)


def _incompatible(source: pa.DataType, target: pa.DataType, path: str, table: str) -> SchemaMismatchError:
    return SchemaMismatchError(path, f"cannot write {source} values to a column of {target}", table=table)


__all__ = ["Batches", "fitted", "write_arrow", "write_with"]
