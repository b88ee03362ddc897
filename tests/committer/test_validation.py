"""validate_results refuses what cannot be committed with errors that carry the facts as
attributes (the checkpoint, both sides of a count, the file, what was given and what is
accepted), and knows which columns every data file must have."""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any

import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.schema import Schema
from pyiceberg.types import IntegerType, LongType, NestedField, StringType, StructType

import icecommit as ic
from icecommit.committer.validation import _required_leaves, files_digest, validate_results
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


def test_the_files_digest_is_sha256_over_the_sorted_paths_one_per_line() -> None:
    """The digest is stored with every prepared checkpoint: a release that computed it
    otherwise would refuse to re-prepare the checkpoints an earlier one left prepared."""
    assert (
        files_digest(["s3://b/y.parquet", "s3://b/x.parquet"])
        == hashlib.sha256(b"s3://b/x.parquet\ns3://b/y.parquet\n").hexdigest()
    )
    assert files_digest([]) == hashlib.sha256().hexdigest()


def test_a_data_file_of_no_bytes_or_negative_rows_is_impossible_and_one_byte_is_left_to_storage(table: Any) -> None:
    good = write_arrow(table, events(0, 10), job_id="ingest", checkpoint_id=1)
    data_file = good.data_files[0]

    def only(file: Any) -> Any:  # the task's result as if it had written this one file
        return dataclasses.replace(good, data_files=(file,), records=file.record_count,
                                   source_records=file.record_count)  # fmt: skip

    for impossible in (
        dataclasses.replace(data_file, file_size_in_bytes=0),
        dataclasses.replace(data_file, record_count=-1),
    ):
        with pytest.raises(ic.ValidationError) as refused:
            _validate(table, [only(impossible)])
        assert _facts(refused.value) == (1, None, None, data_file.path)
        assert str(refused.value) == f"checkpoint 1: data file {data_file.path} has impossible counts"
    tiny = only(dataclasses.replace(data_file, file_size_in_bytes=1))
    assert _validate(table, [tiny]).bytes == 1  # storage's size check, not validation, refuses it
