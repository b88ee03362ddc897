"""A checkpoint committed to another branch than main is exactly once on that branch: a
job committing to ``audit`` dies at each step (after staging, before the commit attempt,
once the catalog accepted it, after the commit) or loses the catalog's answer, then
recovers and replays; every checkpoint is on ``audit`` once, ``main`` is untouched, and the
job's high-water mark is the branch's own property, not main's."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import pytest
from pyiceberg.catalog.sql import SqlCatalog

import icecommit as ic
from icecommit.committer import RetryPolicy
from icecommit.core import ancestry
from icecommit.core.ancestry import MAIN_BRANCH
from tests.committer.crash_driver import InjectedCrash
from tests.fakes import ScriptedCatalog
from tests.helpers import EVENTS_SCHEMA, events, write_arrow

FAST = RetryPolicy(max_attempts=5, max_seconds=30, min_wait_s=0.001, max_wait_s=0.01)
BRANCH, JOB, CHECKPOINTS, CRASHING = "audit", "A", 3, 2
#: The committer's fault points a crash is injected at (``catalog-accepted`` is the
#: catalog's: it committed, and the process died before the answer arrived).
FAULT_POINTS = ("after-stage", "before-commit-attempt", "after-commit")


def _rows(checkpoint_id: int) -> list[int]:
    return list(range(checkpoint_id * 100, checkpoint_id * 100 + 10))


def _branched(catalog: SqlCatalog) -> tuple[str, int]:
    """Table ``events`` with one checkpoint of job ``m`` on main and the branch ``audit``
    made there; the table's name and main's head."""
    name = f"{catalog.name}.events"
    ic.create_table(catalog, name, EVENTS_SCHEMA, partition_by=["event"])
    main = ic.GlobalCommitter(catalog, name, job_id="m", retry_policy=FAST)
    main.prepare(1, [write_arrow(main.load_table(), events(0, 10), job_id="m", checkpoint_id=1)])
    head = main.commit(1).snapshot_id
    assert head is not None
    main.load_table().manage_snapshots().create_branch(head, BRANCH).commit()
    return name, head


def _run(catalog: SqlCatalog, name: str, fault: Callable[[str, int], None] | None = None) -> None:
    """The job on ``audit``: recover, then write, prepare and commit each checkpoint that is
    not in yet (a restarted job replays from its first checkpoint, as a streaming query does)."""
    committer = ic.GlobalCommitter(
        catalog, name, job_id=JOB, branch=BRANCH, retry_policy=FAST, fault=fault, sleep=lambda _: None
    )
    committer.recover()
    for checkpoint_id in range(1, CHECKPOINTS + 1):
        state = committer.store.get(JOB, committer.table_name, checkpoint_id)
        if state is not None and state.committed:
            continue
        if state is None and not committer.is_committed(checkpoint_id):
            data = events(checkpoint_id * 100, checkpoint_id * 100 + 10)
            results = [write_arrow(committer.load_table(), data, job_id=JOB, checkpoint_id=checkpoint_id)]
            committer.prepare(checkpoint_id, results)
        committer.commit(checkpoint_id)


def _crash_at(point: str) -> Callable[[str, int], None]:
    def fault(where: str, checkpoint_id: int) -> None:
        if where == point and checkpoint_id == CRASHING:
            raise InjectedCrash(f"{where} of checkpoint {checkpoint_id}")

    return fault


def assert_once_on_the_branch(catalog: SqlCatalog, name: str, main_head: int) -> None:
    metadata = catalog.load_table(name).metadata
    keyed = Counter(key for s in metadata.snapshots if (key := ancestry.checkpoint_of(s)) is not None and key[0] == JOB)
    assert keyed == Counter((JOB, c) for c in range(1, CHECKPOINTS + 1)), "one snapshot per checkpoint, in all"
    on_branch = [c.checkpoint_id for c in ancestry.committed_checkpoints(metadata, BRANCH, JOB)]
    assert on_branch == list(range(CHECKPOINTS, 0, -1))
    head = ancestry.branch_head(metadata, BRANCH)
    assert head is not None
    table = catalog.load_table(name)
    ids = Counter(table.scan(snapshot_id=head.snapshot_id, selected_fields=("id",)).to_arrow()["id"].to_pylist())
    expected = Counter([*range(10), *(i for c in range(1, CHECKPOINTS + 1) for i in _rows(c))])
    assert ids == expected, f"lost {expected - ids}, duplicated {ids - expected}"
    # main untouched: its head, and no checkpoint of the job in its ancestry
    assert metadata.refs[MAIN_BRANCH].snapshot_id == main_head
    assert ancestry.committed_checkpoints(metadata, MAIN_BRANCH, JOB) == []
    # the job's high-water mark is the branch's property; main's is not set
    properties = metadata.properties
    assert properties[ancestry.job_checkpoint_property(JOB, branch=BRANCH)] == str(CHECKPOINTS)
    assert ancestry.job_checkpoint_property(JOB) not in properties
    assert ancestry.recorded_highest_checkpoints(properties, branch=BRANCH) == {JOB: CHECKPOINTS}
    assert ancestry.recorded_highest_checkpoints(properties) == {"m": 1}
    committer = ic.GlobalCommitter(catalog, name, job_id=JOB, branch=BRANCH)
    states = committer.store.list(committer.table_name, job_id=JOB)
    assert [(s.checkpoint_id, s.status) for s in states] == [(c, "committed") for c in range(1, CHECKPOINTS + 1)]
    assert ic.reconcile(catalog, name, job_id=JOB, branch=BRANCH).ok


@pytest.mark.parametrize("point", FAULT_POINTS)
def test_a_crash_at_each_step_of_a_commit_to_a_branch_then_replayed(catalog: SqlCatalog, point: str) -> None:
    name, main_head = _branched(catalog)
    with pytest.raises(InjectedCrash):
        _run(catalog, name, _crash_at(point))
    _run(catalog, name)
    assert_once_on_the_branch(catalog, name, main_head)
    before = catalog.load_table(name).metadata.snapshots
    _run(catalog, name)  # replayed once more: nothing changes
    assert catalog.load_table(name).metadata.snapshots == before


def test_a_crash_once_the_catalog_accepted_a_commit_to_a_branch(scripted_catalog: ScriptedCatalog) -> None:
    name, main_head = _branched(scripted_catalog)

    def die() -> None:
        raise InjectedCrash("the catalog committed; the process died before its answer")

    def die_at_the_crashing_checkpoint(where: str, checkpoint_id: int) -> None:
        if where == "before-commit-attempt" and checkpoint_id == CRASHING:
            scripted_catalog.after.append(die)  # the attempt's own catalog commit, next

    with pytest.raises(InjectedCrash):
        _run(scripted_catalog, name, die_at_the_crashing_checkpoint)
    landed = ancestry.find_checkpoint(scripted_catalog.load_table(name).metadata, JOB, CRASHING, BRANCH)
    assert landed is not None  # it landed; the state still says prepared
    _run(scripted_catalog, name)
    assert_once_on_the_branch(scripted_catalog, name, main_head)


def test_a_lost_answer_to_a_commit_to_a_branch_is_resolved_on_that_branch(scripted_catalog: ScriptedCatalog) -> None:
    name, main_head = _branched(scripted_catalog)

    def lose_the_answer() -> None:
        raise ConnectionError("connection reset after the commit was sent")

    def lose_it_at_the_crashing_checkpoint(where: str, checkpoint_id: int) -> None:
        if where == "before-commit-attempt" and checkpoint_id == CRASHING:
            scripted_catalog.after.append(lose_the_answer)

    _run(scripted_catalog, name, lose_it_at_the_crashing_checkpoint)  # resolved by the branch's ancestry
    assert_once_on_the_branch(scripted_catalog, name, main_head)
    _run(scripted_catalog, name)  # and a replay commits nothing again
    assert_once_on_the_branch(scripted_catalog, name, main_head)
