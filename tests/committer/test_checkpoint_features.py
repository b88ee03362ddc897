"""Safe across versions: a prepared checkpoint records the features its commit needs, and
code that does not know one refuses to commit it; a checkpoint prepared by an earlier
version (95e5626, before features were recorded) commits as the plain append it is,
exactly once."""

from __future__ import annotations

import shutil
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyiceberg.catalog.sql import SqlCatalog
from sqlalchemy import select, text, update
from sqlalchemy.orm import Session

import icecommit as ic
from icecommit.committer.features import supported
from icecommit.core.errors import EnvironmentFailureError, family_of
from icecommit.errors import CheckpointFeatureError
from icecommit.state import CheckpointStore, state_engine
from icecommit.state.database import state_uri
from icecommit.state.models import SCHEMA_VERSION, CheckpointRow, SchemaVersionRow
from icecommit.writers import write_arrow
from tests.fixtures.state_95e5626.make import JOB, LOCATION, TABLE
from tests.helpers import EVENTS_SCHEMA, events

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "state_95e5626" / "fixture.tar.gz"


@pytest.fixture
def legacy_catalog() -> Iterator[SqlCatalog]:
    """The catalog, state database and warehouse 95e5626 left (see the fixture's make.py),
    back where their paths point."""
    shutil.rmtree(LOCATION, ignore_errors=True)
    LOCATION.mkdir(parents=True)
    with tarfile.open(FIXTURE) as archive:
        archive.extractall(LOCATION, filter="data")
    catalog = ic.connect(uri=f"sqlite:///{LOCATION}/catalog.db", warehouse=f"file://{LOCATION}/warehouse")
    assert isinstance(catalog, SqlCatalog)
    yield catalog
    catalog.engine.dispose()
    shutil.rmtree(LOCATION, ignore_errors=True)


def test_a_checkpoint_prepared_by_95e5626_commits_once_as_the_append_it_is(legacy_catalog: SqlCatalog) -> None:
    with legacy_catalog.engine.connect() as conn:  # what 95e5626 left: schema 9, checkpoint 2 prepared
        assert conn.execute(text("SELECT version FROM icecommit_schema_version")).scalar_one() == 9
        assert conn.execute(text("SELECT status FROM icecommit_checkpoints WHERE checkpoint_id = 2")).scalar_one() == (
            "prepared"
        )
    committer = ic.GlobalCommitter(legacy_catalog, TABLE, job_id=JOB)
    result = committer.commit(2)
    assert (result.status, result.records, result.files) == ("committed", 100, 1)
    rows = legacy_catalog.load_table(TABLE).scan().to_arrow()
    assert sorted(rows.column("id").to_pylist()) == list(range(100)) + list(range(100, 200))
    again = ic.GlobalCommitter(legacy_catalog, TABLE, job_id=JOB)
    assert again.commit(2).status == "already-committed"
    assert again.recover() == []
    assert legacy_catalog.load_table(TABLE).scan().to_arrow().num_rows == 200
    store = CheckpointStore(state_engine(state_uri(legacy_catalog)))
    state = store.get(JOB, TABLE, 2)
    assert state is not None and state.status == "committed" and state.features == ()
    with Session(store.engine) as session:  # the database was migrated, its rows kept
        assert session.execute(select(SchemaVersionRow.version)).scalar_one() == SCHEMA_VERSION


def _prepared(catalog: SqlCatalog, checkpoint_id: int) -> tuple[ic.GlobalCommitter, str]:
    name = f"{catalog.name}.events"
    ic.create_table(catalog, name, EVENTS_SCHEMA, partition_by=["event"])
    committer = ic.GlobalCommitter(catalog, name, job_id="j")
    rows = events(0, 10)
    committer.prepare(
        checkpoint_id, [write_arrow(committer.load_table(), rows, job_id="j", checkpoint_id=checkpoint_id)]
    )
    return committer, name


def test_an_append_records_no_feature(catalog: SqlCatalog) -> None:
    committer, name = _prepared(catalog, 1)
    state = committer.store.get("j", name, 1)
    assert state is not None and state.features == ()
    assert frozenset({"schema-change", "table-create", "overwrite-partitions", "upsert"}) == supported()


@pytest.mark.parametrize("features", ["row-delta", "partition-overwrite,row-delta"])
def test_a_checkpoint_needing_a_feature_this_version_lacks_is_refused_by_commit_and_recover(
    catalog: SqlCatalog, features: str
) -> None:
    committer, name = _prepared(catalog, 1)
    with Session(committer.store.engine) as session, session.begin():  # what a later version would record
        session.execute(update(CheckpointRow).where(CheckpointRow.checkpoint_id == 1).values(features=features))
    before = catalog.load_table(name).metadata
    for attempt in (
        lambda: committer.commit(1),
        committer.recover,
        ic.GlobalCommitter(catalog, name, job_id="j").recover,
    ):
        with pytest.raises(CheckpointFeatureError) as refused:
            attempt()
        assert refused.value.features == features.split(",") and family_of(refused.value) is EnvironmentFailureError
        assert "prepared by a newer icecommit" in str(refused.value) and "nothing was committed" in str(refused.value)
    after = catalog.load_table(name).metadata
    assert (after.snapshots, after.metadata_log == before.metadata_log) == ([], True)
    state = committer.store.get("j", name, 1)
    assert state is not None and state.status == "prepared" and state.features == tuple(features.split(","))
