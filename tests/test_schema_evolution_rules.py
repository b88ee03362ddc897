"""The rules of schema evolution on write (icecommit.core.evolution), on Iceberg types alone:
what each mode adds or widens, and what it refuses, naming the column path and both types."""

from __future__ import annotations

import re

import pytest
from pyiceberg.schema import Schema
from pyiceberg.types import (
    BinaryType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
)

import icecommit as ic
from icecommit.core.evolution import (
    ADD_COLUMNS,
    CREATED_BY_PROPERTY,
    MERGE,
    STRICT,
    AddColumn,
    MakeOptional,
    Promote,
    checked_mode,
    checkpoint_features,
    dead_letter_mode,
    plan_changes,
)
from icecommit.errors import InvalidArgumentError, SchemaMismatchError

TABLE = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "n", IntegerType(), required=False),
    NestedField(3, "point", StructType(NestedField(4, "x", DoubleType(), required=False)), required=False),
    NestedField(
        5, "tags", ListType(6, StructType(NestedField(7, "k", StringType(), required=False)), element_required=False)
    ),
    NestedField(
        8, "attrs", MapType(9, StringType(), 10, StructType(NestedField(11, "v", FloatType(), required=False)))
    ),
    NestedField(12, "price", DecimalType(9, 2), required=False),
    NestedField(13, "score", FloatType(), required=True),
    identifier_field_ids=[1],
)


def _incoming(*extra: NestedField, **replaced: NestedField) -> StructType:
    """The table's columns as rows bring them (ids are placeholders), with changes."""
    fields = [replaced.get(f.name, f) for f in TABLE.fields]
    return StructType(*fields, *extra)


def test_strict_changes_nothing_and_add_columns_adds_at_every_depth_always_optional() -> None:
    incoming = _incoming(
        NestedField(100, "country", StringType(), required=True),
        point=NestedField(
            3,
            "point",
            StructType(NestedField(4, "x", DoubleType()), NestedField(101, "y", DoubleType(), required=True)),
        ),
        tags=NestedField(
            5, "tags", ListType(6, StructType(NestedField(7, "k", StringType()), NestedField(102, "w", LongType())))
        ),
        attrs=NestedField(
            8,
            "attrs",
            MapType(
                9, StringType(), 10, StructType(NestedField(11, "v", FloatType()), NestedField(103, "u", StringType()))
            ),
        ),
    )
    assert plan_changes(TABLE, incoming, STRICT, table="t") == []
    changes = plan_changes(TABLE, incoming, ADD_COLUMNS, table="t")
    assert changes == [
        AddColumn(("point",), "y", DoubleType()),
        AddColumn(("tags",), "w", LongType()),
        AddColumn(("attrs",), "u", StringType()),
        AddColumn((), "country", StringType()),
    ]
    nested = plan_changes(
        TABLE,
        _incoming(NestedField(104, "s", StructType(NestedField(105, "a", IntegerType(), required=True)))),
        ADD_COLUMNS,
        table="t",
    )
    (added,) = nested
    assert isinstance(added, AddColumn) and not added.field_type.fields[0].required  # type: ignore[attr-defined]


def test_a_wider_type_is_refused_by_add_columns_with_a_hint_and_widened_by_merge() -> None:
    wider = _incoming(
        n=NestedField(2, "n", LongType()),
        price=NestedField(12, "price", DecimalType(12, 2)),
        score=NestedField(13, "score", DoubleType()),
    )
    with pytest.raises(
        SchemaMismatchError,
        match=r"column 'n' of table t: the rows' type long cannot be written "
        r"to the table's type int \(schema_mode='merge' widens it\)",
    ):
        plan_changes(TABLE, wider, ADD_COLUMNS, table="t")
    assert plan_changes(TABLE, wider, MERGE, table="t") == [
        Promote(("n",), LongType()),
        Promote(("price",), DecimalType(12, 2)),
        Promote(("score",), DoubleType()),
    ]
    # what the write path widens itself needs no change
    narrower = _incoming(id=NestedField(1, "id", IntegerType(), required=True))
    assert plan_changes(TABLE, narrower, MERGE, table="t") == []


@pytest.mark.parametrize(
    ("replaced", "path", "types"),
    [
        (NestedField(1, "id", StringType()), "id", "string cannot be written to the table's type long"),
        (
            NestedField(12, "price", DecimalType(12, 3)),
            "price",
            "decimal(12, 3) cannot be written to the table's type decimal(9, 2)",
        ),
        (NestedField(3, "point", StringType()), "point", "string cannot be written"),
        (
            NestedField(3, "point", StructType(NestedField(4, "x", StringType()))),
            "point.x",
            "string cannot be written to the table's type double",
        ),
    ],
)
def test_what_no_mode_can_change_is_refused_naming_the_path_and_both_types(
    replaced: NestedField, path: str, types: str
) -> None:
    incoming = _incoming(**{replaced.name: replaced})
    for mode in (ADD_COLUMNS, MERGE):
        with pytest.raises(SchemaMismatchError, match=re.escape(types)) as refused:
            plan_changes(TABLE, incoming, mode, table="t")
        assert refused.value.column == path


def test_names_that_differ_only_by_case_are_refused() -> None:
    without_point = StructType(*(f for f in TABLE.fields if f.name != "point"), NestedField(100, "Point", StringType()))
    with pytest.raises(SchemaMismatchError, match="differs only by case from the table's column 'point'"):
        plan_changes(TABLE, without_point, ADD_COLUMNS, table="t")
    with pytest.raises(SchemaMismatchError, match="differs only by case from the column 'city' beside it"):
        plan_changes(
            TABLE,
            _incoming(NestedField(100, "city", StringType()), NestedField(101, "City", StringType())),
            MERGE,
            table="t",
        )


def test_merge_makes_a_required_column_that_holds_nulls_optional_but_never_an_identifier_field() -> None:
    assert plan_changes(TABLE, _incoming(), MERGE, table="t", nulls_in=["score"]) == [MakeOptional(("score",))]
    assert plan_changes(TABLE, _incoming(), MERGE, table="t", nulls_in=["n"]) == []  # optional already
    with pytest.raises(SchemaMismatchError, match="identifier field stays required") as refused:
        plan_changes(TABLE, _incoming(), MERGE, table="t", nulls_in=["id"])
    assert refused.value.column == "id"


def test_the_routing_column_is_not_added() -> None:
    incoming = _incoming(NestedField(100, "route", StringType()))
    assert plan_changes(TABLE, incoming, ADD_COLUMNS, table="t", ignore=["route"]) == []


def test_the_mode_comes_from_the_argument_then_the_table_property() -> None:
    assert checked_mode(None) == STRICT
    assert checked_mode(None, {"icecommit.schema-mode": "merge"}) == MERGE
    assert checked_mode("add-columns", {"icecommit.schema-mode": "merge"}) == ADD_COLUMNS
    with pytest.raises(InvalidArgumentError, match="schema_mode"):
        checked_mode("evolve")
    with pytest.raises(InvalidArgumentError, match=r"icecommit\.schema-mode"):
        checked_mode(None, {"icecommit.schema-mode": "loose"})


def test_the_table_tells_which_checkpoint_changed_its_schema_or_created_it() -> None:
    properties = {"icecommit.schema-change.job": "7:3", "icecommit.created-by": "job:1"}
    assert checkpoint_features(properties, "job", 7) == ("schema-change",)
    assert checkpoint_features(properties, "job", 1) == ("table-create",)
    assert checkpoint_features(properties, "other", 7) == ()


def test_fixed_columns_take_binary_and_map_keys_never_change() -> None:
    table = Schema(
        NestedField(1, "digest", FixedType(16), required=False),
        NestedField(2, "m", MapType(3, IntegerType(), 4, StringType()), required=False),
    )
    same = StructType(NestedField(1, "digest", BinaryType()), NestedField(2, "m", MapType(3, IntegerType(), 4,
                                                                                          StringType())))  # fmt: skip
    assert plan_changes(table, same, MERGE, table="t") == []
    wider_key = StructType(NestedField(2, "m", MapType(3, LongType(), 4, StringType())))
    with pytest.raises(SchemaMismatchError, match="type long cannot be written to the table's type int") as refused:
        plan_changes(table, wider_key, MERGE, table="t")
    assert refused.value.column == "m.key"


def test_a_required_column_the_rows_lack_is_refused_before_any_change() -> None:
    incoming = StructType(*(f for f in TABLE.fields if f.name != "score"), NestedField(100, "c", StringType()))
    with pytest.raises(SchemaMismatchError, match="required column is missing") as refused:
        plan_changes(TABLE, incoming, ADD_COLUMNS, table="t")
    assert refused.value.column == "score"


def test_write_options_copy_what_they_are_given_and_stay_hashable() -> None:
    specs = {"click": ["day(ts)"]}
    options = ic.WriteOptions(partition_by=specs, identifier_fields=["id"], table_properties={"a": "b"})
    specs["click"].append("id")
    assert options.partition_by == {"click": ("day(ts)",)} and options.identifier_fields == ("id",)
    assert hash(options) == hash(ic.WriteOptions(partition_by={"click": ["day(ts)"]}, identifier_fields=["id"],
                                                 table_properties={"a": "b"}))  # fmt: skip
    with pytest.raises(InvalidArgumentError, match="partition_by"):
        ic.WriteOptions(partition_by={"click": None})  # type: ignore[dict-item]


def test_a_dead_letter_table_icecommit_made_takes_new_columns_whatever_the_mode() -> None:
    made = {CREATED_BY_PROPERTY: "checkpoint 1 of job 'j'"}
    assert dead_letter_mode("strict", made) == "add-columns"
    assert dead_letter_mode("merge", made) == "merge"
    assert dead_letter_mode("strict", {}) == "strict"  # one made by hand keeps the write's mode
