"""Two compaction groups can list one input file (one rolled back or crashed, then another):
the retained snapshot that removed the file names its group, and that group's lineage is
the one followed."""

from __future__ import annotations

from icecommit.core.lineage import Removal, trace_fates

#: a: 10 rows; group R (recorded committed, since rolled back) wrote them to r1; group T (which
#: landed, not yet recorded) to t1 and t2. The store prefers R's lineage for a.
PREFERRED = {"a": [("r1", 10)]}
GROUPS = {"R": {"a": [("r1", 10)]}, "T": {"a": [("t1", 6), ("t2", 4)]}}
LIVE = {"t1": 6, "t2": 4}


def _removal(group: str | None) -> list[Removal]:
    return [Removal(7, "replace", removed=(("a", 10),), added=(("t1", 6), ("t2", 4)), compaction_id=group)]


def test_the_group_the_removing_snapshot_names_is_followed() -> None:
    fate = trace_fates([("a", 10)], LIVE, _removal("T"), PREFERRED, GROUPS)
    assert (fate.readable, fate.compacted, fate.untraceable, fate.held) == (10, 10, 0, {"t1": 6, "t2": 4})
    # without the groups, the preferred lineage leads to R's file, which is gone
    blind = trace_fates([("a", 10)], LIVE, _removal("T"), PREFERRED)
    assert (blind.readable, blind.untraceable) == (0, 10)


def test_a_group_the_state_does_not_know_is_followed_through_its_snapshot() -> None:
    # not through the preferred lineage, which is another group's: the snapshot's own files
    fate = trace_fates([("a", 10)], LIVE, _removal("lost"), PREFERRED, GROUPS)
    assert (fate.readable, fate.untraceable, fate.held) == (10, 0, {"t1": 6, "t2": 4})
    # a caller without the groups follows the preferred lineage, as before they were kept
    assert trace_fates([("a", 10)], {"r1": 10}, _removal("lost"), PREFERRED).held == {"r1": 10}


def test_a_known_group_that_does_not_list_the_file_is_followed_through_its_snapshot() -> None:
    # the snapshot's own added files, in proportion (a conserving replace)
    fate = trace_fates([("a", 10)], LIVE, _removal("R2"), PREFERRED, {**GROUPS, "R2": {"b": [("x", 3)]}})
    assert (fate.readable, fate.untraceable, fate.held) == (10, 0, {"t1": 6, "t2": 4})


def test_with_the_removing_snapshot_expired_the_preferred_lineage_is_followed() -> None:
    fate = trace_fates([("a", 10)], {"r1": 10}, [], PREFERRED, GROUPS)
    assert (fate.readable, fate.held) == (10, {"r1": 10})


def test_each_output_shares_its_rows_among_every_input_of_its_group() -> None:
    # T wrote a (6) and b (4) into t1; the store prefers S's lineage for b
    groups = {"T": {"a": [("t1", 6)], "b": [("t1", 4)]}, "S": {"b": [("s1", 4)]}}
    preferred = {"a": [("t1", 6)], "b": [("s1", 4)]}
    removal = [Removal(7, "replace", removed=(("a", 6), ("b", 4)), added=(("t1", 10),), compaction_id="T")]
    both = trace_fates([("a", 6), ("b", 4)], {"t1": 10}, removal, preferred, groups)
    assert (both.readable, both.held) == (10, {"t1": 10})
    only_a = trace_fates([("a", 6)], {"t1": 10}, removal, preferred, groups)
    assert (only_a.readable, only_a.held) == (6, {"t1": 6})


def test_the_named_groups_lineage_is_exact_where_the_snapshots_shares_would_not_be() -> None:
    # T rewrote a (10 rows) and b (10) into t1 (all of a, 2 of b) and t2 (8 of b): the
    # snapshot alone would share each input's rows among t1 and t2 in proportion
    groups = {"T": {"a": [("t1", 10)], "b": [("t1", 2), ("t2", 8)]}}
    removal = [Removal(7, "replace", removed=(("a", 10), ("b", 10)), added=(("t1", 12), ("t2", 8)), compaction_id="T")]
    fate = trace_fates([("a", 10)], {"t1": 12, "t2": 8}, removal, {}, groups)
    assert fate.held == {"t1": 10}
    assert trace_fates([("a", 10)], {"t1": 12, "t2": 8}, removal, {}, {}).held == {"t1": 6, "t2": 4}
