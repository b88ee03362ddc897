"""A prepared checkpoint one of whose staged data files is lost from storage before its
commit: the replay of that checkpoint (the same rows, written again) prepares it again from
the new files and commits it once, whatever crashed on the way; a later checkpoint waiting
behind it is refused naming it and both ways forward; a file that storage cannot answer for,
or one of another size, is no confirmed loss and changes nothing."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyspark.sql import DataFrame, SparkSession

import icecommit as ic
from icecommit.committer import FAULT_POINTS, committed_checkpoints
from icecommit.errors import CheckpointReusedError, DataFileMissingError
from icecommit.maintenance import find_orphans
from tests.helpers import EVENTS_SCHEMA, events, write_arrow


class Crash(Exception):
    """A driver dying at a step."""


def _table(catalog: SqlCatalog) -> str:
    name = f"{catalog.name}.events"
    ic.create_table(catalog, name, EVENTS_SCHEMA, partition_by=["event"])
    return name


def _rows(checkpoint_id: int) -> range:
    return range(checkpoint_id * 100, checkpoint_id * 100 + 30)


def _write(committer: ic.GlobalCommitter, checkpoint_id: int, tasks: int = 2) -> list[ic.WriteResult]:
    """The checkpoint's rows as written by ``tasks`` tasks (each write makes new files)."""
    rows = events(_rows(checkpoint_id).start, _rows(checkpoint_id).stop)
    share = -(-rows.num_rows // tasks)
    return [
        write_arrow(
            committer.load_table(), rows.slice(t * share, share), job_id=committer.job_id,
            checkpoint_id=checkpoint_id, task_id=t,
        )
        for t in range(tasks)
    ]  # fmt: skip


def _lose_one(results: list[ic.WriteResult]) -> Path:
    lost = Path(results[0].data_files[0].path.removeprefix("file://"))
    lost.unlink()
    return lost


def _assert_once(catalog: SqlCatalog, name: str, job: str, checkpoints: list[int]) -> None:
    table = catalog.load_table(name)
    ids = Counter(table.scan(selected_fields=("id",)).to_arrow().column("id").to_pylist())
    assert ids == Counter(i for c in checkpoints for i in _rows(c)), "rows lost or duplicated"
    assert Counter((c.job_id, c.checkpoint_id) for c in committed_checkpoints(table.metadata)) == Counter(
        (job, c) for c in checkpoints
    )
    states = ic.GlobalCommitter(catalog, name, job_id=job).store.list(name, job_id=job)
    assert [(s.checkpoint_id, s.status) for s in states] == [(c, "committed") for c in checkpoints]
    assert ic.reconcile(catalog, name, job_id=job).ok  # the replay's counts replaced the lost ones


def test_the_replay_of_a_checkpoint_whose_staged_file_was_lost_commits_it_once(sqlite_catalog: SqlCatalog) -> None:
    catalog = sqlite_catalog
    name = _table(catalog)
    committer = ic.GlobalCommitter(catalog, name, job_id="A")
    first = _write(committer, 1)
    committer.prepare(1, first)
    lost = _lose_one(first)
    with pytest.raises(DataFileMissingError) as raised:
        committer.commit(1)
    message = str(raised.value)
    assert f"data file {lost.as_uri()}" in message or str(lost) in message
    assert "Replay checkpoint 1 from its source" in message and "abandon(1" in message
    assert raised.value.waiting_checkpoint_id is None
    replay = _write(committer, 1)  # the same rows, new files
    prepared = committer.prepare(1, replay)
    assert (prepared.status, prepared.files) == ("prepared", sum(len(r.data_files) for r in replay))
    assert prepared.counters.missing == 0
    result = committer.commit(1)
    assert result.status == "committed"
    _assert_once(catalog, name, "A", [1])
    # the old file that survived is the sweep's, the lost one is gone, the replay's are the table's
    survivor = Path(first[1].data_files[0].path.removeprefix("file://"))
    sweep = find_orphans(catalog, name, older_than=timedelta(0))
    assert {Path(o.path.removeprefix("file://")) for o in sweep.orphans} >= {survivor}
    assert committer.commit(1).status == "already-committed"


def _first_of_two_lost(catalog: SqlCatalog) -> tuple[str, ic.GlobalCommitter]:
    """Checkpoints 1 and 2 prepared, a staged file of 1 lost."""
    name = _table(catalog)
    committer = ic.GlobalCommitter(catalog, name, job_id="A")
    first = _write(committer, 1)
    committer.prepare(1, first)
    committer.prepare(2, _write(committer, 2))
    _lose_one(first)
    return name, committer


def test_a_later_checkpoint_waiting_behind_a_lost_one_names_it_and_both_ways_forward(
    sqlite_catalog: SqlCatalog,
) -> None:
    catalog = sqlite_catalog
    name, committer = _first_of_two_lost(catalog)
    with pytest.raises(DataFileMissingError) as raised:
        committer.commit(2)
    error = raised.value
    assert (error.checkpoint_id, error.waiting_checkpoint_id) == (1, 2)
    assert str(error).startswith("checkpoint 1: checkpoint 2 waits behind checkpoint 1 of job 'A', which cannot commit")
    assert "Replay checkpoint 1" in str(error) and "abandon(1" in str(error)
    assert catalog.load_table(name).metadata.snapshots == []  # nothing committed, in order
    # way one: replay it; the waiting checkpoint commits after it
    committer.prepare(1, _write(committer, 1))
    assert committer.commit(2).status == "committed"
    _assert_once(catalog, name, "A", [1, 2])


def test_abandoning_the_lost_checkpoint_lets_the_waiting_one_commit(sqlite_catalog: SqlCatalog) -> None:
    catalog = sqlite_catalog
    name, committer = _first_of_two_lost(catalog)
    with pytest.raises(DataFileMissingError):
        committer.commit(2)
    committer.abandon(1, reason="its files were lost with the old bucket")
    assert committer.commit(2).status == "committed"
    rows = Counter(catalog.load_table(name).scan(selected_fields=("id",)).to_arrow().column("id").to_pylist())
    assert rows == Counter(_rows(2))


@pytest.mark.parametrize("point", FAULT_POINTS)
def test_a_crash_at_each_step_of_the_second_prepare_and_its_commit_still_commits_once(
    sqlite_catalog: SqlCatalog, point: str
) -> None:
    catalog = sqlite_catalog
    name = _table(catalog)
    first_run = ic.GlobalCommitter(catalog, name, job_id="A")
    first = _write(first_run, 1)
    first_run.prepare(1, first)
    _lose_one(first)

    def crash(at: str, checkpoint_id: int) -> None:
        if at == point:
            raise Crash(at)

    dying = ic.GlobalCommitter(catalog, name, job_id="A", fault=crash)
    with pytest.raises((Crash, ic.CommitStateUnknownError)):  # a crash inside an attempt: its outcome unknown
        dying.prepare(1, _write(dying, 1))
        dying.commit(1)
    # the restarted job recovers, then replays the checkpoint from its source unless it is in
    restarted = ic.GlobalCommitter(catalog, name, job_id="A")
    try:
        recovered = restarted.recover()
    except DataFileMissingError as e:  # the crash came before the second prepare was recorded
        assert point == "after-stage" and e.checkpoint_id == 1
    else:
        # recorded in the table (after-commit) or committed from its second prepare: once
        assert point != "after-stage" and [(r.checkpoint_id, r.records) for r in recovered] == [(1, 30)]
    if not restarted.is_committed(1):
        restarted.prepare(1, _write(restarted, 1))
        assert restarted.commit(1).status == "committed"
    _assert_once(catalog, name, "A", [1])


def test_a_checkpoint_in_the_table_is_not_prepared_again_when_its_files_go(sqlite_catalog: SqlCatalog) -> None:
    catalog = sqlite_catalog
    name = _table(catalog)
    committer = ic.GlobalCommitter(catalog, name, job_id="A")
    committer.prepare(1, _write(committer, 1))
    committer.commit(1)
    replay = _write(committer, 1)
    with pytest.raises(CheckpointReusedError):  # its files are the table's: a replay is refused, not staged
        committer.prepare(1, replay)
    _assert_once(catalog, name, "A", [1])


def test_storage_that_cannot_answer_or_a_file_of_another_size_is_no_confirmed_loss(
    sqlite_catalog: SqlCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    catalog = sqlite_catalog
    name = _table(catalog)
    committer = ic.GlobalCommitter(catalog, name, job_id="A")
    first = _write(committer, 1)
    committer.prepare(1, first)
    damaged = Path(first[0].data_files[0].path.removeprefix("file://"))
    damaged.write_bytes(damaged.read_bytes()[:-10])  # present, shorter
    with pytest.raises(CheckpointReusedError):
        committer.prepare(1, _write(committer, 1))
    with pytest.raises(DataFileMissingError) as raised:
        committer.commit(1)
    assert "damaged for good" in str(raised.value) and "Replay" not in str(raised.value)
    damaged.unlink()

    answering = PyArrowFileIO.new_input

    def unreachable(self: PyArrowFileIO, location: str) -> object:
        if "icecommit-staged" in location or location.endswith(".parquet"):
            raise PermissionError(13, "storage refused the request", location)
        return answering(self, location)

    monkeypatch.setattr(PyArrowFileIO, "new_input", unreachable)
    with pytest.raises(OSError, match="storage refused"):
        committer.prepare(1, [])  # storage cannot say whether the files are lost: nothing changes
    monkeypatch.undo()
    state = committer.store.get("A", name, 1)
    assert state is not None and state.status == "prepared" and state.files_digest != ""
    committer.prepare(1, _write(committer, 1))  # storage answers: the loss is confirmed, prepared again
    assert committer.commit(1).status == "committed"
    _assert_once(catalog, name, "A", [1])


def _frame(spark: SparkSession, checkpoint_id: int) -> DataFrame:
    """The checkpoint's rows as a Spark DataFrame (from tuples: pyspark 3.5 warns on pandas' dtypes)."""
    rows = events(_rows(checkpoint_id).start, _rows(checkpoint_id).stop).to_pylist()
    ddl = "id long, ts timestamp, event string, score double"
    return spark.createDataFrame([(r["id"], r["ts"], r["event"], r["score"]) for r in rows], ddl)


@pytest.mark.spark
def test_ic_write_replaying_the_lost_checkpoint_commits_it_once(
    spark: SparkSession, sqlite_catalog: SqlCatalog
) -> None:
    catalog = sqlite_catalog
    name = _table(catalog)
    frame = _frame(spark, 1)
    committer = ic.GlobalCommitter(catalog, name, job_id="A")
    first = _write(committer, 1)
    committer.prepare(1, first)  # a driver prepared it and died
    _lose_one(first)
    with pytest.raises(DataFileMissingError, match="checkpoint 2 waits behind checkpoint 1"):
        ic.write(_frame(spark, 2), name, catalog=catalog, job_id="A", checkpoint_id=2)
    result = ic.write(frame, name, catalog=catalog, job_id="A", checkpoint_id=1)
    assert result.status == "committed"
    ic.write(_frame(spark, 2), name, catalog=catalog, job_id="A", checkpoint_id=2)
    _assert_once(catalog, name, "A", [1, 2])


def test_a_plan_whose_row_another_process_prepared_again_commits_that_row_s_files(
    sqlite_catalog: SqlCatalog,
) -> None:
    catalog = sqlite_catalog
    name = _table(catalog)
    first = ic.GlobalCommitter(catalog, name, job_id="A")
    original = _write(first, 1)
    plan = first.prepare_planned(1, original)  # carries its staged files, found on storage
    _lose_one(original)
    second = ic.GlobalCommitter(catalog, name, job_id="A")  # another process replays the checkpoint
    second.prepare(1, _write(second, 1))
    assert first.commit(1, plan=plan).status == "committed"  # the row's files now: the replay's
    _assert_once(catalog, name, "A", [1])
    for task in catalog.load_table(name).scan().plan_files():
        assert Path(task.file.file_path.removeprefix("file://")).is_file()
