"""Checks of one column's values (:func:`accepted_values`, :func:`in_range`,
:func:`freshness`): answered from the data files' bounds where they settle it, from the
checkpoint's rows where they cannot (see :mod:`icecommit.core.checks`)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

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
    EXAMPLES,
    TIMESTAMPS,
    CheckpointFacts,
    CheckResult,
    bounds_text,
    column_names,
    column_path,
    column_problem,
    column_values,
    iceberg_form,
    iceberg_form_of,
    instant_of,
    json_value,
    literal,
    python_form,
)
from icecommit.core.checks import Check
from icecommit.core.errors import InvalidArgumentError
from icecommit.core.timeparse import format_duration, parse_duration

_SHOWN_VALUES = 5
#: Types whose bounds Iceberg may truncate (a bound then need not be a value of the file).
_TRUNCATED = (StringType, BinaryType, FixedType)


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

    def summarize(self, schema: Schema, batches: Iterator[pa.RecordBatch]) -> tuple[int, list[str]]:
        kind, path = schema.find_type(self.column), column_path(schema, self.column)
        outside, examples = 0, list[str]()
        for batch in batches:
            values = iceberg_form_of(column_values(batch, path), kind)
            if values.null_count == len(values):
                continue
            accepted = pa.array([iceberg_form(v, kind) for v in self.values], type=values.type)
            bad = values.filter(pc.and_(pc.is_valid(values), pc.invert(pc.is_in(values, value_set=accepted))))
            outside += len(bad)
            if len(set(examples)) < EXAMPLES:
                examples += [literal(python_form(v, kind)) for v in bad.slice(0, EXAMPLES * 4).to_pylist()]
        return outside, examples

    def merge(self, summaries: Sequence[Any]) -> tuple[int, list[str]]:
        return sum(n for n, _ in summaries), [e for _, examples in summaries for e in examples]

    def judge(self, facts: CheckpointFacts, summary: Any) -> CheckResult:
        return self._verdict(*summary)

    def _verdict(self, outside: int, examples: list[str], *, at_least: bool = False) -> CheckResult:
        if outside == 0:
            return self._result(True, 0, f"every value of {self.column} in {_values_text(self.values)}")
        count = f"at least {outside}" if at_least else str(outside)
        shown = ", ".join(list(dict.fromkeys(examples))[:EXAMPLES])
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
        return f"in_range({self.column}, {bounds_text(self.min, self.max)})"

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

    def summarize(self, schema: Schema, batches: Iterator[pa.RecordBatch]) -> tuple[Any, Any, int, list[str]]:
        kind, path = schema.find_type(self.column), column_path(schema, self.column)
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
            examples += [literal(python_form(v, kind)) for v in bad.slice(0, EXAMPLES - len(examples)).to_pylist()]
        return low, high, outside, examples

    def merge(self, summaries: Sequence[Any]) -> tuple[Any, Any, int, list[str]]:
        low: Any = None
        high: Any = None
        for part_low, part_high, _, _ in summaries:
            low, high = _extreme(min, low, part_low), _extreme(max, high, part_high)
        examples = [e for *_, part in summaries for e in part][:EXAMPLES]
        return low, high, sum(s[2] for s in summaries), examples

    def judge(self, facts: CheckpointFacts, summary: Any) -> CheckResult:
        low, high, outside, examples = summary
        return self._verdict(facts.schema.find_type(self.column), low, high, outside, examples)

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

    def summarize(self, schema: Schema, batches: Iterator[pa.RecordBatch]) -> tuple[Any]:
        kind, path = schema.find_type(self.column), column_path(schema, self.column)
        newest: Any = None
        for batch in batches:
            newest = _extreme(max, newest, pc.max(iceberg_form_of(column_values(batch, path), kind)).as_py())
        return (newest,)  # a tuple: a summary is never None

    def merge(self, summaries: Sequence[Any]) -> tuple[Any]:
        newest: Any = None
        for (part,) in summaries:
            newest = _extreme(max, newest, part)
        return (newest,)

    def judge(self, facts: CheckpointFacts, summary: Any) -> CheckResult:
        return self._verdict(facts, summary[0])

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


def accepted_values(column: str, values: Iterable[Any]) -> AcceptedValues:
    """Every value of ``column`` is one of ``values`` (nulls are left to :func:`not_null`).
    Answered from the files' bounds where they settle it, else from the rows.

    Raises:
        InvalidArgumentError: a bad column name; ``values`` empty, a single string, or
            holding None or an unhashable value.
    """
    name = column_names((column,), argument="column")[0]
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
    name = column_names((column,), argument="column")[0]
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
    name = column_names((column,), argument="column")[0]
    lag = max_lag
    if isinstance(max_lag, str):
        try:
            lag = parse_duration(max_lag)
        except ValueError:
            raise InvalidArgumentError("max_lag", max_lag, "a duration such as 90s, 30m, 2h or 1d") from None
    if not isinstance(lag, timedelta) or lag <= timedelta(0):
        raise InvalidArgumentError("max_lag", max_lag, "a positive duration (a timedelta, or such as 2h)")
    return Freshness(name, lag)


def _values_text(values: Sequence[Any]) -> str:
    shown = [str(json_value(v)) for v in values[:_SHOWN_VALUES]]
    if len(values) > _SHOWN_VALUES:
        shown.append(f"... {len(values)} in all")
    return f"[{', '.join(shown)}]"


def _below(value: Any, limit: Any) -> bool:
    return value is not None and limit is not None and value < limit


def _extreme(pick: Callable[[Any, Any], Any], known: Any, value: Any) -> Any:
    return value if known is None else known if value is None else pick(known, value)


__all__ = ["AcceptedValues", "Freshness", "InRange", "accepted_values", "freshness", "in_range"]
