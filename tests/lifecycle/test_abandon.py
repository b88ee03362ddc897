"""Abandon, loudly: a checkpoint that cannot commit is given up on purpose, recorded with
its reason, and reported until someone acknowledges it; a stuck one is reported too."""

from __future__ import annotations

import datetime as dt
import json
from datetime import timedelta
from pathlib import Path

import pytest
from pyiceberg.catalog.sql import SqlCatalog
from sqlalchemy import create_engine, inspect, text

import icecommit as ic
from icecommit.errors import CheckpointCommittedError, DataFileMissingError, InvalidArgumentError
from icecommit.maintenance import find_orphans
from icecommit.state import CheckpointStore, read_staged_manifest, state_engine, state_uri
from icecommit.state.database import dispose_state_engines
from icecommit.state.models import SCHEMA_VERSION
from tests.cli.runner import invoke
from tests.fakes import Crash, crash_at
from tests.helpers import EVENTS_SCHEMA, events, write_arrow

# one process, one step after another; abandon's queries are tested in tests/state
pytestmark = pytest.mark.database_independent

LONG_AGO = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


def _prepared(catalog: SqlCatalog, checkpoint_id: int, **kwargs: object) -> ic.GlobalCommitter:
    committer = ic.GlobalCommitter(catalog, f"{catalog.name}.events", job_id="A", **kwargs)  # type: ignore[arg-type]
    table = committer.load_table()
    rows = events(checkpoint_id * 100, checkpoint_id * 100 + 10)
    committer.prepare(checkpoint_id, [write_arrow(table, rows, job_id="A", checkpoint_id=checkpoint_id)])
    return committer


def _lose_staged_files(committer: ic.GlobalCommitter, checkpoint_id: int) -> None:
    state = committer.store.get("A", committer.table_name, checkpoint_id)
    assert state is not None and state.manifest_path is not None
    table = committer.load_table()
    for data_file in read_staged_manifest(table.io, state.manifest_path, table.spec().spec_id):
        table.io.delete(data_file.file_path)


def test_a_stuck_checkpoint_is_abandoned_and_the_job_goes_on(catalog: SqlCatalog) -> None:
    ic.create_table(catalog, f"{catalog.name}.events", EVENTS_SCHEMA, partition_by=["event"])
    committer = _prepared(catalog, 1)
    _lose_staged_files(committer, 1)
    for _ in range(2):  # every recovery fails the same way: the job is stuck
        with pytest.raises(DataFileMissingError):
            committer.recover()

    state = committer.abandon(1, reason="staged files lost in the storage incident", by="oncall")
    assert (state.status, state.abandon_reason, state.abandoned_by) == (
        "abandoned", "staged files lost in the storage incident", "oncall"
    )  # fmt: skip
    assert state.abandoned_at is not None
    assert committer.recover() == []
    assert committer.commit(1).status == "abandoned"  # a replay is a recorded no-op
    assert committer.abandon(1, reason="again").status == "abandoned"  # idempotent
    _prepared(catalog, 2).commit(2)
    assert catalog.load_table(f"{catalog.name}.events").scan().to_arrow().num_rows == 10

    # reported as a problem in every run, whatever the range, until acknowledged
    future = dt.datetime.now(dt.timezone.utc) + timedelta(days=1)
    for since in (None, future - timedelta(hours=1)):
        report = ic.reconcile(catalog, f"{catalog.name}.events", job_id="A", since=since, until=future)
        assert not report.ok
        [problem] = [p for p in report.problems if p.kind == "abandoned"]
        assert (problem.checkpoint_id, problem.severity) == (1, "error") and "oncall" in problem.message
    acknowledged = committer.acknowledge(1, by="lead")
    assert acknowledged.acknowledged_by == "lead"
    report = ic.reconcile(catalog, f"{catalog.name}.events", job_id="A")
    assert report.ok, report.to_markdown()
    assert [p.severity for p in report.problems if p.kind == "abandoned"] == ["info"]


def test_abandon_refuses_what_the_table_holds(catalog: SqlCatalog) -> None:
    ic.create_table(catalog, f"{catalog.name}.events", EVENTS_SCHEMA, partition_by=["event"])
    committed = _prepared(catalog, 1)
    committed.commit(1)
    with pytest.raises(CheckpointCommittedError) as refused:
        committed.abandon(1, reason="oops")
    assert (refused.value.job_id, refused.value.checkpoint_id) == ("A", 1)
    # landed, but the job died before recording it: the table decides, not the state row
    with pytest.raises(Crash):
        _prepared(catalog, 2, fault=crash_at("after-commit", 2)).commit(2)
    with pytest.raises(CheckpointCommittedError):
        committed.abandon(2, reason="looks stuck")
    assert committed.store.get("A", committed.table_name, 2).status == "prepared"  # type: ignore[union-attr]
    with pytest.raises(ic.CheckpointNotFoundError):
        committed.abandon(9, reason="never prepared")
    with pytest.raises(InvalidArgumentError) as empty_reason:
        committed.abandon(2, reason="  ")
    assert empty_reason.value.argument == "reason"


def test_a_checkpoint_prepared_too_long_ago_is_reported_stuck_whatever_the_range(catalog: SqlCatalog) -> None:
    ic.create_table(catalog, f"{catalog.name}.events", EVENTS_SCHEMA, partition_by=["event"])
    store = CheckpointStore(state_engine(state_uri(catalog)), clock=lambda: LONG_AGO)
    _prepared(catalog, 1, store=store)
    report = ic.reconcile(catalog, f"{catalog.name}.events", job_id="A", since=dt.datetime.now(dt.timezone.utc))
    assert not report.ok
    [stuck] = [p for p in report.problems if p.kind == "stuck"]
    assert stuck.checkpoint_id == 1 and "icecommit abandon" in stuck.message
    lenient = ic.reconcile(
        catalog, f"{catalog.name}.events", job_id="A",
        thresholds=ic.Thresholds(max_pending=dt.datetime.now(dt.timezone.utc) - LONG_AGO + timedelta(days=1)),
    )  # fmt: skip
    assert lenient.ok and [c.status for c in lenient.pending] == ["pending"]


def test_abandon_from_the_cli_then_the_sweeper_takes_its_files(tmp_path: Path) -> None:
    home = tmp_path / "home"
    catalog = ic.connect(uri=f"sqlite:///{home / 'catalog.db'}", warehouse=str(home))
    ic.create_table(catalog, "ns.events", EVENTS_SCHEMA, partition_by=["event"])
    committer = ic.GlobalCommitter(catalog, "ns.events", job_id="A")
    committer.prepare(1, [write_arrow(committer.load_table(), events(0, 10), job_id="A", checkpoint_id=1)])
    assert find_orphans(catalog, "ns.events", older_than=timedelta(0)).orphans == ()  # prepared: protected
    args = ["--uri", f"sqlite:///{home / 'catalog.db'}", "--warehouse", str(home)]
    usage = invoke(home, *args, "abandon", "ns.events", "--job", "A", "--checkpoint", "1")
    assert usage.returncode == 2 and "--reason is required" in usage.stderr
    done = invoke(home, *args, "--output", "json", "abandon", "ns.events", "--job", "A", "--checkpoint", "1",
                  "--reason", "bad batch")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (json.loads(done.stdout)["status"], json.loads(done.stdout)["abandon_reason"]) == ("abandoned", "bad batch")
    acked = invoke(home, *args, "--output", "json", "abandon", "ns.events", "--job", "A", "--checkpoint", "1", "--ack")
    assert acked.returncode == 0 and json.loads(acked.stdout)["acknowledged_at"] is not None
    missing = invoke(home, *args, "abandon", "ns.events", "--job", "A", "--checkpoint", "7", "--reason", "x")
    assert missing.returncode == 2 and "no checkpoint 7" in missing.stderr
    orphans = {o.path for o in find_orphans(catalog, "ns.events", older_than=timedelta(0)).orphans}
    assert orphans and all(path.endswith(".parquet") or "icecommit-staged" in path for path in orphans)
    catalog.engine.dispose()  # type: ignore[attr-defined]


def test_a_version_3_state_database_is_migrated(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'state.db'}"
    state_engine(uri)
    dispose_state_engines()
    old = create_engine(uri)
    with old.begin() as conn:  # make it look like a database written by the previous release
        for column in ("abandon_reason", "abandoned_by", "abandoned_at", "acknowledged_by", "acknowledged_at"):
            conn.execute(text(f"ALTER TABLE icecommit_checkpoints DROP COLUMN {column}"))
        conn.execute(text("UPDATE icecommit_schema_version SET version = 3"))
    old.dispose()
    migrated = state_engine(uri)
    columns = {c["name"] for c in inspect(migrated).get_columns("icecommit_checkpoints")}
    assert {"abandon_reason", "acknowledged_at"} <= columns
    with migrated.connect() as conn:
        assert conn.execute(text("SELECT version FROM icecommit_schema_version")).scalar_one() == SCHEMA_VERSION
