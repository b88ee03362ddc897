"""The checks a checkpoint's data must pass, judged over hand-built facts: data files with
the statistics Iceberg keeps (``DataFile.from_args``, bounds by ``to_bytes``) and rows as
Arrow batches. No Spark, no catalog. A ``rows()`` that raises proves a check answered
from the statistics alone."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from itertools import pairwise
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyiceberg.conversions import to_bytes
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.schema import Schema
from pyiceberg.typedef import Record
from pyiceberg.types import (
    DateType,
    DecimalType,
    DoubleType,
    ListType,
    LongType,
    NestedField,
    PrimitiveType,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
)

from icecommit import checks
from icecommit.core.check_values import CheckpointFacts, column_statistics
from icecommit.core.checks import Check, CheckResult, KeyedCheck, Verdict, evaluate_checks, validate_checks
from icecommit.errors import InvalidArgumentError

SCHEMA = Schema(
    NestedField(1, "id", LongType()),
    NestedField(2, "ts", TimestamptzType()),
    NestedField(3, "event", StringType()),
    NestedField(4, "amount", DoubleType()),
    NestedField(5, "address", StructType(NestedField(6, "zip", StringType()), NestedField(7, "city", StringType()))),
    NestedField(8, "day", DateType()),
    NestedField(9, "price", DecimalType(10, 2)),
    NestedField(10, "tags", ListType(11, StringType())),
    NestedField(12, "local_ts", TimestampType()),
)
ARROW = pa.schema(
    [
        ("id", pa.int64()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("event", pa.string()),
        ("amount", pa.float64()),
        ("address", pa.struct([("zip", pa.string()), ("city", pa.string())])),
        ("day", pa.date32()),
        ("price", pa.decimal128(10, 2)),
        ("tags", pa.list_(pa.string())),
        ("local_ts", pa.timestamp("us")),
    ]
)
NOW = datetime(2026, 1, 2, 12, 0, tzinfo=timezone.utc)
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def micros(instant: datetime) -> int:
    return (instant - EPOCH) // timedelta(microseconds=1)


#: (value count, null count, lower, upper) of one column in one file; None where the file lacks it.
Stats = tuple[int | None, int | None, Any, Any]


def data_file(records: int, **columns: Stats) -> DataFile:
    """A data file of ``records`` rows with the statistics given by column (dotted names as
    keywords use ``__``: ``address__zip``)."""
    counts: dict[int, int] = {}
    nulls: dict[int, int] = {}
    lower: dict[int, bytes] = {}
    upper: dict[int, bytes] = {}
    for name, (values, null_count, low, high) in columns.items():
        field = SCHEMA.find_field(name.replace("__", "."))
        assert isinstance(field.field_type, PrimitiveType)
        if values is not None:
            counts[field.field_id] = values
        if null_count is not None:
            nulls[field.field_id] = null_count
        if low is not None:
            lower[field.field_id] = to_bytes(field.field_type, low)
        if high is not None:
            upper[field.field_id] = to_bytes(field.field_type, high)
    return DataFile.from_args(
        content=DataFileContent.DATA,
        file_path=f"s3://bucket/data/{uuid.uuid4()}.parquet",
        file_format=FileFormat.PARQUET,
        partition=Record(),
        record_count=records,
        file_size_in_bytes=1024,
        value_counts=counts,
        null_value_counts=nulls,
        lower_bounds=lower,
        upper_bounds=upper,
    )


def table(**columns: list[Any]) -> pa.Table:
    """Rows of the schema's columns (those left out are null)."""
    length = len(next(iter(columns.values())))
    return pa.table({f.name: pa.array(columns.get(f.name, [None] * length), f.type) for f in ARROW}, schema=ARROW)


class RowsRead:
    """The checkpoint's rows in batches of two, counting how often they are asked for."""

    def __init__(self, rows: pa.Table) -> None:
        self.rows = rows
        self.calls = 0
        self.columns: list[tuple[str, ...] | None] = []

    def __call__(self, columns: tuple[str, ...] | None) -> Iterator[pa.RecordBatch]:
        self.calls += 1
        self.columns.append(columns)
        return iter(self.rows.to_batches(max_chunksize=2))


def unread(columns: tuple[str, ...] | None) -> Iterator[pa.RecordBatch]:
    raise AssertionError("a check answered from statistics read the rows")


def facts(
    files: list[DataFile],
    rows: Callable[[tuple[str, ...] | None], Iterator[pa.RecordBatch]] = unread,
    *,
    source: int | None = None,
    live: Callable[[pa.Table], int] | None = None,
    now: datetime = NOW,
) -> CheckpointFacts:
    return CheckpointFacts.of_files(files, SCHEMA, now=now, source_records=source, rows=rows, live_duplicates=live)


def judge(check: Check, checkpoint: CheckpointFacts) -> tuple[bool, Any, str]:
    result = check.evaluate(checkpoint)
    assert result.check == check.name
    return result.ok, result.observed, result.detail


# -- statistics --------------------------------------------------------------------------


def test_statistics_aggregate_the_files_by_dotted_name_and_decode_bounds() -> None:
    first = data_file(3, id=(3, 1, 1, 5), address__zip=(3, 0, "10115", "80331"), ts=(3, 0, micros(NOW), micros(NOW)))
    second = data_file(2, id=(2, 0, -4, 2), address__zip=(2, 2, None, None))
    stats = column_statistics([first, second], SCHEMA)
    assert {"id", "address.zip", "address.city", "tags.element", "local_ts"} <= set(stats)
    assert "address" not in stats and "tags" not in stats  # statistics are kept for values only
    assert (stats["id"].nulls, stats["id"].lower, stats["id"].upper, stats["id"].bounded) == (1, -4, 5, True)
    # a file of nulls needs no bounds
    assert (stats["address.zip"].nulls, stats["address.zip"].lower, stats["address.zip"].bounded) == (2, "10115", True)
    assert stats["ts"].upper == micros(NOW) and stats["ts"].field_id == 2
    # the second file does not say how many nulls ts holds, nor its bounds
    assert stats["ts"].nulls is None and not stats["ts"].bounded


def test_facts_need_an_aware_now_and_count_the_files_rows() -> None:
    assert facts([data_file(3), data_file(4)]).records == 7
    with pytest.raises(InvalidArgumentError) as caught:
        facts([], now=datetime(2026, 1, 2))
    assert caught.value.argument == "now"


# -- counts ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("check", "records", "ok", "detail"),
    [
        (checks.row_count(min=1), 3, True, "3 rows"),
        (checks.row_count(min=1), 0, False, "0 rows, fewer than min 1"),
        (checks.row_count(max=2), 3, False, "3 rows, more than max 2"),
        (checks.row_count(min=0, max=3), 0, True, "0 rows"),
    ],
)
def test_row_count(check: Check, records: int, ok: bool, detail: str) -> None:
    files = [data_file(records)] if records else []
    assert judge(check, facts(files)) == (ok, records, detail)


@pytest.mark.parametrize(
    ("tolerance", "written", "source", "ok", "detail"),
    [
        (0, 100, 100, True, "written 100 rows, source 100 (tolerance 0)"),
        (0, 95, 100, False, "written 95 rows, source 100 (tolerance 0)"),
        (0, 101, 100, False, "written 101 rows, source 100 (tolerance 0)"),  # duplicates are no better
        (0.05, 95, 100, True, "written 95 rows, source 100 (tolerance 0.05: up to 5 row(s))"),
        (0.05, 94, 100, False, "written 94 rows, source 100 (tolerance 0.05: up to 5 row(s))"),
        (0, 0, 0, True, "written 0 rows, source 0 (tolerance 0)"),
        (0, 0, 10, False, "written 0 rows, source 10 (tolerance 0)"),
    ],
)
def test_matches_source_allows_a_fraction_of_the_sources_count(
    tolerance: float, written: int, source: int, ok: bool, detail: str
) -> None:
    files = [data_file(written)] if written else []
    assert judge(checks.matches_source(tolerance), facts(files, source=source)) == (ok, written - source, detail)


def test_matches_source_fails_when_the_sources_count_is_unknown() -> None:
    ok, observed, detail = judge(checks.matches_source(), facts([data_file(5)], source=None))
    assert (ok, observed) == (False, None) and "source count unknown" in detail


# -- nulls -------------------------------------------------------------------------------


def test_not_null_is_answered_from_null_counts() -> None:
    files = [data_file(4, id=(4, 2, 1, 9), ts=(4, 0, 1, 2)), data_file(3, id=(3, 1, 1, 2), ts=(3, 1, 1, 2))]
    assert judge(checks.not_null("id"), facts(files)) == (False, 3, "3 null(s) in id")
    assert judge(checks.not_null("id", "ts"), facts(files)) == (False, 4, "3 null(s) in id, 1 in ts")
    clean = [data_file(4, id=(4, 0, 1, 9))]
    assert judge(checks.not_null("id"), facts(clean)) == (True, 0, "no nulls in id")


def test_not_null_of_a_nested_column_from_statistics() -> None:
    files = [data_file(5, address__zip=(5, 2, "1", "2"))]
    assert judge(checks.not_null("address.zip"), facts(files)) == (False, 2, "2 null(s) in address.zip")


def test_not_null_reads_rows_where_a_file_lacks_the_count_and_keeps_the_others() -> None:
    # the file has no statistics for id (a metrics mode of none); event's count is taken
    # as the file gives it (the rows, read for id, would say none)
    rows = RowsRead(table(id=[1, None, 3, None, 5], event=["a", "b", "c", "c", "d"]))
    files = [data_file(5, event=(5, 1, "a", "d"))]
    check = checks.not_null("id", "event")
    assert check.needs_rows(facts(files, rows)) and not checks.not_null("event").needs_rows(facts(files))
    assert judge(check, facts(files, rows)) == (False, 3, "2 null(s) in id, 1 in event")
    assert rows.calls == 1


def test_not_null_in_rows_counts_a_null_parent_struct_as_a_null_child() -> None:
    rows = RowsRead(table(address=[{"zip": "1", "city": "x"}, None, {"zip": None, "city": "y"}]))
    ok, observed, detail = judge(checks.not_null("address.zip"), facts([data_file(3)], rows))
    assert (ok, observed, detail) == (False, 2, "2 null(s) in address.zip")
    assert judge(checks.not_null("address"), facts([data_file(3)], rows))[1] == 1  # a struct: read from rows


def test_not_null_of_list_elements_from_rows() -> None:
    rows = RowsRead(table(tags=[["a", None], None, ["b"]]))
    assert judge(checks.not_null("tags.element"), facts([data_file(3)], rows))[:2] == (False, 1)


# -- unique ------------------------------------------------------------------------------


def test_unique_counts_the_keys_seen_more_than_once_with_examples() -> None:
    rows = RowsRead(table(id=[7, 7, 7, 9, 9, 1, None, None]))
    ok, observed, detail = judge(checks.unique("id"), facts([data_file(8)], rows))
    assert (ok, observed) == (False, 2)
    assert detail == "2 key(s) of (id) appear more than once, e.g. 7 (3 times), 9 (2 times)"
    assert rows.calls == 1


def test_unique_passes_distinct_keys_and_leaves_nulls_out() -> None:
    rows = RowsRead(table(id=[1, 2, None, None]))
    assert judge(checks.unique("id"), facts([data_file(4)], rows)) == (True, 0, "2 distinct key(s)")


def test_unique_over_several_columns_nested_ones_too() -> None:
    rows = RowsRead(
        table(id=[1, 1, 1], address=[{"zip": "a", "city": "x"}, {"zip": "b", "city": "x"}, {"zip": "a", "city": "y"}])
    )
    ok, observed, detail = judge(checks.unique("id", "address.zip"), facts([data_file(3)], rows))
    assert (ok, observed, detail) == (
        False,
        1,
        "1 key(s) of (id, address.zip) appear more than once, e.g. (1, 'a') (2 times)",
    )
    assert judge(checks.unique("id", "address.city"), facts([data_file(3)], rows))[0] is False
    assert judge(checks.unique("address.zip", "address.city"), facts([data_file(3)], rows))[0] is True


def test_unique_against_the_table_asks_for_the_distinct_keys_live_rows() -> None:
    asked: list[pa.Table] = []

    def live(keys: pa.Table) -> int:
        asked.append(keys)
        return 2

    rows = RowsRead(table(id=[1, 2, 2, 3, None]))
    ok, observed, detail = judge(checks.unique("id", against_table=True), facts([data_file(5)], rows, live=live))
    assert (ok, observed) == (False, 3)
    assert detail.endswith("; 2 key(s) of (id) already have live rows in the table")
    (keys,) = asked
    assert keys.column_names == ["id"] and sorted(keys.column("id").to_pylist()) == [1, 2, 3]
    with pytest.raises(InvalidArgumentError) as caught:
        checks.unique("id", against_table=True).evaluate(facts([data_file(5)], rows))
    assert caught.value.argument == "live_duplicates"


# -- accepted values ---------------------------------------------------------------------


def test_accepted_values_from_files_of_one_value_read_no_rows() -> None:
    files = [data_file(3, event=(3, 0, "click", "click")), data_file(2, event=(2, 1, "view", "view"))]
    check = checks.accepted_values("event", ["click", "view"])
    assert not check.needs_rows(facts(files))
    assert judge(check, facts(files)) == (True, 0, "every value of event in [click, view]")


def test_accepted_values_fail_from_a_file_of_one_value_outside() -> None:
    files = [data_file(3, event=(3, 0, "click", "click")), data_file(2, event=(2, 0, "bogus", "bogus"))]
    check = checks.accepted_values("event", ["click", "view"])
    assert judge(check, facts(files)) == (False, 2, "2 value(s) of event outside [click, view], e.g. 'bogus'")


def test_accepted_values_give_each_example_once() -> None:
    files = [data_file(3, event=(3, 0, "bogus", "bogus")), data_file(2, event=(2, 0, "bogus", "bogus"))]
    rows = RowsRead(table(event=["bogus", "bogus", "odd", "bogus", "bogus", "odd", "x", "y"]))
    check = checks.accepted_values("event", ["click"])
    assert judge(check, facts(files)) == (False, 5, "5 value(s) of event outside [click], e.g. 'bogus'")
    assert judge(check, facts([data_file(8)], rows))[2].endswith("e.g. 'bogus', 'odd', 'x'")


def test_accepted_values_fail_from_bounds_that_hold_no_accepted_value() -> None:
    files = [data_file(4, event=(4, 1, "x-ray", "zulu"))]
    ok, observed, detail = judge(checks.accepted_values("event", ["click", "view"]), facts(files))
    assert (ok, observed) == (False, 3)
    assert detail == "3 value(s) of event outside [click, view], e.g. values between 'x-ray' and 'zulu'"


def test_accepted_values_say_at_least_when_other_files_are_undecided() -> None:
    files = [data_file(2, event=(2, 0, "bogus", "bogus")), data_file(3, event=(3, 0, "click", "view"))]
    ok, observed, detail = judge(checks.accepted_values("event", ["click", "view"]), facts(files))
    assert (ok, observed) == (False, 2) and detail.startswith("at least 2 value(s) of event outside")


def test_accepted_values_read_rows_when_bounds_do_not_settle_it() -> None:
    rows = RowsRead(table(event=["click", "bogus", None, "view", "bogus", "other"]))
    files = [data_file(6, event=(6, 1, "bogus", "view"))]
    check = checks.accepted_values("event", ["click", "view"])
    assert check.needs_rows(facts(files, rows))
    expected = (False, 3, "3 value(s) of event outside [click, view], e.g. 'bogus', 'other'")
    assert judge(check, facts(files, rows)) == expected
    # a file without bounds reads rows too
    assert judge(check, facts([data_file(6)], rows)) == expected


def test_accepted_values_of_dates_and_decimals() -> None:
    rows = RowsRead(table(day=[date(2026, 1, 1), date(2026, 1, 3)], price=[Decimal("1.00"), Decimal("2.50")]))
    check = checks.accepted_values("day", [date(2026, 1, 1), date(2026, 1, 2)])
    assert judge(check, facts([data_file(2)], rows)) == (
        False,
        1,
        "1 value(s) of day outside [2026-01-01, 2026-01-02], e.g. 2026-01-03",
    )
    assert judge(checks.accepted_values("price", [Decimal("1.00"), 2.5]), facts([data_file(2)], rows))[0] is False
    assert judge(checks.accepted_values("price", [1, Decimal("2.5")]), facts([data_file(2)], rows))[0] is True


# -- ranges ------------------------------------------------------------------------------


def test_in_range_from_bounds_reads_no_rows() -> None:
    files = [data_file(3, amount=(3, 0, 0.0, 10.0)), data_file(2, amount=(2, 0, 5.0, 99.5))]
    assert judge(checks.in_range("amount", min=0, max=100), facts(files)) == (
        True,
        [0.0, 99.5],
        "amount within [0.0, 99.5]",
    )
    ok, observed, detail = judge(checks.in_range("amount", min=1), facts(files))
    assert (ok, observed, detail) == (False, [0.0, 99.5], "values of amount below min 1, e.g. 0.0 (smallest)")
    ok, _, detail = judge(checks.in_range("amount", min=1, max=50), facts(files))
    assert detail == "values of amount outside [1, 50], e.g. 0.0 (smallest), 99.5 (largest)"


def test_in_range_reads_rows_for_a_file_without_bounds() -> None:
    rows = RowsRead(table(amount=[-5.0, 3.0, None, 120.0, -1.0]))
    files = [data_file(2, amount=(2, 0, 3.0, 3.0)), data_file(3, amount=(3, 1, None, None))]
    ok, observed, detail = judge(checks.in_range("amount", min=0, max=100), facts(files, rows))
    assert (ok, observed) == (False, [-5.0, 120.0])
    assert detail == "3 value(s) of amount outside [0, 100], e.g. -5.0, 120.0, -1.0"


def test_in_range_asks_the_rows_when_a_truncated_string_bound_seems_out() -> None:
    # Iceberg truncates a string's upper bound and increments its last character
    rows = RowsRead(table(event=["aaaaaaaaaaaaaaaaaaaa", "b"]))
    files = [data_file(2, event=(2, 0, "aaaaaaaaaaaaaaaa", "c"))]
    assert judge(checks.in_range("event", max="b"), facts(files, rows)) == (
        True,
        ["aaaaaaaaaaaaaaaaaaaa", "b"],
        "event within [aaaaaaaaaaaaaaaaaaaa, b]",
    )
    assert rows.calls == 1


def test_in_range_of_timestamps_takes_datetimes() -> None:
    files = [data_file(2, ts=(2, 0, micros(NOW - timedelta(days=1)), micros(NOW)))]
    assert judge(checks.in_range("ts", min=NOW - timedelta(days=2)), facts(files))[0] is True
    ok, observed, detail = judge(checks.in_range("ts", max=NOW - timedelta(hours=1)), facts(files))
    assert ok is False and observed == ["2026-01-01T12:00:00+00:00", "2026-01-02T12:00:00+00:00"]
    assert detail == "values of ts above max 2026-01-02T11:00:00+00:00, e.g. 2026-01-02T12:00:00+00:00 (largest)"


# -- freshness ---------------------------------------------------------------------------


def test_freshness_compares_the_newest_timestamp_with_the_given_now() -> None:
    files = [data_file(2, ts=(2, 0, micros(NOW - timedelta(hours=5)), micros(NOW - timedelta(minutes=30))))]
    check = checks.freshness("ts", max_lag="2h")
    assert judge(check, facts(files)) == (True, 1800.0, "newest ts 2026-01-02T11:30:00+00:00 is 0:30:00 old")
    later = facts(files, now=NOW + timedelta(hours=3))
    assert judge(check, later) == (
        False,
        12600.0,
        "newest ts 2026-01-02T11:30:00+00:00 is 3:30:00 old, more than max_lag 2h",
    )


def test_freshness_with_a_now_in_another_zone() -> None:
    files = [data_file(1, ts=(1, 0, micros(NOW), micros(NOW)))]
    tokyo = NOW.astimezone(timezone(timedelta(hours=9))) + timedelta(hours=1)
    assert judge(checks.freshness("ts", max_lag=timedelta(minutes=30)), facts(files, now=tokyo))[:2] == (False, 3600.0)


def test_freshness_reads_rows_without_bounds_and_handles_local_timestamps_and_dates() -> None:
    rows = RowsRead(table(local_ts=[datetime(2026, 1, 2, 11, 0), None], day=[date(2026, 1, 1), date(2026, 1, 2)]))
    ok, observed, detail = judge(checks.freshness("local_ts", max_lag="2h"), facts([data_file(2)], rows))
    assert (ok, observed, detail) == (True, 3600.0, "newest local_ts 2026-01-02T11:00:00 is 1:00:00 old")
    assert judge(checks.freshness("day", max_lag="1d"), facts([data_file(2)], rows))[:2] == (True, 43200.0)
    assert judge(checks.freshness("day", max_lag="6h"), facts([data_file(2)], rows))[0] is False


def test_freshness_fails_when_the_column_holds_no_value() -> None:
    files = [data_file(3, ts=(3, 3, None, None))]
    assert judge(checks.freshness("ts", max_lag="1h"), facts(files)) == (False, None, "no value of ts among 3 row(s)")


# -- custom ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("returned", "ok", "observed", "detail"),
    [
        (True, True, None, ""),
        (False, False, None, "no test users failed (its function gave no detail)"),
        ((False, "2 test users"), False, None, "2 test users"),
        (Verdict(False, observed=2, detail="2 test users"), False, 2, "2 test users"),
        (Verdict(True, observed=[date(2026, 1, 1), Decimal("1.5")]), True, ["2026-01-01", "1.5"], ""),
        (np.bool_(True), True, None, ""),
        (pa.scalar(False), False, None, "no test users failed (its function gave no detail)"),
    ],
)
def test_custom_verdict_forms(returned: Any, ok: bool, observed: Any, detail: str) -> None:
    seen: list[int] = []

    def fn(batches: Iterator[pa.RecordBatch]) -> Any:
        seen.extend(b.num_rows for b in batches)
        return returned

    rows = RowsRead(table(id=[1, 2, 3]))
    assert judge(checks.custom("no test users", fn), facts([data_file(3)], rows)) == (ok, observed, detail)
    assert seen == [2, 1]


def test_custom_judges_the_rows_it_is_given() -> None:
    def no_test_users(batches: Iterator[pa.RecordBatch]) -> tuple[bool, str]:
        found = sum(pc.sum(pc.starts_with(b.column("event"), "test")).as_py() or 0 for b in batches)
        return found == 0, f"{found} test user event(s)"

    rows = RowsRead(table(event=["click", "test-1", "view", "test-2"]))
    assert judge(checks.custom("no test users", no_test_users), facts([data_file(4)], rows)) == (
        False,
        None,
        "2 test user event(s)",
    )


@pytest.mark.parametrize("returned", [1, "yes", None, (True, 3), pa.scalar(None, pa.bool_())])
def test_custom_refuses_what_is_not_a_verdict(returned: Any) -> None:
    check = checks.custom("odd", lambda batches: returned)
    with pytest.raises(InvalidArgumentError) as caught:
        check.evaluate(facts([data_file(1)], RowsRead(table(id=[1]))))
    assert caught.value.argument == "fn"


# -- empty checkpoints, unknown columns, which checks read rows ----------------------------


def test_an_empty_checkpoint_passes_every_check_but_row_count() -> None:
    every = [
        checks.not_null("id"),
        checks.unique("id", against_table=True),
        checks.accepted_values("event", ["click"]),
        checks.in_range("amount", min=0),
        checks.freshness("ts", max_lag="1h"),
        checks.custom("never called", lambda batches: False),
    ]
    results = evaluate_checks([checks.row_count(min=1), checks.matches_source(), *every], facts([], source=0))
    assert [(r.ok, r.observed) for r in results] == [(False, 0), (True, 0)] + [(True, 0)] * len(every)
    assert results[0].detail == "0 rows, fewer than min 1"
    assert not any(c.needs_rows(facts([])) for c in every)


def test_which_checks_always_read_rows() -> None:
    assert [c.reads_rows for c in (checks.unique("id"), checks.custom("c", lambda b: True))] == [True, True]
    statistics_only = [
        checks.row_count(min=1),
        checks.matches_source(),
        checks.not_null("id"),
        checks.accepted_values("event", ["a"]),
        checks.in_range("amount", min=0),
        checks.freshness("ts", max_lag="1h"),
    ]
    assert not any(c.reads_rows for c in statistics_only)


def test_a_column_the_schema_lacks_fails_the_check_and_validation_refuses_it() -> None:
    check = checks.not_null("idd")
    assert judge(check, facts([data_file(1)])) == (False, None, "no column 'idd' in the table's schema")
    with pytest.raises(InvalidArgumentError) as caught:
        validate_checks([checks.row_count(min=1), check], SCHEMA)
    assert (caught.value.argument, caught.value.value) == ("checks", "not_null(idd)")


@pytest.mark.parametrize(
    ("check", "problem"),
    [
        (checks.freshness("event", max_lag="1h"), "event is string, not a timestamp or a date"),
        (checks.in_range("event", min=0), "0 is not a value of event (string)"),
        (checks.accepted_values("id", ["1"]), "'1' is not a value of id (long)"),
        (checks.unique("tags.element"), "tags.element is inside a list or a map"),
        (checks.unique("address"), "address is struct"),
    ],
)
def test_validation_refuses_a_check_the_columns_type_cannot_take(check: Check, problem: str) -> None:
    with pytest.raises(InvalidArgumentError, match="expected checks that fit the table") as caught:
        validate_checks([check], SCHEMA)
    assert problem in caught.value.accepted


def test_validation_refuses_two_checks_of_one_name_and_what_is_not_a_check() -> None:
    with pytest.raises(InvalidArgumentError, match="distinct names"):
        validate_checks([checks.not_null("id"), checks.not_null("id")], SCHEMA)
    with pytest.raises(InvalidArgumentError, match=r"checks made by icecommit\.checks"):
        validate_checks(["not_null(id)"], SCHEMA)  # type: ignore[list-item]
    validate_checks([checks.not_null("id"), checks.unique("id"), checks.freshness("day", max_lag="1d")], SCHEMA)


def test_a_check_that_reads_rows_needs_the_rows() -> None:
    checkpoint = CheckpointFacts.of_files([data_file(1)], SCHEMA, now=NOW)
    with pytest.raises(InvalidArgumentError) as caught:
        checks.unique("id").evaluate(checkpoint)
    assert caught.value.argument == "rows" and "unique(id) reads them" in str(caught.value)


# -- names, results, arguments -------------------------------------------------------------


@pytest.mark.parametrize(
    ("check", "name"),
    [
        (checks.row_count(min=1), "row_count(min=1)"),
        (checks.row_count(min=1, max=10), "row_count(min=1, max=10)"),
        (checks.matches_source(), "matches_source(tolerance=0)"),
        (checks.matches_source(0.01), "matches_source(tolerance=0.01)"),
        (checks.not_null("id", "ts"), "not_null(id, ts)"),
        (checks.unique("id"), "unique(id)"),
        (checks.unique("id", "ts", against_table=True), "unique(id, ts, against_table=True)"),
        (checks.accepted_values("event", ["click", "view"]), "accepted_values(event, [click, view])"),
        (checks.accepted_values("id", range(8)), "accepted_values(id, [0, 1, 2, 3, 4, ... 8 in all])"),
        (checks.in_range("amount", min=0), "in_range(amount, min=0)"),
        (
            checks.in_range("day", min=date(2026, 1, 1), max=date(2026, 2, 1)),
            "in_range(day, min=2026-01-01, max=2026-02-01)",
        ),
        (checks.freshness("ts", max_lag="2h"), "freshness(ts, max_lag=2h)"),
        (checks.freshness("ts", max_lag=timedelta(minutes=90)), "freshness(ts, max_lag=90m)"),
        (checks.custom("no test users", lambda b: True), "no test users"),
    ],
)
def test_check_names(check: Check, name: str) -> None:
    assert check.name == name


@pytest.mark.parametrize(
    "result",
    [
        CheckResult("not_null(id)", False, 3, "3 null(s) in id"),
        CheckResult("in_range(amount, min=0)", True, [0.5, 99.0], "amount within [0.5, 99.0]"),
        CheckResult("freshness(ts, max_lag=2h)", False, None, "no value of ts among 3 row(s)"),
        CheckResult("custom", True, "ok"),
    ],
)
def test_a_check_result_round_trips_through_json(result: CheckResult) -> None:
    assert CheckResult.from_json(result.to_json()) == result
    assert CheckResult.from_dict(result.to_dict()) == result


@pytest.mark.parametrize("text", ["not json", "[1, 2]", '{"check": "x"}', '{"check": "x", "ok": "yes"}'])
def test_a_check_result_refuses_json_that_is_not_one(text: str) -> None:
    with pytest.raises(InvalidArgumentError):
        CheckResult.from_json(text)


@pytest.mark.parametrize(
    ("make", "argument"),
    [
        (lambda: checks.row_count(), "min"),
        (lambda: checks.row_count(min=-1), "min"),
        (lambda: checks.row_count(min=True), "min"),
        (lambda: checks.row_count(min=5, max=2), "max"),
        (lambda: checks.row_count(max=1.5), "max"),  # type: ignore[arg-type]
        (lambda: checks.matches_source(-0.1), "tolerance"),
        (lambda: checks.matches_source(1.5), "tolerance"),
        (lambda: checks.matches_source("1%"), "tolerance"),  # type: ignore[arg-type]
        (lambda: checks.not_null(), "columns"),
        (lambda: checks.not_null("id", ""), "columns"),
        (lambda: checks.not_null("id", "id"), "columns"),
        (lambda: checks.unique(), "columns"),
        (lambda: checks.unique("id", against_table="yes"), "against_table"),  # type: ignore[arg-type]
        (lambda: checks.accepted_values("", ["a"]), "column"),
        (lambda: checks.accepted_values("event", []), "values"),
        (lambda: checks.accepted_values("event", "click"), "values"),
        (lambda: checks.accepted_values("event", ["click", None]), "values"),
        (lambda: checks.accepted_values("event", [["click"]]), "values"),
        (lambda: checks.in_range("amount"), "min"),
        (lambda: checks.in_range("amount", min=5, max=1), "max"),
        (lambda: checks.in_range("amount", min=0, max="z"), "max"),
        (lambda: checks.in_range("amount", max=float("nan")), "max"),
        (lambda: checks.freshness("ts", max_lag="2 hours"), "max_lag"),
        (lambda: checks.freshness("ts", max_lag=timedelta(0)), "max_lag"),
        (lambda: checks.freshness("ts", max_lag=-timedelta(hours=1)), "max_lag"),
        (lambda: checks.freshness("ts", max_lag=7200), "max_lag"),  # type: ignore[arg-type]
        (lambda: checks.custom("", lambda b: True), "name"),
        (lambda: checks.custom("no test users", "not callable"), "fn"),  # type: ignore[arg-type]
    ],
)
def test_bad_arguments_name_the_argument(make: Callable[[], Check], argument: str) -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        make()
    assert caught.value.argument == argument


def test_the_public_facade_re_exports_the_constructors_and_values() -> None:
    assert set(checks.__all__) == {
        "Check",
        "CheckResult",
        "Verdict",
        "accepted_values",
        "custom",
        "freshness",
        "in_range",
        "matches_source",
        "not_null",
        "row_count",
        "unique",
    }
    assert checks.CheckResult is CheckResult and isinstance(checks.not_null("id"), checks.Check)


# -- summaries: what Spark tasks share ---------------------------------------------------


def _rows_for_splitting(seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    n = 60
    ids = rng.integers(0, 40, n).tolist()  # repeated keys, some in every part
    return table(
        id=[None if i % 11 == 0 else i for i in ids],
        event=[["pv", "click", "buy", "??"][int(x)] for x in rng.integers(0, 4, n)],
        amount=[float(x) - 5 for x in rng.integers(0, 100, n)],
        ts=[NOW - timedelta(hours=int(h)) for h in rng.integers(120, 500, n)],
        address=[{"zip": None if int(z) == 0 else str(z), "city": "x"} for z in rng.integers(0, 5, n)],
    )


SPLITTING = [
    checks.not_null("id", "address.zip"),
    checks.accepted_values("event", ["pv", "click", "buy"]),
    checks.in_range("amount", min=0, max=90),
    checks.freshness("ts", max_lag="100h"),
    checks.row_count(min=1),
    checks.unique("id"),
    checks.unique("id", "event", against_table=True),
]


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("check", SPLITTING, ids=lambda c: c.name)
def test_rows_summarized_in_parts_and_merged_judge_as_all_the_rows_do(check: Check, seed: int) -> None:
    # Spark tasks summarize parts of the rows (files; for unique, keys cut by hash) and the
    # driver merges them: the result is the one the rows judged at once give, whatever the cut
    rows = _rows_for_splitting(seed)
    asked: list[int] = []

    def live(keys: pa.Table) -> int:
        asked.append(len(keys))
        return 2

    facts_of = facts([data_file(len(rows))], RowsRead(rows), live=live)
    whole = check.evaluate(facts_of)
    rng = np.random.default_rng(seed + 100)
    if isinstance(check, KeyedCheck):
        keys = check.keys(SCHEMA, iter(rows.to_batches()))
        cut = pa.array([hash(tuple(k.values())) % 3 for k in keys.to_pylist()])
        parts = [check.summarize_keys(keys.filter(pc.equal(cut, p))) for p in range(3)]
    else:
        cut_at = sorted(int(x) for x in rng.integers(0, len(rows), 3))
        edges = [0, *cut_at, len(rows)]
        parts = [check.summarize(SCHEMA, iter(rows.slice(a, b - a).to_batches())) for a, b in pairwise(edges)]
    merged = check.judge(facts_of, check.merge(parts))
    assert merged == whole
    assert whole.ok is check.name.startswith("row_count")  # the rows break every other check
    if "against_table" in check.name:  # asked once per judgement, with every distinct key
        distinct = len(rows.select(["id", "event"]).drop_null().group_by(["id", "event"]).aggregate([]))
        assert asked == [distinct, distinct]


def test_checks_read_only_the_columns_they_judge() -> None:
    rows = RowsRead(table(id=[1, 1], event=["a", "b"], address=[{"zip": "1", "city": "x"}] * 2))
    files = [data_file(2)]  # no statistics: every check reads
    for check, read in [
        (checks.unique("id"), ("id",)),
        (checks.not_null("address.zip", "event"), ("address", "event")),
        (checks.accepted_values("event", ["a"]), ("event",)),
        (checks.custom("mine", lambda batches: True), None),
    ]:
        rows.columns.clear()
        check.evaluate(facts(files, rows))
        assert rows.columns == [read], check.name


def test_a_users_function_is_judged_on_all_the_rows_at_once() -> None:
    mine = checks.custom("mine", lambda batches: True)
    assert not mine.splits and checks.unique("id").splits
    with pytest.raises(InvalidArgumentError, match="mine judges all rows at once"):
        mine.merge([Verdict(True), Verdict(True)])
