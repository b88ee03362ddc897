"""A compaction whose snapshot landed but whose process died before the state said so,
after an earlier compaction of the same files was rolled back: both groups list those
files, the state calls the rolled-back one committed and the landed one prepared.
Reconciliation follows the group the table shows; the next expiry records it committed, so
its lineage still leads to the rows once its snapshot is gone."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from pyiceberg.catalog.sql import SqlCatalog

import icecommit as ic
from icecommit.core.lineage import landed_compactions
from icecommit.maintenance import apply_expire, plan_expire
from icecommit.maintenance.compaction import compact
from icecommit.state import state_engine, state_uri
from icecommit.state.compactions import CompactionStore
from tests.conftest import unique_table
from tests.fakes import TARGET, small_checkpoints
from tests.helpers import EVENTS_SCHEMA

# one process, one step after another; the store's queries are tested in tests/state
pytestmark = pytest.mark.database_independent


class Died(BaseException):
    """The compaction's process dies here (a BaseException: nothing in it handles that)."""


def _readable(catalog: SqlCatalog, name: str) -> list[tuple[str, int, int]]:
    report = ic.reconcile(catalog, name)
    assert report.ok and not report.problems, report.to_markdown()
    return sorted((line.job_id, line.checkpoint_id, line.readable) for line in report.checkpoints)


def _died_after_the_swap(catalog: SqlCatalog, monkeypatch: pytest.MonkeyPatch) -> tuple[str, CompactionStore]:
    """A table of 8 small checkpoints compacted, the compaction rolled back by another tool,
    then compacted again by a process that died after its swap."""
    name = unique_table()
    ic.create_table(catalog, name, EVENTS_SCHEMA, partition_by=["event"],
                    properties={"write.target-file-size-bytes": str(TARGET)})  # fmt: skip
    before = small_checkpoints(catalog, name, 8).current_snapshot()
    assert before is not None
    assert compact(catalog, name).committed == 1
    catalog.load_table(name).manage_snapshots().rollback_to_snapshot(before.snapshot_id).commit()

    def died(self: CompactionStore, compaction_id: str, snapshot_id: int) -> None:
        raise Died(f"after the swap of {compaction_id}")

    with monkeypatch.context() as patched:
        patched.setattr(CompactionStore, "committed", died)
        with pytest.raises(Died):
            compact(catalog, name)
    store = CompactionStore(state_engine(state_uri(catalog)))
    assert [g.status for g in store.groups(name)] == ["committed", "prepared"]
    return name, store


EVERY_ROW = [("job", c, 60) for c in range(8)]


def test_the_group_the_table_shows_is_followed_before_and_after_its_snapshot_expires(
    catalog: SqlCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    name, store = _died_after_the_swap(catalog, monkeypatch)
    rolled_back, landed = store.groups(name)
    assert _readable(catalog, name) == EVERY_ROW  # not 0 readable and 480 untraceable

    small_checkpoints(catalog, name, 1, job="later", first=50)  # the compaction is no longer the head
    later = datetime.now(timezone.utc) + timedelta(hours=1)
    apply_expire(catalog, plan_expire(catalog, name, older_than=timedelta(0), retain_last=1, now=later))
    assert not any(s.summary and s.summary.get("icecommit.compaction-id") for s in catalog.load_table(name).snapshots())
    assert [(g.compaction_id, g.status) for g in store.groups(name)] == [
        (rolled_back.compaction_id, "committed"),
        (landed.compaction_id, "committed"),
    ]
    assert store.groups(name)[1].snapshot_id is not None
    assert _readable(catalog, name) == sorted([*EVERY_ROW, ("later", 50, 60)])


def test_the_next_compaction_records_the_group_that_landed(
    catalog: SqlCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    name, store = _died_after_the_swap(catalog, monkeypatch)
    landed = catalog.load_table(name).current_snapshot()
    assert landed is not None
    small_checkpoints(catalog, name, 8, first=8)  # small files to compact again
    assert compact(catalog, name).committed == 1
    groups = store.groups(name)
    assert [(g.status, g.snapshot_id) for g in groups[1:2]] == [("committed", landed.snapshot_id)]
    assert [g.status for g in groups] == ["committed"] * 3
    assert _readable(catalog, name) == [("job", c, 60) for c in range(16)]


def test_a_group_rolled_back_off_every_branch_stays_unrecorded(
    catalog: SqlCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its snapshot is still in the metadata, but on no branch: its lineage no longer says
    where rows are, so it is not recorded as committed (a committed group's lineage wins)."""
    name, store = _died_after_the_swap(catalog, monkeypatch)
    table = catalog.load_table(name)
    head = table.current_snapshot()
    assert head is not None and head.parent_snapshot_id is not None
    table.manage_snapshots().rollback_to_snapshot(head.parent_snapshot_id).commit()  # another tool, again
    small_checkpoints(catalog, name, 8, first=8)
    assert compact(catalog, name).committed == 1
    assert [g.status for g in store.groups(name)] == ["committed", "prepared", "committed"]
    assert _readable(catalog, name) == [("job", c, 60) for c in range(16)]


def test_a_group_that_landed_on_another_branch_is_recorded_too(
    catalog: SqlCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = unique_table()
    ic.create_table(catalog, name, EVENTS_SCHEMA, partition_by=["event"],
                    properties={"write.target-file-size-bytes": str(TARGET)})  # fmt: skip
    head = small_checkpoints(catalog, name, 8).current_snapshot()
    assert head is not None
    catalog.load_table(name).manage_snapshots().create_branch(head.snapshot_id, "audit").commit()

    def died(self: CompactionStore, compaction_id: str, snapshot_id: int) -> None:
        raise Died(f"after the swap of {compaction_id}")

    with monkeypatch.context() as patched:
        patched.setattr(CompactionStore, "committed", died)
        with pytest.raises(Died):
            compact(catalog, name, branch="audit")
    audit = catalog.load_table(name).metadata.refs["audit"].snapshot_id
    store = CompactionStore(state_engine(state_uri(catalog)))
    (group,) = store.groups(name)
    assert landed_compactions(catalog.load_table(name).metadata) == {group.compaction_id: audit}
    small_checkpoints(catalog, name, 8, first=8)  # main's own small files
    main = compact(catalog, name)
    assert main.committed == 1
    assert [(g.status, g.snapshot_id) for g in store.groups(name)] == [
        ("committed", audit),
        ("committed", main.groups[0].snapshot_id),
    ]
