"""Shared fixtures: catalogs on SQLite and PostgreSQL, and one local Spark session."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyspark.sql import SparkSession
from sqlalchemy import create_engine, text

from icecommit.metrics.database import dispose_state_engines
from icecommit.writers.session import local_session

PG_URI = os.environ.get("ICECOMMIT_TEST_PG_URI", "postgresql+psycopg://postgres@127.0.0.1:5432/test")


def _postgres_reason() -> str | None:
    try:
        engine = create_engine(PG_URI)
        with engine.connect() as conn:
            conn.execute(text("select 1"))
        engine.dispose()
        return None
    except Exception as e:  # the server is truly absent or refuses us
        return f"PostgreSQL is not reachable at {PG_URI}: {e.__class__.__name__}: {str(e).splitlines()[0]}"


_PG_UNAVAILABLE = _postgres_reason()


@pytest.fixture(autouse=True)
def _isolated_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    for name in ("ICECOMMIT_CATALOG_URI", "ICECOMMIT_WAREHOUSE", "ICECOMMIT_METRICS_URI"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ICECOMMIT_HOME", str(tmp_path / "home"))
    yield
    dispose_state_engines()


def make_catalog(backend: str, tmp_path: Path) -> SqlCatalog:
    """A fresh, isolated SQL catalog on ``backend`` with its warehouse under tmp_path."""
    warehouse = tmp_path / "warehouse"
    warehouse.mkdir(exist_ok=True)
    name = f"t{uuid.uuid4().hex[:12]}"
    if backend == "sqlite":
        uri = f"sqlite:///{tmp_path / 'catalog.db'}"
    else:
        if _PG_UNAVAILABLE:
            pytest.skip(_PG_UNAVAILABLE)
        uri = PG_URI
    return SqlCatalog(name, uri=uri, warehouse=warehouse.as_uri())


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def catalog(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SqlCatalog]:
    """A SqlCatalog on SQLite and on PostgreSQL (each test runs on both)."""
    cat = make_catalog(request.param, tmp_path)
    yield cat
    cat.engine.dispose()


@pytest.fixture
def sqlite_catalog(tmp_path: Path) -> Iterator[SqlCatalog]:
    """A SqlCatalog on SQLite only, for tests that do not touch concurrency."""
    cat = make_catalog("sqlite", tmp_path)
    yield cat
    cat.engine.dispose()


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """One local Spark session for the whole run: 2 cores, up to 4 attempts per task."""
    # Python workers import task hooks defined in the tests by module name.
    root = str(Path(__file__).resolve().parent.parent)
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    session = local_session("icecommit-tests", master="local[2,4]")
    yield session
    session.stop()


def unique_table(prefix: str = "t") -> str:
    """A table name no other test uses (catalog databases are shared on PostgreSQL)."""
    return f"ns_{uuid.uuid4().hex[:8]}.{prefix}"
