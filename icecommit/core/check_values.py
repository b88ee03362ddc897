"""The values checks take and give: a checkpoint's facts, check results, and the forms
a column's values take.

:class:`CheckpointFacts` holds what the caller gathered about one checkpoint: its counts,
the table's schema, the statistics Iceberg keeps for each of its data files aggregated by
column (:func:`column_statistics`), the time, and two functions the caller supplies (the
checkpoint's rows, and a look-up of keys already live in the table). Nothing here reads a
file or a clock: the rows come from the caller's function, ``now`` is given.
:class:`CheckResult` is what a check gives, stored with the checkpoint as JSON.

A value has three forms: Iceberg's own (what the statistics' bounds decode to, and what
:func:`iceberg_form_of` turns an Arrow column into: microseconds since the epoch for
timestamps, days for dates, bytes for UUIDs), Python's (:func:`python_form`), and JSON's
(:func:`json_value`).
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta, timezone
from decimal import Decimal
from typing import Any, TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.conversions import from_bytes
from pyiceberg.manifest import DataFile
from pyiceberg.schema import Schema
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IcebergType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    PrimitiveType,
    StringType,
    StructType,
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
    TimeType,
    UUIDType,
)

from icecommit.core.errors import InvalidArgumentError

#: A value as JSON holds it (what a check observed).
Observed: TypeAlias = int | float | str | bool | list[Any] | None
#: The checkpoint's rows as Arrow record batches (a fresh iterator on each call), with
#: these top-level columns only (None: every column; none: only the count of rows matters).
Rows = Callable[[tuple[str, ...] | None], Iterator[pa.RecordBatch]]
#: How many of these keys (a table of the key columns) already have live rows in the table.
LiveDuplicates = Callable[[pa.Table], int]

TIMESTAMPS = (TimestampType, TimestamptzType, TimestampNanoType, TimestamptzNanoType)
_NANOS = (TimestampNanoType, TimestamptzNanoType)
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


@dataclass(frozen=True)
class CheckResult:
    """The verdict of one check on one checkpoint.

    Attributes:
        check: the check's name (``"not_null(id, ts)"``, a custom check's given name).
        ok: whether the checkpoint passed it.
        observed: what the check measured, as JSON holds it (a count, a lag in seconds,
            the smallest and largest value, or what a custom check returned).
        detail: what is wrong, concretely (column, count, an example), or what was seen.
    """

    check: str
    ok: bool
    observed: Observed = None
    detail: str = ""

    @property
    def name(self) -> str:
        """The check's name (:attr:`check`)."""
        return self.check

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"check": self.check, "ok": self.ok, "observed": self.observed, "detail": self.detail}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CheckResult:
        """Inverse of :meth:`to_dict`.

        Raises:
            InvalidArgumentError: ``data`` is not a check result.
        """
        check, ok, detail = data.get("check"), data.get("ok"), data.get("detail", "")
        if not isinstance(check, str) or not isinstance(ok, bool) or not isinstance(detail, str):
            raise InvalidArgumentError("data", data, "a check result: check (str), ok (bool), observed, detail (str)")
        return cls(check, ok, json_value(data.get("observed")), detail)

    def to_json(self) -> str:
        """The result as a JSON object."""
        return json.dumps(self.to_dict(), allow_nan=False)

    @classmethod
    def from_json(cls, text: str) -> CheckResult:
        """Inverse of :meth:`to_json`.

        Raises:
            InvalidArgumentError: the text is not a check result's JSON.
        """
        try:
            data = json.loads(text)
        except (TypeError, ValueError):
            raise InvalidArgumentError("text", text, "a check result as JSON") from None
        if not isinstance(data, dict):
            raise InvalidArgumentError("text", text, "a check result as a JSON object")
        return cls.from_dict(data)


@dataclass(frozen=True)
class Verdict:
    """What a custom check's function may return (besides a bool or ``(bool, detail)``).

    Attributes:
        ok: whether the rows pass.
        observed: what the function measured; kept as JSON holds it (dates and decimals
            become strings).
        detail: what is wrong, for the operator who reads the held checkpoint.
    """

    ok: bool
    observed: Any = None
    detail: str = ""


@dataclass(frozen=True)
class FileColumnStatistics:
    """One data file's statistics for one column; None where the file lacks one.

    ``lower``/``upper`` are decoded in Iceberg's own form: microseconds (nanoseconds for
    the ``_ns`` types) since the epoch for timestamps, days for dates, bytes for UUIDs.
    """

    records: int
    values: int | None
    nulls: int | None
    nans: int | None
    lower: Any = None
    upper: Any = None

    @property
    def may_hold_values(self) -> bool:
        """Whether the file may hold a value (neither null nor NaN) of the column."""
        if self.records == 0:
            return False
        if self.values is None or self.nulls is None:
            return True
        return self.values - self.nulls - (self.nans or 0) > 0

    @property
    def non_null(self) -> int | None:
        """Its values that are not null (NaN counted), when the file says."""
        return None if self.values is None or self.nulls is None else self.values - self.nulls


@dataclass(frozen=True)
class ColumnStatistics:
    """A column's statistics over the checkpoint's data files, one entry per file."""

    field_id: int
    type: PrimitiveType
    files: tuple[FileColumnStatistics, ...]

    @property
    def nulls(self) -> int | None:
        """Nulls in the column, or None when a file with rows lacks its null count."""
        counts = [f.nulls for f in self.files if f.records]
        return None if None in counts else sum(c for c in counts if c is not None)

    @property
    def bounded(self) -> bool:
        """Whether every file that may hold a value has both bounds."""
        return all(f.lower is not None and f.upper is not None for f in self.files if f.may_hold_values)

    @property
    def lower(self) -> Any:
        """The smallest lower bound (None when no file has one)."""
        bounds = [f.lower for f in self.files if f.lower is not None]
        return min(bounds) if bounds else None

    @property
    def upper(self) -> Any:
        """The largest upper bound (None when no file has one)."""
        bounds = [f.upper for f in self.files if f.upper is not None]
        return max(bounds) if bounds else None


def column_statistics(data_files: Iterable[DataFile], schema: Schema) -> dict[str, ColumnStatistics]:
    """Each primitive column's statistics over ``data_files``, by dotted name (``id``,
    ``address.zip``, ``tags.element``), with bounds decoded by the schema's types."""
    files = list(data_files)
    found: dict[str, ColumnStatistics] = {}
    for field_id, path in field_paths(schema).items():
        kind = schema.find_type(field_id)
        if not isinstance(kind, PrimitiveType):
            continue
        found[".".join(path)] = ColumnStatistics(field_id, kind, tuple(_file_stats(f, field_id, kind) for f in files))
    return found


def _file_stats(data_file: DataFile, field_id: int, kind: PrimitiveType) -> FileColumnStatistics:
    lower = (data_file.lower_bounds or {}).get(field_id)
    upper = (data_file.upper_bounds or {}).get(field_id)
    return FileColumnStatistics(
        records=data_file.record_count,
        values=(data_file.value_counts or {}).get(field_id),
        nulls=(data_file.null_value_counts or {}).get(field_id),
        nans=(data_file.nan_value_counts or {}).get(field_id),
        lower=None if lower is None else from_bytes(kind, lower),
        upper=None if upper is None else from_bytes(kind, upper),
    )


@dataclass(frozen=True)
class CheckpointFacts:
    """What the checks of one checkpoint are judged on; gathered by the caller.

    Attributes:
        records: rows the checkpoint wrote.
        source_records: rows its source reported or a job declared (None when unknown).
        schema: the table's Iceberg schema.
        columns: :func:`column_statistics` of the checkpoint's data files.
        now: the time freshness is measured against (timezone-aware; never read here).
        rows: gives the checkpoint's rows; called only by checks that read rows.
        live_duplicates: counts the keys that already have live rows in the table;
            called only by ``unique(..., against_table=True)``.

    Raises:
        InvalidArgumentError: ``now`` has no time zone, or ``records`` is negative.
    """

    records: int
    source_records: int | None
    schema: Schema
    columns: Mapping[str, ColumnStatistics]
    now: datetime
    rows: Rows | None = field(default=None, compare=False)
    live_duplicates: LiveDuplicates | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.now.tzinfo is None or self.now.utcoffset() is None:
            raise InvalidArgumentError("now", self.now, "a timezone-aware datetime")
        if self.records < 0:
            raise InvalidArgumentError("records", self.records, "a count of rows (0 or more)")

    @classmethod
    def of_files(
        cls,
        data_files: Sequence[DataFile],
        schema: Schema,
        *,
        now: datetime,
        source_records: int | None = None,
        rows: Rows | None = None,
        live_duplicates: LiveDuplicates | None = None,
    ) -> CheckpointFacts:
        """The facts of a checkpoint that wrote ``data_files`` (its rows are theirs)."""
        records = sum(f.record_count for f in data_files)
        columns = column_statistics(data_files, schema)
        return cls(records, source_records, schema, columns, now, rows, live_duplicates)

    def null_count(self, column: str) -> int | None:
        """Nulls in ``column`` by the files' statistics (None when a file does not say)."""
        stats = self.columns.get(column)
        return None if stats is None else stats.nulls

    def batches(self, reader: str, columns: tuple[str, ...] | None = None) -> Iterator[pa.RecordBatch]:
        """The checkpoint's rows (these top-level ``columns``; None: all), for the check
        named ``reader``.

        Raises:
            InvalidArgumentError: the caller gave no ``rows``.
        """
        if self.rows is None:
            raise InvalidArgumentError("rows", None, f"a function giving the checkpoint's rows: {reader} reads them")
        return self.rows(columns)


def field_paths(schema: Schema) -> dict[int, tuple[str, ...]]:
    """Each field's names from the top, by id (``element``, ``key``, ``value`` inside
    lists and maps, as Iceberg names them)."""
    paths: dict[int, tuple[str, ...]] = {}
    stack: list[tuple[tuple[str, ...], NestedField]] = [((), f) for f in schema.fields]
    while stack:
        prefix, nested = stack.pop()
        path = (*prefix, nested.name)
        paths[nested.field_id] = path
        kind = nested.field_type
        if isinstance(kind, StructType):
            stack.extend((path, f) for f in kind.fields)
        elif isinstance(kind, ListType):
            stack.append((path, kind.element_field))
        elif isinstance(kind, MapType):
            stack.extend([(path, kind.key_field), (path, kind.value_field)])
    return paths


def column_path(schema: Schema, column: str) -> tuple[str, ...]:
    """A column's names from the top (``("address", "zip")`` for ``address.zip``).

    Raises:
        ValueError: the schema has no such column.
    """
    return field_paths(schema)[schema.find_field(column).field_id]


def column_values(batch: pa.RecordBatch, path: tuple[str, ...]) -> pa.Array:
    """A column of the batch along ``path``: a struct's child is null where the struct is;
    a list's or map's entries are flattened; a column the batch lacks is all null."""
    index = batch.schema.get_field_index(path[0])
    if index < 0:
        return pa.nulls(batch.num_rows)
    array = batch.column(index)
    for part in path[1:]:
        kind = array.type
        if pa.types.is_struct(kind):
            if kind.get_field_index(part) < 0:
                return pa.nulls(len(array))
            array = pc.struct_field(array, part)
        elif pa.types.is_map(kind):
            entries = pc.list_flatten(array.cast(pa.list_(pa.struct([kind.key_field, kind.item_field]))))
            array = pc.struct_field(entries, 0 if part == "key" else 1)
        else:
            array = pc.list_flatten(array)
    return array.dictionary_decode() if pa.types.is_dictionary(array.type) else array


def iceberg_form_of(array: pa.Array, kind: IcebergType) -> pa.Array:
    """Values in Iceberg's own form (as the statistics hold them): integers for
    timestamps, dates and times, the storage of an extension type (UUIDs)."""
    if isinstance(array.type, pa.ExtensionType):
        array = array.storage
    if pa.types.is_timestamp(array.type):
        unit = "ns" if isinstance(kind, _NANOS) else "us"
        return pc.cast(pc.cast(array, pa.timestamp(unit, tz=array.type.tz), safe=False), pa.int64())
    if pa.types.is_date(array.type):
        return pc.cast(pc.cast(array, pa.date32()), pa.int32())
    if pa.types.is_time(array.type):
        return pc.cast(pc.cast(array, pa.time64("us"), safe=False), pa.int64())
    return array


def fits(value: Any, kind: PrimitiveType) -> bool:
    """Whether a value given by the user can be compared with a column of ``kind``: a
    Python value of the type (a datetime for timestamps, a date for dates ...) or, for
    timestamps, dates and times, its Iceberg form (an int)."""
    if isinstance(kind, BooleanType) or isinstance(value, bool):
        return isinstance(kind, BooleanType) and isinstance(value, bool)
    accepted: tuple[type, ...] = ()
    if isinstance(kind, (IntegerType, LongType)):
        accepted = (int,)
    elif isinstance(kind, (FloatType, DoubleType)):
        accepted = (int, float)
    elif isinstance(kind, DecimalType):
        accepted = (int, Decimal)
    elif isinstance(kind, StringType):
        accepted = (str,)
    elif isinstance(kind, (BinaryType, FixedType)):
        accepted = (bytes,)
    elif isinstance(kind, DateType):
        return isinstance(value, int) or (isinstance(value, date) and not isinstance(value, datetime))
    elif isinstance(kind, TIMESTAMPS):
        accepted = (int, datetime)
    elif isinstance(kind, TimeType):
        accepted = (int, time)
    elif isinstance(kind, UUIDType):
        accepted = (uuid.UUID, bytes)
    return isinstance(value, accepted)


def iceberg_form(value: Any, kind: IcebergType) -> Any:
    """A value given by the user in Iceberg's own form (naive datetimes read as UTC)."""
    if isinstance(kind, TIMESTAMPS) and isinstance(value, datetime):
        delta = (value if value.tzinfo else value.replace(tzinfo=timezone.utc)) - _EPOCH
        micros = (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds
        return micros * 1000 if isinstance(kind, _NANOS) else micros
    if isinstance(kind, DateType) and isinstance(value, date):
        return (value - date(1970, 1, 1)).days
    if isinstance(kind, TimeType) and isinstance(value, time):
        return ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000 + value.microsecond
    if isinstance(kind, UUIDType) and isinstance(value, uuid.UUID):
        return value.bytes
    if isinstance(kind, DecimalType) and isinstance(value, int):
        return Decimal(value)
    if isinstance(kind, (FloatType, DoubleType)) and isinstance(value, int):
        return float(value)
    return value


def python_form(value: Any, kind: IcebergType) -> Any:
    """Inverse of :func:`iceberg_form` (timestamps with a time zone come back in UTC)."""
    if value is None:
        return None
    if isinstance(kind, TIMESTAMPS):
        instant = _EPOCH + timedelta(microseconds=value // 1000 if isinstance(kind, _NANOS) else value)
        return instant if isinstance(kind, (TimestamptzType, TimestamptzNanoType)) else instant.replace(tzinfo=None)
    if isinstance(kind, DateType):
        return date(1970, 1, 1) + timedelta(days=value)
    if isinstance(kind, TimeType):
        return (datetime.min + timedelta(microseconds=value)).time()
    if isinstance(kind, UUIDType) and isinstance(value, bytes):
        return uuid.UUID(bytes=value)
    return value


def json_value(value: Any) -> Observed:
    """``value`` as JSON holds it: times in ISO 8601, decimals and UUIDs as strings, bytes
    in hex, NaN and infinities as strings."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, np.generic):
        return json_value(value.item())
    if isinstance(value, pa.Scalar):
        return json_value(value.as_py())
    if isinstance(value, (datetime, date, time)):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, (list, tuple)):
        return [json_value(v) for v in value]
    return str(value)


def literal(value: Any) -> str:
    """A value as a check's detail shows it: strings quoted, the rest as JSON holds them."""
    return repr(value) if isinstance(value, str) else str(json_value(value))


def column_problem(
    schema: Schema,
    column: str,
    *,
    values: Iterable[Any] = (),
    one_per_row: bool = False,
    kinds: tuple[type[PrimitiveType], ...] = (PrimitiveType,),
    expected: str = "a column of values",
) -> str | None:
    """Why ``column`` (in ``schema``) cannot be judged as asked (None when it can): it is
    not of one of ``kinds`` (``expected`` says which), ``values`` do not fit its type, or
    (with ``one_per_row``) it sits in a list or a map."""
    kind = schema.find_type(column)
    if not isinstance(kind, kinds):
        return f"{column} is {kind}, not {expected}"
    for value in values:
        if not fits(value, kind):
            return f"{value!r} is not a value of {column} ({kind})"
    path = column_path(schema, column)
    for depth in range(1 if one_per_row else len(path), len(path)):
        if isinstance(schema.find_type(".".join(path[:depth])), (ListType, MapType)):
            return f"{column} is inside a list or a map, not one value per row"
    return None


def instant_of(value: Any, kind: IcebergType) -> datetime:
    """A timestamp's or a date's Iceberg form as a time in UTC (a timestamp without a
    time zone read as UTC, a date as its midnight)."""
    instant = python_form(value, kind)
    if not isinstance(instant, datetime):
        return datetime(instant.year, instant.month, instant.day, tzinfo=timezone.utc)
    return instant if instant.tzinfo is not None else instant.replace(tzinfo=timezone.utc)


def verdict_of(returned: Any) -> Verdict | None:
    """A custom check's verdict from what its function returned: a bool (NumPy's and a
    valid Arrow boolean scalar too), ``(bool, detail)`` or a :class:`Verdict`; None when it
    is none of these."""
    if isinstance(returned, Verdict):
        ok, observed, detail = _truth(returned.ok), returned.observed, returned.detail
    elif isinstance(returned, tuple) and len(returned) == 2 and isinstance(returned[1], str):
        ok, observed, detail = _truth(returned[0]), None, returned[1]
    else:
        ok, observed, detail = _truth(returned), None, ""
    return None if ok is None or not isinstance(detail, str) else Verdict(ok, observed, detail)


def _truth(value: Any) -> bool | None:
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, pa.BooleanScalar) and value.is_valid:
        return bool(value.as_py())
    return None


#: How many examples a failed check's detail names.
EXAMPLES = 3


def column_names(columns: Sequence[Any], *, argument: str = "columns") -> tuple[str, ...]:
    """The column names a check was given, checked.

    Raises:
        InvalidArgumentError: none, a name that is not a non-empty string, or a repeated one.
    """
    if not columns:
        raise InvalidArgumentError(argument, (), "one column name or more")
    for column in columns:
        if not isinstance(column, str) or not column:
            raise InvalidArgumentError(argument, column, "a column name (nested ones dotted: address.zip)")
    if len(set(columns)) != len(columns):
        raise InvalidArgumentError(argument, tuple(columns), "distinct column names")
    return tuple(columns)


def bounds_text(low: Any, high: Any) -> str:
    """``min=1, max=9`` (a bound that is None left out), as checks' names show them."""
    return ", ".join(f"{k}={json_value(v)}" for k, v in (("min", low), ("max", high)) if v is not None)


__all__ = [
    "EXAMPLES",
    "TIMESTAMPS",
    "CheckResult",
    "CheckpointFacts",
    "ColumnStatistics",
    "FileColumnStatistics",
    "LiveDuplicates",
    "Observed",
    "Rows",
    "Verdict",
    "bounds_text",
    "column_names",
    "column_path",
    "column_problem",
    "column_statistics",
    "column_values",
    "field_paths",
    "fits",
    "iceberg_form",
    "iceberg_form_of",
    "instant_of",
    "json_value",
    "literal",
    "python_form",
    "verdict_of",
]
