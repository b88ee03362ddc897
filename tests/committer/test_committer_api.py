"""The committer's operator-facing calls (validate, abandon, acknowledge, recommit) refuse
with errors that carry the facts as attributes (job, checkpoint, table, snapshot), change
nothing when they refuse, and hold against the races they document: a commit landing while
a checkpoint is being abandoned, another tool's rollback, a re-commit whose process died
after the catalog accepted it."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from pyiceberg.catalog.sql import SqlCatalog
from sqlalchemy.exc import OperationalError

import icecommit as ic
import icecommit.committer.committer as committer_module
from icecommit.catalog import apply_rollback, plan_rollback
from icecommit.datafiles import RequiredNullViolation
from icecommit.errors import (
    CheckpointCommittedError,
    CheckpointNotFoundError,
    SchemaMismatchError,
    StateDatabaseMismatchError,
    StateDatabaseUnavailableError,
)
from icecommit.state import CheckpointStore, state_engine
from icecommit.state.database import shown_uri
from tests.helpers import EVENTS_SCHEMA, events, write_arrow
from tests.lifecycle.test_lifecycle import Crash, _crash_at


def _name(catalog: SqlCatalog) -> str:
    name = f"{catalog.name}.events"
    ic.create_table(catalog, name, EVENTS_SCHEMA, partition_by=["event"])
    return name


def _results(committer: ic.GlobalCommitter, checkpoint_id: int) -> list[ic.WriteResult]:
    rows = events(checkpoint_id * 100, checkpoint_id * 100 + 10)
    return [write_arrow(committer.load_table(), rows, job_id=committer.job_id, checkpoint_id=checkpoint_id)]


def _snapshots(catalog: SqlCatalog, name: str) -> list[int]:
    return [s.snapshot_id for s in catalog.load_table(name).metadata.snapshots]


def _facts(error: Any) -> tuple[Any, ...]:
    return (error.job_id, error.checkpoint_id, error.table)


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

    def unreachable(*_args: object) -> bool:
        raise OperationalError("SELECT ...", {}, Exception("server closed the connection unexpectedly"))

    monkeypatch.setattr(committer_module, "records_state", unreachable)
    with pytest.raises(StateDatabaseUnavailableError) as down:
        committer.validate(2, _results(committer, 2))
    assert down.value.uri == shown_uri(committer.store.engine)
    assert down.value.reason.endswith("; nothing was validated")
    assert isinstance(down.value.__cause__, OperationalError)


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


def test_a_commit_that_landed_but_was_not_recorded_during_an_abandon_wins(catalog: SqlCatalog) -> None:
    name = _name(catalog)
    committer = ic.GlobalCommitter(catalog, name, job_id="A")
    committer.prepare(1, _results(committer, 1))
    dying = ic.GlobalCommitter(catalog, name, job_id="A", fault=_crash_at("after-commit", 1))

    def land_and_die() -> None:
        with pytest.raises(Crash):
            dying.commit(1)

    racing = ic.GlobalCommitter(catalog, name, job_id="A", store=_RacingStore(committer.store, land_and_die))
    with pytest.raises(CheckpointCommittedError) as lost:
        racing.abandon(1, reason="looks stuck")
    [snapshot] = _snapshots(catalog, name)
    assert (*_facts(lost.value), lost.value.snapshot_id) == ("A", 1, name, snapshot)
    reopened = committer.store.get("A", name, 1)  # the abandon is undone: prepared, as the commit left it
    assert reopened is not None and (reopened.status, reopened.abandon_reason, reopened.abandoned_by) == (
        "prepared", None, None
    )  # fmt: skip
    assert committer.commit(1).status == "already-committed"
    assert committer.store.get("A", name, 1).status == "committed"  # type: ignore[union-attr]
    assert _snapshots(catalog, name) == [snapshot]


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


def test_a_recommit_whose_process_died_after_the_catalog_accepted_it_is_recorded_once(catalog: SqlCatalog) -> None:
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
        ic.GlobalCommitter(catalog, name, job_id="A", fault=_crash_at("after-commit", 2)).recommit(2)
    relanded = catalog.load_table(name).current_snapshot()
    assert relanded is not None and relanded.snapshot_id not in (first, second)
    assert committer.store.get("A", name, 2).status == "rolled-back"  # type: ignore[union-attr]

    result = ic.GlobalCommitter(catalog, name, job_id="A").recommit(2)
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
