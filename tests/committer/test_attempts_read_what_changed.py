"""Each commit attempt after the first reads only what changed since the planned head: its
(job, checkpoint) key among the new snapshots, on the branch (it landed: an earlier
attempt's answer was lost) or off it (it landed and a rollback took it off: refused), and
the job's high-water mark; where those cannot tell, it plans again."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import CommitFailedException
from sqlalchemy.exc import OperationalError

import icecommit as ic
import icecommit.committer.committer as committer_module
from icecommit.committer import RetryPolicy
from icecommit.core import ancestry
from icecommit.errors import (
    CheckpointRefusedError,
    CheckpointRolledBackError,
    CommitStateUnknownError,
    InvalidArgumentError,
    StateDatabaseUnavailableError,
    StreamingQueryMismatchError,
)
from icecommit.state.database import shown_uri
from icecommit.writers import write_arrow
from tests.fakes import Counted, Crash, ScriptedCatalog, concurrent_append, crash_at
from tests.helpers import EVENTS_SCHEMA, events

FAST = RetryPolicy(max_attempts=4, max_seconds=60, min_wait_s=0.001, max_wait_s=0.002)


def _committer(catalog: SqlCatalog, name: str) -> ic.GlobalCommitter:
    return ic.GlobalCommitter(catalog, name, job_id="A", retry_policy=FAST, sleep=lambda _s: None)


def _prepare(committer: ic.GlobalCommitter, checkpoint_id: int) -> None:
    rows = events(checkpoint_id * 100, checkpoint_id * 100 + 10)
    committer.prepare(
        checkpoint_id, [write_arrow(committer.load_table(), rows, job_id="A", checkpoint_id=checkpoint_id)]
    )


def _prepared_table(catalog: SqlCatalog) -> tuple[str, ic.GlobalCommitter]:
    """A new table whose job ``A`` has prepared checkpoint 1."""
    name = f"{catalog.name}.events"
    ic.create_table(catalog, name, EVENTS_SCHEMA, partition_by=["event"])
    committer = _committer(catalog, name)
    _prepare(committer, 1)
    return name, committer


def _rows(catalog: SqlCatalog, name: str) -> int:
    return catalog.load_table(name).scan().to_arrow().num_rows


LOST = "the answer was lost; the catalog says it conflicted"


def _answer_lost() -> None:
    """A catalog-commit hook: the commit landed, and the catalog's answer says it conflicted."""
    raise CommitFailedException(LOST)


def _another_process(catalog: SqlCatalog, step: Callable[[SqlCatalog], object], *, then: str) -> Callable[[], None]:
    """A catalog-commit hook: another process does ``step`` through a catalog of its own,
    then the attempt loses its compare-and-swap with ``then``."""

    def hook() -> None:
        other = SqlCatalog(catalog.name, **catalog.properties)
        try:
            step(other)
        finally:
            other.engine.dispose()
        raise CommitFailedException(then)

    return hook


def _rolls_back(name: str, snapshot_id: int | None) -> Callable[[SqlCatalog], object]:
    """Another process's rollback of ``name`` to ``snapshot_id``."""
    return lambda other: other.load_table(name).manage_snapshots().rollback_to_snapshot(snapshot_id).commit()


def _checkpoint_2_rolled_back(catalog: SqlCatalog) -> tuple[str, ic.GlobalCommitter, int | None]:
    """Checkpoints 1 and 2 of job A committed, then a rollback to 1 that the committer has
    recorded (its commit of 2 refused): 2 waits for a re-commit. Returns 1's snapshot too."""
    name, committer = _prepared_table(catalog)
    committer.commit(1)
    first = catalog.load_table(name).metadata.current_snapshot_id
    _prepare(committer, 2)
    committer.commit(2)
    catalog.load_table(name).manage_snapshots().rollback_to_snapshot(first).commit()
    with pytest.raises(CheckpointRolledBackError):
        committer.commit(2)
    return name, committer, first


def test_a_rollback_that_lands_between_two_attempts_is_refused(scripted_catalog: ScriptedCatalog) -> None:
    catalog = scripted_catalog
    name, committer = _prepared_table(catalog)
    committer.commit(1)
    _prepare(committer, 2)
    before = catalog.load_table(name).metadata.current_snapshot_id

    catalog.after = [_another_process(catalog, _rolls_back(name, before), then=LOST)]  # landed, rolled back
    catalog.calls = 0
    with pytest.raises(CheckpointRolledBackError) as refused:
        committer.commit(2)
    assert isinstance(refused.value, CheckpointRefusedError)
    table = catalog.load_table(name)
    off_branch = [s for s in table.metadata.snapshots if ancestry.checkpoint_of(s) == ("A", 2)]
    assert refused.value.snapshot_id == off_branch[0].snapshot_id
    assert catalog.calls == 1  # the second attempt was never sent
    assert table.metadata.current_snapshot_id == before and _rows(catalog, name) == 10


def test_an_attempt_whose_answer_was_lost_is_found_by_its_key_and_never_sent_again(
    scripted_catalog: ScriptedCatalog,
) -> None:
    catalog = scripted_catalog
    name, committer = _prepared_table(catalog)

    catalog.after = [_answer_lost]
    catalog.calls = 0
    result = committer.commit(1)
    assert (result.status, result.attempts, result.retries) == ("already-committed", 1, 1)
    assert catalog.calls == 1 and _rows(catalog, name) == 10


def test_a_conflict_with_another_writer_retries_on_the_new_head_and_commits_once(
    scripted_catalog: ScriptedCatalog,
) -> None:
    catalog = scripted_catalog
    name, committer = _prepared_table(catalog)
    catalog.before = [concurrent_append(catalog, name)]
    result = committer.commit(1)
    assert (result.status, result.attempts, result.retries) == ("committed", 2, 1)
    assert _rows(catalog, name) == 11
    assert [c.checkpoint_id for c in ancestry.committed_checkpoints(catalog.load_table(name).metadata)] == [1]


def test_an_answer_lost_and_its_snapshot_expired_before_the_retry_is_found_by_the_high_water_mark(
    scripted_catalog: ScriptedCatalog,
) -> None:
    """The retry finds no key among the new snapshots (its snapshot is gone), but the job's
    high-water mark moved: it plans again, and the checkpoint's live files say it is in."""
    catalog = scripted_catalog
    name, committer = _prepared_table(catalog)
    landed: list[int] = []

    def landed_then_expired_and_the_answer_lost() -> None:
        other = SqlCatalog(catalog.name, **catalog.properties)
        table = other.load_table(name)
        landed.append(table.metadata.current_snapshot_id or -1)
        table.append(events(10_000, 10_001))  # another writer, so that ours is no longer the head
        other.load_table(name).maintenance.expire_snapshots().by_id(landed[0]).commit()
        other.engine.dispose()
        raise CommitFailedException("the answer was lost; the catalog says it conflicted")

    catalog.after = [landed_then_expired_and_the_answer_lost]
    result = committer.commit(1)
    assert (result.status, result.snapshot_id) == ("already-committed", landed[0])
    assert _rows(catalog, name) == 11  # its 10 rows once, and the other writer's one
    assert all(s.snapshot_id != landed[0] for s in catalog.load_table(name).metadata.snapshots)


def test_an_unknown_outcome_of_a_checkpoint_names_it_and_deletes_nothing(scripted_catalog: ScriptedCatalog) -> None:
    catalog = scripted_catalog
    name, committer = _prepared_table(catalog)

    def no_answer() -> None:
        raise TimeoutError("the catalog did not answer")

    catalog.before = [no_answer]
    with pytest.raises(CommitStateUnknownError) as unknown:
        committer.commit(1)
    assert (unknown.value.table, unknown.value.checkpoint_id) == (name, 1)
    assert str(unknown.value).startswith(f"checkpoint 1 of job 'A' in {name}: commit outcome unknown")
    assert "run recover()" in str(unknown.value)
    state = committer.store.get("A", name, 1)
    assert state is not None and (state.status, state.unknown_outcomes) == ("prepared", 1)
    assert committer.recover()[0].status == "committed" and _rows(catalog, name) == 10


def test_an_empty_checkpoint_is_recorded_with_no_attempt(catalog: SqlCatalog) -> None:
    name = f"{catalog.name}.events"
    ic.create_table(catalog, name, EVENTS_SCHEMA)
    committer = _committer(catalog, name)
    committer.prepare(1, [write_arrow(committer.load_table(), events(0, 0), job_id="A", checkpoint_id=1)])
    result = committer.commit(1)
    state = committer.store.get("A", name, 1)
    assert result.status == "empty" and state is not None
    assert (state.status, state.snapshot_id, state.attempts, state.retries) == ("committed", None, 0, 0)


# -- what each attempt reads: the plan's one decision, and a second only where the key
# -- check and the high-water mark cannot tell


def _lose_once() -> None:
    raise CommitFailedException("another commit won the compare-and-swap")


def test_a_retry_that_finds_its_key_decides_nothing_more(
    scripted_catalog: ScriptedCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    catalog = scripted_catalog
    _name, committer = _prepared_table(catalog)

    catalog.after = [_answer_lost]
    counted = Counted(catalog, monkeypatch)
    assert committer.commit(1).status == "already-committed"
    assert counted.decisions == 1  # commit() plans it once; the retry finds its key among the new snapshots


def test_a_retry_after_another_writer_decides_nothing_more_and_a_conflict_that_changed_nothing_reads_no_lineage(
    scripted_catalog: ScriptedCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    catalog = scripted_catalog
    name, committer = _prepared_table(catalog)
    committer.commit(1)  # the job's high-water mark is 1 from here on
    _prepare(committer, 2)
    catalog.before = [concurrent_append(catalog, name)]
    counted = Counted(catalog, monkeypatch)
    assert committer.commit(2).status == "committed"
    assert counted.decisions == 1  # the head moved, the planned head is still on the branch, the mark is the same
    _prepare(committer, 3)
    catalog.before = [_lose_once]  # lost, and nothing changed in the table
    counted.reset()
    assert committer.commit(3).status == "committed"
    assert (counted.decisions, counted.walks) == (1, 1)  # the plan's one walk, none for the retry


def test_a_rollback_between_two_attempts_is_refused_without_a_second_decision(
    scripted_catalog: ScriptedCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    catalog = scripted_catalog
    name, committer = _prepared_table(catalog)
    committer.commit(1)
    _prepare(committer, 2)
    before = catalog.load_table(name).metadata.current_snapshot_id

    catalog.after = [_another_process(catalog, _rolls_back(name, before), then=LOST)]  # landed, rolled back
    counted = Counted(catalog, monkeypatch)
    with pytest.raises(CheckpointRolledBackError):
        committer.commit(2)
    assert counted.decisions == 1  # its key off the branch among the new snapshots says it all


def test_a_retry_whose_planned_head_a_rollback_took_off_decides_again(
    scripted_catalog: ScriptedCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    catalog = scripted_catalog
    name, committer = _prepared_table(catalog)
    committer.commit(1)
    first = catalog.load_table(name).metadata.current_snapshot_id
    concurrent_append(catalog, name)()  # the head the next checkpoint is planned on
    committer = _committer(catalog, name)  # a new process: no table cached from its last commit
    _prepare(committer, 2)

    catalog.before = [_another_process(catalog, _rolls_back(name, first), then="the head moved")]
    counted = Counted(catalog, monkeypatch)
    result = committer.commit(2)
    assert result.status == "committed" and counted.decisions == 2  # only a full decision can judge that
    assert _rows(catalog, name) == 20  # checkpoints 1 and 2; the rolled-back append is gone


def test_a_recommit_whose_base_a_rollback_moved_is_planned_again_as_a_recommit(
    scripted_catalog: ScriptedCatalog,
) -> None:
    catalog = scripted_catalog
    name, committer, first = _checkpoint_2_rolled_back(catalog)
    concurrent_append(catalog, name)()  # another writer's snapshot: the re-commit's planned head

    catalog.before = [_another_process(catalog, _rolls_back(name, first), then="the head moved")]
    result = committer.recommit(2)
    assert result.status == "committed" and _rows(catalog, name) == 20


def test_commit_takes_the_plan_of_its_checkpoint_and_plans_the_earlier_ones_itself(
    scripted_catalog: ScriptedCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    catalog = scripted_catalog
    name, committer = _prepared_table(catalog)  # checkpoint 1 prepared
    rows = events(200, 210)
    plan = committer.prepare_planned(2, [write_arrow(committer.load_table(), rows, job_id="A", checkpoint_id=2)])
    counted = Counted(catalog, monkeypatch)
    catalog.calls = 0
    result = committer.commit(2, plan=plan)
    assert (result.status, result.attempts, catalog.calls) == ("committed", 1, 2)  # on the table 1 left
    assert counted.decisions == 1  # checkpoint 1's own; checkpoint 2 reused its plan
    landed = ancestry.committed_checkpoints(catalog.load_table(name).metadata, job_id="A")
    assert [c.checkpoint_id for c in landed] == [2, 1] and _rows(catalog, name) == 20
    counted.reset()
    replay = committer.plan(2)
    assert committer.commit(2, plan=replay).status == "already-committed" and counted.decisions == 1


def test_a_recommit_never_lowers_the_mark_the_job_raised_between_its_attempts(
    scripted_catalog: ScriptedCatalog,
) -> None:
    catalog = scripted_catalog
    name, committer, _first = _checkpoint_2_rolled_back(catalog)
    other_catalog = SqlCatalog(catalog.name, **catalog.properties)
    other = _committer(other_catalog, name)  # the job's other process

    def the_job_commits_3_meanwhile() -> None:
        _prepare(other, 3)
        other.commit(3)
        other_catalog.engine.dispose()
        raise CommitFailedException("the job's checkpoint 3 won the compare-and-swap")

    catalog.before = [the_job_commits_3_meanwhile]
    assert committer.recommit(2).status == "committed"
    assert catalog.load_table(name).metadata.properties[ancestry.job_checkpoint_property("A")] == "3"


# -- what another process does between the plan and the append


def test_a_planned_checkpoint_another_process_landed_while_earlier_ones_committed_is_found_not_appended_again(
    scripted_catalog: ScriptedCatalog,
) -> None:
    """Checkpoint 4 was left prepared; ``commit(5, plan=...)`` commits 4 first. Meanwhile an
    operator's ``recover`` lands 4 and 5: the first attempt of 5, on the table 4 left, finds
    5's key among the snapshots new since its plan and appends nothing."""
    catalog = scripted_catalog
    name = f"{catalog.name}.events"
    ic.create_table(catalog, name, EVENTS_SCHEMA)
    committer = _committer(catalog, name)
    _prepare(committer, 4)
    rows = events(500, 510)
    plan = committer.prepare_planned(5, [write_arrow(committer.load_table(), rows, job_id="A", checkpoint_id=5)])

    recovers = lambda other: _committer(other, name).recover()  # noqa: E731  # the operator's recover of 4 and 5
    catalog.before = [_another_process(catalog, recovers, then="the operator's commit of checkpoint 4 won")]
    result = committer.commit(5, plan=plan)
    assert result.status == "already-committed"
    landed = ancestry.committed_checkpoints(catalog.load_table(name).metadata, job_id="A")
    assert sorted(c.checkpoint_id for c in landed) == [4, 5] and _rows(catalog, name) == 20


def test_a_plan_to_commit_that_another_process_committed_is_answered_already_committed(catalog: SqlCatalog) -> None:
    name = f"{catalog.name}.events"
    ic.create_table(catalog, name, EVENTS_SCHEMA)
    committer = _committer(catalog, name)
    rows = events(0, 10)
    plan = committer.prepare_planned(1, [write_arrow(committer.load_table(), rows, job_id="A", checkpoint_id=1)])
    assert _committer(catalog, name).recover()[0].status == "committed"  # another process
    assert committer.commit(1, plan=plan).status == "already-committed"
    assert _rows(catalog, name) == 10


def test_a_branch_removed_between_two_attempts_is_refused_and_not_made_again(
    scripted_catalog: ScriptedCatalog,
) -> None:
    catalog = scripted_catalog
    name, committer = _prepared_table(catalog)
    committer.commit(1)
    base = catalog.load_table(name).metadata.current_snapshot_id
    assert base is not None
    catalog.load_table(name).manage_snapshots().create_branch(base, "audit").commit()
    audit = ic.GlobalCommitter(catalog, name, job_id="B", branch="audit", retry_policy=FAST, sleep=lambda _s: None)
    audit.prepare(1, [write_arrow(audit.load_table(), events(300, 305), job_id="B", checkpoint_id=1)])

    removes = lambda other: other.load_table(name).manage_snapshots().remove_branch("audit").commit()  # noqa: E731
    catalog.before = [_another_process(catalog, removes, then="the branch moved")]
    with pytest.raises(InvalidArgumentError) as refused:
        audit.commit(1)
    assert refused.value.argument == "branch"
    assert "audit" not in catalog.load_table(name).metadata.refs


# -- reuse of a plan, and what a commit records when it finds its checkpoint in


def test_prepare_reuses_a_current_plan_and_decides_again_on_a_moved_head(
    scripted_catalog: ScriptedCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    catalog = scripted_catalog
    name = f"{catalog.name}.events"
    ic.create_table(catalog, name, EVENTS_SCHEMA)
    committer = _committer(catalog, name)
    table = committer.load_table()
    plan = committer.plan(1, table=table)  # before the table's claim of its state database
    results = [write_arrow(table, events(0, 10), job_id="A", checkpoint_id=1)]
    counted = Counted(catalog, monkeypatch)
    prepared = committer.prepare_planned(1, results, plan=plan, table=table)
    assert counted.decisions == 0 and counted.loads[name] == 0  # the claim moved no head
    committer.validate(1, results, table=prepared.table)
    assert counted.loads[name] == 0
    assert committer.prepare(1, results, plan=prepared) == prepared.state and counted.decisions == 0
    catalog.calls = 0
    assert committer.commit(1, plan=prepared).attempts == 1 and catalog.calls == 1  # on the claimed table
    stale = committer.plan(2)
    concurrent_append(catalog, name)()
    rows = events(100, 110)
    counted.reset()
    committer.prepare(2, [write_arrow(committer.load_table(), rows, job_id="A", checkpoint_id=2)], plan=stale)
    assert counted.decisions == 1  # the head moved since that plan


def test_a_checkpoint_found_in_the_table_by_its_plan_records_no_attempt(catalog: SqlCatalog) -> None:
    name = f"{catalog.name}.events"
    ic.create_table(catalog, name, EVENTS_SCHEMA)
    committer = ic.GlobalCommitter(catalog, name, job_id="A", fault=crash_at("after-commit", 1))
    _prepare(committer, 1)
    with pytest.raises(Crash):
        committer.commit(1)  # landed; the process died before recording it
    restarted = _committer(catalog, name)
    [result] = restarted.recover()
    state = restarted.store.get("A", name, 1)
    assert (result.status, result.attempts, result.retries) == ("already-committed", 0, 0)
    assert state is not None and (state.status, state.attempts, state.retries) == ("committed", 0, 0)


def test_a_state_database_failing_while_a_checkpoint_is_decided_names_itself(
    catalog: SqlCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = f"{catalog.name}.events"
    ic.create_table(catalog, name, EVENTS_SCHEMA)
    committer = _committer(catalog, name)
    _prepare(committer, 1)

    def unreachable(*_args: object) -> bool:
        raise OperationalError("SELECT ...", {}, Exception("server closed the connection unexpectedly"))

    monkeypatch.setattr(committer_module, "records_state", unreachable)
    with pytest.raises(StateDatabaseUnavailableError) as down:
        committer.commit(1)
    assert down.value.reason.endswith("; nothing was decided or changed")
    assert down.value.uri == shown_uri(committer.store.engine)


def test_a_batch_another_streaming_query_committed_is_refused_by_commit_too(catalog: SqlCatalog) -> None:
    name = f"{catalog.name}.events"
    ic.create_table(catalog, name, EVENTS_SCHEMA)
    first = ic.GlobalCommitter(catalog, name, job_id="A", query_id="q1")
    _prepare(first, 1)
    first.commit(1)
    second = ic.GlobalCommitter(catalog, name, job_id="A", query_id="q2")
    for refusal in (lambda: second.commit(1), lambda: second.refuse(1, second.plan(1, query_id="q2"))):
        with pytest.raises(StreamingQueryMismatchError) as refused:
            refusal()
        assert (refused.value.query_id, refused.value.committed_by) == ("q2", "q1")


def test_a_commit_after_another_writer_starts_from_its_plan_not_from_the_table_its_last_commit_left(
    scripted_catalog: ScriptedCatalog,
) -> None:
    catalog = scripted_catalog
    name = f"{catalog.name}.events"
    ic.create_table(catalog, name, EVENTS_SCHEMA)
    committer = _committer(catalog, name)
    plan = committer.prepare_planned(
        1, [write_arrow(committer.load_table(), events(0, 10), job_id="A", checkpoint_id=1)]
    )
    committer.commit(1, plan=plan)
    concurrent_append(catalog, name)()  # after the table committer's last commit left
    rows = events(100, 110)
    plan = committer.prepare_planned(2, [write_arrow(committer.load_table(), rows, job_id="A", checkpoint_id=2)])
    catalog.calls = 0
    assert committer.commit(2, plan=plan).attempts == 1 and catalog.calls == 1


def test_a_recommit_after_another_writer_decides_nothing_more(
    scripted_catalog: ScriptedCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    catalog = scripted_catalog
    name, committer, _first = _checkpoint_2_rolled_back(catalog)
    catalog.before = [concurrent_append(catalog, name)]
    counted = Counted(catalog, monkeypatch)
    result = committer.recommit(2)
    assert (result.status, result.attempts) == ("committed", 2) and counted.decisions == 1


def test_a_lost_answer_on_a_branch_is_found_on_that_branch(scripted_catalog: ScriptedCatalog) -> None:
    catalog = scripted_catalog
    name, committer = _prepared_table(catalog)
    committer.commit(1)
    base = catalog.load_table(name).metadata.current_snapshot_id
    assert base is not None
    catalog.load_table(name).manage_snapshots().create_branch(base, "audit").commit()
    audit = ic.GlobalCommitter(catalog, name, job_id="B", branch="audit", retry_policy=FAST, sleep=lambda _s: None)
    audit.prepare(1, [write_arrow(audit.load_table(), events(300, 305), job_id="B", checkpoint_id=1)])

    catalog.after = [_answer_lost]
    assert audit.commit(1).status == "already-committed"
    landed = ancestry.committed_checkpoints(catalog.load_table(name).metadata, "audit", job_id="B")
    assert [c.checkpoint_id for c in landed] == [1]
