"""validate_results refuses what cannot be committed with errors that carry the facts as
attributes (the checkpoint, both sides of a count, the file, what was given and what is
accepted), and knows which columns every data file must have."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.schema import Schema
from pyiceberg.types import IntegerType, LongType, NestedField, StringType, StructType

import icecommit as ic
from icecommit.committer.validation import _required_leaves, validate_results
from icecommit.errors import InvalidArgumentError
from tests.helpers import EVENTS_SCHEMA, events, write_arrow


def _validate(table: Any, results: Any, checkpoint_id: int = 1) -> Any:
    return validate_results(
        results, metadata=table.metadata, job_id="ingest", checkpoint_id=checkpoint_id, table_name="db.events"
    )


@pytest.fixture
def table(sqlite_catalog: SqlCatalog) -> Any:
    return ic.create_table(sqlite_catalog, f"{sqlite_catalog.name}.events", EVENTS_SCHEMA, partition_by=["event"])


def _facts(error: ic.ValidationError) -> tuple[Any, ...]:
    return (error.checkpoint_id, error.expected, error.actual, error.path)


def test_what_is_no_list_of_write_results_is_refused_naming_what_was_given(table: Any) -> None:
    with pytest.raises(InvalidArgumentError) as not_a_list:
        _validate(table, "results.json")
    refused = not_a_list.value
    assert (refused.argument, refused.value) == ("results", "results.json")
    assert refused.accepted == "a list of WriteResult (what the writers returned)"

    good = write_arrow(table, events(0, 10), job_id="ingest", checkpoint_id=1)
    given = good.to_json()  # what a task sends before WriteResult.from_json reads it
    with pytest.raises(InvalidArgumentError) as not_a_result:
        _validate(table, [good, given])
    refused = not_a_result.value
    assert (refused.argument, refused.value) == ("results[1]", given)
    assert refused.accepted == "a WriteResult (what a writer task returned; WriteResult.from_json)"
    assert _validate(table, [good]).records == 10


def test_refused_counts_carry_the_checkpoint_and_both_sides(table: Any) -> None:
    good = write_arrow(table, events(0, 100), job_id="ingest", checkpoint_id=3)
    with pytest.raises(ic.ValidationError) as more_than_in_files:
        _validate(table, [dataclasses.replace(good, records=101, source_records=101)], 3)
    assert _facts(more_than_in_files.value) == (3, 101, 100, None)
    with pytest.raises(ic.ValidationError) as fewer_than_received:
        _validate(table, [dataclasses.replace(good, source_records=105)], 3)
    assert _facts(fewer_than_received.value) == (3, 105, 100, None)
    assert str(fewer_than_received.value) == "checkpoint 3: task 0 received 105 records but wrote 100"


def test_a_task_or_a_file_reported_twice_is_refused_naming_the_checkpoint(table: Any) -> None:
    first = write_arrow(table, events(0, 10), job_id="ingest", checkpoint_id=2, task_id=4, attempt=0)
    again = write_arrow(table, events(0, 10), job_id="ingest", checkpoint_id=2, task_id=4, attempt=1)
    with pytest.raises(ic.ValidationError) as task_twice:
        _validate(table, [first, again], 2)
    assert _facts(task_twice.value) == (2, None, None, None)
    assert "task 4 reported twice (attempts 0 and 1)" in str(task_twice.value)

    copied = dataclasses.replace(first, task_id=5)  # another task reporting the same file
    with pytest.raises(ic.ValidationError) as file_twice:
        _validate(table, [first, copied], 2)
    path = first.data_files[0].path
    assert _facts(file_twice.value) == (2, None, None, path)
    assert str(file_twice.value) == f"checkpoint 2: data file listed twice: {path}"


def test_required_leaves_are_the_required_primitives_and_the_required_leaves_of_required_structs() -> None:
    schema = Schema(
        NestedField(1, "note", StringType(), required=False),
        NestedField(2, "id", LongType(), required=True),
        NestedField(
            3,
            "device",
            StructType(
                NestedField(4, "kind", StringType(), required=True),
                NestedField(5, "model", StringType(), required=False),
            ),
            required=True,
        ),
        NestedField(6, "extra", StructType(NestedField(7, "x", IntegerType(), required=True)), required=False),
        NestedField(8, "seq", IntegerType(), required=True),
    )
    assert _required_leaves(schema.fields) == {2, 4, 8}
