"""Following a checkpoint's files through rewrites and removals, without a table."""

from __future__ import annotations

import math
import random
from fractions import Fraction

import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.expressions import EqualTo
from pyiceberg.table import Table

from icecommit.core.lineage import Fate, Removal, path_key, rounded, rounded_table, trace_fates


def test_live_files_are_readable_and_missing_ones_without_a_record_are_untraceable() -> None:
    fate = trace_fates([("a", 10), ("b", 5)], {"a": 10}, [])
    assert (fate.readable, fate.untraceable, fate.removed, fate.compacted) == (10, 5, {}, 0)


def test_a_chain_of_conserving_rewrites_keeps_rows_readable() -> None:
    removals = [
        Removal(1, "replace", removed=(("a", 10), ("x", 30)), added=(("ab", 40),)),
        Removal(2, "replace", removed=(("ab", 40),), added=(("c1", 25), ("c2", 15))),
    ]
    fate = trace_fates([("a", 10)], {"c1": 25, "c2": 15}, removals)
    assert (fate.readable, fate.compacted, fate.untraceable) == (10, 10, 0)


def test_a_copy_on_write_delete_removes_only_the_rows_missing_from_its_added_files() -> None:
    removals = [Removal(7, "overwrite", removed=(("a", 30),), added=(("a2", 18),))]
    fate = trace_fates([("a", 30)], {"a2": 18}, removals)
    assert (fate.readable, fate.removed) == (18, {(7, "overwrite"): 12})


def test_a_rewrite_of_several_checkpoints_shares_kept_and_removed_rows_in_proportion() -> None:
    removals = [Removal(7, "delete", removed=(("a", 30), ("b", 10)), added=(("ab", 20),))]
    first = trace_fates([("a", 30)], {"ab": 20}, removals)
    second = trace_fates([("b", 10)], {"ab": 20}, removals)
    assert (first.readable, first.removed[(7, "delete")]) == (15, 15)
    assert (second.readable, second.removed[(7, "delete")]) == (5, 5)
    assert first.readable + second.readable == 20  # every total exact


def test_a_rewrite_whose_output_was_later_deleted_outright_is_removed_by_the_later_snapshot() -> None:
    removals = [
        Removal(1, "replace", removed=(("a", 10),), added=(("b", 10),)),
        Removal(2, "delete", removed=(("b", 10),), added=()),
    ]
    fate = trace_fates([("a", 10)], {}, removals)
    assert (fate.readable, fate.removed, fate.untraceable) == (0, {(2, "delete"): 10}, 0)


def test_an_overwrite_that_also_adds_new_rows_keeps_all_of_the_old_ones() -> None:
    removals = [Removal(3, "overwrite", removed=(("a", 10),), added=(("a2", 25),))]
    fate = trace_fates([("a", 10)], {"a2": 25}, removals)
    assert (fate.readable, fate.removed) == (10, {})


def test_shares_through_many_rewrites_come_back_as_exact_fractions() -> None:
    # 60 rows of 7 files pass through a chain of rewrites whose shares (1/3, 1/7, ...) a
    # float cannot hold: whole rows stay whole, thirds stay thirds
    removals = [Removal(1, "replace", removed=tuple((f"f{i}", 60) for i in range(7)), added=(("r1", 420),))]
    for step in range(2, 40):
        removals.append(Removal(step, "replace", removed=((f"r{step - 1}", 420),),
                                added=((f"r{step}", 140), (f"s{step}", 280))))  # fmt: skip
        removals.append(Removal(100 + step, "replace", removed=((f"s{step}", 280),), added=((f"r{step}x", 280),)))
    live = {f"r{s}x": 280 for s in range(2, 40)} | {"r39": 140}
    fate = trace_fates([("f3", 60)], live, removals)
    assert fate.readable == 60 and isinstance(fate.readable, Fraction) and fate.untraceable == 0
    thirds = trace_fates([("a", 10)], {"b": 30}, [Removal(5, "delete", removed=(("a", 10), ("c", 20)),
                                                          added=(("b", 7),))])  # fmt: skip
    assert (thirds.readable, thirds.removed[(5, "delete")]) == (Fraction(7, 3), Fraction(23, 3))


def test_a_cycle_in_the_records_ends_as_untraceable_instead_of_looping() -> None:
    removals = [
        Removal(1, "replace", removed=(("a", 10),), added=(("b", 10),)),
        Removal(2, "replace", removed=(("b", 10),), added=(("a", 10),)),
    ]
    assert trace_fates([("a", 10)], {}, removals).untraceable == 10


def test_paths_are_compared_by_storage_key_and_counts_round_to_whole_rows() -> None:
    assert path_key("file:/w/t/a.parquet") == path_key("file:///w/t/a.parquet") == path_key("/w/t/a.parquet")
    assert path_key("s3://bucket/a") != path_key("s3://other/a")
    assert [rounded(Fraction(n, 2)) for n in (1, 2, 3, 4, 5)] == [1, 1, 2, 2, 3]


def test_fates_add_up_in_proportion_to_their_share() -> None:
    part = Fate(
        readable=Fraction(6), removed={(4, "delete"): Fraction(3)}, untraceable=Fraction(2), compacted=Fraction(5),
        held={"x": Fraction(6)},
    )  # fmt: skip
    total = Fate(readable=Fraction(1), removed={(4, "delete"): Fraction(1)}, untraceable=Fraction(1),
                 compacted=Fraction(1), held={"x": Fraction(1)})  # fmt: skip
    total.add(part, Fraction(1, 3))
    assert total == Fate(
        readable=Fraction(3), removed={(4, "delete"): Fraction(2)}, untraceable=Fraction(5, 3),
        compacted=Fraction(8, 3), held={"x": Fraction(3)},
    )  # fmt: skip
    total.add(Fate(held={"y": Fraction(9)}, removed={(5, "overwrite"): Fraction(9)}), Fraction(2, 3))
    assert total.held == {"x": Fraction(3), "y": Fraction(6)} and total.removed[(5, "overwrite")] == 6


def test_an_exact_compaction_lineage_splits_an_input_by_the_rows_each_output_holds() -> None:
    # inputs a (30 rows) and b (10) compacted into o1 (25: 20 of a, 5 of b) and o2 (15: 10 of a, 5 of b)
    lineage = {"a": [("o1", 20), ("o2", 10)], "b": [("o1", 5), ("o2", 5)]}
    live = {"o1": 25, "o2": 15}
    compaction = [
        Removal(9, "replace", removed=(("a", 30), ("b", 10)), added=(("o1", 25), ("o2", 15)), compaction_id="g")
    ]
    for removals in ([], compaction):  # the snapshot expired, or still retained
        a = trace_fates([("a", 30)], live, removals, lineage)
        b = trace_fates([("b", 10)], live, removals, lineage)
        assert (a.readable, a.compacted, a.held) == (30, 30, {"o1": 20, "o2": 10})
        assert (b.readable, b.compacted, b.held) == (10, 10, {"o1": 5, "o2": 5})
    # another engine's rewrite of a file that also has a lineage record is followed by its snapshot
    foreign = [Removal(9, "replace", removed=(("a", 30),), added=(("f", 30),))]
    assert trace_fates([("a", 30)], {"f": 30}, foreign, lineage).held == {"f": 30}
    # an output of a lineage record that was later deleted outright: removed by that snapshot
    deleted = [Removal(11, "delete", removed=(("o1", 25),), added=())]
    fate = trace_fates([("a", 30)], {"o2": 15}, deleted, lineage)
    assert (fate.readable, fate.removed) == (10, {(11, "delete"): 20})


def test_chained_icecommit_compactions_follow_each_outputs_rows_through_the_next_compaction() -> None:
    """A compaction's output compacted again: its rows are followed through the second
    lineage as well, each input keeping exactly its share."""
    chained = {"f": [("g", 10)], "g": [("h", 10)]}
    fate = trace_fates([("f", 10)], {"h": 10}, [], chained)
    assert (fate.readable, fate.compacted, fate.untraceable) == (10, 10, 0)

    merged = {"f1": [("g", 5)], "f2": [("g", 5)], "g": [("h", 10)]}  # two inputs into g, g into h
    first = trace_fates([("f1", 5)], {"h": 10}, [], merged)
    both = trace_fates([("f1", 5), ("f2", 5)], {"h": 10}, [], merged)
    assert (first.readable, first.held) == (5, {"h": 5})
    assert (both.readable, both.held) == (10, {"h": 10})


def test_removals_are_read_from_the_branchs_snapshots_that_removed_files(sqlite_catalog: SqlCatalog) -> None:
    import icecommit as ic
    from icecommit.catalog.removals import removals_of
    from icecommit.core.lineage import COMPACTION_ID_PROPERTY
    from tests.helpers import EVENTS_SCHEMA, compact, events, write_arrow

    table = ic.create_table(sqlite_catalog, "ns.lineage", EVENTS_SCHEMA, partition_by=["event"])
    committer = ic.GlobalCommitter(sqlite_catalog, table, job_id="j")
    for checkpoint_id in (1, 2):
        rows = events(checkpoint_id * 100, checkpoint_id * 100 + 30)
        committer.prepare(checkpoint_id, [write_arrow(committer.load_table(), rows, job_id="j",
                                                      checkpoint_id=checkpoint_id)])  # fmt: skip
        committer.commit(checkpoint_id)
    table = committer.load_table()
    table.manage_snapshots().create_branch(table.current_snapshot().snapshot_id, "before").commit()
    before = {path_key(f): n for f, n in _live(table).items()}
    compacted = compact(table, snapshot_properties={COMPACTION_ID_PROPERTY: "group-1"})
    table = committer.load_table()
    after_compaction = {path_key(f): n for f, n in _live(table).items()}
    some_event = table.scan(selected_fields=("event",)).to_arrow().column("event")[0].as_py()
    table.delete(EqualTo("event", some_event))  # whole files of one partition: a delete snapshot
    table = committer.load_table()
    deleted = table.current_snapshot()
    left = {path_key(f): n for f, n in _live(table).items()}
    removals = removals_of(table)
    assert [(r.snapshot_id, r.operation, r.compaction_id) for r in removals] == [
        (compacted, "replace", "group-1"),
        (deleted.snapshot_id, "delete", None),
    ]
    assert dict(removals[0].removed) == before and dict(removals[0].added) == after_compaction
    assert dict(removals[1].removed) == {p: n for p, n in after_compaction.items() if p not in left}
    assert removals[1].added == ()
    assert removals_of(table, branch="before") == []  # that branch never removed anything


def _live(table: Table) -> dict[str, int]:
    return {e.data_file.file_path: e.data_file.record_count for m in table.current_snapshot().manifests(table.io)
            for e in m.fetch_manifest_entry(table.io)}  # fmt: skip


def test_a_snapshot_without_a_summary_is_not_a_removal(sqlite_catalog: SqlCatalog) -> None:
    # the v1 spec makes a snapshot's summary optional: another writer's snapshot may have none
    import icecommit as ic
    from icecommit.catalog.removals import removals_of
    from tests.helpers import EVENTS_SCHEMA, events, write_arrow

    table = ic.create_table(sqlite_catalog, "ns.bare", EVENTS_SCHEMA, partition_by=["event"])
    committer = ic.GlobalCommitter(sqlite_catalog, table, job_id="j")
    committer.prepare(1, [write_arrow(committer.load_table(), events(0, 40), job_id="j", checkpoint_id=1)])
    committer.commit(1)
    table = committer.load_table()
    table.delete(EqualTo("event", next(v for v in table.scan().to_arrow().column("event").to_pylist() if v)))
    table = committer.load_table()
    assert [r.operation for r in removals_of(table)] == ["delete"]
    bare = table.metadata.model_copy(
        update={"snapshots": [s.model_copy(update={"summary": None}) for s in table.metadata.snapshots]}
    )
    assert removals_of(Table(table.name(), bare, table.metadata_location, table.io, sqlite_catalog)) == []


def test_removals_read_every_manifest_the_snapshot_wrote_in_any_order(
    sqlite_catalog: SqlCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    # pyiceberg lists a snapshot's own manifests first and a rewritten manifest's DELETED
    # entries before its EXISTING ones; Java Iceberg keeps a rewritten manifest's entries in
    # their old order, and a snapshot may add delete files too. The same removal either way.
    from types import SimpleNamespace

    from pyiceberg.manifest import ManifestContent, ManifestEntryStatus
    from pyiceberg.table.snapshots import Snapshot

    import icecommit as ic
    from icecommit.catalog.removals import removals_of
    from tests.helpers import EVENTS_SCHEMA, events, write_arrow

    table = ic.create_table(sqlite_catalog, "ns.java", EVENTS_SCHEMA, partition_by=["event"])
    committer = ic.GlobalCommitter(sqlite_catalog, table, job_id="j")
    committer.prepare(1, [write_arrow(committer.load_table(), events(0, 40), job_id="j", checkpoint_id=1)])
    committer.commit(1)
    table = committer.load_table()
    older = table.current_snapshot().snapshot_id
    table.delete(EqualTo("event", next(v for v in table.scan().to_arrow().column("event").to_pylist() if v)))
    table = committer.load_table()
    deleting = table.current_snapshot().snapshot_id

    def entry(status: str, path: str, records: int, snapshot_id: int) -> SimpleNamespace:
        return SimpleNamespace(status=ManifestEntryStatus[status], snapshot_id=snapshot_id,
                               data_file=SimpleNamespace(file_path=path, record_count=records))  # fmt: skip

    def manifest(content: ManifestContent, added_by: int, *entries: SimpleNamespace) -> SimpleNamespace:
        return SimpleNamespace(content=content, added_snapshot_id=added_by,
                               fetch_manifest_entry=lambda io, discard_deleted=True: list(entries))  # fmt: skip

    layout = [
        manifest(ManifestContent.DATA, older, entry("ADDED", "/w/carried.parquet", 5, older)),  # carried, listed first
        manifest(ManifestContent.DELETES, deleting, entry("ADDED", "/w/positions.parquet", 2, deleting)),
        manifest(ManifestContent.DATA, deleting, entry("EXISTING", "/w/kept.parquet", 4, older),
                 entry("DELETED", "/w/gone.parquet", 3, deleting), entry("ADDED", "/w/new.parquet", 1, deleting)),
    ]  # fmt: skip
    monkeypatch.setattr(Snapshot, "manifests", lambda self, io: layout if self.snapshot_id == deleting else [])
    [removal] = removals_of(table)
    assert (removal.snapshot_id, removal.operation) == (deleting, "delete")
    assert removal.removed == ((path_key("/w/gone.parquet"), 3),)
    assert removal.added == ((path_key("/w/new.parquet"), 1),)  # data files only, never the delete file


def test_shares_round_so_that_every_checkpoint_and_every_removal_adds_up() -> None:
    # five rows deleted from a compacted file that holds 15 rows of each of six checkpoints
    cells = {k: {"readable": Fraction(15) - Fraction(5, 6), (7, "row-level delete"): Fraction(5, 6)} for k in range(6)}
    whole = rounded_table(cells)
    assert all(sum(parts.values()) == 15 for parts in whole.values())
    assert sum(parts[(7, "row-level delete")] for parts in whole.values()) == 5
    assert sum(parts["readable"] for parts in whole.values()) == 85
    assert all(parts[(7, "row-level delete")] in (0, 1) for parts in whole.values())


def test_random_shares_round_to_exact_row_and_column_totals() -> None:
    rng = random.Random(20261127)
    for _ in range(300):
        rows, cols = rng.randint(1, 10), rng.randint(1, 5)
        # whole rows per cell, then fractions moved around rectangles: every row and column
        # total stays whole (as a checkpoint's rows and a removal's rows are)
        cells = {r: {c: Fraction(rng.randint(0, 30)) for c in range(cols)} for r in range(rows)}
        for _ in range(rng.randint(0, 30)):
            r1, r2, c1, c2 = rng.randrange(rows), rng.randrange(rows), rng.randrange(cols), rng.randrange(cols)
            if r1 == r2 or c1 == c2:
                continue
            delta = Fraction(rng.randint(1, 9), rng.randint(2, 11))
            delta = min(delta, cells[r1][c2], cells[r2][c1])
            cells[r1][c1] += delta
            cells[r1][c2] -= delta
            cells[r2][c1] -= delta
            cells[r2][c2] += delta
        whole = rounded_table(cells)
        for r, parts in cells.items():
            assert sum(whole[r].values()) == sum(parts.values())
            for c, value in parts.items():
                assert math.floor(value) <= whole[r][c] <= math.ceil(value)
        for c in range(cols):
            assert sum(whole[r][c] for r in cells) == sum(cells[r][c] for r in cells)


def test_a_large_table_keeps_every_row_and_each_groups_total_exact() -> None:
    rng = random.Random(11)
    cells = {}
    for row in range(300):  # 300 checkpoints by 1 readable and 100 removal columns: 30,300 cells
        parts = {"readable": Fraction(rng.randint(0, 5000), rng.choice([1, 3, 7, 11]))}
        parts |= {(snapshot, "row-level delete"): Fraction(rng.randint(0, 90), rng.choice([1, 3, 7])) for snapshot in
                  range(100)}  # fmt: skip
        total = sum(parts.values(), Fraction(0))
        parts["readable"] += math.ceil(total) - total  # a checkpoint's rows are whole
        cells[row] = parts
    whole = rounded_table(cells, group=lambda col: col if col == "readable" else "removed")
    for row, parts in cells.items():
        assert sum(whole[row].values()) == rounded(sum(parts.values(), Fraction(0)))
        assert all(whole[row][col] in (math.floor(v), math.ceil(v)) for col, v in parts.items())
    readable = sum(parts["readable"] for parts in cells.values())
    assert sum(w["readable"] for w in whole.values()) == rounded(readable)
    removed = sum(sum(v for c, v in parts.items() if c != "readable") for parts in cells.values())
    assert sum(sum(n for c, n in w.items() if c != "readable") for w in whole.values()) == rounded(removed)
    # the removal columns miss their own rounded totals only by what rounding each of them
    # apart cannot give back (their rounded totals need not add up to the group's): never
    # one column over while another is under
    misses = [
        sum(w[(s, "row-level delete")] for w in whole.values())
        - rounded(sum(parts[(s, "row-level delete")] for parts in cells.values()))
        for s in range(100)
    ]
    assert all(m <= 0 for m in misses) or all(m >= 0 for m in misses), misses
