"""Nothing reaches readers unchecked: a checkpoint whose checks fail (or every checkpoint,
with a manual release) is committed to its job's audit branch and held there; publishing
brings it to main exactly once (a fast-forward, or its changes again when main moved), and
the checkpoints queued behind it follow in order; discarding gives it up. Written without
Spark (``write_arrow``, as a task writes); SQLite and PostgreSQL."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog

import icecommit as ic
from icecommit import checks
from icecommit.committer import committed_checkpoints, holding, release
from icecommit.committer.holding import Gate
from icecommit.core import ancestry
from icecommit.errors import CheckpointHeldError, InvalidArgumentError
from icecommit.state.checkpoints import CheckpointStore
from tests.committer.crash_driver import InjectedCrash
from tests.fakes import events_at, tables_committed_together
from tests.helpers import EVENTS_SCHEMA, events, write_arrow

AUDIT = "icecommit-audit-j"


def _table(catalog: SqlCatalog) -> str:
    name = f"{catalog.name}.events"
    ic.create_table(catalog, name, EVENTS_SCHEMA, partition_by=["event"])
    return name


def _committer(catalog: SqlCatalog, name: str, gate: Gate | None, job: str = "j", **kwargs: object):
    return ic.GlobalCommitter(catalog, name, job_id=job, gate=gate, sleep=lambda _: None, **kwargs)  # type: ignore[arg-type]


def _land(committer: ic.GlobalCommitter, checkpoint_id: int, rows: pa.Table) -> ic.CommitResult:
    results = [write_arrow(committer.load_table(), rows, job_id=committer.job_id, checkpoint_id=checkpoint_id)]
    committer.prepare(checkpoint_id, results)
    return committer.commit(checkpoint_id)


def _ids(catalog: SqlCatalog, name: str, branch: str = ancestry.MAIN_BRANCH) -> list[int]:
    table = catalog.load_table(name)
    ref = table.metadata.refs.get(branch)
    if ref is None:
        return []
    return sorted(table.scan(snapshot_id=ref.snapshot_id, selected_fields=("id",)).to_arrow().column("id").to_pylist())


def _on(catalog: SqlCatalog, name: str, branch: str = ancestry.MAIN_BRANCH) -> Counter[tuple[str, int]]:
    metadata = catalog.load_table(name).metadata
    return Counter((s.job_id, s.checkpoint_id) for s in committed_checkpoints(metadata, branch))


def _ids_of(rows: pa.Table) -> list[int]:
    return sorted(rows.column("id").to_pylist())


STRICT = Gate(checks=(checks.row_count(min=10), checks.not_null("id")))


def test_a_failed_check_holds_the_checkpoint_on_the_audit_branch_and_nothing_reaches_main(
    catalog: SqlCatalog,
) -> None:
    name = _table(catalog)
    committer = _committer(catalog, name, STRICT)
    _land(committer, 1, events(0, 20))
    with pytest.raises(CheckpointHeldError, match=r"row_count\(min=10\)") as held:
        _land(committer, 2, events(100, 105))
    assert held.value.branch == AUDIT and held.value.failed[0][1] == 5  # observed: 5 rows
    assert _ids(catalog, name) == _ids_of(events(0, 20))  # main: checkpoint 1 only
    assert _ids(catalog, name, AUDIT) == _ids_of(events(0, 20)) + _ids_of(events(100, 105))
    state = committer.store.get("j", committer.table_name, 2)
    assert state is not None and (state.status, state.audit_branch, state.hold_reason) == ("held", AUDIT, "checks")
    again = _committer(catalog, name, Gate(checks=STRICT.checks, on_check_failure="queue")).commit(2)
    assert again.status == "held" and [r.ok for r in again.checks] == [False, True]  # a replay: still held
    assert _on(catalog, name) == Counter({("j", 1): 1}) and _on(catalog, name, AUDIT)[("j", 2)] == 1


def test_checks_that_pass_go_to_main_with_their_results(catalog: SqlCatalog) -> None:
    name = _table(catalog)
    result = _land(_committer(catalog, name, STRICT), 1, events(0, 20))
    assert result.status == "committed" and [(r.name, r.ok) for r in result.checks] == [
        ("row_count(min=10)", True),
        ("not_null(id)", True),
    ]
    assert AUDIT not in catalog.load_table(name).metadata.refs and _ids(catalog, name) == _ids_of(events(0, 20))


def test_a_manual_release_holds_every_checkpoint_and_publish_fast_forwards_main(catalog: SqlCatalog) -> None:
    name = _table(catalog)
    committer = _committer(catalog, name, Gate(publish="manual"))
    held = _land(committer, 1, events(0, 10))  # the table had no snapshot: the commit makes the branch
    assert held.status == "held" and _ids(catalog, name) == []
    published = ic.publish(catalog, name, job_id="j", checkpoint_id=1)
    assert [r.status for r in published] == ["committed"]
    assert published[0].snapshot_id == held.snapshot_id  # fast-forwarded: the snapshot keeps its id
    assert _ids(catalog, name) == _ids_of(events(0, 10))
    assert ancestry.highest_committed_checkpoint(catalog.load_table(name).metadata, "j") == 1
    second = _land(committer, 2, events(100, 110))  # the audit branch now starts from main's head
    assert second.status == "held"
    assert ic.publish(catalog, name, job_id="j", checkpoint_id=2)[0].snapshot_id == second.snapshot_id
    assert ic.publish(catalog, name, job_id="j", checkpoint_id=2)[0].status == "already-committed"
    assert committer.commit(2).status == "already-committed"
    assert _on(catalog, name) == Counter({("j", 1): 1, ("j", 2): 1})
    state = committer.store.get("j", committer.table_name, 2)
    assert state is not None and state.status == "committed" and state.published_by and not state.publish_forced


def test_a_held_checkpoint_is_committed_again_when_main_moved_meanwhile(catalog: SqlCatalog) -> None:
    name = _table(catalog)
    committer = _committer(catalog, name, Gate(publish="manual"))
    _land(_committer(catalog, name, None, job="other"), 1, events(0, 10))
    held = _land(committer, 1, events(100, 110))
    _land(_committer(catalog, name, None, job="other"), 2, events(200, 210))  # main moves on
    published = ic.publish(catalog, name, job_id="j", checkpoint_id=1)[0]
    assert published.snapshot_id != held.snapshot_id  # committed again on main
    assert _ids(catalog, name) == _ids_of(events(0, 10)) + _ids_of(events(100, 110)) + _ids_of(events(200, 210))
    assert _on(catalog, name) == Counter({("other", 1): 1, ("other", 2): 1, ("j", 1): 1})


def test_a_failed_check_needs_force_and_a_reason_both_recorded(catalog: SqlCatalog) -> None:
    name = _table(catalog)
    with pytest.raises(CheckpointHeldError):
        _land(_committer(catalog, name, STRICT), 1, events(0, 3))
    before = catalog.load_table(name).metadata_location
    with pytest.raises(InvalidArgumentError, match="force"):
        ic.publish(catalog, name, job_id="j", checkpoint_id=1)
    with pytest.raises(InvalidArgumentError, match="reason"):
        ic.publish(catalog, name, job_id="j", checkpoint_id=1, force=True)
    assert catalog.load_table(name).metadata_location == before  # nothing changed
    ic.publish(catalog, name, job_id="j", checkpoint_id=1, force=True, reason="a small test batch", by="ana")
    state = ic.GlobalCommitter(catalog, name, job_id="j").store.get("j", f"{catalog.name}.events", 1)
    assert state is not None and (state.published_by, state.publish_reason, state.publish_forced) == (
        "ana",
        "a small test batch",
        True,
    )
    assert _ids(catalog, name) == _ids_of(events(0, 3))


def test_queued_checkpoints_wait_behind_a_held_one_and_follow_it_in_order(catalog: SqlCatalog) -> None:
    name = _table(catalog)
    committer = _committer(catalog, name, Gate(checks=STRICT.checks, on_check_failure="queue"))
    _land(committer, 1, events(0, 20))
    assert _land(committer, 2, events(100, 103)).status == "held"  # no raise: the job goes on
    assert _land(committer, 3, events(200, 220)).status == "held"  # its checks pass: queued behind 2
    assert _ids(catalog, name) == _ids_of(events(0, 20))
    with pytest.raises(InvalidArgumentError, match=r"checkpoint 2 of job 'j' in \S+ first"):
        ic.publish(catalog, name, job_id="j", checkpoint_id=3)
    published = ic.publish(catalog, name, job_id="j", checkpoint_id=2, force=True, reason="known short batch")
    assert [r.checkpoint_id for r in published] == [2, 3]
    assert _ids(catalog, name) == _ids_of(events(0, 20)) + _ids_of(events(100, 103)) + _ids_of(events(200, 220))
    assert _on(catalog, name) == Counter({("j", 1): 1, ("j", 2): 1, ("j", 3): 1})
    assert _land(committer, 4, events(300, 320)).status == "committed"  # nothing waits: straight to main


def test_discarding_a_held_checkpoint_releases_the_queue_without_its_rows(catalog: SqlCatalog) -> None:
    name = _table(catalog)
    committer = _committer(catalog, name, Gate(checks=STRICT.checks, on_check_failure="queue"))
    _land(committer, 1, events(0, 20))
    _land(committer, 2, events(100, 103))
    _land(committer, 3, events(200, 220))
    ic.discard(catalog, name, job_id="j", checkpoint_id=2, reason="duplicated upstream", by="ana")
    assert _ids(catalog, name) == _ids_of(events(0, 20)) + _ids_of(events(200, 220))  # 3 without 2's rows
    states = {s.checkpoint_id: s for s in committer.store.list(committer.table_name, job_id="j")}
    assert (states[2].status, states[2].abandoned_by, states[3].status) == ("abandoned", "ana", "committed")
    assert committer.commit(2).status == "abandoned"  # a replay of the discarded one: a no-op
    with pytest.raises(InvalidArgumentError, match="held"):
        ic.discard(catalog, name, job_id="j", checkpoint_id=3, reason="too late")


def test_an_empty_checkpoint_is_checked_too(catalog: SqlCatalog) -> None:
    name = _table(catalog)
    committer = _committer(catalog, name, Gate(checks=(checks.row_count(min=1),)))
    table = committer.load_table()
    committer.prepare(1, [write_arrow(table, events(0, 0), job_id="j", checkpoint_id=1)])
    with pytest.raises(CheckpointHeldError, match=r"row_count\(min=1\)"):
        committer.commit(1)
    assert ic.publish(catalog, name, job_id="j", checkpoint_id=1, force=True, reason="no data today")[0].status == (
        "committed"
    )
    assert _ids(catalog, name) == []


@pytest.mark.parametrize("point", ["after-prepare", "before-commit-attempt", "after-commit"])
def test_a_crash_while_holding_then_a_recovery_holds_it_once(catalog: SqlCatalog, point: str) -> None:
    name = _table(catalog)
    gate = Gate(publish="manual")
    _land(_committer(catalog, name, None), 1, events(0, 10))

    def crash(at: str, checkpoint_id: int) -> None:
        if at == point and checkpoint_id == 2:
            raise InjectedCrash(at)

    with pytest.raises(InjectedCrash):
        _land(_committer(catalog, name, gate, fault=crash), 2, events(100, 110))
    recovered = _committer(catalog, name, gate).recover()
    assert [r.status for r in recovered] in (["held"], [])  # after-commit: recorded by the next call
    assert _committer(catalog, name, gate).commit(2).status == "held"
    assert _on(catalog, name, AUDIT)[("j", 2)] == 1 and ("j", 2) not in _on(catalog, name)
    ic.publish(catalog, name, job_id="j", checkpoint_id=2)
    assert _on(catalog, name) == Counter({("j", 1): 1, ("j", 2): 1})


def test_a_publish_that_landed_and_was_not_recorded_is_found_not_applied_twice(
    catalog: SqlCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = _table(catalog)
    committer = _committer(catalog, name, Gate(publish="manual"))
    _land(committer, 1, events(0, 10))
    _land(_committer(catalog, name, None, job="other"), 1, events(500, 510))  # main moved: committed again
    recorded = CheckpointStore.mark_published

    def lost(*args: object, **kwargs: object) -> bool:
        raise InjectedCrash("after publish, before it was recorded")

    monkeypatch.setattr(CheckpointStore, "mark_published", lost)
    with pytest.raises(InjectedCrash):
        ic.publish(catalog, name, job_id="j", checkpoint_id=1)
    monkeypatch.setattr(CheckpointStore, "mark_published", recorded)
    ic.publish(catalog, name, job_id="j", checkpoint_id=1)
    assert _on(catalog, name) == Counter({("other", 1): 1, ("j", 1): 1})
    assert _ids(catalog, name) == _ids_of(events(0, 10)) + _ids_of(events(500, 510))


def test_a_time_partition_is_complete_only_once_its_rows_are_on_main(catalog: SqlCatalog) -> None:
    name = f"{catalog.name}.hourly"
    ic.create_table(catalog, name, EVENTS_SCHEMA, partition_by=["event", "hour(ts)"])
    committer = _committer(catalog, name, Gate(publish="manual"))
    results = [write_arrow(committer.load_table(), events_at(0, 10, 59, 70), job_id="j", checkpoint_id=1)]
    committer.prepare(1, results)
    assert committer.commit(1).status == "held"
    assert committer.partition_status() == []  # its watermark passed 00:59, but no row of it is on main
    ic.publish(catalog, name, job_id="j", checkpoint_id=1)
    assert [s.label for s in committer.partition_status()] == ["ts_hour=2026-05-01-00"]


def test_unique_against_the_table_looks_its_keys_up_among_the_live_rows(catalog: SqlCatalog) -> None:
    name = _table(catalog)
    committer = _committer(catalog, name, Gate(checks=(checks.unique("id", against_table=True),)))
    assert _land(committer, 1, events(0, 20)).status == "committed"
    with pytest.raises(CheckpointHeldError, match="unique") as held:
        _land(committer, 2, events(15, 25))  # ids 15..19 are live already
    assert held.value.failed[0][1] == 5
    assert _land(committer, 3, events(100, 110)).status == "held"  # queued behind 2 (it raised, not queued)


def test_a_routed_checkpoint_waits_in_all_its_tables_and_is_published_or_discarded_in_all(
    catalog: SqlCatalog,
) -> None:
    names = {kind: f"{catalog.name}.{kind}" for kind in ("clicks", "views")}
    for name in names.values():
        ic.create_table(catalog, name, EVENTS_SCHEMA)
    gates = {"clicks": None, "views": Gate(checks=(checks.row_count(min=10),), on_check_failure="queue")}
    committers = {k: _committer(catalog, names[k], gates[k], job="routed") for k in names}

    def land(checkpoint_id: int, rows: dict[str, pa.Table]) -> dict[str, str]:
        results = {
            k: [write_arrow(committers[k].load_table(), r, job_id="routed", checkpoint_id=checkpoint_id)]
            for k, r in rows.items()
        }
        along = any(committers[k].checks_fail(checkpoint_id, results[k], committers[k].load_table()) for k in rows)
        for k in rows:  # as a routed write prepares its tables: all of them held when one fails
            committers[k].prepare_planned(checkpoint_id, results[k], held_along=along)
        return {k: committers[k].commit(checkpoint_id).status for k in rows}

    assert land(1, {"clicks": events(0, 20), "views": events(100, 103)}) == {"clicks": "held", "views": "held"}
    assert _ids(catalog, names["clicks"]) == [] and _ids(catalog, names["views"]) == []
    with pytest.raises(InvalidArgumentError, match="force"):  # refused before any table is published
        ic.publish(catalog, names["clicks"], job_id="routed", checkpoint_id=1)
    published = ic.publish(catalog, names["clicks"], job_id="routed", checkpoint_id=1, force=True, reason="ok")
    assert sorted(r.table for r in published) == sorted(names.values())
    assert _ids(catalog, names["clicks"]) == _ids_of(events(0, 20))
    assert _ids(catalog, names["views"]) == _ids_of(events(100, 103))
    assert land(2, {"clicks": events(200, 220), "views": events(300, 301)}) == {"clicks": "held", "views": "held"}
    ic.discard(catalog, names["views"], job_id="routed", checkpoint_id=2, reason="a bad batch")
    states = [c.store.get("routed", names[k], 2) for k, c in committers.items()]
    assert [s.status for s in states if s is not None] == ["abandoned", "abandoned"]
    assert _ids(catalog, names["clicks"]) == _ids_of(events(0, 20))  # nothing of 2 in either table


def test_a_discard_that_stopped_before_releasing_the_queue_goes_on_when_run_again(
    catalog: SqlCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = _table(catalog)
    committer = _committer(catalog, name, Gate(checks=STRICT.checks, on_check_failure="queue"))
    _land(committer, 1, events(100, 103))
    _land(committer, 2, events(200, 220))  # queued behind 1
    follow = release._follow

    def crash(*args: object, **kwargs: object) -> list[ic.CommitResult]:
        raise InjectedCrash("after the discard was recorded, before the queue was released")

    monkeypatch.setattr(release, "_follow", crash)
    with pytest.raises(InjectedCrash):
        ic.discard(catalog, name, job_id="j", checkpoint_id=1, reason="bad")
    monkeypatch.setattr(release, "_follow", follow)
    assert _ids(catalog, name) == []
    ic.discard(catalog, name, job_id="j", checkpoint_id=1, reason="bad")
    assert _ids(catalog, name) == _ids_of(events(200, 220))
    assert _on(catalog, name) == Counter({("j", 2): 1})


def test_a_fast_forward_whose_answer_was_lost_is_found_on_main(catalog: SqlCatalog) -> None:
    name = _table(catalog)
    committer = _committer(catalog, name, Gate(publish="manual"))
    held = _land(committer, 1, events(0, 10))
    accept = catalog.commit_table
    state = {"lost": False}

    def lose_once(*args: object, **kwargs: object) -> object:
        response = accept(*args, **kwargs)  # type: ignore[arg-type]
        if not state["lost"]:
            state["lost"] = True
            raise ConnectionResetError("the catalog's answer was lost")
        return response

    catalog.commit_table = lose_once  # type: ignore[method-assign]
    try:
        published = ic.publish(catalog, name, job_id="j", checkpoint_id=1)
    finally:
        catalog.commit_table = accept  # type: ignore[method-assign]
    assert state["lost"] and published[0].snapshot_id == held.snapshot_id
    assert _on(catalog, name) == Counter({("j", 1): 1}) and _ids(catalog, name) == _ids_of(events(0, 10))


def test_a_routed_tables_checks_are_judged_once_and_look_keys_up_on_its_branch(
    catalog: SqlCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    # judged before any table is prepared (all wait if one fails) and reused at prepare;
    # unique(..., against_table=True) looks the keys up there too
    name = _table(catalog)
    gate = Gate(checks=(checks.unique("id", against_table=True), checks.row_count(min=1)), on_check_failure="queue")
    committer = _committer(catalog, name, gate)
    assert _land(committer, 1, events(0, 20)).status == "committed"
    judged: list[int] = []
    evaluate = holding.evaluate_checks
    monkeypatch.setattr(holding, "evaluate_checks", lambda *a, **k: judged.append(1) or evaluate(*a, **k))
    results = [write_arrow(committer.load_table(), events(18, 30), job_id="j", checkpoint_id=2)]
    assert committer.checks_fail(2, results, committer.load_table())  # 18 and 19 are live
    committer.prepare_planned(2, results, held_along=True)
    held = committer.commit(2)
    assert held.status == "held" and len(judged) == 1
    assert [(r.check, r.ok, r.observed) for r in held.checks] == [
        ("unique(id, against_table=True)", False, 2),
        ("row_count(min=1)", True, 12),
    ]


def test_a_routed_checkpoint_is_published_to_its_tables_in_one_catalog_commit(
    catalog: SqlCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = [f"{catalog.name}.clicks", f"{catalog.name}.views"]
    for name in names:
        ic.create_table(catalog, name, EVENTS_SCHEMA)
    gates = [None, Gate(checks=(checks.row_count(min=10),), on_check_failure="queue")]  # 5 rows fail the views'
    committers = {n: _committer(catalog, n, g, job="routed") for n, g in zip(names, gates, strict=True)}
    results = {n: [write_arrow(c.load_table(), events(0, 5), job_id="routed", checkpoint_id=1)]
               for n, c in committers.items()}  # fmt: skip
    for name, committer in committers.items():
        committer.prepare_planned(1, results[name], held_along=True)
        assert committer.commit(1).status == "held"
    together = tables_committed_together(monkeypatch)
    published = ic.publish(catalog, names[0], job_id="routed", checkpoint_id=1, force=True, reason="a test")
    assert sorted(r.table for r in published) == names and together == [names]
    assert all(_ids(catalog, n) == _ids_of(events(0, 5)) for n in names)
