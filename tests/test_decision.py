"""The checkpoint decision as a table of cases: no Spark, no catalog, no database."""

from __future__ import annotations

import pytest

from icecommit.core.decision import Action, StateView, TableView, decide

IN = TableView(landed_snapshot_id=11, highest_committed=7)
OFF = TableView(off_branch_snapshot_id=12, highest_committed=7)
EXPIRED = TableView(highest_committed=7, lineage_complete=False)  # job committed up to 7, gaps in the lineage
COMPLETE = TableView(highest_committed=7, lineage_complete=True)  # nothing expired: absence is proof
NEW_TABLE = TableView()
LIVE = TableView(highest_committed=7, lineage_complete=False, files_live=True)  # expired; its files in the table
GONE = TableView(highest_committed=7, lineage_complete=False, files_live=False)  # expired; its files gone

CASES = [
    # (checkpoint, state, table, recommit) -> action
    ("in the ancestry", 7, StateView("committed", 11), IN, False, Action.ALREADY_IN),
    ("landed, job died before recording it", 7, StateView("prepared"), IN, False, Action.ALREADY_IN),
    ("in the ancestry beats a stale rolled-back row", 7, StateView("rolled-back", 11), IN, False, Action.ALREADY_IN),
    ("abandoned", 9, StateView("abandoned"), NEW_TABLE, False, Action.ABANDONED),
    ("abandoned, even if asked to recommit", 5, StateView("abandoned"), EXPIRED, True, Action.ABANDONED),
    ("committed empty", 5, StateView("committed", None), COMPLETE, False, Action.EMPTY),
    ("held on its audit branch", 5, StateView("held", 12), OFF, False, Action.HELD),
    ("held, landed on the branch since (published)", 7, StateView("held", 12), IN, False, Action.ALREADY_IN),
    # recorded when its snapshot was already gone and its files rewritten (found by the soak)
    (
        "another streaming query's batch",
        3,
        StateView("committed", 11, query_id="q-old"),
        IN,
        False,
        Action.OTHER_QUERY,
    ),
    (
        "committed with files, snapshot unknown",
        5,
        StateView("committed", None, has_files=True),
        EXPIRED,
        False,
        Action.ALREADY_IN,
    ),
    ("recorded rolled back", 5, StateView("rolled-back", 10), EXPIRED, False, Action.ROLLED_BACK),
    ("recorded rolled back, recommit asked", 5, StateView("rolled-back", 10), EXPIRED, True, Action.RECOMMIT),
    ("off the branch (another tool's rollback)", 7, StateView("committed", 12), OFF, False, Action.ROLLED_BACK),
    ("off the branch, state lost", 7, StateView(), OFF, False, Action.ROLLED_BACK),
    ("off the branch, state lost, recommit asked", 7, StateView(), OFF, True, Action.ROLLED_BACK),
    ("committed, snapshot expired", 3, StateView("committed", 10), EXPIRED, False, Action.ALREADY_IN),
    ("prepared at or below the mark, expired", 7, StateView("prepared"), EXPIRED, False, Action.ALREADY_IN),
    ("committed, complete lineage lacks it", 3, StateView("committed", 10), COMPLETE, False, Action.ROLLED_BACK),
    ("prepared below the mark, complete lineage", 6, StateView("prepared"), COMPLETE, False, Action.ROLLED_BACK),
    (
        "files live beat a complete lineage",
        3,
        StateView("committed", 10),
        TableView(highest_committed=7, files_live=True),  # lineage complete by default
        False,
        Action.ALREADY_IN,
    ),
    ("committed, expired, files live", 3, StateView("committed", 10), LIVE, False, Action.ALREADY_IN),
    ("committed, expired, files gone", 3, StateView("committed", 10), GONE, False, Action.ROLLED_BACK),
    ("committed, expired, files gone, recommit", 3, StateView("committed", 10), GONE, True, Action.RECOMMIT),
    ("stale rolled-back row, re-commit landed", 3, StateView("rolled-back", 10), LIVE, True, Action.ALREADY_IN),
    ("prepared at the mark, files gone", 7, StateView("prepared"), GONE, False, Action.ROLLED_BACK),
    ("prepared at the mark, files live", 7, StateView("prepared"), LIVE, False, Action.ALREADY_IN),
    ("prepared above the mark", 8, StateView("prepared"), EXPIRED, False, Action.COMMIT),
    ("prepared, first checkpoint of the job", 0, StateView("prepared"), NEW_TABLE, False, Action.COMMIT),
    ("new, above the mark", 8, StateView(), COMPLETE, False, Action.WRITE),
    ("new, on a new table", 0, StateView(), NEW_TABLE, False, Action.WRITE),
    ("new, at the mark", 7, StateView(), EXPIRED, False, Action.OUT_OF_ORDER),
    ("new, below the mark (a reused job id)", 0, StateView(), COMPLETE, False, Action.OUT_OF_ORDER),
]


@pytest.mark.parametrize(
    ("checkpoint", "state", "table", "recommit", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_decide(checkpoint: int, state: StateView, table: TableView, recommit: bool, expected: Action) -> None:
    assert decide(checkpoint, state, table, recommit=recommit, query_id="q-new").action is expected


def test_every_action_is_reachable() -> None:
    assert {c[-1] for c in CASES} == set(Action)


def test_a_batch_of_another_query_is_refused_and_recovery_is_let_through() -> None:
    landed = TableView(landed_snapshot_id=11, highest_committed=3)
    mine = StateView("committed", 11, has_files=True, query_id="q-old")
    assert decide(3, mine, landed, query_id="q-new").action is Action.OTHER_QUERY
    assert decide(3, mine, landed, query_id="q-old").action is Action.ALREADY_IN  # a restart of the same query
    assert decide(3, mine, landed).action is Action.ALREADY_IN  # recovery and batch writes do not compare
    batch = StateView("committed", 11, has_files=True)  # written by ic.write, no query
    assert decide(3, batch, landed, query_id="q-new").action is Action.ALREADY_IN


# Each case's whole decision: the snapshot it concerns and the reason, which is what the
# logs and the refusal errors show an operator (which fact decided, and which snapshot).
FULL = {
    "in the ancestry": (11, "in the branch's ancestry"),
    "landed, job died before recording it": (11, "in the branch's ancestry"),
    "in the ancestry beats a stale rolled-back row": (11, "in the branch's ancestry"),
    "abandoned": (None, "abandoned by an operator"),
    "abandoned, even if asked to recommit": (None, "abandoned by an operator"),
    "committed empty": (None, "committed with no data files"),
    "held on its audit branch": (12, "held on the job's audit branch until it is published"),
    "held, landed on the branch since (published)": (11, "in the branch's ancestry"),
    "another streaming query's batch": (11, "batch of streaming query q-old"),
    "committed with files, snapshot unknown": (None, "committed; its snapshot was expired since"),
    "recorded rolled back": (10, "a rollback removed it (recorded)"),
    "recorded rolled back, recommit asked": (10, "a rollback removed it (recorded)"),
    "off the branch (another tool's rollback)": (12, "its snapshot is no longer an ancestor of the branch"),
    "off the branch, state lost": (12, "its snapshot is no longer an ancestor of the branch"),
    "off the branch, state lost, recommit asked": (12, "its snapshot is no longer an ancestor of the branch"),
    "committed, snapshot expired": (10, "committed; its snapshot was expired since"),
    "prepared at or below the mark, expired": (None, "committed; its snapshot was expired since"),
    "committed, complete lineage lacks it": (10, "it landed once and the branch's complete lineage lacks it"),
    "prepared below the mark, complete lineage": (None, "it landed once and the branch's complete lineage lacks it"),
    "files live beat a complete lineage": (10, "its snapshot was expired; its files are in the table"),
    "committed, expired, files live": (10, "its snapshot was expired; its files are in the table"),
    "committed, expired, files gone": (10, "it landed once and its files are no longer in the table"),
    "committed, expired, files gone, recommit": (10, "it landed once and its files are no longer in the table"),
    "stale rolled-back row, re-commit landed": (10, "its snapshot was expired; its files are in the table"),
    "prepared at the mark, files gone": (None, "it landed once and its files are no longer in the table"),
    "prepared at the mark, files live": (None, "its snapshot was expired; its files are in the table"),
    "prepared above the mark": (None, "prepared, not in the table"),
    "prepared, first checkpoint of the job": (None, "prepared, not in the table"),
    "new, above the mark": (None, "new"),
    "new, on a new table": (None, "new"),
    "new, at the mark": (None, "at or below the job's highest committed checkpoint 7"),
    "new, below the mark (a reused job id)": (None, "at or below the job's highest committed checkpoint 7"),
}


def test_every_case_has_its_whole_decision_written_down() -> None:
    assert set(FULL) == {c[0] for c in CASES}


@pytest.mark.parametrize(
    ("name", "checkpoint", "state", "table", "recommit", "expected"), CASES, ids=[c[0] for c in CASES]
)
def test_decide_names_the_snapshot_and_the_fact_that_decided(
    name: str, checkpoint: int, state: StateView, table: TableView, recommit: bool, expected: Action
) -> None:
    # "another streaming query's batch" is offered by q-new; q-old prepared it
    decision = decide(checkpoint, state, table, recommit=recommit, query_id="q-new")
    assert (decision.action, decision.snapshot_id, decision.reason) == (expected, *FULL[name])


@pytest.mark.parametrize("name", [c[0] for c in CASES if c[4] is False])
def test_recommit_is_off_unless_asked(name: str) -> None:
    _, checkpoint, state, table, _, expected = next(c for c in CASES if c[0] == name)
    assert decide(checkpoint, state, table, query_id="q-new").action is expected
