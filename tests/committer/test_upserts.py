"""Upserts by key (``mode="upsert"``): each checkpoint's keys are resolved to the positions
of the live rows that hold them on the head its commit runs on, and position delete files
land with its new rows in one snapshot, exactly once. Written without Spark
(``write_arrow`` + ``prepare(keys=...)``); SQLite and PostgreSQL."""

from __future__ import annotations

import datetime as dt
import json
import time
from collections import Counter
from contextlib import nullcontext
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.sql import SqlCatalog

import icecommit as ic
from icecommit.committer import committed_checkpoints
from icecommit.committer.features import require_supported, supported
from icecommit.errors import (
    CheckpointFeatureError,
    EqualityDeletesError,
    InvalidArgumentError,
    KeyViolationError,
    SchemaMismatchError,
    ValidationError,
)
from icecommit.maintenance import apply_expire, apply_rollback, plan_expire, plan_rollback
from icecommit.maintenance.compaction import compact
from icecommit.maintenance.orphans import find_orphans
from tests import processes
from tests.committer.crash_driver import (
    CRASH_POINTS,
    crash_then_replay_as_processes,
    crash_then_replay_in_process,
    upserted,
)
from tests.fakes import ScriptedCatalog
from tests.helpers import EVENTS_SCHEMA, delete_equal, events, write_arrow

UPSERT = "upsert"


def _table(catalog: SqlCatalog, partition_by: list[str] | None = None, suffix: str = "") -> str:
    name = f"{catalog.name}.users{suffix}"
    ic.create_table(catalog, name, EVENTS_SCHEMA, partition_by=partition_by or ["event"], identifier_fields=["id"])
    return name


def _marked(start: int, end: int, mark: str) -> pa.Table:
    rows = events(start, end)
    return rows.set_column(2, "event", pa.array([mark] * len(rows)))


def _upsert(catalog: SqlCatalog, name: str, checkpoint: int, rows: pa.Table, deleted: list[int] = (), job: str = "j"):  # type: ignore[assignment]
    committer = ic.GlobalCommitter(catalog, name, job_id=job)
    results = [write_arrow(committer.load_table(), rows, job_id=job, checkpoint_id=checkpoint)] if len(rows) else []
    keys = pa.table({"id": pa.array([*rows.column("id").to_pylist(), *deleted], pa.int64())})
    committer.prepare(checkpoint, results, mode=UPSERT, keys=keys)
    return committer.commit(checkpoint)


def _live(catalog: SqlCatalog, name: str) -> dict[int, str]:
    rows = catalog.load_table(name).scan(selected_fields=("id", "event")).to_arrow().to_pylist()
    ids = Counter(r["id"] for r in rows)
    assert max(ids.values(), default=1) == 1, f"keys live twice: {[i for i, n in ids.items() if n > 1]}"
    return {r["id"]: r["event"] for r in rows}


def test_rows_replace_their_keys_live_rows_or_are_inserted_and_deletes_delete(catalog: SqlCatalog) -> None:
    name = _table(catalog)
    _upsert(catalog, name, 1, _marked(0, 10, "a"))
    result = _upsert(catalog, name, 2, _marked(5, 15, "b"), deleted=[0, 1, 999])  # 999: no such key
    assert result.committed and result.records == 10
    assert _live(catalog, name) == {**{i: "a" for i in range(2, 5)}, **{i: "b" for i in range(5, 15)}}
    table = catalog.load_table(name)
    snapshot = table.current_snapshot()
    assert snapshot is not None and snapshot.summary is not None
    summary = snapshot.summary.additional_properties
    assert snapshot.summary.operation.value == "overwrite"
    assert summary["icecommit.write-mode"] == UPSERT and summary["icecommit.deleted-rows"] == "7"
    assert summary["added-position-deletes"] == "7" and summary["added-delete-files"] == "1"  # one per data file
    # 5..9 replaced, 10..14 new, 0 and 1 deleted, 999 deleted but never there
    counts = [summary[f"icecommit.{k}-keys"] for k in ("inserted", "updated", "deleted")]
    assert counts == ["5", "5", "2"]
    state = ic.GlobalCommitter(catalog, name, job_id="j").store.get("j", name, 2)
    assert state is not None and state.features == (UPSERT,) and state.keys_path is not None
    # a checkpoint that only deletes
    assert _upsert(catalog, name, 3, _marked(0, 0, "c"), deleted=[2, 14]).committed
    assert sorted(_live(catalog, name)) == [3, 4, *range(5, 14)]
    only_deletes = catalog.load_table(name).current_snapshot()
    assert only_deletes is not None and only_deletes.summary is not None
    assert only_deletes.summary.operation.value == "delete"  # as Iceberg's RowDelta names one
    # each delete file names its data file exactly as the manifest does, rows sorted by position
    table = catalog.load_table(name)
    live = {f.file.file_path for f in table.scan().plan_files()}
    for task in table.scan().plan_files():
        for delete in task.delete_files:
            with table.io.new_input(delete.file_path).open() as stream:
                rows = pq.read_table(pa.BufferReader(stream.read()))
            assert set(rows.column("file_path").to_pylist()) == {task.file.file_path} <= live
            assert rows.column("pos").to_pylist() == sorted(rows.column("pos").to_pylist())
    # reconciliation: the replaced rows are superseded, not lost
    report = ic.reconcile(catalog, name, job_id="j")
    assert report.ok, report.to_markdown()
    summary = json.loads(report.to_json())["summary"]
    assert summary["loss"] == 0 and summary["rows"]["removed"] == 9  # 7 by checkpoint 2, 2 by checkpoint 3
    assert "removed on purpose (superseded, deleted) | 9 |" in report.to_markdown()
    notes = {line.checkpoint_id: line.note for line in report.checkpoints}
    assert "superseded by checkpoint 2 of job j" in notes[1] and "superseded by checkpoint 3 of job j" in notes[1]
    assert "upsert: 5 inserted, 5 updated, 2 deleted (7 earlier row(s) of its keys replaced or deleted)" in notes[2]
    assert "upsert: 0 inserted, 0 updated, 2 deleted" in notes[3]
    # compaction applies the delete files and drops them; every number above still holds
    live_before = _live(catalog, name)
    done = compact(catalog, name, min_input_files=1)
    assert done.committed == 1 and sum(g.removed_delete_files for g in done.groups) > 0
    compacted = catalog.load_table(name)
    assert [d for task in compacted.scan().plan_files() for d in task.delete_files] == []
    assert _live(catalog, name) == live_before
    after = ic.reconcile(catalog, name, job_id="j")
    assert after.ok, after.to_markdown()
    assert json.loads(after.to_json())["summary"]["rows"]["removed"] == 9
    notes = {line.checkpoint_id: line.note for line in after.checkpoints}
    assert "superseded by checkpoint 2 of job j" in notes[1] and "superseded by checkpoint 3 of job j" in notes[1]


def test_a_key_live_twice_before_the_upsert_is_live_once_after(catalog: SqlCatalog) -> None:
    name = _table(catalog)
    committer = ic.GlobalCommitter(catalog, name, job_id="seed")
    for checkpoint in (1, 2):  # appends do not check keys: id 3 is there twice
        committer.prepare(checkpoint, [write_arrow(committer.load_table(), _marked(0, 5, "a"), job_id="seed",
                                                   checkpoint_id=checkpoint)])  # fmt: skip
        committer.commit(checkpoint)
    _upsert(catalog, name, 1, _marked(3, 4, "b"))
    assert _live_all(catalog, name)[3] == ["b"]


def _live_all(catalog: SqlCatalog, name: str) -> dict[int, list[str]]:
    found: dict[int, list[str]] = {}
    for row in catalog.load_table(name).scan().to_arrow().to_pylist():
        found.setdefault(row["id"], []).append(row["event"])
    return found


def test_bad_keys_are_refused_before_anything_is_staged(catalog: SqlCatalog) -> None:
    name = _table(catalog)
    committer = ic.GlobalCommitter(catalog, name, job_id="j")
    rows = _marked(0, 5, "a")
    written = [write_arrow(committer.load_table(), rows, job_id="j", checkpoint_id=1)]
    with pytest.raises(InvalidArgumentError, match="keys"):
        committer.prepare(1, written, mode=UPSERT)
    with pytest.raises(KeyViolationError, match=r"1 row\(s\) have a null in the key \(id\)"):
        committer.prepare(1, written, mode=UPSERT, keys=pa.table({"id": pa.array([1, None], pa.int64())}))
    with pytest.raises(SchemaMismatchError, match=r"'nope'.*not a column of the table"):
        committer.prepare(1, written, mode=UPSERT, keys=pa.table({"nope": [1]}))
    with pytest.raises(SchemaMismatchError, match="'id'"):
        committer.prepare(1, written, mode=UPSERT, keys=pa.table({"id": ["x"]}))
    assert committer.store.get("j", name, 1) is None
    committer.prepare(1, written, mode=UPSERT, keys=pa.table({"id": pa.array([0, 0, 1], pa.int32())}))  # cast, once
    state = committer.store.get("j", name, 1)
    assert state is not None
    with pytest.raises(CheckpointFeatureError, match=UPSERT):
        require_supported(state, supported() - {UPSERT})


def test_a_lost_response_and_a_replay_apply_the_upsert_once(scripted_catalog: ScriptedCatalog) -> None:
    catalog = scripted_catalog
    name = _table(catalog)
    _upsert(catalog, name, 1, _marked(0, 10, "a"))

    def lost() -> None:
        raise ConnectionResetError("the catalog's answer was lost")

    catalog.after.append(lost)
    assert _upsert(catalog, name, 2, _marked(5, 15, "b")).committed
    _upsert(catalog, name, 3, _marked(10, 20, "c"))
    after = _live(catalog, name)
    again = ic.GlobalCommitter(catalog, name, job_id="j").commit(2)  # a replay after later checkpoints wrote those keys
    assert again.status == "already-committed" and _live(catalog, name) == after
    assert after == {**{i: "a" for i in range(5)}, **{i: "b" for i in range(5, 10)}, **{i: "c" for i in range(10, 20)}}


def test_another_upsert_of_the_same_keys_landing_first_is_resolved_again(scripted_catalog: ScriptedCatalog) -> None:
    catalog = scripted_catalog
    name = _table(catalog)
    _upsert(catalog, name, 1, _marked(0, 10, "a"))
    committer = ic.GlobalCommitter(catalog, name, job_id="j")
    rows = _marked(0, 5, "mine")
    committer.prepare(2, [write_arrow(committer.load_table(), rows, job_id="j", checkpoint_id=2)], mode=UPSERT,
                      keys=rows.select(["id"]))  # fmt: skip
    other = SqlCatalog(catalog.name, **catalog.properties)
    catalog.before.append(lambda: _upsert(other, name, 1, _marked(3, 8, "theirs"), job="other"))
    try:
        result = committer.commit(2)
    finally:
        other.engine.dispose()
    assert result.committed and result.retries >= 1
    assert _live(catalog, name) == {0: "mine", 1: "mine", 2: "mine", 3: "mine", 4: "mine", 5: "theirs", 6: "theirs",
                                    7: "theirs", 8: "a", 9: "a"}  # fmt: skip


def test_files_compacted_before_the_commit_are_resolved_on_the_rewritten_files(catalog: SqlCatalog) -> None:
    name = _table(catalog, suffix="_c")
    for checkpoint in range(1, 4):
        _upsert(catalog, name, checkpoint, _marked(checkpoint * 10, checkpoint * 10 + 10, "a"))
    committer = ic.GlobalCommitter(catalog, name, job_id="j")
    rows = _marked(15, 25, "b")
    committer.prepare(4, [write_arrow(committer.load_table(), rows, job_id="j", checkpoint_id=4)], mode=UPSERT,
                      keys=pa.table({"id": pa.array([*range(15, 25), 31], pa.int64())}))  # fmt: skip
    head = catalog.load_table(name).metadata.current_snapshot_id
    compact(catalog, name, min_input_files=2)
    compacted = catalog.load_table(name).current_snapshot()
    assert compacted is not None and compacted.snapshot_id != head and compacted.summary is not None
    assert compacted.summary.operation.value == "replace"  # the files the keys were in were rewritten
    assert committer.commit(4).committed
    live = _live(catalog, name)
    assert sorted(live) == [*range(10, 31), *range(32, 40)]
    assert [live[i] for i in range(15, 25)] == ["b"] * 10


def test_rollback_and_expiry_hold_for_upserts(catalog: SqlCatalog) -> None:
    name = _table(catalog, suffix="_r")
    _upsert(catalog, name, 1, _marked(0, 10, "a"))
    _upsert(catalog, name, 2, _marked(5, 15, "b"))
    _upsert(catalog, name, 3, _marked(12, 14, "c"))  # deletes rows of checkpoint 2 only: none of them come back
    plan = plan_rollback(catalog, name, to_checkpoint=1, job_id="j")
    # 5..14 and 12..13 disappear; 5..9 of checkpoint 1, deleted by checkpoint 2's upsert, reappear
    assert (plan.hidden_records, plan.reappearing_records, plan.reappearing_checkpoints) == (12, 5, (("j", 2),))
    apply_rollback(catalog, plan)
    assert _live(catalog, name) == {i: "a" for i in range(10)}
    _upsert(catalog, name, 4, _marked(8, 12, "c"))
    when = dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=1)
    apply_expire(catalog, plan_expire(catalog, name, older_than=dt.timedelta(0), retain_last=1, now=when))
    assert ic.GlobalCommitter(catalog, name, job_id="j").commit(4).status == "already-committed"
    assert _live(catalog, name) == {**{i: "a" for i in range(8)}, **{i: "c" for i in range(8, 12)}}


@pytest.mark.parametrize("point", CRASH_POINTS)
def test_an_exception_at_each_step_then_a_replay_upserts_once(catalog: SqlCatalog, point: str) -> None:
    crash_then_replay_in_process(catalog, f"{catalog.name}.events", "crashy", point, upsert=True)
    _assert_upserted_once(catalog, f"{catalog.name}.events", "crashy")


@pytest.mark.parametrize("point", CRASH_POINTS)
def test_a_process_killed_mid_upsert_then_replayed_upserts_once(catalog: SqlCatalog, point: str) -> None:
    crash_then_replay_as_processes(catalog, f"{catalog.name}.events", "crashy", point, "--upsert")
    _assert_upserted_once(catalog, f"{catalog.name}.events", "crashy")


def _assert_upserted_once(catalog: SqlCatalog, name: str, job: str) -> None:
    assert _live(catalog, name) == upserted()
    metadata = catalog.load_table(name).metadata
    assert Counter((c.job_id, c.checkpoint_id) for c in committed_checkpoints(metadata)) == Counter(
        (job, c) for c in (1, 2, 3)
    )
    committer = ic.GlobalCommitter(catalog, name, job_id=job)
    states = committer.store.list(committer.table_name, job_id=job)
    assert [(s.checkpoint_id, s.status, s.features) for s in states] == [(c, "committed", (UPSERT,)) for c in (1, 2, 3)]


def _upserter(uri: str, warehouse: str, name: str, table: str, job: str, start: float) -> None:
    """One job: upsert ids 0..19 marked with its name, starting with the other."""
    catalog = SqlCatalog(name, uri=uri, warehouse=warehouse)
    committer = ic.GlobalCommitter(catalog, table, job_id=job,
                                   retry_policy=ic.RetryPolicy(max_attempts=50, max_seconds=60, min_wait_s=0.001,
                                                               max_wait_s=0.05))  # fmt: skip
    rows = _marked(0, 20, job)
    written = write_arrow(committer.load_table(), rows, job_id=job, checkpoint_id=1)
    time.sleep(max(0.0, start - time.time()))
    committer.prepare(1, [written], mode=UPSERT, keys=rows.select(["id"]))
    committer.commit(1)
    catalog.engine.dispose()


def test_two_processes_upserting_the_same_keys_at_once_leave_one_live_row_per_key(catalog: SqlCatalog) -> None:
    name = _table(catalog, suffix="_race")
    _upsert(catalog, name, 1, _marked(0, 20, "seed"), job="seed")
    start = time.time() + 2.0
    uri, warehouse = catalog.properties["uri"], catalog.properties["warehouse"]
    children = {job: processes.Child(_upserter, uri, warehouse, catalog.name, name, job, start) for job in "ab"}
    for job, child in children.items():
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, (job, out, err[-3000:])
    live = _live(catalog, name)  # every key once
    assert sorted(live) == list(range(20)) and len(set(live.values())) == 1 and live[0] in ("a", "b")


def test_the_orphan_sweep_keeps_live_delete_files_and_staged_keys_and_finds_a_lost_attempts(
    scripted_catalog: ScriptedCatalog,
) -> None:
    catalog = scripted_catalog
    name = _table(catalog, suffix="_o")
    _upsert(catalog, name, 1, _marked(0, 10, "a"))
    committer = ic.GlobalCommitter(catalog, name, job_id="j")
    rows = _marked(0, 5, "b")
    committer.prepare(2, [write_arrow(committer.load_table(), rows, job_id="j", checkpoint_id=2)], mode=UPSERT,
                      keys=rows.select(["id"]))  # fmt: skip
    other = SqlCatalog(catalog.name, **catalog.properties)
    catalog.before.append(lambda: _upsert(other, name, 1, _marked(8, 9, "c"), job="other"))  # our first attempt loses
    try:
        assert committer.commit(2).retries >= 1
    finally:
        other.engine.dispose()
    later = dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=1)
    orphans = {o.path for o in find_orphans(catalog, name, older_than=dt.timedelta(0), now=later).orphans}
    table = catalog.load_table(name)
    live_deletes = {d.file_path for task in table.scan().plan_files() for d in task.delete_files}
    assert live_deletes and not {p.removeprefix("file://") for p in live_deletes} & orphans
    lost = [p for p in orphans if "-deletes-" in p]
    assert len(lost) == 1  # the delete file of the attempt that lost its compare-and-swap
    states = committer.store.list(committer.table_name, job_id="j")
    assert not {s.keys_path.removeprefix("file://") for s in states if s.keys_path} & orphans


def test_files_without_field_ids_are_read_through_the_name_mapping(catalog: SqlCatalog, tmp_path: object) -> None:
    name = _table(catalog, suffix="_seeded")
    table = catalog.load_table(name)
    seed = f"{table.location()}/data/seed.parquet"  # an initial snapshot, as a migration adds it
    with table.io.new_output(seed).create() as stream:
        pq.write_table(_marked(0, 5, "a").cast(pa.schema([f.with_metadata(None) for f in EVENTS_SCHEMA])), stream)
    table.add_files([seed])
    _upsert(catalog, name, 1, _marked(0, 2, "b"))
    assert _live(catalog, name) == {0: "b", 1: "b", 2: "a", 3: "a", 4: "a"}


def test_a_rolled_back_upsert_is_not_committed_again_over_newer_rows_and_bad_keys_are_refused(
    catalog: SqlCatalog,
) -> None:
    name = _table(catalog, suffix="_rb")
    _upsert(catalog, name, 1, _marked(0, 3, "a"))
    _upsert(catalog, name, 2, _marked(0, 3, "b"))
    apply_rollback(catalog, plan_rollback(catalog, name, to_checkpoint=1, job_id="j"))
    _upsert(catalog, name, 3, _marked(0, 3, "c"))
    with pytest.raises(ValidationError, match="older rows of its keys over newer ones"):
        ic.GlobalCommitter(catalog, name, job_id="j").recommit(2)
    assert _live(catalog, name) == {0: "c", 1: "c", 2: "c"}
    committer = ic.GlobalCommitter(catalog, name, job_id="j")
    for column in ("score", "ts"):  # a float key, and none at all when the rows are empty
        with pytest.raises(SchemaMismatchError, match="other than float, double or uuid") if column == "score" else \
                nullcontext():  # fmt: skip
            keys = pa.table({column: pa.array([1.5], pa.float64())}) if column == "score" else _marked(0, 0, "x")
            committer.prepare(4, [], mode=UPSERT, keys=keys.select([column]))
    state = committer.store.get("j", name, 4)
    assert state is not None and not state.has_changes and committer.commit(4).status == "empty"
    v1 = f"{catalog.name}.v1"
    ic.create_table(catalog, v1, EVENTS_SCHEMA, identifier_fields=["id"], properties={"format-version": "1"})
    with pytest.raises(InvalidArgumentError, match="format version 1"):
        ic.GlobalCommitter(catalog, v1, job_id="j").prepare(1, [], mode=UPSERT, keys=pa.table({"id": [1]}))


def test_a_short_seeded_slice_of_the_upsert_soak(tmp_path: Path) -> None:
    """Four trials of ``bench/soak.py --upsert`` (concurrent jobs killed at random steps,
    replayed): every key once, each key one job alone wrote holding its last row."""
    import multiprocessing
    import random

    from bench import soak

    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["tests.committer.crash_driver"])
    rng = random.Random(20261127)
    for trial in range(4):
        result = soak.run_trial(trial, rng, "sqlite", tmp_path, context, upsert=True)
        assert (result.lost, result.duplicated, result.double_commits, result.stale) == (0, 0, 0, 0), result


def test_taking_over_an_upsert_computed_before_the_new_jobs_commits_is_refused(catalog: SqlCatalog) -> None:
    name = _table(catalog, suffix="_take")
    _upsert(catalog, name, 1, _marked(0, 3, "a"), job="old")
    old = ic.GlobalCommitter(catalog, name, job_id="old")
    rows = _marked(0, 3, "old")
    old.prepare(2, [write_arrow(old.load_table(), rows, job_id="old", checkpoint_id=2)], mode=UPSERT,
                keys=rows.select(["id"]))  # fmt: skip  # the old job died before its commit
    _upsert(catalog, name, 1, _marked(0, 3, "new"), job="new")  # the new job wrote those keys since
    with pytest.raises(ValidationError, match="older rows of its keys over newer ones"):
        ic.GlobalCommitter(catalog, name, job_id="new").take_over("old")
    assert _live(catalog, name) == {0: "new", 1: "new", 2: "new"}
    fresh = _table(catalog, suffix="_take2")  # nothing of the new job's since: taken over as it is
    _upsert(catalog, fresh, 1, _marked(0, 3, "a"), job="old")
    old = ic.GlobalCommitter(catalog, fresh, job_id="old")
    old.prepare(2, [write_arrow(old.load_table(), rows, job_id="old", checkpoint_id=2)], mode=UPSERT,
                keys=rows.select(["id"]))  # fmt: skip
    assert [r.status for r in ic.GlobalCommitter(catalog, fresh, job_id="new").take_over("old")] == ["committed"]
    assert _live(catalog, fresh) == {0: "old", 1: "old", 2: "old"}


def test_a_table_with_equality_deletes_is_refused_by_name_and_left_as_it_was(catalog: SqlCatalog) -> None:
    name = _table(catalog, suffix="_eq")
    _upsert(catalog, name, 1, _marked(0, 10, "a"))
    table = catalog.load_table(name)
    path = next(str(f["file_path"]) for f in table.inspect.files().to_pylist())
    delete_equal(table, path, "id", [3])  # as Flink's upsert sink deletes
    before = catalog.load_table(name).metadata_location
    with pytest.raises(EqualityDeletesError) as refused:
        _upsert(catalog, name, 2, _marked(0, 2, "b"))
    assert refused.value.table == name and refused.value.path.endswith(".parquet")
    assert "equality delete" in str(refused.value)
    assert catalog.load_table(name).metadata_location == before
    state = ic.GlobalCommitter(catalog, name, job_id="j").store.get("j", name, 2)
    assert state is not None and not state.committed  # prepared, never committed: abandon or replay it
