"""Checks a checkpoint's data must pass before it reaches readers: pure rules over facts.

A check is a frozen value (:class:`Check`) made by one of the functions below
(:func:`row_count`, :func:`matches_source`, :func:`not_null`, :func:`unique`,
:func:`accepted_values`, :func:`in_range`, :func:`freshness`, :func:`custom`). It judges a
checkpoint's :class:`~icecommit.core.check_values.CheckpointFacts` and returns a
:class:`CheckResult` (its name, a verdict, what it observed and a detail that names what
is wrong), which round-trips through JSON so that it can be stored with the checkpoint.

What reads rows. ``row_count`` and ``matches_source`` judge counts. ``not_null`` (null
counts), ``in_range`` (bounds), ``freshness`` (the column's upper bound) and
``accepted_values`` (a file whose bounds are equal holds one value; bounds that hold no
accepted value prove every value of the file outside) are answered from the data files'
statistics, and read the checkpoint's rows only where a file lacks what they need, or
where the bounds of a string or binary column, which Iceberg may truncate, seem to break
``in_range``. ``unique`` and ``custom`` always read rows. Rows come from the caller's
``facts.rows()``, called at most once per check.

No rows. On an empty checkpoint every check passes (observed 0) but ``row_count``, whose
``min=1`` fails, and ``matches_source``, which compares the counts. Nulls are judged by
``not_null`` alone: the other checks leave them out (as in SQL, ``unique`` compares no
key with a null).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, ClassVar

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.schema import Schema
from pyiceberg.types import (
    BinaryType,
    DateType,
    DoubleType,
    FixedType,
    FloatType,
    IcebergType,
    StringType,
)

from icecommit.core.check_values import (
    TIMESTAMPS,
    CheckpointFacts,
    CheckResult,
    Observed,
    Verdict,
    column_path,
    column_problem,
    column_values,
    iceberg_form,
    iceberg_form_of,
    instant_of,
    json_value,
    literal,
    python_form,
    verdict_of,
)
from icecommit.core.errors import InvalidArgumentError
from icecommit.core.timeparse import format_duration, parse_duration

_EXAMPLES = 3
_SHOWN_VALUES = 5
#: Types whose bounds Iceberg may truncate (a bound then need not be a value of the file).
_TRUNCATED = (StringType, BinaryType, FixedType)


@dataclass(frozen=True)
class Check(ABC):
    """A check of a checkpoint's data. ``reads_rows`` is True when it always reads the
    checkpoint's rows; a check where it is False reads them only when the statistics
    cannot answer (:meth:`needs_rows` says so for one checkpoint)."""

    reads_rows: ClassVar[bool] = False
    #: Whether an empty checkpoint passes without being judged.
    _empty_passes: ClassVar[bool] = True

    @property
    @abstractmethod
    def name(self) -> str:
        """The check as results and errors name it."""

    @property
    def columns(self) -> tuple[str, ...]:
        """The columns it judges, by dotted name."""
        return ()

    def schema_problem(self, schema: Schema) -> str | None:
        """Why the check cannot judge a table of ``schema`` (None when it can)."""
        for column in self.columns:
            try:
                schema.find_field(column)
            except ValueError:
                return f"no column {column!r} in the table's schema"
        return None

    def needs_rows(self, facts: CheckpointFacts) -> bool:
        """Whether judging ``facts`` reads the checkpoint's rows."""
        if self.schema_problem(facts.schema) is not None or (facts.records == 0 and self._empty_passes):
            return False
        return self.reads_rows or self._from_statistics(facts) is None

    def evaluate(self, facts: CheckpointFacts) -> CheckResult:
        """Judges a checkpoint. A column missing from the schema fails the check.

        Raises:
            InvalidArgumentError: the check reads rows (or live keys) the facts do not give.
        """
        problem = self.schema_problem(facts.schema)
        if problem is not None:
            return self._result(False, None, problem)
        if facts.records == 0 and self._empty_passes:
            return self._result(True, 0, "no rows")
        result = None if self.reads_rows else self._from_statistics(facts)
        return result if result is not None else self._from_rows(facts, facts.batches(self.name))

    def _from_statistics(self, facts: CheckpointFacts) -> CheckResult | None:
        """The result from the statistics alone, or None when rows must be read."""
        return None

    @abstractmethod
    def _from_rows(self, facts: CheckpointFacts, batches: Iterator[pa.RecordBatch]) -> CheckResult:
        """The result from the checkpoint's rows (where the statistics cannot answer)."""

    def _result(self, ok: bool, observed: Observed, detail: str) -> CheckResult:
        return CheckResult(self.name, ok, observed, detail)


@dataclass(frozen=True)
class RowCount(Check):
    """The checkpoint wrote between ``min`` and ``max`` rows (either may be None)."""

    min: int | None = None
    max: int | None = None
    _empty_passes: ClassVar[bool] = False

    @property
    def name(self) -> str:
        return f"row_count({_bounds_text(self.min, self.max)})"

    def _from_statistics(self, facts: CheckpointFacts) -> CheckResult:
        n = facts.records
        if self.min is not None and n < self.min:
            return self._result(False, n, f"{n} rows, fewer than min {self.min}")
        if self.max is not None and n > self.max:
            return self._result(False, n, f"{n} rows, more than max {self.max}")
        return self._result(True, n, f"{n} rows")

    def _from_rows(self, facts: CheckpointFacts, batches: Iterator[pa.RecordBatch]) -> CheckResult:
        return self._from_statistics(facts.counted(batches))


@dataclass(frozen=True)
class MatchesSource(Check):
    """The checkpoint wrote as many rows as its source counted, give or take ``tolerance``
    (a fraction of the source's count). Fails when the source's count is unknown."""

    tolerance: float = 0
    _empty_passes: ClassVar[bool] = False

    @property
    def name(self) -> str:
        return f"matches_source(tolerance={self.tolerance:g})"

    def _from_statistics(self, facts: CheckpointFacts) -> CheckResult:
        source, written = facts.source_records, facts.records
        if source is None:
            return self._result(False, None, f"written {written} rows, source count unknown (declare_source gives it)")
        allowed = math.floor(self.tolerance * source)
        within = f"tolerance {self.tolerance:g}" + (f": up to {allowed} row(s)" if self.tolerance else "")
        detail = f"written {written} rows, source {source} ({within})"
        return self._result(abs(written - source) <= allowed, written - source, detail)

    def _from_rows(self, facts: CheckpointFacts, batches: Iterator[pa.RecordBatch]) -> CheckResult:
        return self._from_statistics(facts.counted(batches))


@dataclass(frozen=True)
class _ColumnsCheck(Check):
    """A check of one column or more, ``of``."""

    of: tuple[str, ...]

    @property
    def columns(self) -> tuple[str, ...]:
        return self.of


@dataclass(frozen=True)
class NotNull(_ColumnsCheck):
    """No null in any of ``columns`` (nested columns by dotted name)."""

    @property
    def name(self) -> str:
        return f"not_null({', '.join(self.of)})"

    def _from_statistics(self, facts: CheckpointFacts) -> CheckResult | None:
        counts = [facts.null_count(c) for c in self.of]
        return None if None in counts else self._verdict({c: n or 0 for c, n in zip(self.of, counts, strict=True)})

    def _from_rows(self, facts: CheckpointFacts, batches: Iterator[pa.RecordBatch]) -> CheckResult:
        counts = {c: facts.null_count(c) for c in self.of}
        unread = {c: column_path(facts.schema, c) for c, n in counts.items() if n is None}
        nulls = {c: n or 0 for c, n in counts.items()}
        for batch in batches:
            for column, path in unread.items():
                nulls[column] += column_values(batch, path).null_count
        return self._verdict(nulls)

    def _verdict(self, counts: Mapping[str, int]) -> CheckResult:
        total = sum(counts.values())
        if total == 0:
            return self._result(True, 0, f"no nulls in {', '.join(self.of)}")
        found = [(c, n) for c, n in counts.items() if n]
        parts = [f"{found[0][1]} null(s) in {found[0][0]}", *(f"{n} in {c}" for c, n in found[1:])]
        return self._result(False, total, ", ".join(parts))


@dataclass(frozen=True)
class Unique(_ColumnsCheck):
    """No key of ``of`` appears twice in the checkpoint; with ``against_table``, no key
    already has a live row in the table either (through ``facts.live_duplicates``, given
    the checkpoint's distinct keys, columns named as the check's). Keys with a null are
    not compared. Observed: the keys seen more than once plus the keys already live."""

    against_table: bool = False
    reads_rows: ClassVar[bool] = True

    @property
    def name(self) -> str:
        return f"unique({', '.join(self.of)}{', against_table=True' if self.against_table else ''})"

    def schema_problem(self, schema: Schema) -> str | None:
        problem = super().schema_problem(schema)
        for column in self.of:
            problem = problem or column_problem(schema, column, one_per_row=True)
        return problem

    def _from_rows(self, facts: CheckpointFacts, batches: Iterator[pa.RecordBatch]) -> CheckResult:
        paths = [column_path(facts.schema, c) for c in self.of]
        parts = [pa.table([column_values(b, p) for p in paths], names=list(self.of)) for b in batches]
        if not parts:
            return self._result(True, 0, "no rows")
        keys = pa.concat_tables(parts)
        valid = pc.is_valid(keys.column(0))
        for column in self.of[1:]:
            valid = pc.and_(valid, pc.is_valid(keys.column(column)))
        keys = keys.filter(valid)
        counted = keys.group_by(list(self.of)).aggregate([([], "count_all")])
        repeated = counted.filter(pc.greater(counted.column("count_all"), 1))
        observed, problems = len(repeated), []
        if len(repeated):
            top = repeated.take(pc.sort_indices(repeated, [("count_all", "descending")])[:_EXAMPLES])
            examples = ", ".join(f"{_key_text(self.of, row)} ({row['count_all']} times)" for row in top.to_pylist())
            problems.append(f"{len(repeated)} key(s) of ({', '.join(self.of)}) appear more than once, e.g. {examples}")
        if self.against_table and len(counted):
            if facts.live_duplicates is None:
                raise InvalidArgumentError("live_duplicates", None, f"a key look-up: {self.name} needs it")
            live = int(facts.live_duplicates(counted.select(list(self.of))))
            observed += live
            if live:
                problems.append(f"{live} key(s) of ({', '.join(self.of)}) already have live rows in the table")
        return self._result(not problems, observed, "; ".join(problems) or f"{len(counted)} distinct key(s)")


@dataclass(frozen=True)
class _ColumnCheck(Check):
    """A check of one column."""

    column: str

    @property
    def columns(self) -> tuple[str, ...]:
        return (self.column,)


@dataclass(frozen=True)
class AcceptedValues(_ColumnCheck):
    """Every value of ``column`` is one of ``values``. Observed: the values outside
    (a lower bound, said as "at least", when file bounds prove some outside but cannot
    count the rest)."""

    values: tuple[Any, ...]

    @property
    def name(self) -> str:
        return f"accepted_values({self.column}, {_values_text(self.values)})"

    def schema_problem(self, schema: Schema) -> str | None:
        return super().schema_problem(schema) or column_problem(schema, self.column, values=self.values)

    def _from_statistics(self, facts: CheckpointFacts) -> CheckResult | None:
        stats, kind = facts.columns.get(self.column), facts.schema.find_type(self.column)
        if stats is None:
            return None
        accepted = {iceberg_form(v, kind) for v in self.values}
        outside, undecided, examples = 0, False, list[str]()
        for f in stats.files:
            if not f.may_hold_values:
                continue
            if f.lower is None or f.upper is None:
                undecided = True
            elif f.lower == f.upper and f.lower in accepted:
                # one value, accepted; a float column's NaN would be outside the bounds
                undecided = undecided or (isinstance(kind, (FloatType, DoubleType)) and f.nans != 0)
            elif f.lower == f.upper or not any(f.lower <= a <= f.upper for a in accepted):
                outside += f.non_null or 1
                low, high = literal(python_form(f.lower, kind)), literal(python_form(f.upper, kind))
                examples.append(low if f.lower == f.upper else f"values between {low} and {high}")
            else:
                undecided = True
        if outside == 0:
            return None if undecided else self._verdict(0, [])
        return self._verdict(outside, examples, at_least=undecided)

    def _from_rows(self, facts: CheckpointFacts, batches: Iterator[pa.RecordBatch]) -> CheckResult:
        kind, path = facts.schema.find_type(self.column), column_path(facts.schema, self.column)
        outside, examples = 0, list[str]()
        for batch in batches:
            values = iceberg_form_of(column_values(batch, path), kind)
            if values.null_count == len(values):
                continue
            accepted = pa.array([iceberg_form(v, kind) for v in self.values], type=values.type)
            bad = values.filter(pc.and_(pc.is_valid(values), pc.invert(pc.is_in(values, value_set=accepted))))
            outside += len(bad)
            if len(set(examples)) < _EXAMPLES:
                examples += [literal(python_form(v, kind)) for v in bad.slice(0, _EXAMPLES * 4).to_pylist()]
        return self._verdict(outside, examples)

    def _verdict(self, outside: int, examples: list[str], *, at_least: bool = False) -> CheckResult:
        if outside == 0:
            return self._result(True, 0, f"every value of {self.column} in {_values_text(self.values)}")
        count = f"at least {outside}" if at_least else str(outside)
        shown = ", ".join(list(dict.fromkeys(examples))[:_EXAMPLES])
        detail = f"{count} value(s) of {self.column} outside {_values_text(self.values)}, e.g. {shown}"
        return self._result(False, outside, detail)


@dataclass(frozen=True)
class InRange(_ColumnCheck):
    """Every value of ``column`` is at least ``min`` and at most ``max`` (either may be
    None). Observed: the smallest and largest value (None when the column has none)."""

    min: Any = None
    max: Any = None

    @property
    def name(self) -> str:
        return f"in_range({self.column}, {_bounds_text(self.min, self.max)})"

    def schema_problem(self, schema: Schema) -> str | None:
        limits = [v for v in (self.min, self.max) if v is not None]
        return super().schema_problem(schema) or column_problem(schema, self.column, values=limits)

    def _from_statistics(self, facts: CheckpointFacts) -> CheckResult | None:
        stats = facts.columns.get(self.column)
        if stats is None or not stats.bounded:
            return None
        kind, low, high = stats.type, stats.lower, stats.upper
        lowest, highest = self._limits(kind)
        below, above = _below(low, lowest), _below(highest, high)
        if (below or above) and isinstance(kind, _TRUNCATED):
            return None  # a truncated bound need not be a value of the file: the rows say
        extremes = [f"{literal(python_form(low, kind))} (smallest)"] * below
        extremes += [f"{literal(python_form(high, kind))} (largest)"] * above
        return self._verdict(kind, low, high, None, extremes)

    def _from_rows(self, facts: CheckpointFacts, batches: Iterator[pa.RecordBatch]) -> CheckResult:
        kind, path = facts.schema.find_type(self.column), column_path(facts.schema, self.column)
        lowest, highest = self._limits(kind)
        low: Any = None
        high: Any = None
        outside, examples = 0, list[str]()
        for batch in batches:
            values = iceberg_form_of(column_values(batch, path), kind)
            if values.null_count == len(values):
                continue
            extremes = pc.min_max(values)
            low, high = _extreme(min, low, extremes["min"].as_py()), _extreme(max, high, extremes["max"].as_py())
            masks = [pc.less(values, pa.scalar(lowest, values.type))] if lowest is not None else []
            masks += [pc.greater(values, pa.scalar(highest, values.type))] if highest is not None else []
            bad = values.filter(masks[0] if len(masks) == 1 else pc.or_(masks[0], masks[1]))
            outside += len(bad)
            examples += [literal(python_form(v, kind)) for v in bad.slice(0, _EXAMPLES - len(examples)).to_pylist()]
        return self._verdict(kind, low, high, outside, examples)

    def _verdict(self, kind: IcebergType, low: Any, high: Any, outside: int | None, examples: list[str]) -> CheckResult:
        """``outside`` is None when bounds judged (they cannot count), ``examples`` empty when all are in range."""
        if low is None:
            return self._result(True, None, f"no values in {self.column}")
        observed = [json_value(python_form(low, kind)), json_value(python_form(high, kind))]
        if not examples:
            return self._result(True, observed, f"{self.column} within [{observed[0]}, {observed[1]}]")
        count = "values" if outside is None else f"{outside} value(s)"
        return self._result(
            False, observed, f"{count} of {self.column} {self._range_text()}, e.g. {', '.join(examples)}"
        )

    def _limits(self, kind: IcebergType) -> tuple[Any, Any]:
        return (
            None if self.min is None else iceberg_form(self.min, kind),
            None if self.max is None else iceberg_form(self.max, kind),
        )

    def _range_text(self) -> str:
        if self.min is not None and self.max is not None:
            return f"outside [{json_value(self.min)}, {json_value(self.max)}]"
        return f"below min {json_value(self.min)}" if self.min is not None else f"above max {json_value(self.max)}"


@dataclass(frozen=True)
class Freshness(_ColumnCheck):
    """The newest value of ``column`` (a timestamp or a date) is at most ``max_lag`` older
    than ``facts.now``. A timestamp without a time zone is read as UTC, a date as its
    midnight in UTC. Observed: the lag in seconds (None when the column has no value)."""

    max_lag: timedelta

    @property
    def name(self) -> str:
        return f"freshness({self.column}, max_lag={format_duration(self.max_lag)})"

    def schema_problem(self, schema: Schema) -> str | None:
        return super().schema_problem(schema) or column_problem(
            schema, self.column, kinds=(*TIMESTAMPS, DateType), expected="a timestamp or a date"
        )

    def _from_statistics(self, facts: CheckpointFacts) -> CheckResult | None:
        stats = facts.columns.get(self.column)
        return None if stats is None or not stats.bounded else self._verdict(facts, stats.upper)

    def _from_rows(self, facts: CheckpointFacts, batches: Iterator[pa.RecordBatch]) -> CheckResult:
        kind, path = facts.schema.find_type(self.column), column_path(facts.schema, self.column)
        newest: Any = None
        for batch in batches:
            newest = _extreme(max, newest, pc.max(iceberg_form_of(column_values(batch, path), kind)).as_py())
        return self._verdict(facts, newest)

    def _verdict(self, facts: CheckpointFacts, newest: Any) -> CheckResult:
        kind = facts.schema.find_type(self.column)
        if newest is None:
            return self._result(False, None, f"no value of {self.column} among {facts.records} row(s)")
        lag = facts.now - instant_of(newest, kind)
        whole = timedelta(seconds=int(abs(lag.total_seconds())))
        age = f"{whole} old" if lag >= timedelta(0) else f"{whole} ahead of now"
        detail = f"newest {self.column} {json_value(python_form(newest, kind))} is {age}"
        if lag > self.max_lag:
            detail += f", more than max_lag {format_duration(self.max_lag)}"
        return self._result(lag <= self.max_lag, round(lag.total_seconds(), 3), detail)


@dataclass(frozen=True)
class Custom(Check):
    """A check written by the user: ``fn`` receives the checkpoint's rows as Arrow record
    batches and returns a bool, ``(bool, detail)`` or a :class:`Verdict`. It is not
    called on an empty checkpoint, which passes."""

    label: str
    fn: Callable[[Iterator[pa.RecordBatch]], Any]
    reads_rows: ClassVar[bool] = True

    @property
    def name(self) -> str:
        return self.label

    def _from_rows(self, facts: CheckpointFacts, batches: Iterator[pa.RecordBatch]) -> CheckResult:
        returned = self.fn(batches)
        verdict = verdict_of(returned)
        if verdict is None:
            raise InvalidArgumentError(
                "fn", returned, f"{self.label}: a bool, (bool, detail) or Verdict(ok, observed, detail)"
            )
        detail = verdict.detail or ("" if verdict.ok else f"{self.label} failed (its function gave no detail)")
        return self._result(verdict.ok, json_value(verdict.observed), detail)


def row_count(*, min: int | None = None, max: int | None = None) -> RowCount:
    """The checkpoint wrote at least ``min`` and at most ``max`` rows (statistics only).

    Raises:
        InvalidArgumentError: neither is given, one is not a count, or ``min > max``.
    """
    for argument, value in (("min", min), ("max", max)):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
            raise InvalidArgumentError(argument, value, "a count of rows (0 or more) or None")
    if min is None and max is None:
        raise InvalidArgumentError("min", None, "a count of rows: row_count needs min, max or both")
    if min is not None and max is not None and min > max:
        raise InvalidArgumentError("max", max, f"a count at least min={min}")
    return RowCount(min, max)


def matches_source(tolerance: float = 0) -> MatchesSource:
    """The checkpoint wrote as many rows as its source counted (the count a stream's source
    reported, or one a job declared with ``declare_source``), give or take ``tolerance``: a
    fraction of the source's count (``0.01`` allows 1% more or fewer rows; the default, 0,
    asks for the exact count). A fraction holds across batch sizes, where a count of rows
    would be too loose for small batches and too strict for large ones. The check fails
    when the source's count is unknown.

    Raises:
        InvalidArgumentError: ``tolerance`` is not a number between 0 and 1.
    """
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or not 0 <= tolerance <= 1:
        raise InvalidArgumentError("tolerance", tolerance, "a fraction of the source's count, from 0 to 1")
    return MatchesSource(tolerance)


def not_null(*columns: str) -> NotNull:
    """No null in any of ``columns`` (nested ones by dotted name: ``address.zip``); answered
    from the files' null counts, reading rows only where a file lacks one.

    Raises:
        InvalidArgumentError: no column, or a name that is not a non-empty string.
    """
    return NotNull(_column_names(columns))


def unique(*columns: str, against_table: bool = False) -> Unique:
    """No key (the values of ``columns``) appears twice among the checkpoint's rows; with
    ``against_table``, no key already has a live row in the table either. Keys with a null
    are not compared. Reads the checkpoint's key columns.

    Raises:
        InvalidArgumentError: no column, a bad column name, or ``against_table`` not a bool.
    """
    if not isinstance(against_table, bool):
        raise InvalidArgumentError("against_table", against_table, "True or False")
    return Unique(_column_names(columns), against_table)


def accepted_values(column: str, values: Iterable[Any]) -> AcceptedValues:
    """Every value of ``column`` is one of ``values`` (nulls are left to :func:`not_null`).
    Answered from the files' bounds where they settle it, else from the rows.

    Raises:
        InvalidArgumentError: a bad column name; ``values`` empty, a single string, or
            holding None or an unhashable value.
    """
    name = _column_names((column,), argument="column")[0]
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise InvalidArgumentError("values", values, "a list of the accepted values")
    listed = list(values)
    if not listed or any(v is None for v in listed):
        raise InvalidArgumentError("values", listed, "one value or more, none of them None (not_null judges nulls)")
    try:
        distinct = tuple(dict.fromkeys(listed))
    except TypeError:
        raise InvalidArgumentError("values", listed, "hashable values (numbers, strings, dates ...)") from None
    return AcceptedValues(name, distinct)


def in_range(column: str, *, min: Any = None, max: Any = None) -> InRange:
    """Every value of ``column`` is at least ``min`` and at most ``max`` (datetimes for
    timestamps, naive ones read as UTC; dates for dates). Answered from the files' bounds,
    reading rows only where a file lacks them or a truncated string bound seems out.

    Raises:
        InvalidArgumentError: a bad column name, no bound, a NaN, or ``min > max``.
    """
    name = _column_names((column,), argument="column")[0]
    if min is None and max is None:
        raise InvalidArgumentError("min", None, "a bound: in_range needs min, max or both")
    for argument, value in (("min", min), ("max", max)):
        if isinstance(value, float) and math.isnan(value):
            raise InvalidArgumentError(argument, value, "a number, not NaN")
    if min is not None and max is not None:
        try:
            reversed_ = bool(min > max)
        except TypeError:
            raise InvalidArgumentError("max", max, f"a value comparable with min={min!r}") from None
        if reversed_:
            raise InvalidArgumentError("max", max, f"a value at least min={min!r}")
    return InRange(name, min, max)


def freshness(column: str, *, max_lag: timedelta | str) -> Freshness:
    """The newest value of ``column`` (a timestamp or a date) is at most ``max_lag`` (a
    timedelta, or a duration such as ``"2h"``) older than the time the checks run.
    Answered from the files' upper bounds.

    Raises:
        InvalidArgumentError: a bad column name, or ``max_lag`` not a positive duration.
    """
    name = _column_names((column,), argument="column")[0]
    lag = max_lag
    if isinstance(max_lag, str):
        try:
            lag = parse_duration(max_lag)
        except ValueError:
            raise InvalidArgumentError("max_lag", max_lag, "a duration such as 90s, 30m, 2h or 1d") from None
    if not isinstance(lag, timedelta) or lag <= timedelta(0):
        raise InvalidArgumentError("max_lag", max_lag, "a positive duration (a timedelta, or such as 2h)")
    return Freshness(name, lag)


def custom(name: str, fn: Callable[[Iterator[pa.RecordBatch]], Any]) -> Custom:
    """A check of your own named ``name``: ``fn`` receives the checkpoint's rows as an
    iterator of Arrow record batches and returns ``True``/``False``, ``(ok, detail)`` or a
    :class:`Verdict`. What ``fn`` raises propagates (the checkpoint does not commit).

    Raises:
        InvalidArgumentError: ``name`` is empty or ``fn`` is not callable.
    """
    if not isinstance(name, str) or not name.strip():
        raise InvalidArgumentError("name", name, "a non-empty name for the check")
    if not callable(fn):
        raise InvalidArgumentError("fn", fn, "a function of the checkpoint's record batches")
    return Custom(name, fn)


def validate_checks(checks: Iterable[Check], schema: Schema) -> None:
    """Refuses checks that cannot judge a table of ``schema``, before anything is written.

    Raises:
        InvalidArgumentError: an item is not a check, two checks share a name (results are
            kept by name), or a check names a column the schema lacks or of a type it
            cannot judge.
    """
    seen: set[str] = set()
    for check in checks:
        if not isinstance(check, Check):
            raise InvalidArgumentError("checks", check, "checks made by icecommit.checks (row_count, not_null ...)")
        if check.name in seen:
            raise InvalidArgumentError("checks", check.name, "checks of distinct names (results are kept by name)")
        seen.add(check.name)
        problem = check.schema_problem(schema)
        if problem is not None:
            raise InvalidArgumentError("checks", check.name, f"checks that fit the table ({problem})")


def evaluate_checks(checks: Iterable[Check], facts: CheckpointFacts) -> tuple[CheckResult, ...]:
    """Each check's result on ``facts``, in order (see :meth:`Check.evaluate`)."""
    return tuple(check.evaluate(facts) for check in checks)


def _column_names(columns: Sequence[Any], *, argument: str = "columns") -> tuple[str, ...]:
    if not columns:
        raise InvalidArgumentError(argument, (), "one column name or more")
    for column in columns:
        if not isinstance(column, str) or not column:
            raise InvalidArgumentError(argument, column, "a column name (nested ones dotted: address.zip)")
    if len(set(columns)) != len(columns):
        raise InvalidArgumentError(argument, tuple(columns), "distinct column names")
    return tuple(columns)


def _values_text(values: Sequence[Any]) -> str:
    shown = [str(json_value(v)) for v in values[:_SHOWN_VALUES]]
    if len(values) > _SHOWN_VALUES:
        shown.append(f"... {len(values)} in all")
    return f"[{', '.join(shown)}]"


def _bounds_text(low: Any, high: Any) -> str:
    return ", ".join(f"{k}={json_value(v)}" for k, v in (("min", low), ("max", high)) if v is not None)


def _key_text(columns: Sequence[str], row: Mapping[str, Any]) -> str:
    shown = [literal(row[c]) for c in columns]
    return shown[0] if len(shown) == 1 else f"({', '.join(shown)})"


def _below(value: Any, limit: Any) -> bool:
    return value is not None and limit is not None and value < limit


def _extreme(pick: Callable[[Any, Any], Any], known: Any, value: Any) -> Any:
    return value if known is None else known if value is None else pick(known, value)


__all__ = [
    "AcceptedValues",
    "Check",
    "CheckResult",
    "Custom",
    "Freshness",
    "InRange",
    "MatchesSource",
    "NotNull",
    "RowCount",
    "Unique",
    "Verdict",
    "accepted_values",
    "custom",
    "evaluate_checks",
    "freshness",
    "in_range",
    "matches_source",
    "not_null",
    "row_count",
    "unique",
    "validate_checks",
]
