"""The compaction tables: a group's lineage recorded with it, gone when it is aborted, and
a committed group's lineage preferred where a crashed one listed the same input."""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta, timezone

from hypothesis import given
from hypothesis import strategies as st
from pyiceberg.catalog.sql import SqlCatalog

from icecommit.maintenance.rewrite import _rewritten
from icecommit.state import state_engine, state_uri
from icecommit.state.compactions import CompactionStore
from tests.conftest import unique_table


def test_lineage_follows_the_groups_fate(catalog: SqlCatalog) -> None:
    table = unique_table()
    ticks = iter(datetime(2026, 1, 1, tzinfo=timezone.utc) + timedelta(seconds=i) for i in range(10))
    store = CompactionStore(state_engine(state_uri(catalog)), clock=lambda: next(ticks))
    store.prepare(table, "crashed", [("a", "x1", 5), ("b", "x1", 5)], input_files=2, output_files=1)
    store.prepare(table, "aborted", [("c", "y1", 3)], input_files=1, output_files=1)
    store.aborted("aborted")
    store.prepare(table, "landed", [("a", "z1", 4), ("a", "z2", 1), ("d", "z2", 2)], input_files=2, output_files=2)
    store.committed("landed", 42)
    lineage = store.lineage(table)
    assert lineage == {"a": [("z1", 4), ("z2", 1)], "b": [("x1", 5)], "d": [("z2", 2)]}
    assert [(g.compaction_id, g.status, g.snapshot_id, g.records) for g in store.groups(table)] == [
        ("crashed", "prepared", None, 10), ("aborted", "aborted", None, 3), ("landed", "committed", 42, 7),
    ]  # fmt: skip
    assert store.lineage(unique_table()) == {}  # per table


@given(
    st.lists(st.integers(min_value=1, max_value=50), min_size=1, max_size=12),
    st.lists(st.integers(min_value=1, max_value=50), min_size=1, max_size=12),
)
def test_consecutive_runs_are_shared_exactly(inputs: list[int], cuts: list[int]) -> None:
    """For any input sizes and any way of cutting their rows into outputs, every row of every
    input is assigned to exactly one output, in order."""
    total = sum(inputs)
    outputs, left = [], total
    for cut in cuts:
        if left == 0:
            break
        outputs.append(min(cut, left))
        left -= outputs[-1]
    if left:
        outputs.append(left)
    ins = [(f"/d/in{i}", n) for i, n in enumerate(inputs)]
    outs = [(f"/d/out{i}", n) for i, n in enumerate(outputs)]
    edges = list(_rewritten(ins, outs))
    per_input, per_output = Counter(), Counter()
    for i, o, n in edges:
        assert n > 0
        per_input[i] += n
        per_output[o] += n
    assert [per_input[f"file:///d/in{i}"] for i in range(len(inputs))] == inputs
    assert [per_output[f"file:///d/out{i}"] for i in range(len(outputs))] == outputs
    order = [(int(i.rsplit("in", 1)[1]), int(o.rsplit("out", 1)[1])) for i, o, _ in edges]
    assert order == sorted(order)  # runs stay in order on both sides


def test_runs_that_do_not_add_up_abort() -> None:
    assert _rewritten([("/a", 3)], [("/b", 2)]) == "the rewrite read 3 rows and wrote 2; the group is not committed"
