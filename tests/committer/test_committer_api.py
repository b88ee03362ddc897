"""The committer's operator-facing calls (validate, abandon, acknowledge, recommit) refuse
with errors that carry the facts as attributes (job, checkpoint, table, snapshot), change
nothing when they refuse, and hold against the races they document: a commit landing while
a checkpoint is being abandoned, another tool's rollback, a re-commit whose process died
after the catalog accepted it."""

from __future__ import annotations

import dataclasses
import os
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.expressions import AlwaysTrue
from pyiceberg.io.pyarrow import _dataframe_to_data_files
from pyiceberg.manifest import ManifestEntryStatus, ManifestFile
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Operation
from pyiceberg.table.update.snapshot import _FastAppendFiles
from sqlalchemy import select
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

import icecommit as ic
import icecommit.committer.checkpoint_commit as append_module
import icecommit.committer.committer as committer_module
import icecommit.committer.fate as fate_module
from icecommit.committer import PartitionCompleteness, RetryPolicy
from icecommit.committer.planning import all_live
from icecommit.core import ancestry
from icecommit.core.datafiles import RequiredNullViolation
from icecommit.core.decision import Action
from icecommit.core.lineage import path_key
from icecommit.errors import (
    CheckpointCommittedError,
    CheckpointNotFoundError,
    CheckpointOutOfOrderError,
    CheckpointReusedError,
    InvalidArgumentError,
    SchemaMismatchError,
    StateDatabaseMismatchError,
    StateDatabaseUnavailableError,
    StreamingQueryMismatchError,
)
from icecommit.maintenance import apply_expire, apply_rollback, plan_expire, plan_rollback
from icecommit.maintenance.compaction import compact
from icecommit.state import CheckpointStore, state_engine
from icecommit.state.database import shown_uri, state_identity
from icecommit.state.identity import STATE_ID_PROPERTY
from icecommit.state.models import MetricRow
from tests.conftest import unique_table
from tests.fakes import Crash, ScriptedCatalog, concurrent_append, crash_at, events_at
from tests.helpers import EVENTS_SCHEMA, events, write_arrow


def _name(catalog: SqlCatalog) -> str:
    name = f"{catalog.name}.events"
    ic.create_table(catalog, name, EVENTS_SCHEMA, partition_by=["event"])
    return name


def _results(committer: ic.GlobalCommitter, checkpoint_id: int) -> list[ic.WriteResult]:
    rows = events(checkpoint_id * 100, checkpoint_id * 100 + 10)
    return [write_arrow(committer.load_table(), rows, job_id=committer.job_id, checkpoint_id=checkpoint_id)]


def _snapshots(catalog: SqlCatalog, name: str) -> list[int]:
    return [s.snapshot_id for s in catalog.load_table(name).metadata.snapshots]


def _first_snapshot(catalog: SqlCatalog, name: str) -> int:
    """Append one foreign row so the table has a snapshot to branch from."""
    table = catalog.load_table(name)
    table.append(events_at(500, first_id=99_999))
    return table.current_snapshot().snapshot_id  # type: ignore[union-attr]


def _branch(catalog: SqlCatalog, name: str, branch: str) -> None:
    """Make ``branch`` at a first snapshot of one foreign row (a branch needs a snapshot)."""
    first = _first_snapshot(catalog, name)
    catalog.load_table(name).manage_snapshots().create_branch(first, branch).commit()


def _on_branch(catalog: SqlCatalog, name: str, job_id: str, checkpoints: tuple[int, ...]) -> ic.GlobalCommitter:
    """A committer of ``job_id`` on a new branch ``audit``, with ``checkpoints`` committed there."""
    _branch(catalog, name, "audit")
    committer = ic.GlobalCommitter(catalog, name, job_id=job_id, branch="audit")
    for checkpoint_id in checkpoints:
        committer.prepare(checkpoint_id, _results(committer, checkpoint_id))
        committer.commit(checkpoint_id)
    return committer


def _facts(error: Any) -> tuple[Any, ...]:
    return (error.job_id, error.checkpoint_id, error.table)


@pytest.mark.database_independent
def test_validate_refuses_what_prepare_would_and_records_nothing(catalog: SqlCatalog) -> None:
    name = _name(catalog)
    committer = ic.GlobalCommitter(catalog, name, job_id="A")
    results = _results(committer, 1)
    assert committer.validate(1, results) is None
    assert committer.store.get("A", name, 1) is None and _snapshots(catalog, name) == []

    with pytest.raises(ic.ValidationError) as other_checkpoint:
        committer.validate(2, results)
    refused = other_checkpoint.value
    assert (refused.checkpoint_id, refused.expected, refused.actual) == (2, ("A", 2), ("A", 1))
    with pytest.raises(ic.ValidationError) as other_job:
        ic.GlobalCommitter(catalog, name, job_id="B").validate(1, results)
    assert (other_job.value.expected, other_job.value.actual) == (("B", 1), ("A", 1))

    nulls = [dataclasses.replace(results[0], violations=(RequiredNullViolation("id", 3),))]
    with pytest.raises(SchemaMismatchError) as required:
        committer.validate(1, nulls)
    assert (required.value.column, required.value.table) == ("id", name)
    assert "3 null value(s)" in required.value.reason
    assert committer.store.get("A", name, 1) is None and _snapshots(catalog, name) == []


def test_validate_checks_the_state_database_the_table_records(
    catalog: SqlCatalog, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = _name(catalog)
    committer = ic.GlobalCommitter(catalog, name, job_id="A")
    committer.prepare(1, _results(committer, 1))  # the table now records its state database
    other = CheckpointStore(state_engine(f"sqlite:///{tmp_path / 'elsewhere.db'}"))
    elsewhere = ic.GlobalCommitter(catalog, name, job_id="A", store=other)
    with pytest.raises(StateDatabaseMismatchError) as mismatch:
        elsewhere.validate(2, _results(elsewhere, 2))
    assert mismatch.value.table == name and mismatch.value.uri == shown_uri(other.engine)

    def unreachable(*_args: object, **_kwargs: object) -> bool:
        raise OperationalError("SELECT ...", {}, Exception("server closed the connection unexpectedly"))

    monkeypatch.setattr(committer_module, "records_state", unreachable)
    monkeypatch.setattr(append_module, "records_state", unreachable)  # the claim's check at prepare
    with pytest.raises(StateDatabaseUnavailableError) as down:
        committer.validate(2, _results(committer, 2))
    assert down.value.uri == shown_uri(committer.store.engine)
    assert down.value.reason.endswith("; nothing was validated")
    assert isinstance(down.value.__cause__, OperationalError)
    with pytest.raises(StateDatabaseUnavailableError) as down_in_prepare:
        committer.prepare(2, _results(committer, 2))
    assert down_in_prepare.value.uri == shown_uri(committer.store.engine)
    assert down_in_prepare.value.reason.endswith("; nothing was staged")
    assert committer.store.get("A", name, 2) is None and len(_snapshots(catalog, name)) == 0

    monkeypatch.undo()  # reachable again, until the prepare's own insert
    monkeypatch.setattr(committer.store, "insert_prepared", unreachable)
    with pytest.raises(StateDatabaseUnavailableError) as down_at_insert:
        committer.prepare(2, _results(committer, 2))
    assert down_at_insert.value.uri == shown_uri(committer.store.engine)
    assert down_at_insert.value.reason.endswith("; nothing was recorded: prepare it again")
    assert isinstance(down_at_insert.value.__cause__, OperationalError)
    monkeypatch.undo()
    assert committer.store.get("A", name, 2) is None and len(_snapshots(catalog, name)) == 0
    committer.prepare(2, _results(committer, 2))  # prepared again, as the error says
    assert committer.commit(2).committed


@pytest.mark.database_independent
def test_refusals_of_abandon_acknowledge_and_recommit_name_job_checkpoint_and_table(catalog: SqlCatalog) -> None:
    name = _name(catalog)
    committer = ic.GlobalCommitter(catalog, name, job_id="A")
    committer.prepare(1, _results(committer, 1))
    landed = committer.commit(1).snapshot_id
    committer.prepare(2, _results(committer, 2))

    with pytest.raises(CheckpointNotFoundError) as never:
        committer.abandon(9, reason="never prepared")
    assert _facts(never.value) == ("A", 9, name)
    with pytest.raises(CheckpointCommittedError) as held:
        committer.abandon(1, reason="oops")
    assert (*_facts(held.value), held.value.snapshot_id) == ("A", 1, name, landed)
    with pytest.raises(CheckpointNotFoundError) as not_abandoned:
        committer.acknowledge(2, by="lead")  # prepared, not abandoned
    assert _facts(not_abandoned.value) == ("A", 2, name)
    with pytest.raises(CheckpointNotFoundError) as no_recommit:
        committer.recommit(9)
    assert _facts(no_recommit.value) == ("A", 9, name)
    with pytest.raises(ic.ValidationError) as in_table:
        committer.recommit(1)
    assert in_table.value.checkpoint_id == 1 and "already-in" in str(in_table.value)
    assert [(s.checkpoint_id, s.status) for s in committer.store.list(name)] == [(1, "committed"), (2, "prepared")]
    assert _snapshots(catalog, name) == [landed]


class _RacingStore(CheckpointStore):
    """A store whose ``abandon`` first lets ``race`` run: what another process did in the
    instant between the abandon's decision and its compare-and-set."""

    def __init__(self, store: CheckpointStore, race: Any) -> None:
        super().__init__(store.engine)
        self._race = race

    def abandon(self, job_id: str, table_name: str, checkpoint_id: int, *, reason: str, by: str) -> bool:
        self._race()
        return super().abandon(job_id, table_name, checkpoint_id, reason=reason, by=by)


def test_a_commit_recorded_during_an_abandon_wins(catalog: SqlCatalog) -> None:
    name = _name(catalog)
    committer = ic.GlobalCommitter(catalog, name, job_id="A")
    committer.prepare(1, _results(committer, 1))
    racing = ic.GlobalCommitter(
        catalog, name, job_id="A", store=_RacingStore(committer.store, lambda: committer.commit(1))
    )  # fmt: skip
    with pytest.raises(CheckpointCommittedError) as lost:
        racing.abandon(1, reason="looks stuck")
    # the state row said committed by the time of the compare-and-set: no snapshot is named
    assert (*_facts(lost.value), lost.value.snapshot_id) == ("A", 1, name, None)
    state = committer.store.get("A", name, 1)
    assert state is not None and (state.status, state.abandon_reason) == ("committed", None)
    assert len(_snapshots(catalog, name)) == 1


@pytest.mark.parametrize("branch", ["main", "audit"])
def test_a_commit_that_landed_but_was_not_recorded_during_an_abandon_wins(catalog: SqlCatalog, branch: str) -> None:
    name = _name(catalog)
    if branch != "main":
        _branch(catalog, name, branch)
    committer = ic.GlobalCommitter(catalog, name, job_id="A", branch=branch)
    committer.prepare(1, _results(committer, 1))
    dying = ic.GlobalCommitter(catalog, name, job_id="A", branch=branch, fault=crash_at("after-commit", 1))

    def land_and_die() -> None:
        with pytest.raises(Crash):
            dying.commit(1)

    racing = ic.GlobalCommitter(
        catalog, name, job_id="A", branch=branch, store=_RacingStore(committer.store, land_and_die)
    )  # fmt: skip
    with pytest.raises(CheckpointCommittedError) as lost:
        racing.abandon(1, reason="looks stuck")
    snapshot = ancestry.find_checkpoint(catalog.load_table(name).metadata, "A", 1, branch)
    assert snapshot is not None
    assert (*_facts(lost.value), lost.value.snapshot_id) == ("A", 1, name, snapshot.snapshot_id)
    reopened = committer.store.get("A", name, 1)  # the abandon is undone: prepared, as the commit left it
    assert reopened is not None and (reopened.status, reopened.abandon_reason, reopened.abandoned_by) == (
        "prepared", None, None
    )  # fmt: skip
    assert committer.commit(1).status == "already-committed"
    assert committer.store.get("A", name, 1).status == "committed"  # type: ignore[union-attr]
    assert [s.snapshot_id for s in catalog.load_table(name).metadata.snapshots if ancestry.checkpoint_of(s)] == [
        snapshot.snapshot_id
    ]


@pytest.mark.database_independent
def test_abandon_after_another_tools_rollback_records_the_rollback_first(catalog: SqlCatalog) -> None:
    name = _name(catalog)
    committer = ic.GlobalCommitter(catalog, name, job_id="A")
    for checkpoint_id in (1, 2):
        committer.prepare(checkpoint_id, _results(committer, checkpoint_id))
        committer.commit(checkpoint_id)
    first, _second = _snapshots(catalog, name)
    catalog.load_table(name).manage_snapshots().rollback_to_snapshot(first).commit()  # not icecommit
    assert committer.store.get("A", name, 2).status == "committed"  # type: ignore[union-attr]
    abandoned = committer.abandon(2, reason="the rollback was on purpose", by="oncall")
    assert (abandoned.status, abandoned.abandon_reason, abandoned.abandoned_by) == (
        "abandoned", "the rollback was on purpose", "oncall"
    )  # fmt: skip
    assert committer.commit(2).status == "abandoned"
    assert catalog.load_table(name).scan().to_arrow().num_rows == 10


@pytest.mark.parametrize("then", ["recommit", "commit"])
def test_a_recommit_whose_process_died_after_the_catalog_accepted_it_is_recorded_once(
    catalog: SqlCatalog, then: str
) -> None:
    name = _name(catalog)
    committer = ic.GlobalCommitter(catalog, name, job_id="A")
    for checkpoint_id in (1, 2):
        committer.prepare(checkpoint_id, _results(committer, checkpoint_id))
        committer.commit(checkpoint_id)
    first, second = _snapshots(catalog, name)
    plan = plan_rollback(catalog, name, to_snapshot=first)
    apply_rollback(catalog, plan)
    assert committer.store.get("A", name, 2).status == "rolled-back"  # type: ignore[union-attr]
    with pytest.raises(Crash):
        ic.GlobalCommitter(catalog, name, job_id="A", fault=crash_at("after-commit", 2)).recommit(2)
    relanded = catalog.load_table(name).current_snapshot()
    assert relanded is not None and relanded.snapshot_id not in (first, second)
    assert committer.store.get("A", name, 2).status == "rolled-back"  # type: ignore[union-attr]

    result = getattr(ic.GlobalCommitter(catalog, name, job_id="A"), then)(2)  # the restarted job, either way
    assert (result.status, result.snapshot_id, result.attempts, result.retries, result.records) == (
        "already-committed", relanded.snapshot_id, 0, 0, 10
    )  # fmt: skip
    state = committer.store.get("A", name, 2)
    assert state is not None and (state.status, state.snapshot_id, state.attempts, state.retries) == (
        "committed", relanded.snapshot_id, 1, 0
    )  # fmt: skip
    assert (state.counters.created, state.counters.skipped) == (state.files, state.files)
    assert catalog.load_table(name).current_snapshot().snapshot_id == relanded.snapshot_id  # type: ignore[union-attr]
    assert ic.reconcile(catalog, name, job_id="A").ok
    with pytest.raises(ic.ValidationError):  # recorded: in the table, nothing to re-commit
        committer.recommit(2)
    assert committer.commit(2).status == "already-committed"
    assert catalog.load_table(name).scan().to_arrow().num_rows == 20


@pytest.mark.database_independent
def test_decide_answers_for_a_recommit_and_for_another_streaming_query(catalog: SqlCatalog) -> None:
    name = _name(catalog)
    committer = ic.GlobalCommitter(catalog, name, job_id="A")
    for checkpoint_id in (1, 2):
        committer.prepare(checkpoint_id, _results(committer, checkpoint_id))
        committer.commit(checkpoint_id)
    first, second = _snapshots(catalog, name)
    apply_rollback(catalog, plan_rollback(catalog, name, to_snapshot=first))
    assert committer.decide(2).action is Action.ROLLED_BACK
    with pytest.raises(ic.CheckpointRolledBackError) as rolled_back:
        committer.refuse(2, committer.decide(2))
    assert (*_facts(rolled_back.value), rolled_back.value.snapshot_id) == ("A", 2, name, second)
    assert committer.refuse(1, committer.decide(1)) is None  # in the table: nothing to refuse
    assert committer.decide(2, recommit=True).action is Action.RECOMMIT
    assert committer.store.get("A", name, 2).status == "rolled-back"  # type: ignore[union-attr]  # read only

    stream = ic.GlobalCommitter(catalog, name, job_id="S", query_id="query-1")
    stream.prepare(1, _results(stream, 1))
    restarted_elsewhere = ic.GlobalCommitter(catalog, name, job_id="S", query_id="query-2")
    decision = restarted_elsewhere.decide(1)
    assert decision.action is Action.OTHER_QUERY and "query-1" in decision.reason
    with pytest.raises(StreamingQueryMismatchError) as other:
        restarted_elsewhere.refuse(1, decision)
    assert (*_facts(other.value), other.value.query_id, other.value.committed_by) == (
        "S", 1, name, "query-2", "query-1"
    )  # fmt: skip
    # ids are reported as they were given, an empty one too
    with pytest.raises(StreamingQueryMismatchError) as other:
        blank = ic.GlobalCommitter(catalog, name, job_id="S", query_id="")
        blank.refuse(1, blank.decide(1))
    assert (other.value.query_id, other.value.committed_by) == ("", "query-1")
    blank = ic.GlobalCommitter(catalog, name, job_id="E", query_id="")
    blank.prepare(1, _results(blank, 1))
    with pytest.raises(StreamingQueryMismatchError) as other:
        named = ic.GlobalCommitter(catalog, name, job_id="E", query_id="query-3")
        named.refuse(1, named.decide(1))
    assert (other.value.query_id, other.value.committed_by) == ("query-3", "")
    assert ic.GlobalCommitter(catalog, name, job_id="S").decide(1).action is Action.COMMIT  # recovery commits it


@pytest.mark.database_independent
def test_an_out_of_order_checkpoint_on_a_branch_names_that_branchs_highest(catalog: SqlCatalog) -> None:
    """The refusal names the highest checkpoint the committer's branch holds, read from its
    ancestry where another tool garbled the job's property."""
    name = _name(catalog)
    audit = _on_branch(catalog, name, "B", (1, 3))
    with catalog.load_table(name).transaction() as edit:
        edit.set_properties({ancestry.job_checkpoint_property("B", branch="audit"): "three"})
    decision = audit.decide(2)
    assert decision.action is Action.OUT_OF_ORDER
    with pytest.raises(CheckpointOutOfOrderError) as raised:
        audit.refuse(2, decision)
    assert (*_facts(raised.value), raised.value.highest_committed) == ("B", 2, name, 3)
    before = _snapshots(catalog, name)
    with pytest.raises(CheckpointOutOfOrderError):
        audit.prepare(2, _results(audit, 2))
    assert _snapshots(catalog, name) == before and audit.store.get("B", name, 2) is None


@pytest.mark.database_independent
def test_the_last_committed_checkpoint_is_read_from_the_committers_branch(catalog: SqlCatalog) -> None:
    name = _name(catalog)
    main = ic.GlobalCommitter(catalog, name, job_id="A")
    main.prepare(1, _results(main, 1))
    main.commit(1)
    table = catalog.load_table(name)
    table.manage_snapshots().create_branch(table.current_snapshot().snapshot_id, "audit").commit()  # type: ignore[union-attr]
    audit = ic.GlobalCommitter(catalog, name, job_id="B", branch="audit")
    for checkpoint_id in (1, 2):
        audit.prepare(checkpoint_id, _results(audit, checkpoint_id))
        audit.commit(checkpoint_id)
    assert audit.last_committed_checkpoint() == 2
    # another tool overwrote the high-water mark property: the branch's own history still tells
    with catalog.load_table(name).transaction() as edit:
        edit.set_properties({ancestry.job_checkpoint_property("B", branch="audit"): "two"})
    assert audit.last_committed_checkpoint() == 2
    assert ic.GlobalCommitter(catalog, name, job_id="B").last_committed_checkpoint() is None  # not on main
    metadata = catalog.load_table(name).metadata
    main_head, audit_head = ancestry.branch_head(metadata), ancestry.branch_head(metadata, "audit")
    assert main_head is not None and audit_head is not None  # main, unless another branch is named
    assert main_head.snapshot_id == metadata.current_snapshot_id != audit_head.snapshot_id
    assert ancestry.branch_head(metadata, "no-such-branch") is None


@pytest.mark.database_independent
@pytest.mark.parametrize("branch", ["main", "audit"])
def test_a_checkpoint_prepared_again_after_its_state_was_lost_is_compared_with_what_landed(
    catalog: SqlCatalog, tmp_path: Any, branch: str
) -> None:
    name = _name(catalog)
    if branch != "main":
        _branch(catalog, name, branch)
    committer = ic.GlobalCommitter(catalog, name, job_id="A", branch=branch)
    results = {c: _results(committer, c) for c in (1, 2)}
    # other rows offered under checkpoint 2: the job's counter went back
    results[3] = [write_arrow(committer.load_table(), events(900, 905), job_id="A", checkpoint_id=2)]
    for checkpoint_id in (1, 2):
        committer.prepare(checkpoint_id, results[checkpoint_id])
        committer.commit(checkpoint_id)
    second = committer.commit(2).snapshot_id
    # the same committed checkpoint offered again with other files: refused, naming what holds it
    with pytest.raises(CheckpointReusedError) as reused:
        committer.prepare(2, results[3])
    assert (*_facts(reused.value), reused.value.status, reused.value.snapshot_id) == (
        "A", 2, name, "committed", second
    )  # fmt: skip
    # a driver whose state rows are gone (a fresh state database) reads the table instead

    def amnesiac(fresh: str) -> ic.GlobalCommitter:
        store = CheckpointStore(state_engine(f"sqlite:///{tmp_path / fresh}"))
        return ic.GlobalCommitter(catalog, name, job_id="A", store=store, branch=branch)

    with pytest.MonkeyPatch.context() as patched:  # the table records the first state database: allow others
        patched.setattr(committer_module, "records_state", lambda *_: True)
        patched.setattr(append_module, "records_state", lambda *_: True)
        with pytest.raises(CheckpointReusedError) as counter_went_back:
            amnesiac("one.db").prepare(2, results[3])
        amnesiac("two.db").prepare(2, results[2])  # the files that landed: a replay, accepted
    refused = counter_went_back.value
    assert (*_facts(refused), refused.status, refused.snapshot_id) == ("A", 2, name, "committed", second)
    assert [s.snapshot_id for s in catalog.load_table(name).metadata.snapshots][-1] == second


@pytest.mark.database_independent
def test_checkpoint_zero_offered_again_without_its_state_names_zero_as_the_highest(
    catalog: SqlCatalog, tmp_path: Any
) -> None:
    """Checkpoint 0 landed and its snapshot was expired; a driver whose state database is a
    fresh one offers it again: out of order, and the highest checkpoint named is 0."""
    name = _name(catalog)
    committer = ic.GlobalCommitter(catalog, name, job_id="A")
    committer.prepare(0, _results(committer, 0))
    landed = committer.commit(0).snapshot_id
    catalog.load_table(name).append(events_at(500, first_id=99_999))  # another writer moves the head on
    catalog.load_table(name).maintenance.expire_snapshots().by_id(landed).commit()  # type: ignore[arg-type]
    store = CheckpointStore(state_engine(f"sqlite:///{tmp_path / 'fresh.db'}"))
    with pytest.MonkeyPatch.context() as patched:  # the table records the first state database: allow another
        patched.setattr(committer_module, "records_state", lambda *_: True)
        amnesiac = ic.GlobalCommitter(catalog, name, job_id="A", store=store)
        decision = amnesiac.decide(0)
        assert decision.action is Action.OUT_OF_ORDER
        with pytest.raises(CheckpointOutOfOrderError) as raised:
            amnesiac.refuse(0, decision)
    assert (*_facts(raised.value), raised.value.highest_committed) == ("A", 0, name, 0)


@pytest.mark.database_independent
def test_declared_source_counts_keep_their_minute_and_the_rows_without_an_event_time(catalog: SqlCatalog) -> None:
    name = _name(catalog)
    committer = ic.GlobalCommitter(catalog, name, job_id="A")
    committer.prepare(1, _results(committer, 1))
    committer.commit(1)
    minute = datetime(2026, 11, 20, 9, 30, tzinfo=timezone.utc)
    committer.declare_source(1, {minute + timedelta(seconds=42): 6, None: 4})
    with Session(committer.store.engine) as session:
        rows = session.execute(
            select(MetricRow.window_start, MetricRow.records).where(
                MetricRow.table_name == name, MetricRow.stage == "source"
            )
        ).all()
    windows = {(w.astimezone(timezone.utc) if w else None): n for w, n in rows}
    assert windows == {None: 4, minute: 6}  # the window is the minute the instant falls in


def _store_of_its_own(tmp_path: Any) -> CheckpointStore:
    return CheckpointStore(state_engine(f"sqlite:///{tmp_path / 'own-state.db'}"))


def test_take_over_commits_another_jobs_prepared_checkpoints_as_the_taker_is_configured(
    scripted_catalog: ScriptedCatalog, tmp_path: Any
) -> None:
    catalog = scripted_catalog
    name = unique_table()
    ic.create_table(catalog, name, EVENTS_SCHEMA, partition_by=["event", "hour(ts)"])
    _branch(catalog, name, "audit")
    store = _store_of_its_own(tmp_path)  # the table records this state database, not the catalog's
    old = ic.GlobalCommitter(catalog, name, job_id="old", branch="audit", store=store)
    for checkpoint_id, minutes in ((1, (0, 10)), (2, (65, 70)), (3, (130, 140))):
        old.prepare(checkpoint_id, [write_arrow(old.load_table(), events_at(*minutes, first_id=10 * checkpoint_id),
                                                job_id="old", checkpoint_id=checkpoint_id)])  # fmt: skip
    published: list[str] = []
    sleeps: list[float] = []
    one_try = RetryPolicy(max_attempts=1, max_seconds=60, min_wait_s=0.01, max_wait_s=0.02)
    policy = PartitionCompleteness(lateness=timedelta(0), on_complete=lambda s: published.append(s.label))

    def taker(**kwargs: Any) -> ic.GlobalCommitter:
        return ic.GlobalCommitter(
            catalog, name, job_id="new", branch="audit", store=store, sleep=sleeps.append, completeness=policy,
            **kwargs,
        )  # fmt: skip

    # the taker's retry policy holds: one try, and a concurrent append makes it give up
    catalog.before = [concurrent_append(catalog, name)]
    with pytest.raises(ic.CommitConflictError):
        taker(retry_policy=one_try).take_over("old")
    # and its fault hook: the process dies after the catalog accepted checkpoint 2
    with pytest.raises(Crash):
        taker(fault=crash_at("after-commit", 2)).take_over("old")
    catalog.before = [concurrent_append(catalog, name)]  # one conflict more, retried after the taker's sleep
    results = taker(
        retry_policy=RetryPolicy(max_attempts=3, max_seconds=60, min_wait_s=0.01, max_wait_s=0.02)
    ).take_over("old")
    assert [(r.job_id, r.checkpoint_id, r.status) for r in results] == [
        ("old", 2, "already-committed"), ("old", 3, "committed")
    ]  # fmt: skip
    assert len(sleeps) == 1
    loaded = catalog.load_table(name)
    audit = [s for s in ancestry.branch_ancestry(loaded.metadata, "audit") if s.summary.get(ancestry.JOB_ID) == "old"]
    assert sorted(int(s.summary[ancestry.CHECKPOINT_ID]) for s in audit) == [1, 2, 3]
    assert {s.summary.get("icecommit.recovered-by") for s in audit} == {"new"}
    assert [s.summary.get(ancestry.JOB_ID) for s in ancestry.branch_ancestry(loaded.metadata, "main")] == [None] * len(
        list(ancestry.branch_ancestry(loaded.metadata, "main"))
    )  # main holds only the concurrent appends
    # the taker's completeness policy published the hours the old job's watermark closed
    assert published == ["ts_hour=2026-05-01-00", "ts_hour=2026-05-01-01"]
    assert [s.status for s in store.list(name, job_id="old")] == ["committed"] * 3


@pytest.mark.database_independent
def test_a_checkpoint_in_the_table_without_a_state_row_is_reported_from_its_summary(
    catalog: SqlCatalog, tmp_path: Any
) -> None:
    name = _name(catalog)
    committer = ic.GlobalCommitter(catalog, name, job_id="A")
    committer.prepare(1, _results(committer, 1))
    landed = committer.commit(1)
    with pytest.MonkeyPatch.context() as patched:  # another state database than the one the table records
        patched.setattr(committer_module, "records_state", lambda *_: True)
        amnesiac = ic.GlobalCommitter(catalog, name, job_id="A", store=_store_of_its_own(tmp_path))
        result = amnesiac.commit(1)
        assert (result.job_id, result.table, result.checkpoint_id, result.status, result.snapshot_id) == (
            "A", name, 1, "already-committed", landed.snapshot_id
        )  # fmt: skip
        assert (result.records, result.files, result.bytes) == (landed.records, landed.files, landed.bytes)
        assert (result.records, result.attempts, result.retries) == (10, 0, 0) and result.bytes > 0
        with pytest.raises(CheckpointNotFoundError) as never:
            amnesiac.commit(5)
        assert _facts(never.value) == ("A", 5, name)
    assert amnesiac.store.list(name) == []  # it only reports: nothing recorded in the other database

    # a snapshot another tool made with the checkpoint's keys and no counts: the counts are 0
    summary = {ancestry.JOB_ID: "A", ancestry.CHECKPOINT_ID: "2"}
    catalog.load_table(name).append(events(700, 703), snapshot_properties=summary)
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(committer_module, "records_state", lambda *_: True)
        foreign = amnesiac.commit(2)
    assert (foreign.status, foreign.records, foreign.files, foreign.bytes) == ("already-committed", 0, 0, 0)
    assert foreign.snapshot_id == catalog.load_table(name).current_snapshot().snapshot_id  # type: ignore[union-attr]


@pytest.mark.database_independent
def test_recover_commits_this_jobs_prepared_checkpoints_only(catalog: SqlCatalog) -> None:
    name = _name(catalog)
    a = ic.GlobalCommitter(catalog, name, job_id="A")
    b = ic.GlobalCommitter(catalog, name, job_id="B")
    for committer in (a, b):
        for checkpoint_id in (1, 2):
            committer.prepare(checkpoint_id, _results(committer, checkpoint_id))
    assert [(r.job_id, r.checkpoint_id, r.status) for r in a.recover()] == [
        ("A", 1, "committed"),
        ("A", 2, "committed"),
    ]
    assert [(s.job_id, s.checkpoint_id, s.status) for s in a.store.list(name, job_id="B")] == [
        ("B", 1, "prepared"), ("B", 2, "prepared")
    ]  # fmt: skip
    assert a.recover() == []  # nothing left of its own


@pytest.mark.database_independent
def test_abandon_names_a_bad_reason_and_records_who_when_no_one_is_named(
    catalog: SqlCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = _name(catalog)
    committer = ic.GlobalCommitter(catalog, name, job_id="A")
    for checkpoint_id in (1, 2):
        committer.prepare(checkpoint_id, _results(committer, checkpoint_id))
    with pytest.raises(InvalidArgumentError) as blank:
        committer.abandon(1, reason="  ")
    assert (blank.value.argument, blank.value.value) == ("reason", "  ")
    assert str(blank.value) == (
        "reason='  ' is not valid: expected a non-empty text (it is kept with the checkpoint and shown in reports)"
    )
    assert committer.store.get("A", name, 1).status == "prepared"  # type: ignore[union-attr]
    monkeypatch.setattr(fate_module.getpass, "getuser", lambda: "etl-operator")
    assert committer.abandon(1, reason="lost").abandoned_by == "etl-operator"

    def no_login_name() -> str:  # a container without a passwd entry
        raise KeyError("getpwuid(): uid not found: 1000")

    monkeypatch.setattr(fate_module.getpass, "getuser", no_login_name)
    assert committer.abandon(2, reason="lost").abandoned_by == "unknown"
    assert committer.acknowledge(2).acknowledged_by == "unknown"


@pytest.mark.database_independent
def test_a_lost_response_on_a_branch_is_resolved_from_that_branchs_ancestry(
    scripted_catalog: ScriptedCatalog,
) -> None:
    catalog = scripted_catalog
    name = _name(catalog)
    _branch(catalog, name, "audit")
    committer = ic.GlobalCommitter(catalog, name, job_id="A", branch="audit", sleep=lambda _: None)
    committer.prepare(1, _results(committer, 1))

    def lose_the_response() -> None:
        raise ConnectionError("connection reset after the commit was sent")

    catalog.after = [lose_the_response]
    result = committer.commit(1)
    landed = ancestry.find_checkpoint(catalog.load_table(name).metadata, "A", 1, "audit")
    assert landed is not None and (result.status, result.snapshot_id) == ("committed", landed.snapshot_id)
    state = committer.store.get("A", name, 1)
    assert state is not None and (state.status, state.unknown_outcomes, state.snapshot_id) == (
        "committed", 1, landed.snapshot_id
    )  # fmt: skip


@pytest.mark.database_independent
def test_a_table_dropped_and_made_again_under_the_same_name_does_not_hold_the_old_tables_checkpoints(
    catalog: SqlCatalog,
) -> None:
    name = _name(catalog)
    committer = ic.GlobalCommitter(catalog, name, job_id="A")
    committer.prepare(1, _results(committer, 1))
    committer.commit(1)
    catalog.drop_table(name)
    ic.create_table(catalog, name, EVENTS_SCHEMA, partition_by=["event"])
    assert catalog.load_table(name).current_snapshot() is None
    assert not committer.is_committed(1)
    with pytest.raises(ic.CheckpointRolledBackError):
        committer.commit(1)  # never reported as in a table that holds none of its rows
    assert committer.recommit(1).status == "committed"  # its files are still there: it can be brought back
    assert catalog.load_table(name).scan().to_arrow().num_rows == 10


@pytest.mark.database_independent
def test_abandon_refuses_a_committed_checkpoint_whose_snapshot_was_expired_naming_that_snapshot(
    catalog: SqlCatalog,
) -> None:
    name = _name(catalog)
    committer = ic.GlobalCommitter(catalog, name, job_id="A")
    landed = []
    for checkpoint_id in (1, 2, 3):
        committer.prepare(checkpoint_id, _results(committer, checkpoint_id))
        landed.append(committer.commit(checkpoint_id).snapshot_id)
    apply_expire(catalog, plan_expire(catalog, name, older_than=timedelta(0), retain_last=1))
    assert ancestry.find_checkpoint(catalog.load_table(name).metadata, "A", 1) is None
    with pytest.raises(CheckpointCommittedError) as held:
        committer.abandon(1, reason="looks stuck")
    assert (*_facts(held.value), held.value.snapshot_id) == ("A", 1, name, landed[0])
    assert committer.store.get("A", name, 1).status == "committed"  # type: ignore[union-attr]


@pytest.mark.database_independent
def test_files_compacted_on_a_branch_after_their_snapshot_expired_are_traced_on_that_branch(
    catalog: SqlCatalog,
) -> None:
    name = _name(catalog)
    committer = _on_branch(catalog, name, "A", (1, 2))
    done = compact(catalog, name, branch="audit", min_input_files=2)
    assert done.committed >= 1
    apply_expire(catalog, plan_expire(catalog, name, older_than=timedelta(0), retain_last=1))
    metadata = catalog.load_table(name).metadata
    assert ancestry.find_checkpoint(metadata, "A", 1, "audit") is None  # expired; the compaction is the head
    # their snapshots left the metadata, not the branch: the expiry did not take them for rolled back
    assert [s.status for s in committer.store.list(name, job_id="A")] == ["committed", "committed"]
    decision = committer.decide(1)
    assert decision.action is Action.ALREADY_IN, decision  # its rows live on in the branch's compacted files
    assert committer.commit(1).status == "already-committed"
    rows = catalog.load_table(name).scan(snapshot_id=metadata.snapshot_by_name("audit").snapshot_id).to_arrow()  # type: ignore[union-attr]
    assert rows.num_rows == 21  # checkpoints 1 and 2 once each, and the foreign row of the branch point


@pytest.mark.database_independent
def test_a_streaming_batch_names_its_query_in_the_snapshot(catalog: SqlCatalog) -> None:
    name = _name(catalog)
    committer = ic.GlobalCommitter(catalog, name, job_id="S", query_id="query-7")
    committer.prepare(1, _results(committer, 1))
    landed = committer.commit(1)
    snapshot = catalog.load_table(name).metadata.snapshot_by_id(landed.snapshot_id)  # type: ignore[arg-type]
    assert snapshot is not None and snapshot.summary is not None
    assert snapshot.summary.get(ancestry.QUERY_ID) == "query-7"


@pytest.mark.database_independent
def test_a_recommit_below_the_high_water_mark_keeps_it_and_a_commit_restores_the_state_id(catalog: SqlCatalog) -> None:
    name = _name(catalog)
    committer = ic.GlobalCommitter(catalog, name, job_id="A")
    for checkpoint_id in (1, 2, 3):
        committer.prepare(checkpoint_id, _results(committer, checkpoint_id))
        committer.commit(checkpoint_id)
    first = _snapshots(catalog, name)[0]
    apply_rollback(catalog, plan_rollback(catalog, name, to_snapshot=first))
    assert committer.recommit(2).status == "committed"
    properties = catalog.load_table(name).metadata.properties
    assert properties[ancestry.job_checkpoint_property("A")] == "3"  # not lowered to 2
    # a checkpoint prepared before tables recorded their state database (an older release)
    committer.prepare(4, _results(committer, 4))
    with catalog.load_table(name).transaction() as edit:
        edit.remove_properties(STATE_ID_PROPERTY)
    ic.GlobalCommitter(catalog, name, job_id="A").commit(4)  # the upgraded release's process
    properties = catalog.load_table(name).metadata.properties
    assert properties[STATE_ID_PROPERTY] == state_identity(committer.store.engine)
    assert properties[ancestry.job_checkpoint_property("A")] == "4"


@pytest.mark.database_independent
@pytest.mark.parametrize("expired", [False, True], ids=["rolled-back", "rolled-back-and-expired"])
def test_a_cached_table_never_decides_a_skip_the_table_as_it_is_now_decides(
    catalog: SqlCatalog, monkeypatch: pytest.MonkeyPatch, expired: bool
) -> None:
    name = _name(catalog)
    committer = ic.GlobalCommitter(catalog, name, job_id="A")
    committer.prepare(1, _results(committer, 1))
    committer.commit(1)
    committer.prepare(2, _results(committer, 2))
    original = CheckpointStore.mark_committed
    calls = {"n": 0}

    def fails_once(self: CheckpointStore, *args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 1:
            raise OperationalError("UPDATE ...", {}, Exception("server closed the connection unexpectedly"))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(CheckpointStore, "mark_committed", fails_once)
    with pytest.raises(StateDatabaseUnavailableError):  # landed, not recorded; this committer caches the table
        committer.commit(2)
    landed = ancestry.find_checkpoint(catalog.load_table(name).metadata, "A", 2)
    assert landed is not None
    first = _snapshots(catalog, name)[0]
    catalog.load_table(name).manage_snapshots().rollback_to_snapshot(first).commit()  # another tool
    if expired:  # and another tool's expiry: only the job's state and high-water mark remember it
        catalog.load_table(name).maintenance.expire_snapshots().by_ids([landed.snapshot_id]).commit()
    # the cached copy still shows checkpoint 2 in the table; the table as it is now does not
    [result] = committer.recover()
    assert (result.status, result.snapshot_id) == ("rolled-back", None if expired else landed.snapshot_id)
    assert committer.store.get("A", name, 2).status == "rolled-back"  # type: ignore[union-attr]
    assert catalog.load_table(name).scan().to_arrow().num_rows == 10


@pytest.mark.database_independent
def test_the_fault_hook_runs_before_each_commit_attempt(catalog: SqlCatalog) -> None:
    name = _name(catalog)
    committer = ic.GlobalCommitter(catalog, name, job_id="A", fault=crash_at("before-commit-attempt", 1))
    committer.prepare(1, _results(committer, 1))
    with pytest.raises(ic.CommitStateUnknownError) as raised:  # an error in an attempt: the ancestry decides
        committer.commit(1)
    assert isinstance(raised.value.cause, Crash) and "before-commit-attempt" in str(raised.value.cause)
    assert _snapshots(catalog, name) == []
    assert ic.GlobalCommitter(catalog, name, job_id="A").commit(1).status == "committed"


@pytest.mark.database_independent
def test_a_conflict_that_outlasts_the_retries_names_its_checkpoint_and_time(
    scripted_catalog: ScriptedCatalog, caplog: pytest.LogCaptureFixture
) -> None:
    catalog = scripted_catalog
    name = _name(catalog)
    policy = RetryPolicy(max_attempts=2, max_seconds=60, min_wait_s=0.001, max_wait_s=0.002)
    committer = ic.GlobalCommitter(catalog, name, job_id="A", retry_policy=policy, sleep=lambda _: None)
    committer.prepare(3, _results(committer, 3))
    catalog.before = [concurrent_append(catalog, name), concurrent_append(catalog, name)]
    with caplog.at_level("WARNING"), pytest.raises(ic.CommitConflictError) as raised:
        committer.commit(3)
    e = raised.value
    assert (e.table, e.checkpoint_id, e.attempts) == (name, 3, 2) and 0 <= e.elapsed_s < 60
    assert any(r.getMessage().startswith("commit of checkpoint 3 conflicted (attempt 1)") for r in caplog.records)


@pytest.mark.database_independent
def test_a_checkpoint_that_landed_is_recorded_though_its_spec_was_removed_since(
    catalog: SqlCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = f"{catalog.name}.events"
    ic.create_table(catalog, name, EVENTS_SCHEMA, partition_by=["day(ts)"])
    committer = ic.GlobalCommitter(catalog, name, job_id="A", fault=crash_at("after-commit", 1))
    committer.prepare(1, _results(committer, 1))
    with pytest.raises(Crash):
        committer.commit(1)
    with catalog.load_table(name).update_spec() as update:
        update.add_identity("event")
    table = catalog.load_table(name)
    # what another engine's RemoveUnusedSpecs leaves: spec 0 gone from the metadata
    metadata = table.metadata.model_copy(
        update={"partition_specs": [s for s in table.metadata.partition_specs if s.spec_id != 0]}
    )
    pruned = Table(table.name(), metadata, table.metadata_location, table.io, catalog)
    restarted = ic.GlobalCommitter(catalog, name, job_id="A")
    monkeypatch.setattr(restarted, "load_table", lambda: pruned)
    [result] = restarted.recover()  # in the table already: recorded as it is, not refused for its spec
    assert result.status == "already-committed"
    assert restarted.store.get("A", name, 1).status == "committed"  # type: ignore[union-attr]


@pytest.mark.database_independent
def test_a_retry_that_finds_its_checkpoint_landed_and_rolled_back_meanwhile_refuses_naming_it(
    scripted_catalog: ScriptedCatalog,
) -> None:
    catalog = scripted_catalog
    name = _name(catalog)
    _first_snapshot(catalog, name)
    committer = ic.GlobalCommitter(
        catalog, name, job_id="A", retry_policy=RetryPolicy(max_attempts=3), sleep=lambda _: None
    )
    committer.prepare(1, _results(committer, 1))
    other_driver: dict[str, int] = {}

    def another_driver_lands_it_then_a_rollback_removes_it() -> None:
        plain = SqlCatalog(catalog.name, **catalog.properties)
        before = plain.load_table(name).current_snapshot().snapshot_id  # type: ignore[union-attr]
        other_driver["snapshot"] = ic.GlobalCommitter(plain, name, job_id="A").commit(1).snapshot_id  # type: ignore[assignment]
        plain.load_table(name).manage_snapshots().rollback_to_snapshot(before).commit()
        plain.engine.dispose()

    catalog.before = [another_driver_lands_it_then_a_rollback_removes_it]
    with pytest.raises(ic.CheckpointRolledBackError) as raised:
        committer.commit(1)  # its first attempt loses the swap; the retry sees what happened
    assert (raised.value.job_id, raised.value.checkpoint_id, raised.value.snapshot_id) == (
        "A", 1, other_driver["snapshot"]
    )  # fmt: skip
    assert catalog.load_table(name).scan().to_arrow().num_rows == 1  # the branch point's row only


@pytest.mark.database_independent
@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"spec_id": 7}, "was written for partition spec 7"),
        ({"column_sizes": "unknown"}, "unknown field ids [999], missing required field ids []"),
        ({"column_sizes": "missing"}, "unknown field ids [], missing required field ids [1]"),
        ({"file_size_in_bytes": 0}, "has impossible counts"),
    ],
    ids=["spec", "unknown-column", "missing-column", "empty-file"],
)
def test_a_data_file_that_does_not_fit_the_table_is_refused_naming_it(
    catalog: SqlCatalog, change: dict[str, Any], says: str
) -> None:
    name = _name(catalog)
    committer = ic.GlobalCommitter(catalog, name, job_id="A")
    [result] = _results(committer, 1)
    bad, *rest = result.data_files
    sizes = dict(bad.column_sizes)
    if change.get("column_sizes") == "unknown":
        change = {"column_sizes": {**sizes, 999: 1}}
    elif change.get("column_sizes") == "missing":
        change = {"column_sizes": {k: v for k, v in sizes.items() if k != 1}}  # id: the required column
    broken = dataclasses.replace(result, data_files=(dataclasses.replace(bad, **change), *rest))
    with pytest.raises(ic.ValidationError) as raised:
        committer.prepare(1, [broken])
    assert (raised.value.checkpoint_id, raised.value.path) == (1, bad.path)
    assert says in str(raised.value)
    assert committer.store.get("A", name, 1) is None and _snapshots(catalog, name) == []


@pytest.mark.database_independent
def test_a_zero_row_data_file_is_committed_beside_the_rows(catalog: SqlCatalog) -> None:
    """Iceberg allows a data file without rows, and another engine's writer can close one
    (a task whose input was empty): it is validated like any other file and committed with
    the checkpoint, whose counts stay those of its rows."""
    import pyarrow.parquet as pq

    name = _name(catalog)
    committer = ic.GlobalCommitter(catalog, name, job_id="A")
    [result] = _results(committer, 1)
    real = result.data_files[0]
    local = real.path.removeprefix("file://")
    empty_path = local.replace(".parquet", "-empty.parquet")
    pq.write_table(pq.read_table(local).slice(0, 0), empty_path)  # the schema keeps the field ids
    columns = list(real.column_sizes)
    empty = dataclasses.replace(
        real, path=("file://" if real.path.startswith("file://") else "") + empty_path,
        file_size_in_bytes=os.path.getsize(empty_path), record_count=0, column_sizes=dict.fromkeys(columns, 0),
        value_counts=dict.fromkeys(columns, 0), null_value_counts=dict.fromkeys(columns, 0), nan_value_counts={},
        lower_bounds={}, upper_bounds={}, split_offsets=(), max_event_time_us=None,
    )  # fmt: skip
    with_empty = dataclasses.replace(
        result, data_files=(*result.data_files, empty), bytes=result.bytes + empty.file_size_in_bytes
    )
    prepared = committer.prepare(1, [with_empty])
    assert (prepared.records, prepared.files) == (10, len(result.data_files) + 1)
    committer.commit(1)
    table = catalog.load_table(name)
    live = {f["file_path"]: f["record_count"] for f in table.inspect.files().to_pylist()}
    assert live[empty.path] == 0 and sum(live.values()) == 10
    assert sorted(table.scan().to_arrow()["id"].to_pylist()) == list(range(100, 110))
    assert committer.store.get("A", name, 1).status == "committed"  # type: ignore[union-attr]


class _JavaStyleAppend(_FastAppendFiles):
    """Iceberg Java's fast append: every manifest of the parent is carried as it is, so a
    manifest's deleted entries outlive the snapshot that deleted them (pyiceberg's drops a
    manifest holding only deleted entries)."""

    def _existing_manifests(self) -> list[ManifestFile]:
        parent = self._transaction.table_metadata.snapshot_by_id(self._parent_snapshot_id)  # type: ignore[arg-type]
        assert parent is not None
        return list(parent.manifests(io=self._io))


@pytest.mark.database_independent
def test_files_a_manifest_lists_as_deleted_are_not_live_after_the_deleting_snapshot_expired(
    catalog: SqlCatalog,
) -> None:
    """A checkpoint's files deleted by a snapshot since expired, whose deleted entries a later
    snapshot still carries: they are not in the table, and no retained snapshot says why."""
    name = _name(catalog)
    committer = ic.GlobalCommitter(catalog, name, job_id="A")
    results = _results(committer, 1)
    committer.prepare(1, results)
    committer.commit(1)
    paths = [f.path for r in results for f in r.data_files]
    assert all_live(catalog.load_table(name), paths, "main")
    catalog.load_table(name).delete(AlwaysTrue())  # another tool deletes every row
    table = catalog.load_table(name)
    with table.transaction() as tx:
        append = _JavaStyleAppend(operation=Operation.APPEND, transaction=tx, io=table.io, branch="main")
        for data_file in _dataframe_to_data_files(tx.table_metadata, events_at(500, first_id=77_777), table.io):
            append.append_data_file(data_file)
        append.commit()
    apply_expire(catalog, plan_expire(catalog, name, older_than=timedelta(0), retain_last=1))
    table = catalog.load_table(name)
    assert len(table.metadata.snapshots) == 1
    head = table.current_snapshot()
    assert head is not None
    carried = [
        e.data_file.file_path
        for m in head.manifests(table.io)
        for e in m.fetch_manifest_entry(table.io, discard_deleted=False)
        if e.status == ManifestEntryStatus.DELETED
    ]
    assert sorted(path_key(p) for p in carried) == sorted(path_key(p) for p in paths)  # the case itself
    assert not all_live(table, paths, "main")
    assert table.scan().to_arrow()["id"].to_pylist() == [77_777]


@pytest.mark.database_independent
def test_the_file_counts_of_a_commit_and_of_a_recovery_that_found_it_landed(catalog: SqlCatalog) -> None:
    name = _name(catalog)
    committer = ic.GlobalCommitter(catalog, name, job_id="A")
    committer.prepare(1, _results(committer, 1))
    committer.commit(1)
    files = committer.store.get("A", name, 1).files  # type: ignore[union-attr]
    counted = committer.store.get("A", name, 1).counters  # type: ignore[union-attr]
    assert (counted.created, counted.committed, counted.skipped, counted.missing) == (files, files, 0, 0)
    dying = ic.GlobalCommitter(catalog, name, job_id="A", fault=crash_at("after-commit", 2))
    dying.prepare(2, _results(dying, 2))
    with pytest.raises(Crash):
        dying.commit(2)
    # landed in an attempt of the process that died: the recovery finds it in, and skips its files
    [recovered] = ic.GlobalCommitter(catalog, name, job_id="A").recover()
    assert recovered.status == "already-committed"
    files = committer.store.get("A", name, 2).files  # type: ignore[union-attr]
    counted = committer.store.get("A", name, 2).counters  # type: ignore[union-attr]
    assert (counted.created, counted.committed, counted.skipped, counted.missing) == (files, 0, files, 0)


@pytest.mark.database_independent
def test_a_rollback_between_the_catalogs_commit_and_the_state_update_leaves_it_rolled_back(
    catalog: SqlCatalog,
) -> None:
    name = _name(catalog)
    committer = ic.GlobalCommitter(catalog, name, job_id="A")
    committer.prepare(1, _results(committer, 1))
    first = committer.commit(1).snapshot_id

    def roll_back_meanwhile(where: str, checkpoint_id: int) -> None:
        if where == "after-commit" and checkpoint_id == 2:
            apply_rollback(catalog, plan_rollback(catalog, name, to_snapshot=first))

    racing = ic.GlobalCommitter(catalog, name, job_id="A", fault=roll_back_meanwhile)
    racing.prepare(2, _results(racing, 2))
    [result] = racing.recover()  # (commit() then refuses it: CheckpointRolledBackError)
    landed = [s.snapshot_id for s in catalog.load_table(name).metadata.snapshots if s.snapshot_id != first]
    assert (result.status, [result.snapshot_id]) == ("rolled-back", landed)  # names the snapshot that landed
    assert racing.store.get("A", name, 2).status == "rolled-back"  # type: ignore[union-attr]


@pytest.mark.database_independent
def test_a_landed_checkpoint_on_a_branch_whose_snapshot_expired_names_it_from_that_branchs_head(
    catalog: SqlCatalog,
) -> None:
    name = _name(catalog)
    _branch(catalog, name, "audit")
    dying = ic.GlobalCommitter(catalog, name, job_id="A", branch="audit", fault=crash_at("after-commit", 1))
    dying.prepare(1, _results(dying, 1))
    with pytest.raises(Crash):  # landed on audit; the state row still says prepared
        dying.commit(1)
    landed = ancestry.find_checkpoint(catalog.load_table(name).metadata, "A", 1, "audit")
    assert landed is not None
    other = ic.GlobalCommitter(catalog, name, job_id="B", branch="audit")
    other.prepare(1, _results(other, 1))
    other.commit(1)  # now the head of audit; main never saw either
    apply_expire(catalog, plan_expire(catalog, name, older_than=timedelta(0), retain_last=1))
    assert ancestry.find_checkpoint(catalog.load_table(name).metadata, "A", 1, "audit") is None
    [result] = ic.GlobalCommitter(catalog, name, job_id="A", branch="audit").recover()
    assert (result.status, result.snapshot_id) == ("already-committed", landed.snapshot_id)
