"""Compaction: small files rewritten as ``replace`` snapshots, safely beside live commits."""

from __future__ import annotations

import json
import math
import os
import re
from collections import Counter
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table import Table
from pyspark.sql import SparkSession

import icecommit as ic
import icecommit.maintenance
from icecommit.committer.retry import RetryPolicy
from icecommit.errors import CommitConflictError, InvalidArgumentError
from icecommit.maintenance.compaction import CommitGroup, compact, plan_compaction
from icecommit.state import state_engine, state_uri
from icecommit.state.compactions import CompactionStore
from tests import processes
from tests.cli.runner import invoke
from tests.committer import crash_driver
from tests.committer.crash_driver import ROWS, checkpoint_rows
from tests.fakes import TARGET, small_checkpoints
from tests.helpers import EVENTS_SCHEMA, assert_same_rows, delete_positions, events


def at_commit(action: Callable[[CommitGroup], None]) -> Callable[[str, CommitGroup], None]:
    """A step hook that runs ``action`` just before the group's commit."""
    return lambda step, group: action(group) if step == "commit" else None


def live_files(table: Table) -> Counter[tuple[object, ...]]:
    files = table.inspect.files().to_pylist()
    return Counter(tuple(sorted(f["partition"].items())) for f in files)


@pytest.mark.over_rest
@pytest.mark.database_independent
def test_small_files_become_few_in_one_replace_snapshot_and_reconcile_as_before(
    catalog: SqlCatalog, table_name: str
) -> None:
    table = small_checkpoints(catalog, table_name, 8)
    before_rows = table.scan().to_arrow()
    before_files = live_files(table)
    assert sum(before_files.values()) == 8 * 4  # pv, show, click and null, in every checkpoint
    assert ic.reconcile(catalog, table_name).ok

    plan = plan_compaction(catalog, table_name)
    assert not plan.applied and len(plan.groups) == 1 and len(plan.groups[0].partitions) == 4
    assert catalog.load_table(table_name).metadata_location == table.metadata_location  # planning changes nothing
    dry = compact(catalog, table_name, dry_run=True)
    assert not dry.applied and dry.groups[0].status == "planned"
    assert catalog.load_table(table_name).metadata_location == table.metadata_location

    done = compact(catalog, table_name)
    assert (done.applied, done.committed, done.aborted) == (True, 1, 0)
    after = catalog.load_table(table_name)
    head = after.current_snapshot()
    assert head is not None and head.summary is not None
    assert head.summary.operation.value == "replace" and head.summary["icecommit.compaction"] == "true"
    assert head.snapshot_id == done.groups[0].snapshot_id
    files = live_files(after)
    for partition in done.groups[0].partitions:
        assert files[tuple(sorted(zip(["event"], partition.partition, strict=True)))] <= (
            math.ceil(partition.input_bytes / TARGET) + 1
        )
    assert sum(files.values()) == 4
    assert_same_rows(after.scan().to_arrow(), before_rows)
    report = ic.reconcile(catalog, table_name)
    assert report.ok, report.problems
    assert sum(line.readable for line in report.checkpoints) == 8 * 60
    # nothing left to do: a second run plans nothing
    assert compact(catalog, table_name).groups == ()


@pytest.mark.database_independent
def test_few_small_files_where_and_bad_arguments_leave_the_table_alone(catalog: SqlCatalog, table_name: str) -> None:
    small_checkpoints(catalog, table_name, 3)
    assert plan_compaction(catalog, table_name).groups == ()  # 3 small files per partition, fewer than 5
    only_clicks = plan_compaction(catalog, table_name, min_input_files=2, where="event = 'click'")
    assert [p.partition for g in only_clicks.groups for p in g.partitions] == [("click",)]
    split = plan_compaction(catalog, table_name, min_input_files=2, max_bytes_per_commit=1)
    assert len(split.groups) == 4  # one partition per commit when one partition exceeds the limit
    for argument, value in (("min_input_files", 0), ("max_bytes_per_commit", -1), ("target_file_size", "big")):
        with pytest.raises(InvalidArgumentError) as refused:
            plan_compaction(catalog, table_name, **{argument: value})  # type: ignore[arg-type]
        assert refused.value.argument == argument


@pytest.mark.over_rest
def test_an_append_during_compaction_wins_and_the_compaction_still_lands(catalog: SqlCatalog, table_name: str) -> None:
    small_checkpoints(catalog, table_name, 6)
    expected = catalog.load_table(table_name).scan().to_arrow()

    def append_meanwhile(group: CommitGroup) -> None:
        small_checkpoints(catalog, table_name, 1, job="live", first=100)

    base = catalog.load_table(table_name).current_snapshot()
    assert base is not None
    done = compact(catalog, table_name, on_step=at_commit(append_meanwhile))
    assert done.committed == 1
    after = catalog.load_table(table_name)
    # the rewritten files keep the sequence number of the snapshot the plan read (Iceberg's
    # RewriteFiles rule), below the append that landed meanwhile
    added = [e for e in after.inspect.entries().to_pylist() if e["snapshot_id"] == done.groups[0].snapshot_id
             and e["status"] == 1]  # fmt: skip
    head = after.current_snapshot()
    assert head is not None and head.sequence_number > base.sequence_number + 1
    assert added and {e["sequence_number"] for e in added} == {base.sequence_number}
    live = events(100 * 60, 100 * 60 + 60)
    assert_same_rows(after.scan().to_arrow(), pa.concat_tables([expected, live.cast(expected.schema)]))
    assert ic.reconcile(catalog, table_name).ok


@pytest.mark.database_independent
@pytest.mark.parametrize("meanwhile", ["rollback", "second-compaction", "position-delete"])
def test_a_group_whose_input_changed_is_aborted_and_leaves_no_file(
    catalog: SqlCatalog, table_name: str, meanwhile: str
) -> None:
    table = small_checkpoints(catalog, table_name, 6)
    first_snapshot = table.snapshots()[0].snapshot_id

    def interfere(group: CommitGroup) -> None:
        if meanwhile == "rollback":
            ic.maintenance.apply_rollback(
                catalog, ic.maintenance.plan_rollback(catalog, table_name, to_snapshot=first_snapshot)
            )
        elif meanwhile == "second-compaction":
            assert compact(catalog, table_name).committed == 1
        else:
            current = catalog.load_table(table_name)
            path = next(p for p in group.partitions[0].files)
            delete_positions(current, {path: [0]})

    before = catalog.load_table(table_name)
    on_disk_before = _parquet_files(before)
    done = compact(catalog, table_name, on_step=at_commit(interfere))
    assert (done.committed, done.aborted) == (0, 1)
    expected_reason = "changed since they were rewritten" if meanwhile == "position-delete" else "no longer live"
    assert done.groups[0].reason is not None and expected_reason in done.groups[0].reason
    after = catalog.load_table(table_name)
    ours = [s for s in after.snapshots() if s.snapshot_id not in _ids(before) and _is_compaction(s)]
    assert len(ours) == (1 if meanwhile == "second-compaction" else 0)  # only the other compaction's
    # the aborted group's outputs were removed: every new file on disk is one the table references
    leftovers = _parquet_files(after) - on_disk_before - _referenced(after)
    assert leftovers == set(), leftovers


def _is_compaction(snapshot: object) -> bool:
    summary = getattr(snapshot, "summary", None)
    return summary is not None and summary.get("icecommit.compaction") == "true"


def _parquet_files(table: Table) -> set[str]:
    return {str(p) for p in Path(table.metadata.location.removeprefix("file://")).rglob("*.parquet")}


def _referenced(table: Table) -> set[str]:
    paths = set()
    for snapshot in table.snapshots():
        for manifest in snapshot.manifests(table.io):
            for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=False):
                paths.add(entry.data_file.file_path.removeprefix("file://"))
    return paths


def _ids(table: Table) -> set[int]:
    return {s.snapshot_id for s in table.snapshots()}


def test_the_cli_shows_the_plan_and_compacts(tmp_path: Path) -> None:
    home = tmp_path / "home"
    catalog = ic.connect(uri=f"sqlite:///{home / 'catalog.db'}", warehouse=str(home))
    ic.create_table(catalog, "ns.events", EVENTS_SCHEMA, partition_by=["event"])
    small_checkpoints(catalog, "ns.events", 5)
    catalog.engine.dispose()  # type: ignore[attr-defined]
    text = invoke(home, "compact", "ns.events", "--dry-run")
    assert text.returncode == 0 and "would rewrite 20 small file(s)" in text.stdout, text.stdout + text.stderr
    assert "  event=click: 5 file(s)" in text.stdout and "  event=null: 5 file(s)" in text.stdout
    done = invoke(home, "--output", "json", "compact", "ns.events", "--target-file-size", str(TARGET))
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert (document["committed_groups"], document["aborted_groups"], document["applied"]) == (1, 0, True)
    assert isinstance(document["groups"][0]["snapshot_id_str"], str)
    missing = invoke(home, "compact", "ns.nosuch")
    assert missing.returncode == 2 and "does not exist" in missing.stderr


LIVE_CHECKPOINTS = 20


@pytest.mark.over_rest
def test_compaction_beside_a_process_that_commits_checkpoints(catalog: SqlCatalog) -> None:
    """A real second process commits 20 checkpoints into the same partitions while this one
    compacts again and again: every row once, every checkpoint readable."""
    table = f"{catalog.name}.events"
    ic.create_table(
        catalog, table, checkpoint_rows(1).schema, partition_by=["event"],
        properties={"icecommit.event-time-column": "ts", "write.target-file-size-bytes": str(TARGET)},
    )  # fmt: skip
    where, env = crash_driver.process_arguments(catalog)
    argv = [*where, "--table", table, "--job", "live", "--checkpoints", str(LIVE_CHECKPOINTS)]
    outcomes: Counter[str] = Counter()
    with processes.Child(crash_driver.main, argv, env={**os.environ, **env}) as writer:
        while writer.poll() is None:
            done = compact(catalog, table, min_input_files=3)
            outcomes.update(g.status for g in done.groups)
        _, stderr = writer.communicate(timeout=600)
    assert writer.returncode == 0, stderr[-3000:]
    outcomes.update(g.status for g in compact(catalog, table, min_input_files=3).groups)
    print(f"compaction groups beside the writer: {dict(outcomes)}")
    assert outcomes["committed"] >= 1

    loaded = catalog.load_table(table)
    ids = Counter(loaded.scan(selected_fields=("id",)).to_arrow().column("id").to_pylist())
    expected = Counter(i for c in range(1, LIVE_CHECKPOINTS + 1) for i in checkpoint_rows(c).column("id").to_pylist())
    assert ids == expected
    report = ic.reconcile(catalog, table)
    assert report.ok, report.problems
    assert sum(line.readable for line in report.checkpoints) == LIVE_CHECKPOINTS * ROWS


@pytest.mark.over_rest
@pytest.mark.database_independent
def test_a_commit_whose_answer_was_lost_is_found_landed_and_its_files_kept(
    catalog: SqlCatalog, table_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pyiceberg.exceptions import CommitFailedException
    from pyiceberg.table import Transaction

    small_checkpoints(catalog, table_name, 6)
    expected = catalog.load_table(table_name).scan().to_arrow()
    original = Transaction.commit_transaction
    lost: list[bool] = []

    def commit_then_lose_the_answer(self: Transaction) -> Table:
        table = original(self)
        if not lost:
            lost.append(True)
            raise CommitFailedException("the response was lost")
        return table

    monkeypatch.setattr(Transaction, "commit_transaction", commit_then_lose_the_answer)
    done = compact(catalog, table_name)
    assert lost and (done.committed, done.aborted) == (1, 0)
    after = catalog.load_table(table_name)
    head = after.current_snapshot()
    assert head is not None and head.snapshot_id == done.groups[0].snapshot_id
    assert sum(1 for s in after.snapshots() if _is_compaction(s)) == 1  # not committed twice
    assert_same_rows(after.scan().to_arrow(), expected)  # and its files were not removed


def _expire_all_but_head(catalog: SqlCatalog, name: str) -> None:
    later = datetime.now(timezone.utc) + timedelta(hours=1)
    ic.maintenance.apply_expire(catalog, ic.maintenance.plan_expire(catalog, name, older_than=timedelta(0), now=later))


def _store(catalog: SqlCatalog) -> CompactionStore:
    return CompactionStore(state_engine(state_uri(catalog)))


@pytest.mark.over_rest
@pytest.mark.database_independent
def test_rows_are_followed_exactly_through_compactions_whose_snapshots_were_expired(
    catalog: SqlCatalog, table_name: str
) -> None:
    """The state's lineage, not the retained snapshots, says where a checkpoint's rows are:
    a chain of two compactions, then every snapshot but an append's expired."""
    small_checkpoints(catalog, table_name, 8)
    first = compact(catalog, table_name)
    small_checkpoints(catalog, table_name, 6, first=8)
    second = compact(catalog, table_name, min_input_files=2)  # the first's outputs are small again
    assert (first.committed, second.committed) == (1, 1)
    rewritten_twice = {p for g in second.groups for part in g.partitions for p in part.files}
    live_now = {str(f["file_path"]) for f in catalog.load_table(table_name).inspect.files().to_pylist()}
    assert rewritten_twice and not rewritten_twice & live_now
    small_checkpoints(catalog, table_name, 1, job="later", first=50)
    _expire_all_but_head(catalog, table_name)
    after = catalog.load_table(table_name)
    assert not any(_is_compaction(s) for s in after.snapshots())  # no retained snapshot says where rows went

    groups = _store(catalog).groups(table_name)
    assert [(g.status, g.snapshot_id) for g in groups] == [
        ("committed", first.groups[0].snapshot_id),
        ("committed", second.groups[0].snapshot_id),
    ]
    assert groups[1].records == sum(p.input_records for p in second.groups[0].partitions)
    for deep in (False, True):
        report = ic.reconcile(catalog, table_name, deep=deep)
        assert report.ok, report.problems
        assert sorted((line.job_id, line.checkpoint_id, line.readable) for line in report.checkpoints) == sorted(
            [("job", c, 60) for c in range(14)] + [("later", 50, 60)]
        )


@pytest.mark.database_independent
def test_a_missing_compacted_file_is_named_with_the_checkpoints_whose_rows_it_held(
    catalog: SqlCatalog, table_name: str
) -> None:
    small_checkpoints(catalog, table_name, 8)
    assert compact(catalog, table_name).committed == 1
    table = catalog.load_table(table_name)
    files = table.inspect.files().to_pylist()
    victim = max(files, key=lambda f: f["record_count"])
    os.remove(str(victim["file_path"]).removeprefix("file://"))

    report = ic.reconcile(catalog, table_name)
    assert not report.ok
    (missing,) = [p for p in report.problems if p.kind == "missing-file"]
    assert missing.path == victim["file_path"]
    held = [int(n.replace(",", "")) for n in re.findall(r"holds ([\d,]+) row\(s\) of checkpoint", missing.message)]
    assert len(held) == 8 and sum(held) == victim["record_count"], missing.message  # every checkpoint's share, exact
    deep = ic.reconcile(catalog, table_name, deep=True)
    assert not deep.ok
    assert sum(line.committed - line.readable for line in deep.checkpoints) == victim["record_count"]
    assert sum(not line.ok for line in deep.checkpoints) == len(held)
    assert sum(line.readable for line in deep.checkpoints) == 8 * 60 - victim["record_count"]


@pytest.mark.database_independent
@pytest.mark.parametrize("failure", ["before-commit", "retries-exhausted", "unreadable-input"])
def test_a_group_that_fails_leaves_neither_files_nor_lineage(
    catalog: SqlCatalog, table_name: str, failure: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pyiceberg.exceptions import CommitFailedException
    from pyiceberg.table import Transaction

    small_checkpoints(catalog, table_name, 6)
    before = catalog.load_table(table_name)
    on_disk_before = _parquet_files(before)
    expected = before.scan().to_arrow()
    policy = RetryPolicy(max_attempts=2, min_wait_s=0.0, max_wait_s=0.0)
    if failure == "before-commit":

        def fail(group: CommitGroup) -> None:
            raise RuntimeError("the operator pressed stop")

        with pytest.raises(RuntimeError, match="pressed stop"):
            compact(catalog, table_name, on_step=at_commit(fail))
    elif failure == "retries-exhausted":

        def conflict(self: Transaction) -> Table:
            raise CommitFailedException("another writer won")

        monkeypatch.setattr(Transaction, "commit_transaction", conflict)
        with pytest.raises(CommitConflictError):
            compact(catalog, table_name, retry_policy=policy)
        monkeypatch.undo()
        assert [g.status for g in _store(catalog).groups(table_name)] == ["aborted"]
    else:
        victim = next(p for p in sorted(on_disk_before) if "event=click" in p)
        os.remove(victim)
        on_disk_before.discard(victim)
        done = compact(catalog, table_name)
        assert (done.committed, done.aborted) == (0, 1)
        reason = done.groups[0].reason
        assert reason is not None and "a rewrite task failed" in reason and "event=click" in reason, reason
    after = catalog.load_table(table_name)
    assert after.metadata_location == before.metadata_location  # the table is as it was
    assert _parquet_files(after) == on_disk_before  # no output left behind
    assert _store(catalog).lineage(table_name) == {}
    if failure != "unreadable-input":
        assert_same_rows(after.scan().to_arrow(), expected)


@pytest.mark.spark
@pytest.mark.parametrize("catalog", ["sqlite"], indirect=True)  # the Spark side is the same on both
def test_spark_tasks_rewrite_the_partitions_with_the_same_result(
    catalog: SqlCatalog, table_name: str, spark: SparkSession
) -> None:
    small_checkpoints(catalog, table_name, 8)
    expected = catalog.load_table(table_name).scan().to_arrow()
    plan = plan_compaction(catalog, table_name)
    done = compact(catalog, table_name, spark=spark)
    assert (done.committed, done.aborted) == (1, 0)
    after = catalog.load_table(table_name)
    assert_same_rows(after.scan().to_arrow(), expected)
    assert sum(live_files(after).values()) == sum(p.expected_files for g in plan.groups for p in g.partitions)
    _expire_all_but_head(catalog, table_name)
    report = ic.reconcile(catalog, table_name, deep=True)
    assert report.ok and all(line.readable == 60 for line in report.checkpoints), report.problems
    with pytest.raises(InvalidArgumentError, match="SparkSession"):
        compact(catalog, table_name, spark="local[2]")  # type: ignore[arg-type]
