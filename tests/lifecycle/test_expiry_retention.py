"""Expiry keeps what Apache Iceberg keeps: every branch and tag head, and on every branch its
newest min-snapshots-to-keep snapshots and those younger than its max-snapshot-age; a
branch's own settings win over the call's, the call's over the table's history.expire.*
properties, and those over Iceberg's defaults (1 and 5 days). Time is injected (``now``),
never waited for."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pyiceberg.table.snapshots
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table import Table

import icecommit as ic
from icecommit.committer import RetryPolicy
from icecommit.errors import InvalidArgumentError, PlanChangedError
from icecommit.maintenance import apply_expire, apply_rollback, find_orphans, plan_expire, plan_rollback
from icecommit.maintenance.expire import BranchRetention
from tests.cli.runner import invoke
from tests.helpers import EVENTS_SCHEMA, events, write_arrow

# what is kept is decided from the table's metadata, above the database
pytestmark = pytest.mark.database_independent

FAST = RetryPolicy(max_attempts=5, max_seconds=60, min_wait_s=0.01, max_wait_s=0.1)
DAY_MS = 86_400_000


def _land(catalog: SqlCatalog, checkpoints: int) -> list[int]:
    """A table with one snapshot per checkpoint (10 rows each); their ids, oldest first."""
    ic.create_table(catalog, f"{catalog.name}.events", EVENTS_SCHEMA, partition_by=["event"])
    committer = ic.GlobalCommitter(catalog, f"{catalog.name}.events", job_id="job", retry_policy=FAST)
    ids = []
    for c in range(1, checkpoints + 1):
        table = committer.load_table()
        committer.prepare(c, [write_arrow(table, events(c * 100, c * 100 + 10), job_id="job", checkpoint_id=c)])
        result = committer.commit(c)
        assert result.snapshot_id is not None
        ids.append(result.snapshot_id)
    return ids


def _table(catalog: SqlCatalog) -> Table:
    return catalog.load_table(f"{catalog.name}.events")


def _later(days: float) -> datetime:
    return datetime.now(timezone.utc) + timedelta(days=days)


def _where(catalog: SqlCatalog) -> tuple[str, ...]:
    """The command's options that reach the test's catalog."""
    return (
        "--catalog",
        catalog.name,
        "--uri",
        catalog.properties["uri"],
        "--warehouse",
        catalog.properties["warehouse"],
    )


def _files(table: Table, snapshot_id: int) -> set[str]:
    return {task.file.file_path for task in table.scan(snapshot_id=snapshot_id).plan_files()}


def test_the_tables_history_properties_are_the_default(catalog: SqlCatalog) -> None:
    first, second, third = _land(catalog, 3)
    with _table(catalog).transaction() as tx:
        tx.set_properties({"history.expire.max-snapshot-age-ms": str(30 * DAY_MS),
                           "history.expire.min-snapshots-to-keep": "2"})  # fmt: skip
    # six days on: Iceberg's defaults (5 days, 1) would expire two; the table asks for 30 days
    plan = plan_expire(catalog, f"{catalog.name}.events", now=_later(6))
    assert plan.expired_snapshot_ids == ()
    assert plan.retention == (BranchRetention("main", 2, 30 * DAY_MS, "table table"),)
    # 31 days on: the age no longer keeps them, the count keeps the newest two
    assert plan_expire(catalog, f"{catalog.name}.events", now=_later(31)).expired_snapshot_ids == (first,)
    # the call's own rules win over the table's
    explicit = plan_expire(catalog, f"{catalog.name}.events", older_than=timedelta(0), retain_last=1, now=_later(6))
    assert sorted(explicit.expired_snapshot_ids) == sorted((first, second))
    assert explicit.retention == (BranchRetention("main", 1, 0, "argument argument"),)
    # without any setting: Iceberg's defaults
    with _table(catalog).transaction() as tx:
        tx.remove_properties("history.expire.max-snapshot-age-ms", "history.expire.min-snapshots-to-keep")
    defaults = plan_expire(catalog, f"{catalog.name}.events", now=_later(6))
    assert sorted(defaults.expired_snapshot_ids) == sorted((first, second))
    assert defaults.retention == (BranchRetention("main", 1, 5 * DAY_MS, "default default"),)
    assert plan_expire(catalog, f"{catalog.name}.events", now=_later(4)).expired_snapshot_ids == ()
    assert _table(catalog).current_snapshot().snapshot_id == third  # type: ignore[union-attr]


def test_a_branchs_own_retention_keeps_its_ancestors_and_their_files(catalog: SqlCatalog) -> None:
    first, second, third, fourth, fifth = _land(catalog, 5)
    table = _table(catalog)
    # an audit branch at the third snapshot that keeps two, and a tag on the first
    table.manage_snapshots().create_branch(third, "audit", min_snapshots_to_keep=2).commit()
    table.manage_snapshots().create_tag(first, "v1").commit()
    needed = _files(_table(catalog), second)

    plan = plan_expire(catalog, f"{catalog.name}.events", older_than=timedelta(0), retain_last=1, now=_later(6))
    # main keeps its head only; audit its head and its parent (its own count, not the call's
    # one); the tag its snapshot
    assert plan.expired_snapshot_ids == (fourth,)
    assert plan.retention == (
        BranchRetention("audit", 2, 0, "argument branch"),
        BranchRetention("main", 1, 0, "argument argument"),
    )
    assert not needed & set(plan.files_to_delete)
    apply_expire(catalog, plan)
    after = _table(catalog)
    assert {s.snapshot_id for s in after.metadata.snapshots} == {first, second, third, fifth}
    assert after.scan(snapshot_id=second).to_arrow().num_rows == 20  # time travel on the branch
    assert after.scan(snapshot_id=first).to_arrow().num_rows == 10  # and to the tag
    assert after.scan().to_arrow().num_rows == 50


def test_a_branchs_own_age_wins_over_the_calls(catalog: SqlCatalog) -> None:
    first, second, third = _land(catalog, 3)
    # a branch at the head that keeps a week of history: nothing of it expires after six days
    _table(catalog).manage_snapshots().create_branch(third, "week", max_snapshot_age_ms=7 * DAY_MS).commit()
    plan = plan_expire(catalog, f"{catalog.name}.events", older_than=timedelta(days=1), now=_later(6))
    assert plan.expired_snapshot_ids == ()
    assert BranchRetention("week", 1, 7 * DAY_MS, "branch default") in plan.retention
    later = plan_expire(catalog, f"{catalog.name}.events", older_than=timedelta(days=1), now=_later(8))
    assert sorted(later.expired_snapshot_ids) == sorted((first, second))


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("history.expire.min-snapshots-to-keep", "0"),
        ("history.expire.min-snapshots-to-keep", "ten"),
        ("history.expire.max-snapshot-age-ms", "-1"),
        ("history.expire.max-snapshot-age-ms", "5d"),
    ],
)
def test_a_bad_history_property_is_named_and_nothing_expires(catalog: SqlCatalog, key: str, value: str) -> None:
    ids = _land(catalog, 2)
    with _table(catalog).transaction() as tx:
        tx.set_properties({key: value})
    with pytest.raises(ic.TableSpecError, match=f"{key} is '{value}', not a whole number") as raised:
        plan_expire(catalog, f"{catalog.name}.events", now=_later(30))
    assert "nothing was expired" in str(raised.value)
    assert [s.snapshot_id for s in _table(catalog).metadata.snapshots] == ids


def test_a_bad_retain_last_is_refused(catalog: SqlCatalog) -> None:
    _land(catalog, 1)
    for bad in (0, True, 1.5):
        with pytest.raises(InvalidArgumentError, match="retain_last"):
            plan_expire(catalog, f"{catalog.name}.events", retain_last=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("change", ["tag", "branch moved", "branch removed"])
def test_apply_refuses_a_plan_when_any_branch_or_tag_changed(catalog: SqlCatalog, change: str) -> None:
    first, second, third = _land(catalog, 3)
    _table(catalog).manage_snapshots().create_branch(third, "audit").commit()
    plan = plan_expire(catalog, f"{catalog.name}.events", older_than=timedelta(0), retain_last=1, now=_later(1))
    assert sorted(plan.expired_snapshot_ids) == sorted((first, second))
    manage = _table(catalog).manage_snapshots()
    if change == "tag":  # a tag on a planned snapshot: the rules now keep it
        manage.create_tag(first, "release").commit()
    elif change == "branch moved":  # main is unchanged; the branch was rolled back
        manage.remove_branch("audit").create_branch(second, "audit").commit()
    else:
        manage.remove_branch("audit").commit()
    with pytest.raises(PlanChangedError, match=r"changed since the expiry was planned \(a branch or tag moved\)"):
        apply_expire(catalog, plan)
    assert {s.snapshot_id for s in _table(catalog).metadata.snapshots} == {first, second, third}


def test_the_command_says_by_which_rules_each_branch_is_kept(catalog: SqlCatalog, tmp_path: Path) -> None:
    first, second = _land(catalog, 2)
    with _table(catalog).transaction() as tx:
        tx.set_properties({"history.expire.max-snapshot-age-ms": str(30 * DAY_MS)})
    _table(catalog).manage_snapshots().create_tag(first, "v1").commit()
    where = _where(catalog)
    table = f"{catalog.name}.events"

    text = invoke(tmp_path, *where, "expire", table)
    assert text.returncode == 0, text.stderr
    assert "would expire (dry run) 0 snapshot(s)" in text.stdout
    assert "branch main keeps its newest 1 snapshot(s) (default) and those younger than 30d (table)" in text.stdout

    done = invoke(tmp_path, *where, "--output", "json", "expire", table, "--older-than", "0s", "--retain-last", "1")
    document = json.loads(done.stdout)
    assert document["expired_snapshot_ids"] == []  # the head and the tag: nothing else to expire
    assert document["retention"] == [{"branch": "main", "min_snapshots_to_keep": 1, "max_snapshot_age_ms": 0,
                                      "source": "argument argument"}]  # fmt: skip
    assert document["refs"] == [
        {"name": "main", "snapshot_id": second, "snapshot_id_str": str(second)},
        {"name": "v1", "snapshot_id": first, "snapshot_id_str": str(first)},
    ]


def test_a_branchs_walk_stops_at_its_first_ancestor_past_both_rules(
    catalog: SqlCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Writers whose clocks disagree: a parent stamped later than its child. As in Iceberg,
    the walk back from the head stops at the first snapshot past the count and the age, so
    the parent behind it expires too, instead of being kept with its child expired (it would
    then hang off no branch, and its checkpoint would read as rolled back)."""
    now = datetime.now(timezone.utc)
    stamps = iter([now - timedelta(days=1), now - timedelta(days=10), now])  # the middle one's clock is slow

    class Clock:
        @staticmethod
        def time() -> float:
            return next(stamps).timestamp()

    with monkeypatch.context() as patched:
        patched.setattr(pyiceberg.table.snapshots, "time", Clock)
        parent, child, _ = _land(catalog, 3)
    plan = plan_expire(catalog, f"{catalog.name}.events", older_than=timedelta(days=5), retain_last=1, now=now)
    assert sorted(plan.expired_snapshot_ids) == sorted((parent, child))
    assert plan.rolled_back_checkpoints == ()  # both were on the branch


def test_an_age_too_long_for_a_duration_is_shown_in_milliseconds(catalog: SqlCatalog, tmp_path: Path) -> None:
    _land(catalog, 1)
    forever = str(2**63 - 1)  # Long.MAX: "never expire by age"
    with _table(catalog).transaction() as tx:
        tx.set_properties({"history.expire.max-snapshot-age-ms": forever})
    where = _where(catalog)
    text = invoke(tmp_path, *where, "expire", f"{catalog.name}.events")
    assert text.returncode == 0, text.stderr
    assert f"those younger than {int(forever):,} ms (table)" in text.stdout


def test_json_gives_every_listed_snapshot_id_as_a_string_too(catalog: SqlCatalog, tmp_path: Path) -> None:
    """jq 1.6 and JavaScript round numbers above 2**53: lists of ids come as strings as well."""
    first, second = _land(catalog, 2)
    table = f"{catalog.name}.events"
    expire = json.loads(
        invoke(tmp_path, *_where(catalog), "--output", "json", "expire", table, "--older-than", "0s").stdout
    )
    assert expire["expired_snapshot_ids"] == [first] and expire["expired_snapshot_ids_str"] == [str(first)]
    rollback = invoke(tmp_path, *_where(catalog), "--output", "json", "rollback", table, "--to-snapshot", str(first),
                      "--dry-run")  # fmt: skip
    document = json.loads(rollback.stdout)
    assert document["hidden_snapshot_ids"] == [second] and document["hidden_snapshot_ids_str"] == [str(second)]


@pytest.mark.parametrize("value", ["false", "False", "no"])
def test_a_table_whose_gc_is_disabled_is_neither_expired_nor_swept(
    catalog: SqlCatalog, tmp_path: Path, value: str
) -> None:
    """As Iceberg: its files may be another table's too (a snapshot of a table, Nessie)."""
    ids = _land(catalog, 3)
    table = f"{catalog.name}.events"
    with _table(catalog).transaction() as tx:
        tx.set_properties({"gc.enabled": value})
    with pytest.raises(ic.TableSpecError, match=f"cannot expire snapshots: table property gc.enabled is '{value}'"):
        plan_expire(catalog, table, older_than=timedelta(0), now=_later(1))
    assert find_orphans(catalog, table, older_than=timedelta(0)).orphans == ()  # listing deletes nothing
    with pytest.raises(ic.TableSpecError, match=r"cannot delete orphan files: table property gc\.enabled"):
        find_orphans(catalog, table, older_than=timedelta(0), delete=True)
    refused = invoke(tmp_path, *_where(catalog), "expire", table, "--older-than", "0s", "--no-dry-run")
    assert refused.returncode == 2 and "gc.enabled" in refused.stderr and "nothing was changed" in refused.stderr
    assert [s.snapshot_id for s in _table(catalog).metadata.snapshots] == ids
    with _table(catalog).transaction() as tx:
        tx.set_properties({"gc.enabled": "TRUE"})
    assert len(plan_expire(catalog, table, older_than=timedelta(0), now=_later(1)).expired_snapshot_ids) == 2


def _another_commit_lands_first(catalog: SqlCatalog, monkeypatch: pytest.MonkeyPatch) -> None:
    """The next catalog commit loses its compare-and-swap: another process commits after it
    read the table's current metadata and before it swaps (a real conflict, made once)."""
    original = SqlCatalog._update_and_stage_table
    raced = []

    def racing(self: SqlCatalog, current: Any, *args: Any, **kwargs: Any) -> Any:
        if not raced:
            raced.append(True)
            with _table(catalog).transaction() as tx:
                tx.set_properties({"owner": "another process"})
        return original(self, current, *args, **kwargs)

    monkeypatch.setattr(SqlCatalog, "_update_and_stage_table", racing)


def test_an_expiry_whose_commit_loses_to_another_is_refused_and_deletes_nothing(
    catalog: SqlCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = _land(catalog, 3)
    plan = plan_expire(catalog, f"{catalog.name}.events", older_than=timedelta(0), retain_last=1, now=_later(1))
    assert plan.files_to_delete
    _another_commit_lands_first(catalog, monkeypatch)
    with pytest.raises(PlanChangedError, match=r"changed since the expiry was planned \(another commit landed"):
        apply_expire(catalog, plan)
    assert [s.snapshot_id for s in _table(catalog).metadata.snapshots] == ids
    assert all(Path(p.removeprefix("file:")).exists() for p in plan.files_to_delete)


def test_a_rollback_whose_commit_loses_to_another_is_refused(
    catalog: SqlCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, _, third = _land(catalog, 3)
    plan = plan_rollback(catalog, f"{catalog.name}.events", to_snapshot=first)
    _another_commit_lands_first(catalog, monkeypatch)
    with pytest.raises(PlanChangedError, match=r"changed since the rollback was planned \(another commit landed"):
        apply_rollback(catalog, plan)
    assert _table(catalog).current_snapshot().snapshot_id == third  # type: ignore[union-attr]
    committer = ic.GlobalCommitter(catalog, f"{catalog.name}.events", job_id="job")
    assert [committer.store.get("job", committer.table_name, c).status for c in (2, 3)] == ["committed"] * 2  # type: ignore[union-attr]
