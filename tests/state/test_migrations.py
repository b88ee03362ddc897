"""The state schema migrates from what earlier releases wrote, and a newer one is refused.

The fixtures were written by the code of those releases (``tests/state/fixtures/make_fixture.py``
run on the checkout of each): ``state-v3`` by 76fdac0, ``state-v4`` by 83d4eeb, ``state-v5`` by
ab1f9b6 (the schema before query ids, capped watermarks and recorded completeness policies),
``state-v6`` by 9f5cf33 (before source offsets), ``state-v7`` by 47d51ca (before the compaction
tables), ``state-v8`` by 41ee4b8 (before the metrics' stage was widened), as a SQLite file
and as a PostgreSQL dump (``pg_dump --inserts``). Each is loaded into a fresh database, opened by
this release, and read and written through the state store.
"""

from __future__ import annotations

import shutil
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest
from sqlalchemy import Engine, create_engine, event, select, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import IntegrityError

from icecommit.errors import StateDatabaseUnavailableError, StateSchemaError
from icecommit.state import CheckpointStore, SourceRange, database, state_engine
from icecommit.state.compactions import CompactionStore
from icecommit.state.database import dispose_state_engines, state_identity
from icecommit.state.models import SCHEMA_VERSION, SchemaVersionRow
from icecommit.state.partitions import PartitionStatusStore
from tests import postgres, processes
from tests.conftest import pg_uri

FIXTURES = Path(__file__).parent / "fixtures"
TABLE = "fx.events"
#: (job, checkpoint) -> status, as every fixture holds them
EXPECTED = {("A", 1): "committed", ("A", 2): "committed", ("A", 3): "prepared", ("B", 1): "committed"}


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _empty_database() -> Iterator[str]:
    """A PostgreSQL database of its own, empty; yields its URL and drops it after."""
    pg_uri()  # skips where the server is absent
    name = f"icecommit_fx_{uuid.uuid4().hex[:8]}"
    admin = postgres._admin_engine()
    with admin.connect() as conn:
        conn.execute(text(f'create database "{name}"'))
    try:
        yield make_url(postgres.ADMIN_URI).set(database=name).render_as_string(hide_password=False)
    finally:
        dispose_state_engines()
        with admin.connect() as conn:
            conn.execute(text(f'drop database if exists "{name}" with (force)'))
        admin.dispose()


def _load(backend: str, version: int, tmp_path: Path) -> Iterator[str]:
    """The fixture of ``version`` loaded into a database of its own; yields its URL."""
    if backend == "sqlite":
        target = tmp_path / f"state-v{version}.sqlite"
        shutil.copyfile(FIXTURES / f"state-v{version}.sqlite", target)
        yield f"sqlite:///{target}"
        return
    pg_uri()  # skips where the server is absent
    name = f"icecommit_fx_{uuid.uuid4().hex[:8]}"
    admin = postgres._admin_engine()
    with admin.connect() as conn:
        conn.execute(text(f'create database "{name}"'))
    uri = make_url(postgres.ADMIN_URI).set(database=name)
    try:
        dump = (FIXTURES / f"state-v{version}.pg.sql").read_text()
        # pg_dump's psql meta-commands (\restrict, \unrestrict) are not SQL
        sql = "\n".join(line for line in dump.splitlines() if not line.startswith("\\"))
        conninfo = uri.set(drivername="postgresql").render_as_string(hide_password=False)
        with psycopg.connect(conninfo, autocommit=True) as conn:
            conn.execute(sql)
        yield uri.render_as_string(hide_password=False)
    finally:
        dispose_state_engines()
        with admin.connect() as conn:
            conn.execute(text(f'drop database if exists "{name}" with (force)'))
        admin.dispose()


@pytest.mark.parametrize("version", [3, 4, 5, 6, 7, 8])
def test_a_database_of_an_earlier_release_migrates_and_keeps_every_checkpoint(
    backend: str, version: int, tmp_path: Path
) -> None:
    for uri in _load(backend, version, tmp_path):
        raw = create_engine(uri)
        with raw.connect() as conn:
            assert conn.execute(text("select version from icecommit_schema_version")).scalar_one() == version
        raw.dispose()

        store = CheckpointStore(state_engine(uri))
        states = {(s.job_id, s.checkpoint_id): s for s in store.list(TABLE)}
        abandoned = {("A", 4): "abandoned"} if version >= 4 else {}
        assert {k: s.status for k, s in states.items()} == EXPECTED | abandoned
        assert states[("A", 1)].records == 10 and states[("A", 1)].source_records == 10
        assert states[("A", 1)].snapshot_id is not None and states[("A", 3)].snapshot_id is None
        if version >= 4:
            assert (states[("A", 4)].abandon_reason, states[("A", 4)].abandoned_by) == ("fixture", "fixture")
        with store.engine.connect() as conn:
            assert conn.execute(select(SchemaVersionRow.version)).scalar_one() == SCHEMA_VERSION
        identity = state_identity(store.engine)

        # the tables a later schema added are there and work
        compactions = CompactionStore(store.engine)
        compactions.prepare(TABLE, "g1", [("in.parquet", "out.parquet", 10)], input_files=1, output_files=1)
        compactions.committed("g1", 7)
        assert compactions.lineage(TABLE) == {"in.parquet": [("out.parquet", 10)]}
        assert [(g.status, g.snapshot_id) for g in compactions.groups(TABLE)] == [("committed", 7)]
        # the columns the migration added are written and read like any other
        assert store.abandon("A", TABLE, 3, reason="migrated", by="test")
        assert store.acknowledge("A", TABLE, 3, by="lead")
        after = store.get("A", TABLE, 3)
        assert after is not None and (after.status, after.abandon_reason, after.acknowledged_by) == (
            "abandoned", "migrated", "lead"
        )  # fmt: skip

        # the columns of schema 6: an old row reads its watermark as its largest event time,
        # and a new row keeps its query id, capped watermark and future rows
        assert states[("A", 1)].watermark_us == states[("A", 1)].max_event_time_us
        assert (states[("A", 1)].future_records, states[("A", 1)].query_id) == (0, None)
        state, inserted = store.insert_prepared(
            job_id="A", table_name=TABLE, checkpoint_id=9, manifest_path=None, files_digest="d", source_records=0,
            records=0, files=0, bytes_=0, max_event_time_us=2_000, watermark_us=1_000, future_records=3,
            query_id="q-1",
        )  # fmt: skip
        assert inserted and (state.watermark_us, state.future_records, state.query_id) == (1_000, 3, "q-1")
        stored = store.get("A", TABLE, 9)
        assert stored is not None and (stored.watermark_us, stored.future_records, stored.query_id) == (1_000, 3, "q-1")

        # schema 7: the source offsets of a streamed batch are kept beside its source count
        assert states[("A", 1)].source_offsets == ()
        ranges = [SourceRange("KafkaV2[Subscribe[t]]", '{"t":{"0":5}}', '{"t":{"0":9}}', 4)]
        store.record_query_input("A", TABLE, 9, 4, preserves_rows=True, offsets=ranges)
        stored = store.get("A", TABLE, 9)
        assert stored is not None and stored.source_offsets == tuple(ranges)
        # schema 9: the stage of a routed sink's source count fits (PostgreSQL refused it before)
        store.record_query_input("A", TABLE, 9, 4, preserves_rows=True, routed=True)
        with store.engine.connect() as conn:
            stages = conn.execute(
                text("select stage from icecommit_metrics where checkpoint_id = 9 and table_name = :t"), {"t": TABLE}
            ).scalars()
            assert list(stages) == ["query-input-routed-kept"]

        partitions = PartitionStatusStore(store.engine)  # schema 6's policy table exists and works
        assert partitions.policy(TABLE) is None
        partitions.record_policy(TABLE, writers=["A", "B"], lateness=timedelta(minutes=5), idle_timeout=None,
                                 recorded_by="test")  # fmt: skip
        assert partitions.policy(TABLE) == (("A", "B"), timedelta(minutes=5), None)

        # opening again changes nothing: same version, same identity, same rows
        dispose_state_engines()
        reopened = CheckpointStore(state_engine(uri))
        assert state_identity(reopened.engine) == identity
        assert len(reopened.list(TABLE)) == len(states) + 1


def test_a_database_of_a_newer_release_is_refused_and_left_as_it_is(backend: str, tmp_path: Path) -> None:
    for uri in _load(backend, 4, tmp_path):
        raw = create_engine(uri)
        with raw.begin() as conn:
            conn.execute(text("update icecommit_schema_version set version = :v"), {"v": SCHEMA_VERSION + 1})
        with pytest.raises(StateSchemaError) as raised:
            state_engine(uri)
        assert (raised.value.found, raised.value.supported) == (SCHEMA_VERSION + 1, SCHEMA_VERSION)
        assert "upgrade icecommit" in str(raised.value)
        with raw.connect() as conn:
            assert conn.execute(text("select version from icecommit_schema_version")).scalar_one() == SCHEMA_VERSION + 1
            assert conn.execute(text("select count(*) from icecommit_checkpoints")).scalar_one() == 5
            # nothing made: not even the table this release would add
            exists = conn.execute(
                text("select count(*) from information_schema.tables where table_name = 'icecommit_state_identity'")
                if backend == "postgres"
                else text("select count(*) from sqlite_master where name = 'icecommit_state_identity'")
            ).scalar_one()
        raw.dispose()
        assert exists == 0


def _statements_opening(uri: str) -> list[str]:
    """The statements on icecommit's tables that opening ``uri`` afresh runs."""
    seen: list[str] = []

    def note(_conn: object, _cursor: object, statement: str, *_args: object) -> None:
        if "icecommit_" in statement:
            seen.append(" ".join(statement.split()))

    dispose_state_engines()
    event.listen(Engine, "before_cursor_execute", note)
    try:
        state_engine(uri)
    finally:
        event.remove(Engine, "before_cursor_execute", note)
    return seen


def test_a_database_at_this_version_is_opened_with_one_query_and_anything_else_takes_the_full_path(
    backend: str, tmp_path: Path
) -> None:
    for uri in _load(backend, 8, tmp_path):
        migrating = _statements_opening(uri)
        assert any(s.startswith("ALTER TABLE") for s in migrating) or backend == "sqlite"
        assert any(s.startswith("UPDATE icecommit_schema_version") for s in migrating)
        identity = state_identity(state_engine(uri))

        again = _statements_opening(uri)  # every process but the first: one query, nothing written
        assert len(again) == 1 and again[0].startswith("SELECT icecommit_schema_version.version")
        assert state_identity(state_engine(uri)) == identity

        # an identity lost since (or never written): the full path writes one again
        raw = create_engine(uri)
        with raw.begin() as conn:
            conn.execute(text("delete from icecommit_state_identity"))
        raw.dispose()
        restoring = _statements_opening(uri)
        assert any(s.startswith("INSERT INTO icecommit_state_identity") for s in restoring)
        assert state_identity(state_engine(uri)) not in (None, identity)
        assert len(_statements_opening(uri)) == 1


def _open_state(uri: str, start: float) -> None:
    """A child's target: wait for the common start, open the state database, print its identity."""
    while time.time() < start:
        time.sleep(0.001)
    print(state_identity(state_engine(uri)))


def test_processes_making_the_schema_at_once_all_open_it_and_agree_on_its_identity(
    backend: str, tmp_path: Path
) -> None:
    """Every process races to make the tables, the version row and the identity row; each
    race a process loses sends it to look again, never to a failure."""
    uris = iter([f"sqlite:///{tmp_path / 'fresh.db'}"]) if backend == "sqlite" else _empty_database()
    for uri in uris:
        start = time.time() + 0.5  # after every child has started
        with ExitStack() as running:
            children = [running.enter_context(processes.Child(_open_state, uri, start)) for _ in range(4)]
            outputs = [child.communicate(timeout=120) for child in children]
        assert [child.returncode for child in children] == [0] * 4, [err[-2000:] for _, err in outputs]
        identities = {out.strip() for out, _ in outputs}
        assert len(identities) == 1 and identities == {state_identity(state_engine(uri))}


def _losing(monkeypatch: pytest.MonkeyPatch, uri: str, wins_after: int | None) -> list[int]:
    """Make this process lose every race at making the schema; another process (a second
    engine here) makes all of it after this one's ``wins_after``-th loss (None: never)."""
    made = database._create_schema_once
    losses: list[int] = []

    def lose(engine: Engine) -> None:
        losses.append(1)
        if len(losses) == wins_after:
            other = create_engine(uri)
            made(other)
            other.dispose()
        raise IntegrityError("INSERT INTO icecommit_schema_version", {}, Exception("UNIQUE constraint failed"))

    monkeypatch.setattr(database, "_create_schema_once", lose)
    return losses


def test_a_process_that_loses_race_after_race_opens_the_schema_another_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uri = f"sqlite:///{tmp_path / 'fresh.db'}"
    losses = _losing(monkeypatch, uri, wins_after=database.SCHEMA_TRIES - 1)
    engine = state_engine(uri)
    assert len(losses) == database.SCHEMA_TRIES - 1 and state_identity(engine)


def test_a_process_that_never_finds_the_schema_made_gives_up_naming_the_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uri = f"sqlite:///{tmp_path / 'fresh.db'}"
    losses = _losing(monkeypatch, uri, wins_after=None)
    with pytest.raises(StateDatabaseUnavailableError) as raised:
        state_engine(uri)
    assert len(losses) == database.SCHEMA_TRIES
    assert raised.value.uri == uri and isinstance(raised.value.__cause__, IntegrityError)
