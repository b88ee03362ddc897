"""A compaction group whose snapshot landed but whose process died before it said so is
recorded as committed by the next compaction or expiry, and its lineage is then preferred
over an older group's (on SQLite and PostgreSQL: the store's own queries)."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone

from pyiceberg.catalog.sql import SqlCatalog

from icecommit.state import state_engine, state_uri
from icecommit.state.compactions import CompactionStore
from tests.conftest import unique_table


def _ids(*names: str) -> list[str]:
    """Group ids of this test (an id is unique in the state database, which tests share)."""
    run = uuid.uuid4().hex[:8]
    return [f"{name}-{run}" for name in names]


def _store(catalog: SqlCatalog) -> CompactionStore:
    ticks = iter(datetime(2026, 1, 1, tzinfo=timezone.utc) + timedelta(seconds=i) for i in range(20))
    return CompactionStore(state_engine(state_uri(catalog)), clock=lambda: next(ticks))


def test_prepared_groups_the_table_shows_landed_are_recorded_committed_once(catalog: SqlCatalog) -> None:
    table, other = unique_table(), unique_table()
    store = _store(catalog)
    rolled_back, landed_id, never, aborted, elsewhere = _ids("rolled-back", "landed", "never", "aborted", "elsewhere")
    store.prepare(table, rolled_back, [("a", "r1", 10)], input_files=1, output_files=1)
    store.committed(rolled_back, 41)
    store.prepare(table, landed_id, [("a", "t1", 6), ("a", "t2", 4)], input_files=1, output_files=2)
    store.prepare(table, never, [("b", "n1", 3)], input_files=1, output_files=1)
    store.prepare(table, aborted, [("c", "x1", 2)], input_files=1, output_files=1)
    store.aborted(aborted)
    store.prepare(other, elsewhere, [("z", "e1", 1)], input_files=1, output_files=1)
    landed = {landed_id: 43, rolled_back: 41, aborted: 44, elsewhere: 45}

    assert store.resolve_landed(table, landed) == [landed_id]
    assert [(g.compaction_id, g.status, g.snapshot_id) for g in store.groups(table)] == [
        (rolled_back, "committed", 41), (landed_id, "committed", 43), (never, "prepared", None),
        (aborted, "aborted", None),
    ]  # fmt: skip
    assert [(g.status, g.snapshot_id) for g in store.groups(other)] == [("prepared", None)]  # per table
    assert store.resolve_landed(table, landed) == []  # once


def test_a_landed_group_is_preferred_once_it_is_recorded(catalog: SqlCatalog) -> None:
    table = unique_table()
    store = _store(catalog)
    rolled_back, landed_id, gone = _ids("rolled-back", "landed", "gone")
    store.prepare(table, rolled_back, [("a", "r1", 10)], input_files=1, output_files=1)
    store.committed(rolled_back, 41)
    store.prepare(table, landed_id, [("a", "t1", 6), ("a", "t2", 4), ("b", "t2", 2)], input_files=2, output_files=2)
    assert store.lineage(table) == {"a": [("r1", 10)], "b": [("t2", 2)]}  # a committed group wins
    landed = {"a": [("t1", 6), ("t2", 4)], "b": [("t2", 2)]}
    store.resolve_landed(table, {landed_id: 43})
    assert store.lineage(table) == landed  # once recorded, the newer committed group wins
    assert store.group_lineage(table) == {rolled_back: {"a": [("r1", 10)]}, landed_id: landed}
    store.prepare(table, gone, [("a", "g1", 10)], input_files=1, output_files=1)
    store.aborted(gone)
    assert set(store.group_lineage(table)) == {rolled_back, landed_id}  # aborted groups have none
