"""One checkpoint's tables in one catalog commit (``commit_to_tables(..., together_in=)``):
every table moves in one database transaction or none does; a conflict on one table
changes no table and the attempt goes again; a crash before or after the transaction
leaves the checkpoint in every table or in none, and the next run commits nothing twice;
a table whose part fails before it is sent keeps the others from landing. Written without
Spark (``write_arrow``, as a task writes); SQLite, PostgreSQL and (``over_rest``) the REST
catalog server, whose ``/v1/config`` lists ``transactions/commit``."""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import requests
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.table.update import AssertTableUUID, SetPropertiesUpdate

import icecommit as ic
from icecommit.catalog.multi_table import TableChange, can_commit_together, commit_together
from icecommit.committer import committed_checkpoints
from icecommit.committer.checkpoint_tables import commit_to_tables
from icecommit.core import ancestry
from icecommit.core.overwrite import OVERWRITE_PARTITIONS
from icecommit.core.pyiceberg_internals import rest_session
from icecommit.core.upsert import UPSERT
from icecommit.errors import InvalidArgumentError, StateDatabaseUnavailableError, TableGroupError
from icecommit.maintenance import apply_rollbacks, find_orphans
from tests.cli.runner import invoke
from tests.committer.crash_driver import InjectedCrash
from tests.fakes import tables_committed_together
from tests.helpers import EVENTS_SCHEMA, events, write_arrow

JOB = "routed"


def _tables(catalog: SqlCatalog, count: int = 2) -> list[str]:
    names = [f"{catalog.name}.t{i}" for i in range(count)]
    for name in names:
        ic.create_table(catalog, name, EVENTS_SCHEMA)
    return names


def _prepared(catalog: SqlCatalog, names: Sequence[str], checkpoint_id: int) -> tuple[dict, dict]:
    committers = {n: ic.GlobalCommitter(catalog, n, job_id=JOB, sleep=lambda _: None) for n in names}
    plans = {}
    for i, (name, committer) in enumerate(committers.items()):
        rows = events(checkpoint_id * 100 + i * 10, checkpoint_id * 100 + i * 10 + 5)
        results = [write_arrow(committer.load_table(), rows, job_id=JOB, checkpoint_id=checkpoint_id)]
        plans[name] = committer.prepare_planned(checkpoint_id, results)
    return committers, plans


def _landed(catalog: SqlCatalog, name: str) -> Counter[int]:
    return Counter(s.checkpoint_id for s in committed_checkpoints(catalog.load_table(name).metadata))


def _snapshots(catalog: SqlCatalog, name: str) -> int:
    return len(catalog.load_table(name).metadata.snapshots)


@pytest.mark.over_rest
def test_every_table_moves_in_one_catalog_commit(catalog: SqlCatalog) -> None:
    assert can_commit_together(catalog)
    names = _tables(catalog, 3)
    committers, plans = _prepared(catalog, names, 1)
    fired: list[tuple[str, Sequence[str]]] = []
    results = commit_to_tables(committers, 1, plans, together_in=catalog, fault=lambda p, t: fired.append((p, t)))
    assert [r.status for r in results.values()] == ["committed"] * 3
    around = [f for f in fired if f[0] != "after-metadata-file"]
    assert around == [("before-group-commit", sorted(names)), ("after-group-commit", sorted(names))]
    files = sorted(t for p, tables in fired if p == "after-metadata-file" for t in tables)
    assert files == (sorted(names) if isinstance(catalog, SqlCatalog) else [])  # REST: the server writes them
    assert all(_landed(catalog, n) == Counter({1: 1}) for n in names)
    for name in names:  # the snapshot says it was one of three tables committed at once
        summary = catalog.load_table(name).current_snapshot().summary  # type: ignore[union-attr]
        assert summary["icecommit.tables-in-commit"] == "3"
    again = commit_to_tables(committers, 1, plans, together_in=catalog)  # a replay
    assert [r.status for r in again.values()] == ["already-committed"] * 3
    assert all(_landed(catalog, n) == Counter({1: 1}) for n in names)


@pytest.mark.over_rest
def test_a_conflict_on_one_table_changes_none_and_the_attempt_goes_again(catalog: SqlCatalog) -> None:
    names = _tables(catalog)
    committers, plans = _prepared(catalog, names, 1)
    other = ic.GlobalCommitter(catalog, names[1], job_id="other", sleep=lambda _: None)
    seen: list[list[int]] = []

    def other_writes() -> None:
        other.prepare(1, [write_arrow(other.load_table(), events(900, 905), job_id="other", checkpoint_id=1)])
        assert other.commit(1).committed

    def meanwhile(point: str, tables: Sequence[str]) -> None:
        if point == "before-group-commit" and not seen:  # another writer (a thread of its own) moves it first
            writer = threading.Thread(target=other_writes)
            writer.start()
            writer.join()
        if point == "before-group-commit":
            seen.append([_snapshots(catalog, n) for n in names])

    results = commit_to_tables(committers, 1, plans, together_in=catalog, fault=meanwhile)
    assert [r.status for r in results.values()] == ["committed", "committed"]
    assert seen == [[0, 1], [0, 1]]  # the first transaction lost on the second table: the first did not move
    assert [r.retries for r in results.values()] == [1, 1]
    assert _landed(catalog, names[0]) == Counter({1: 1}) and _snapshots(catalog, names[0]) == 1
    assert sorted(_landed(catalog, names[1]).elements()) == [1, 1]  # the other job's and ours


@pytest.mark.over_rest
@pytest.mark.parametrize("point", ["before-group-commit", "after-metadata-file", "after-group-commit"])
def test_a_crash_around_the_transaction_leaves_all_or_none_and_the_next_run_commits_once(
    catalog: SqlCatalog, point: str
) -> None:
    names = _tables(catalog)
    committers, plans = _prepared(catalog, names, 1)

    if point == "after-metadata-file" and not isinstance(catalog, SqlCatalog):
        pytest.skip("a REST server writes the metadata files itself")

    def crash(at: str, tables: Sequence[str]) -> None:
        if at == point:  # after-metadata-file: once the first table's new file is written
            raise InjectedCrash(at)

    with pytest.raises(InjectedCrash):
        commit_to_tables(committers, 1, plans, together_in=catalog, fault=crash)
    landed = [_landed(catalog, n)[1] for n in names]
    assert landed == ([1, 1] if point == "after-group-commit" else [0, 0])
    assert all(c.store.get(JOB, n, 1).status == "prepared" for n, c in committers.items())  # type: ignore[union-attr]
    # the job runs again: its checkpoint is prepared already, and is committed from its state
    rerun = {n: ic.GlobalCommitter(catalog, n, job_id=JOB, sleep=lambda _: None) for n in names}
    results = commit_to_tables(rerun, 1, {n: c.plan(1) for n, c in rerun.items()}, together_in=catalog)
    assert {r.status for r in results.values()} <= {"committed", "already-committed"}
    assert all(_landed(catalog, n) == Counter({1: 1}) for n in names)
    assert all(c.store.get(JOB, n, 1).status == "committed" for n, c in rerun.items())  # type: ignore[union-attr]


@pytest.mark.over_rest
def test_a_table_that_fails_before_its_part_is_sent_keeps_the_others_from_landing(
    catalog: SqlCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = _tables(catalog)
    committers, plans = _prepared(catalog, names, 1)
    broken, other = committers[names[1]], committers[names[0]]
    kept_from_landing: list[BaseException] = []
    commit = other.commit

    def refuse(checkpoint_id: int, **kwargs: object) -> ic.CommitResult:
        raise StateDatabaseUnavailableError("sqlite:///state.db", "the state database went away")

    def recorded(checkpoint_id: int, **kwargs: Any) -> ic.CommitResult:
        try:
            return commit(checkpoint_id, **kwargs)
        except BaseException as e:
            kept_from_landing.append(e)
            raise

    monkeypatch.setattr(broken, "commit", refuse)
    monkeypatch.setattr(other, "commit", recorded)
    with pytest.raises(StateDatabaseUnavailableError):  # the part that failed, not the one it held back
        commit_to_tables(committers, 1, plans, together_in=catalog)
    assert [type(e) for e in kept_from_landing] in ([], [TableGroupError])  # it may not have got to send
    if kept_from_landing:
        assert re.search(f"{names[1]}.*no table of the checkpoint changed", str(kept_from_landing[0]))
    assert [_snapshots(catalog, n) for n in names] == [0, 0]
    monkeypatch.undo()
    results = commit_to_tables(committers, 1, plans, together_in=catalog)
    assert [r.status for r in results.values()] == ["committed", "committed"]


def test_a_pointer_moved_after_it_was_read_rolls_every_table_back(catalog: SqlCatalog) -> None:
    names = _tables(catalog)
    changes = [
        TableChange(t, (AssertTableUUID(uuid=t.metadata.table_uuid),), (SetPropertiesUpdate(updates={"owner": "a"}),))
        for t in (catalog.load_table(n) for n in names)
    ]
    moved: list[str] = []

    def meanwhile(table: str) -> None:  # once the first table's new metadata file is written
        if not moved:
            moved.append(table)
            with catalog.load_table(names[1]).transaction() as tx:  # the second pointer moves after it was read
                tx.set_properties({"owner": "someone else"})

    with pytest.raises(CommitFailedException, match=f"{names[1]}.*no table changed"):
        commit_together(catalog, changes, fault=meanwhile)
    assert moved == [names[0]]
    assert "owner" not in catalog.load_table(names[0]).metadata.properties  # rolled back with the second
    # the first table's metadata file of the transaction that lost is referenced by nothing: the sweep's
    table = catalog.load_table(names[0])
    written = {p for p in Path(table.metadata.location.removeprefix("file://"), "metadata").glob("*.metadata.json")}
    kept = {Path(e.metadata_file.removeprefix("file://")) for e in table.metadata.metadata_log}
    kept.add(Path(table.metadata_location.removeprefix("file://")))
    lost = written - kept
    assert len(lost) == 1
    sweep = find_orphans(catalog, names[0], older_than=timedelta(0), now=datetime.now(timezone.utc) + timedelta(days=9))
    assert {str(p) for p in lost} <= {o.path.removeprefix("file://").removeprefix("file:") for o in sweep.orphans}
    assert catalog.load_table(names[1]).metadata.properties["owner"] == "someone else"
    again = [TableChange(catalog.load_table(n), (), c.updates) for n, c in zip(names, changes, strict=True)]
    commit_together(catalog, again)
    assert [catalog.load_table(n).metadata.properties["owner"] for n in names] == ["a", "a"]


@pytest.mark.over_rest
def test_an_append_an_upsert_and_a_partition_overwrite_land_in_one_catalog_commit(catalog: SqlCatalog) -> None:
    appended, upserted, overwritten = (f"{catalog.name}.{t}" for t in ("appended", "upserted", "overwritten"))
    ic.create_table(catalog, appended, EVENTS_SCHEMA)
    ic.create_table(catalog, upserted, EVENTS_SCHEMA, identifier_fields=["id"])
    ic.create_table(catalog, overwritten, EVENTS_SCHEMA, partition_by=["event"])
    names = [appended, upserted, overwritten]
    committers = {n: ic.GlobalCommitter(catalog, n, job_id=JOB, sleep=lambda _: None) for n in names}
    for committer in committers.values():  # checkpoint 1: every table gets ids 0..9
        committer.prepare(1, [write_arrow(committer.load_table(), events(0, 10), job_id=JOB, checkpoint_id=1)])
        assert committer.commit(1).committed
    modes = {appended: "append", upserted: UPSERT, overwritten: OVERWRITE_PARTITIONS}
    plans = {}
    for name, committer in committers.items():  # checkpoint 2: ids 5..14
        rows = events(5, 15)
        results = [write_arrow(committer.load_table(), rows, job_id=JOB, checkpoint_id=2)]
        keys = rows.select(["id"]) if modes[name] == UPSERT else None
        plans[name] = committer.prepare_planned(2, results, mode=modes[name], keys=keys)
    together: list[tuple[str, int]] = []
    results = commit_to_tables(committers, 2, plans, together_in=catalog,
                               fault=lambda point, tables: together.append((point, len(tables))))  # fmt: skip
    assert [r.status for r in results.values()] == ["committed"] * 3
    assert [(p, n) for p, n in together if p != "after-metadata-file"] == [
        ("before-group-commit", 3), ("after-group-commit", 3)
    ]

    def ids(name: str) -> list[int]:
        return sorted(catalog.load_table(name).scan().to_arrow().column("id").to_pylist())

    assert ids(appended) == sorted([*range(10), *range(5, 15)])
    assert ids(upserted) == list(range(15))  # 5..9 replaced, once each
    # the partitions checkpoint 2 touched now hold its rows only; the others keep checkpoint 1's
    touched = set(events(5, 15).column("event").to_pylist())
    kept = [i for i, e in zip(range(10), events(0, 10).column("event").to_pylist(), strict=True) if e not in touched]
    assert ids(overwritten) == sorted([*kept, *range(5, 15)])


def test_several_tables_roll_back_to_one_checkpoint_in_one_catalog_commit(
    catalog: SqlCatalog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = _tables(catalog)
    for checkpoint in (1, 2, 3):
        committers, plans = _prepared(catalog, names, checkpoint)
        commit_to_tables(committers, checkpoint, plans, together_in=catalog)
    together = tables_committed_together(monkeypatch)
    where = ("--catalog", catalog.name, "--uri", catalog.properties["uri"])
    where += ("--warehouse", catalog.properties["warehouse"])
    refused = invoke(tmp_path, *where, "rollback", *names, "--to-snapshot", "1", "--yes")
    assert refused.returncode == 2 and "--to-checkpoint" in refused.stderr
    rolled = invoke(tmp_path, *where, "rollback", *names, "--to-checkpoint", "1", "--job", JOB, "--yes")
    assert rolled.returncode == 0, rolled.stderr
    assert together == [sorted(names)]
    assert all(ic.consistent_cut(catalog, names, job_id=JOB).snapshots[n] is not None for n in names)
    for name in names:
        assert ancestry.last_committed_checkpoint(catalog.load_table(name).metadata, JOB) == 1
    with pytest.raises(InvalidArgumentError, match="one rollback plan per table"):
        apply_rollbacks(catalog, [])


@pytest.mark.parametrize("catalog", ["rest"], indirect=True)
@pytest.mark.parametrize("lost", ["connection cut", "502 after the commit"])
@pytest.mark.over_rest
def test_a_lost_answer_to_transactions_commit_is_found_in_every_table(
    catalog: SqlCatalog, monkeypatch: pytest.MonkeyPatch, lost: str
) -> None:
    names = _tables(catalog)
    committers, plans = _prepared(catalog, names, 1)
    session = rest_session(catalog)  # type: ignore[arg-type]
    post = session.post
    answered: list[int] = []

    def loses_its_answer(url: str, *args: Any, **kwargs: Any) -> Any:
        response = post(url, *args, **kwargs)  # the server committed every table
        if url.endswith("transactions/commit") and not answered:
            answered.append(response.status_code)
            if lost == "connection cut":
                raise requests.ConnectionError("the connection was cut before the answer came back")
            response.status_code = 502
        return response

    monkeypatch.setattr(session, "post", loses_its_answer)
    results = commit_to_tables(committers, 1, plans, together_in=catalog)
    assert answered == [204]
    assert [r.status for r in results.values()] == ["committed", "committed"]  # found by their keys, once
    assert all(_landed(catalog, n) == Counter({1: 1}) for n in names)
    assert all(c.store.get(JOB, n, 1).status == "committed" for n, c in committers.items())  # type: ignore[union-attr]
