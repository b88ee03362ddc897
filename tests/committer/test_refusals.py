"""Each refusal of the committer is its own error class, of the one family that says what
the caller does next, carrying its facts as attributes; and each leaves the table, its
files and the state as they were. validate_results refuses what cannot be committed with
the facts as attributes (the checkpoint, both sides of a count, the file, what was given
and what is accepted), and knows which columns every data file must have."""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.schema import Schema
from pyiceberg.types import IntegerType, LongType, NestedField, StringType, StructType

import icecommit as ic
from icecommit.committer.validation import _required_leaves, files_digest, validate_results
from icecommit.errors import (
    CheckpointRefusedError,
    CheckpointReusedError,
    DataFileMissingError,
    EnvironmentFailureError,
    InvalidArgumentError,
    StagedManifestError,
)
from icecommit.state import CheckpointStore, state_engine
from icecommit.state.database import state_identity
from icecommit.state.identity import STATE_ID_PROPERTY
from tests.helpers import EVENTS_SCHEMA, events, write_arrow

# refused before anything is written
pytestmark = pytest.mark.database_independent


def _table(catalog: SqlCatalog) -> str:
    name = f"{catalog.name}.events"
    ic.create_table(catalog, name, EVENTS_SCHEMA, partition_by=["event"])
    return name


def _results(committer: ic.GlobalCommitter, checkpoint_id: int, start: int, task_id: int = 0) -> list[ic.WriteResult]:
    table = committer.load_table()
    rows = events(start, start + 10)
    return [write_arrow(table, rows, job_id=committer.job_id, checkpoint_id=checkpoint_id, task_id=task_id)]


def _local(path: str) -> Path:
    return Path(path.removeprefix("file://"))


def test_other_files_under_a_used_checkpoint_id(catalog: SqlCatalog, tmp_path: Path) -> None:
    name = _table(catalog)
    committer = ic.GlobalCommitter(catalog, name, job_id="A")
    first = _results(committer, 1, 0)
    committer.prepare(1, first)
    metadata = _local(catalog.load_table(name).metadata_location).parent
    staged = sorted(metadata.glob("icecommit-staged-*"))
    assert len(staged) == 1
    committer.prepare(1, first)  # the same files again: a no-op
    second = _results(committer, 1, 100) + _results(committer, 1, 200, task_id=1)
    with pytest.raises(CheckpointReusedError) as prepared:
        committer.prepare(1, second)
    # neither staged a manifest of its own: the row is compared before anything is written
    assert sorted(metadata.glob("icecommit-staged-*")) == staged
    e = prepared.value
    assert isinstance(e, CheckpointRefusedError)
    staged, offered = len(first[0].data_files), sum(len(r.data_files) for r in second)
    assert (e.job_id, e.checkpoint_id, e.table, e.status) == ("A", 1, name, "prepared")
    assert (e.expected, e.actual) == (staged, offered) and staged < offered

    landed = committer.commit(1)
    # the state lost (and the table pointed at a new one): the table alone refuses, naming
    # the snapshot that holds the id
    other_state = CheckpointStore(state_engine(f"sqlite:///{tmp_path / 'lost.db'}"))
    with catalog.load_table(name).transaction() as tx:
        tx.set_properties({STATE_ID_PROPERTY: state_identity(other_state.engine)})
    before = catalog.load_table(name).metadata_location
    lost = ic.GlobalCommitter(catalog, name, job_id="A", store=other_state)
    with pytest.raises(CheckpointReusedError) as committed:
        lost.prepare(1, _results(lost, 1, 300))
    assert (committed.value.status, committed.value.snapshot_id) == ("committed", landed.snapshot_id)
    assert catalog.load_table(name).metadata_location == before
    assert other_state.list(name) == []


def test_a_data_file_missing_at_prepare_and_a_staged_file_lost_before_commit(catalog: SqlCatalog) -> None:
    name = _table(catalog)
    committer = ic.GlobalCommitter(catalog, name, job_id="A")
    results = _results(committer, 1, 0)
    gone = results[0].data_files[0]
    _local(gone.path).unlink()
    with pytest.raises(DataFileMissingError) as at_prepare:
        committer.prepare(1, results)
    e = at_prepare.value
    assert (e.path, e.expected, e.actual, e.bad, e.total) == (
        gone.path,
        gone.file_size_in_bytes,
        None,
        1,
        len(results[0].data_files),
    )
    assert committer.store.get("A", name, 1) is None  # nothing recorded

    results = _results(committer, 2, 100)
    committer.prepare(2, results)
    lost = results[0].data_files[-1]
    _local(lost.path).write_bytes(b"truncated")
    with pytest.raises(DataFileMissingError) as at_commit:
        committer.commit(2)
    e = at_commit.value
    assert (e.table, e.job_id, e.checkpoint_id, e.path, e.actual) == (name, "A", 2, lost.path, len(b"truncated"))
    assert (e.expected, e.bad, e.total) == (lost.file_size_in_bytes, 1, len(results[0].data_files))
    assert catalog.load_table(name).current_snapshot() is None
    state = committer.store.get("A", name, 2)
    assert state is not None and (state.status, state.counters.missing) == ("prepared", 1)
    # the way forward: a file lost before staging is written again; one lost after, abandoned
    assert not at_prepare.value.staged and "nothing was staged: write the checkpoint again" in str(at_prepare.value)
    assert e.staged and "abandon(2, reason=...)" in str(e)


@pytest.mark.parametrize("damage", ["corrupt", "missing"])
def test_a_staged_manifest_that_cannot_be_read_names_itself_and_how_to_abandon(
    catalog: SqlCatalog, damage: str
) -> None:
    name = _table(catalog)
    committer = ic.GlobalCommitter(catalog, name, job_id="A")
    state = committer.prepare(1, _results(committer, 1, 0))
    assert state.manifest_path is not None
    manifest = _local(state.manifest_path)
    if damage == "corrupt":
        manifest.write_bytes(b"Obj\x01 not an avro file")
    else:
        manifest.unlink()
    for attempt in (committer.commit, lambda _n: committer.recover()):
        with pytest.raises(StagedManifestError) as raised:
            attempt(1)
        e = raised.value
        assert isinstance(e, EnvironmentFailureError)
        assert (e.job_id, e.checkpoint_id, e.table, e.path) == ("A", 1, name, state.manifest_path)
        if damage == "corrupt":  # names the decoder's own error
            assert f"{state.manifest_path} cannot be read ({type(e.__cause__).__name__}: " in str(e), str(e)
        else:
            assert f"{state.manifest_path} is missing from storage;" in str(e)
        assert "abandon(1, reason=...)" in str(e) and "--" not in str(e)  # Python words, not CLI flags
    assert catalog.load_table(name).current_snapshot() is None
    assert committer.store.get("A", name, 1).status == "prepared"  # type: ignore[union-attr]
    # as the message says: abandon it and the job goes on
    committer.abandon(1, reason="staged manifest damaged")
    assert committer.recover() == []
    committer.prepare(2, _results(committer, 2, 100))
    assert committer.commit(2).status == "committed"


# -- validate_results, without a committer -------------------------------------------------


def _validate(table: Any, results: Any, checkpoint_id: int = 1) -> Any:
    return validate_results(
        results, metadata=table.metadata, job_id="ingest", checkpoint_id=checkpoint_id, table_name="db.events"
    )


@pytest.fixture
def events_table(sqlite_catalog: SqlCatalog) -> Any:
    return ic.create_table(sqlite_catalog, f"{sqlite_catalog.name}.events", EVENTS_SCHEMA, partition_by=["event"])


def _facts(error: ic.ValidationError) -> tuple[Any, ...]:
    return (error.checkpoint_id, error.expected, error.actual, error.path)


def test_what_is_no_list_of_write_results_is_refused_naming_what_was_given(events_table: Any) -> None:
    with pytest.raises(InvalidArgumentError) as not_a_list:
        _validate(events_table, "results.json")
    refused = not_a_list.value
    assert (refused.argument, refused.value) == ("results", "results.json")
    assert refused.accepted == "a list of WriteResult (what the writers returned)"

    good = write_arrow(events_table, events(0, 10), job_id="ingest", checkpoint_id=1)
    given = good.to_json()  # what a task sends before WriteResult.from_json reads it
    with pytest.raises(InvalidArgumentError) as not_a_result:
        _validate(events_table, [good, given])
    refused = not_a_result.value
    assert (refused.argument, refused.value) == ("results[1]", given)
    assert refused.accepted == "a WriteResult (what a writer task returned; WriteResult.from_json)"
    assert _validate(events_table, [good]).records == 10


def test_refused_counts_carry_the_checkpoint_and_both_sides(events_table: Any) -> None:
    good = write_arrow(events_table, events(0, 100), job_id="ingest", checkpoint_id=3)
    with pytest.raises(ic.ValidationError) as more_than_in_files:
        _validate(events_table, [dataclasses.replace(good, records=101, source_records=101)], 3)
    assert _facts(more_than_in_files.value) == (3, 101, 100, None)
    with pytest.raises(ic.ValidationError) as fewer_than_received:
        _validate(events_table, [dataclasses.replace(good, source_records=105)], 3)
    assert _facts(fewer_than_received.value) == (3, 105, 100, None)
    assert str(fewer_than_received.value) == "checkpoint 3: task 0 received 105 records but wrote 100"


def test_a_task_or_a_file_reported_twice_is_refused_naming_the_checkpoint(events_table: Any) -> None:
    first = write_arrow(events_table, events(0, 10), job_id="ingest", checkpoint_id=2, task_id=4, attempt=0)
    again = write_arrow(events_table, events(0, 10), job_id="ingest", checkpoint_id=2, task_id=4, attempt=1)
    with pytest.raises(ic.ValidationError) as task_twice:
        _validate(events_table, [first, again], 2)
    assert _facts(task_twice.value) == (2, None, None, None)
    assert "task 4 reported twice (attempts 0 and 1)" in str(task_twice.value)

    copied = dataclasses.replace(first, task_id=5)  # another task reporting the same file
    with pytest.raises(ic.ValidationError) as file_twice:
        _validate(events_table, [first, copied], 2)
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


def test_a_data_file_of_no_bytes_or_negative_rows_is_impossible_one_byte_is_left_to_storage(
    events_table: Any,
) -> None:
    good = write_arrow(events_table, events(0, 10), job_id="ingest", checkpoint_id=1)
    data_file = good.data_files[0]

    def only(file: Any) -> Any:  # the task's result as if it had written this one file
        return dataclasses.replace(good, data_files=(file,), records=file.record_count,
                                   source_records=file.record_count)  # fmt: skip

    for impossible in (
        dataclasses.replace(data_file, file_size_in_bytes=0),
        dataclasses.replace(data_file, record_count=-1),
    ):
        with pytest.raises(ic.ValidationError) as refused:
            _validate(events_table, [only(impossible)])
        assert _facts(refused.value) == (1, None, None, data_file.path)
        assert str(refused.value) == f"checkpoint 1: data file {data_file.path} has impossible counts"
    tiny = only(dataclasses.replace(data_file, file_size_in_bytes=1))
    assert _validate(events_table, [tiny]).bytes == 1  # storage's size check, not validation, refuses it
