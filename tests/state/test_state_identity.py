"""One home for the committer's state: the table records which state database holds its
checkpoints, and the commands that rely on them refuse another database or none at all."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from pyiceberg.catalog.sql import SqlCatalog

import icecommit as ic
from icecommit.catalog.tables import to_iceberg_schema
from icecommit.errors import StateDatabaseMismatchError, StateDatabaseUnavailableError
from icecommit.maintenance import apply_rollback, find_orphans, plan_expire, plan_rollback
from icecommit.state import CheckpointStore, state_engine, state_uri
from icecommit.state.database import dispose_state_engines, state_identity
from icecommit.state.identity import STATE_ID_PROPERTY, STATE_URI_PROPERTY
from tests.cli.runner import invoke
from tests.helpers import EVENTS_SCHEMA, events, write_arrow

UNREACHABLE = "postgresql+psycopg://postgres@127.0.0.1:9/nowhere?connect_timeout=2"


def _land(catalog: SqlCatalog, checkpoint_id: int, *, commit: bool = True) -> ic.GlobalCommitter:
    committer = ic.GlobalCommitter(catalog, f"{catalog.name}.events", job_id="A")
    table = committer.load_table()
    rows = events(checkpoint_id * 100, checkpoint_id * 100 + 10)
    committer.prepare(checkpoint_id, [write_arrow(table, rows, job_id="A", checkpoint_id=checkpoint_id)])
    if commit:
        committer.commit(checkpoint_id)
    return committer


def _files(catalog: SqlCatalog) -> set[Path]:
    root = Path(str(catalog.properties["warehouse"]).removeprefix("file://"))
    return {p for p in root.rglob("*") if p.is_file()}


def test_the_first_prepare_records_the_state_database_on_the_table(catalog: SqlCatalog) -> None:
    table = ic.create_table(catalog, f"{catalog.name}.events", EVENTS_SCHEMA, partition_by=["event"])
    assert STATE_ID_PROPERTY not in table.metadata.properties  # creating a table pins nothing
    committer = _land(catalog, 1, commit=False)  # staged files need protecting before any commit
    properties = catalog.load_table(f"{catalog.name}.events").metadata.properties
    engine = committer.store.engine
    assert properties[STATE_ID_PROPERTY] == state_identity(engine)
    assert properties[STATE_URI_PROPERTY] == engine.url.render_as_string(hide_password=True)
    committer.commit(1)
    _land(catalog, 2)  # recorded once: one metadata change for the claim, one per commit
    assert len(catalog.load_table(f"{catalog.name}.events").metadata.metadata_log) == 3


def test_a_custom_state_store_is_the_one_the_table_records(catalog: SqlCatalog, tmp_path: Path) -> None:
    from sqlalchemy import create_engine

    name = f"{catalog.name}.events"
    ic.create_table(catalog, name, EVENTS_SCHEMA, partition_by=["event"])
    store = CheckpointStore(create_engine(f"sqlite:///{tmp_path / 'custom.db'}"))  # not made by state_engine
    committer = ic.GlobalCommitter(catalog, name, job_id="A", store=store)
    committer.prepare(1, [write_arrow(committer.load_table(), events(0, 10), job_id="A", checkpoint_id=1)])
    assert committer.commit(1).status == "committed"
    assert catalog.load_table(name).metadata.properties[STATE_ID_PROPERTY] == state_identity(store.engine)
    store.engine.dispose()


def test_a_table_made_by_another_tool_records_it_at_the_first_prepare(catalog: SqlCatalog) -> None:
    catalog.create_namespace(catalog.name)
    catalog.create_table(f"{catalog.name}.events", schema=to_iceberg_schema(EVENTS_SCHEMA))  # plain pyiceberg
    committer = _land(catalog, 1, commit=False)  # staged files need protecting before any commit
    properties = catalog.load_table(f"{catalog.name}.events").metadata.properties
    assert properties[STATE_ID_PROPERTY] == state_identity(committer.store.engine)
    committer.commit(1)
    assert ic.reconcile(catalog, f"{catalog.name}.events").ok


def test_one_database_reached_by_another_url_is_the_same_state(
    sqlite_catalog: SqlCatalog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = tmp_path / "state.db"
    monkeypatch.setenv("ICECOMMIT_METRICS_URI", f"sqlite:///{state}")
    ic.create_table(sqlite_catalog, f"{sqlite_catalog.name}.events", EVENTS_SCHEMA, partition_by=["event"])
    _land(sqlite_catalog, 1)
    dispose_state_engines()
    monkeypatch.setenv("ICECOMMIT_METRICS_URI", f"sqlite:///{tmp_path}/./state.db")
    assert find_orphans(sqlite_catalog, f"{sqlite_catalog.name}.events", older_than=timedelta(0)).orphans == ()
    assert ic.reconcile(sqlite_catalog, f"{sqlite_catalog.name}.events").ok


def test_another_state_database_is_refused_by_every_command_that_relies_on_it(
    catalog: SqlCatalog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = f"{catalog.name}.events"
    ic.create_table(catalog, name, EVENTS_SCHEMA, partition_by=["event"])
    _land(catalog, 1)
    _land(catalog, 2)
    _land(catalog, 3, commit=False)  # its staged files look like orphans to any other database
    table = catalog.load_table(name)
    recorded = table.metadata.properties[STATE_ID_PROPERTY]
    files = _files(catalog)
    monkeypatch.setenv("ICECOMMIT_METRICS_URI", f"sqlite:///{tmp_path / 'elsewhere.db'}")
    other = state_identity(state_engine(state_uri(catalog)))

    def refused(call: object) -> None:
        with pytest.raises(StateDatabaseMismatchError) as raised:
            call()  # type: ignore[operator]
        assert (raised.value.table, raised.value.expected_id, raised.value.actual_id) == (name, recorded, other)
        assert "ICECOMMIT_METRICS_URI" in str(raised.value)

    refused(lambda: find_orphans(catalog, name, older_than=timedelta(0), delete=True))
    refused(lambda: plan_expire(catalog, name, older_than=timedelta(0)))
    refused(lambda: ic.reconcile(catalog, name))
    plan = plan_rollback(catalog, name, to_checkpoint=1, job_id="A")  # planning reads no state
    refused(lambda: apply_rollback(catalog, plan))
    committer = ic.GlobalCommitter(catalog, name, job_id="A")
    refused(lambda: committer.prepare(4, [write_arrow(table, events(400, 410), job_id="A", checkpoint_id=4)]))
    refused(lambda: committer.commit(3))

    after = catalog.load_table(name)
    assert after.metadata_location == table.metadata_location  # not rolled back, nothing expired
    assert _files(catalog) >= files  # nothing deleted (prepare 4 wrote its data file before refusing)
    assert CheckpointStore(state_engine(state_uri(catalog))).list(name) == []  # nothing recorded here

    # the CLI says the same in one line, exit 4 (an environment failure: an operator acts)
    home = tmp_path / "home"
    uri = str(catalog.properties["uri"])
    warehouse = str(catalog.properties["warehouse"])
    for command in (["orphans", name, "--older-than", "0s", "--delete"], ["expire", name, "--older-than", "0s"]):
        result = invoke(home, "--catalog", catalog.name, "--uri", uri, "--warehouse", warehouse, *command)
        assert result.returncode == 4, result.stdout + result.stderr
        assert "keeps its checkpoints in state database" in result.stderr and "Traceback" not in result.stderr
    assert _files(catalog) >= files


def test_an_unreachable_state_database_is_refused_before_anything_is_deleted(
    sqlite_catalog: SqlCatalog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = f"{sqlite_catalog.name}.events"
    ic.create_table(sqlite_catalog, name, EVENTS_SCHEMA, partition_by=["event"])
    _land(sqlite_catalog, 1)
    _land(sqlite_catalog, 2, commit=False)
    files = _files(sqlite_catalog)
    dispose_state_engines()
    monkeypatch.setenv("ICECOMMIT_METRICS_URI", UNREACHABLE)
    for call in (
        lambda: find_orphans(sqlite_catalog, name, older_than=timedelta(0), delete=True),
        lambda: plan_expire(sqlite_catalog, name, older_than=timedelta(0)),
    ):
        with pytest.raises(StateDatabaseUnavailableError) as raised:
            call()
        assert "127.0.0.1:9" in raised.value.uri and "cannot be opened" in str(raised.value)
    assert _files(sqlite_catalog) == files
