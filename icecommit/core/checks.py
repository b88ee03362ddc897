"""Checks a checkpoint's data must pass before it reaches readers: pure rules over facts.

A check is a frozen value (:class:`Check`) made by one of the functions below
(:func:`row_count`, :func:`matches_source`, :func:`not_null`, :func:`unique`,
:func:`custom`) or of :mod:`icecommit.core.value_checks` (:func:`accepted_values`,
:func:`in_range`, :func:`freshness`). It judges a
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
``facts.rows(columns)`` (only the columns the check judges; ``custom``: every column),
called at most once per check, or are summarized elsewhere (Spark tasks: see
:class:`Check`) and given to :func:`evaluate_checks`.

No rows. On an empty checkpoint every check passes (observed 0) but ``row_count``, whose
``min=1`` fails, and ``matches_source``, which compares the counts. Nulls are judged by
``not_null`` alone: the other checks leave them out (as in SQL, ``unique`` compares no
key with a null).
"""

from __future__ import annotations

import dataclasses
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.schema import Schema

from icecommit.core.check_values import (
    EXAMPLES,
    CheckpointFacts,
    CheckResult,
    Observed,
    Verdict,
    bounds_text,
    column_names,
    column_path,
    column_problem,
    column_values,
    json_value,
    literal,
    verdict_of,
)
from icecommit.core.errors import InvalidArgumentError


@dataclass(frozen=True)
class Check(ABC):
    """A check of a checkpoint's data. ``reads_rows`` is True when it always reads the
    checkpoint's rows; a check where it is False reads them only when the statistics
    cannot answer (:meth:`needs_rows` says so for one checkpoint).

    Reading rows has three steps, so that Spark tasks can share them: :meth:`summarize`
    some of the rows (in a task, the rows of its files), :meth:`merge` the summaries, and
    :meth:`judge` the whole. A :class:`KeyedCheck` is cut by key instead (every row of one
    key in the same part); one whose ``splits`` is False is summarized once, on all the rows."""

    reads_rows: ClassVar[bool] = False
    #: Whether its rows may be summarized in parts and the parts merged.
    splits: ClassVar[bool] = True
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

    def columns_read(self, schema: Schema) -> tuple[str, ...] | None:
        """The top-level columns it reads when it reads rows (None: all of them)."""
        return tuple(dict.fromkeys(column_path(schema, c)[0] for c in self.columns))

    def needs_rows(self, facts: CheckpointFacts) -> bool:
        """Whether judging ``facts`` reads the checkpoint's rows."""
        if self.schema_problem(facts.schema) is not None or (facts.records == 0 and self._empty_passes):
            return False
        return self.reads_rows or self._from_statistics(facts) is None

    def evaluate(self, facts: CheckpointFacts, summary: Any = None) -> CheckResult:
        """Judges a checkpoint. A column missing from the schema fails the check.
        ``summary``: its rows' summary made elsewhere (in Spark tasks); None: where the
        rows must be read, they are read here (``facts.rows``).

        Raises:
            InvalidArgumentError: the check reads rows (or live keys) the facts do not give.
        """
        problem = self.schema_problem(facts.schema)
        if problem is not None:
            return self._result(False, None, problem)
        if facts.records == 0 and self._empty_passes:
            return self._result(True, 0, "no rows")
        result = None if self.reads_rows else self._from_statistics(facts)
        if result is not None:
            return result
        if summary is None:
            summary = self.summarize(facts.schema, facts.batches(self.name, self.columns_read(facts.schema)))
        return self.judge(facts, summary)

    def _from_statistics(self, facts: CheckpointFacts) -> CheckResult | None:
        """The result from the statistics alone, or None when rows must be read."""
        return None

    @abstractmethod
    def summarize(self, schema: Schema, batches: Iterator[pa.RecordBatch]) -> Any:
        """What it needs of these rows (some of the checkpoint's; picklable, never None)."""

    def merge(self, summaries: Sequence[Any]) -> Any:
        """One summary of the rows the ``summaries`` were made of (disjoint rows, or, for a
        :class:`KeyedCheck`, disjoint keys).

        Raises:
            InvalidArgumentError: none given, or several for a check that does not split.
        """
        if len(summaries) != 1:
            raise InvalidArgumentError("summaries", len(summaries), f"one summary: {self.name} judges all rows at once")
        return summaries[0]

    @abstractmethod
    def judge(self, facts: CheckpointFacts, summary: Any) -> CheckResult:
        """The result from the summary of all the checkpoint's rows (where the statistics
        cannot answer)."""

    def _result(self, ok: bool, observed: Observed, detail: str) -> CheckResult:
        return CheckResult(self.name, ok, observed, detail)


class KeyedCheck(Check):
    """A check whose rows are summarized by key: parts of the rows may be summarized apart
    only when no key has rows in two of them (Spark tasks cut them by the keys' hash)."""

    @abstractmethod
    def keys(self, schema: Schema, batches: Iterator[pa.RecordBatch]) -> pa.Table:
        """The keys of these rows (one row each; what :meth:`summarize_keys` takes)."""

    @abstractmethod
    def summarize_keys(self, keys: pa.Table) -> Any:
        """:meth:`summarize` of the rows these keys were taken from."""

    def summarize(self, schema: Schema, batches: Iterator[pa.RecordBatch]) -> Any:
        return self.summarize_keys(self.keys(schema, batches))


@dataclass(frozen=True)
class _CountCheck(Check):
    """A check of the checkpoint's count of rows (its rows, where read, are only counted)."""

    _empty_passes: ClassVar[bool] = False

    @abstractmethod
    def _from_statistics(self, facts: CheckpointFacts) -> CheckResult:
        """The result on ``facts.records``."""

    def columns_read(self, schema: Schema) -> tuple[str, ...]:
        return ()

    def summarize(self, schema: Schema, batches: Iterator[pa.RecordBatch]) -> int:
        return sum(batch.num_rows for batch in batches)

    def merge(self, summaries: Sequence[Any]) -> int:
        return sum(summaries)

    def judge(self, facts: CheckpointFacts, summary: Any) -> CheckResult:
        return self._from_statistics(dataclasses.replace(facts, records=int(summary)))


@dataclass(frozen=True)
class RowCount(_CountCheck):
    """The checkpoint wrote between ``min`` and ``max`` rows (either may be None)."""

    min: int | None = None
    max: int | None = None

    @property
    def name(self) -> str:
        return f"row_count({bounds_text(self.min, self.max)})"

    def _from_statistics(self, facts: CheckpointFacts) -> CheckResult:
        n = facts.records
        if self.min is not None and n < self.min:
            return self._result(False, n, f"{n} rows, fewer than min {self.min}")
        if self.max is not None and n > self.max:
            return self._result(False, n, f"{n} rows, more than max {self.max}")
        return self._result(True, n, f"{n} rows")


@dataclass(frozen=True)
class MatchesSource(_CountCheck):
    """The checkpoint wrote as many rows as its source counted, give or take ``tolerance``
    (a fraction of the source's count). Fails when the source's count is unknown."""

    tolerance: float = 0

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

    def summarize(self, schema: Schema, batches: Iterator[pa.RecordBatch]) -> dict[str, int]:
        paths = {c: column_path(schema, c) for c in self.of}
        nulls = dict.fromkeys(self.of, 0)
        for batch in batches:
            for column, path in paths.items():
                nulls[column] += column_values(batch, path).null_count
        return nulls

    def merge(self, summaries: Sequence[Any]) -> dict[str, int]:
        return {c: sum(s[c] for s in summaries) for c in self.of}

    def judge(self, facts: CheckpointFacts, summary: Any) -> CheckResult:
        # a column the files count nulls of keeps their count; the rows count the others
        counts = {c: facts.null_count(c) for c in self.of}
        return self._verdict({c: summary[c] if n is None else n for c, n in counts.items()})

    def _verdict(self, counts: Mapping[str, int]) -> CheckResult:
        total = sum(counts.values())
        if total == 0:
            return self._result(True, 0, f"no nulls in {', '.join(self.of)}")
        found = [(c, n) for c, n in counts.items() if n]
        parts = [f"{found[0][1]} null(s) in {found[0][0]}", *(f"{n} in {c}" for c, n in found[1:])]
        return self._result(False, total, ", ".join(parts))


@dataclass(frozen=True)
class Unique(_ColumnsCheck, KeyedCheck):
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

    def keys(self, schema: Schema, batches: Iterator[pa.RecordBatch]) -> pa.Table:
        """The keys of these rows, columns named as the check's; keys with a null left out."""
        paths = [column_path(schema, c) for c in self.of]
        names = list(self.of)
        parts = [pa.table([column_values(b, p) for p in paths], names=names) for b in batches]
        if not parts:
            return pa.table([pa.array([], pa.null()) for _ in names], names=names)
        keys = pa.concat_tables(parts)
        valid = pc.is_valid(keys.column(0))
        for column in self.of[1:]:
            valid = pc.and_(valid, pc.is_valid(keys.column(column)))
        return keys.filter(valid)

    def summarize_keys(self, keys: pa.Table) -> KeyTally:
        if len(keys) == 0:
            return KeyTally(0, 0, (), keys if self.against_table else None)
        counted = keys.group_by(list(self.of)).aggregate([([], "count_all")])
        repeated = counted.filter(pc.greater(counted.column("count_all"), 1))
        order = [("count_all", "descending"), *((c, "ascending") for c in self.of)]
        top = repeated.take(pc.sort_indices(repeated, order)[:EXAMPLES])
        examples = tuple((tuple(row[c] for c in self.of), row["count_all"]) for row in top.to_pylist())
        distinct = counted.select(list(self.of)) if self.against_table else None
        return KeyTally(len(counted), len(repeated), examples, distinct)

    def merge(self, summaries: Sequence[Any]) -> KeyTally:
        examples = sorted((e for s in summaries for e in s.examples), key=lambda e: (-e[1], *e[0]))
        distinct = None
        if self.against_table:
            distinct = pa.concat_tables([s.distinct for s in summaries], promote_options="permissive")
        return KeyTally(
            sum(s.keys for s in summaries), sum(s.repeated for s in summaries), tuple(examples[:EXAMPLES]), distinct
        )

    def judge(self, facts: CheckpointFacts, summary: Any) -> CheckResult:
        tally: KeyTally = summary
        observed, problems = tally.repeated, []
        if tally.repeated:
            examples = ", ".join(f"{_key_text(self.of, dict(zip(self.of, key, strict=True)))} ({n} times)"
                                 for key, n in tally.examples)  # fmt: skip
            problems.append(f"{tally.repeated} key(s) of ({', '.join(self.of)}) appear more than once, e.g. {examples}")
        if self.against_table and tally.keys:
            if facts.live_duplicates is None:
                raise InvalidArgumentError("live_duplicates", None, f"a key look-up: {self.name} needs it")
            live = int(facts.live_duplicates(tally.distinct))
            observed += live
            if live:
                problems.append(f"{live} key(s) of ({', '.join(self.of)}) already have live rows in the table")
        return self._result(not problems, observed, "; ".join(problems) or f"{tally.keys} distinct key(s)")


@dataclass(frozen=True)
class KeyTally:
    """What :class:`Unique` knows of some rows' keys: how many distinct keys, how many of
    them repeated, the most repeated (their values and count; ties by value) and,
    ``against_table``, the distinct keys themselves."""

    keys: int
    repeated: int
    examples: tuple[tuple[tuple[Any, ...], int], ...]
    distinct: pa.Table | None


@dataclass(frozen=True)
class Custom(Check):
    """A check written by the user: ``fn`` receives the checkpoint's rows as Arrow record
    batches and returns a bool, ``(bool, detail)`` or a :class:`Verdict`. It is not
    called on an empty checkpoint, which passes."""

    label: str
    fn: Callable[[Iterator[pa.RecordBatch]], Any]
    reads_rows: ClassVar[bool] = True
    splits: ClassVar[bool] = False  # the function sees every row, in one process

    @property
    def name(self) -> str:
        return self.label

    def columns_read(self, schema: Schema) -> None:
        return None

    def summarize(self, schema: Schema, batches: Iterator[pa.RecordBatch]) -> Verdict:
        returned = self.fn(batches)
        verdict = verdict_of(returned)
        if verdict is None:
            raise InvalidArgumentError(
                "fn", returned, f"{self.label}: a bool, (bool, detail) or Verdict(ok, observed, detail)"
            )
        return verdict

    def judge(self, facts: CheckpointFacts, summary: Any) -> CheckResult:
        verdict: Verdict = summary
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
    return NotNull(column_names(columns))


def unique(*columns: str, against_table: bool = False) -> Unique:
    """No key (the values of ``columns``) appears twice among the checkpoint's rows; with
    ``against_table``, no key already has a live row in the table either. Keys with a null
    are not compared. Reads the checkpoint's key columns.

    Raises:
        InvalidArgumentError: no column, a bad column name, or ``against_table`` not a bool.
    """
    if not isinstance(against_table, bool):
        raise InvalidArgumentError("against_table", against_table, "True or False")
    return Unique(column_names(columns), against_table)


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


def evaluate_checks(
    checks: Iterable[Check], facts: CheckpointFacts, summaries: Mapping[str, Any] | None = None
) -> tuple[CheckResult, ...]:
    """Each check's result on ``facts``, in order (see :meth:`Check.evaluate`);
    ``summaries``: the rows' summaries made elsewhere, by check name (the others read
    the rows they need here)."""
    made = summaries or {}
    return tuple(check.evaluate(facts, made.get(check.name)) for check in checks)


def _key_text(columns: Sequence[str], row: Mapping[str, Any]) -> str:
    shown = [literal(row[c]) for c in columns]
    return shown[0] if len(shown) == 1 else f"({', '.join(shown)})"


__all__ = [
    "Check",
    "CheckResult",
    "Custom",
    "MatchesSource",
    "NotNull",
    "RowCount",
    "Unique",
    "Verdict",
    "custom",
    "evaluate_checks",
    "matches_source",
    "not_null",
    "row_count",
    "unique",
    "validate_checks",
]
