"""Where icecommit's state tables live, and their creation on first use."""

from __future__ import annotations

import os
import threading

from pyiceberg.catalog import Catalog
from pyiceberg.catalog.sql import SqlCatalog
from sqlalchemy import Engine, create_engine, event, inspect, select, text
from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError
from sqlalchemy.orm import Session

from icecommit.settings import ENV_METRICS_URI, icecommit_home
from icecommit.state.models import SCHEMA_VERSION, Base, SchemaVersionRow

_engines: dict[str, Engine] = {}
_lock = threading.Lock()


def state_uri(catalog: Catalog | None = None) -> str:
    """The database URL of icecommit's state tables.

    ``ICECOMMIT_METRICS_URI`` wins; otherwise the catalog's own database when it is a SQL
    catalog; otherwise a SQLite file under ``$ICECOMMIT_HOME``.
    """
    configured = os.environ.get(ENV_METRICS_URI)
    if configured:
        return configured
    if isinstance(catalog, SqlCatalog):
        return str(catalog.properties["uri"])
    home = icecommit_home()
    home.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{home / 'icecommit-state.db'}"


def _sqlite_pragmas(dbapi_connection: object, _record: object) -> None:
    cursor = dbapi_connection.cursor()  # type: ignore[attr-defined]
    cursor.execute("PRAGMA busy_timeout = 30000")
    cursor.close()


def state_engine(uri: str) -> Engine:
    """A process-wide engine for ``uri`` with icecommit's tables created."""
    with _lock:
        engine = _engines.get(uri)
        if engine is not None:
            return engine
        if uri.startswith("sqlite"):
            engine = create_engine(uri, connect_args={"timeout": 30})
            event.listen(engine, "connect", _sqlite_pragmas)
        else:
            engine = create_engine(uri, pool_pre_ping=True)
        _create_schema(engine)
        _engines[uri] = engine
        return engine


def _create_schema(engine: Engine) -> None:
    # Several processes may create the schema at once; the loser of a race sees the
    # winner's tables on its second try.
    for attempt in range(3):
        try:
            _create_schema_once(engine)
            return
        except (IntegrityError, ProgrammingError, OperationalError):
            if attempt == 2:
                raise


#: Columns added after a table first shipped: version -> (table, column, SQL type and default).
MIGRATIONS: dict[int, list[tuple[str, str, str]]] = {
    2: [("icecommit_checkpoints", "unknown_outcomes", "INTEGER NOT NULL DEFAULT 0")],
    # 3 added two tables (checkpoint partitions, partition status); create_all makes them
    3: [],
    4: [
        ("icecommit_checkpoints", "abandon_reason", "TEXT"),
        ("icecommit_checkpoints", "abandoned_by", "VARCHAR(255)"),
        ("icecommit_checkpoints", "abandoned_at", "TIMESTAMP WITH TIME ZONE"),
        ("icecommit_checkpoints", "acknowledged_by", "VARCHAR(255)"),
        ("icecommit_checkpoints", "acknowledged_at", "TIMESTAMP WITH TIME ZONE"),
    ],
}


def _migrate(engine: Engine, from_version: int) -> None:
    inspector = inspect(engine)
    with engine.begin() as conn:
        for version in range(from_version + 1, SCHEMA_VERSION + 1):
            for table, column, definition in MIGRATIONS.get(version, []):
                present = {c["name"] for c in inspector.get_columns(table)}
                if column not in present:
                    conn.execute(text(f"ALTER TABLE {table} ADD COLUMN {column} {definition}"))


def _create_schema_once(engine: Engine) -> None:
    Base.metadata.create_all(engine, checkfirst=True)
    with Session(engine) as session, session.begin():
        row = session.execute(
            select(SchemaVersionRow).where(SchemaVersionRow.component == "state").with_for_update()
        ).scalar_one_or_none()
        if row is None:
            session.add(SchemaVersionRow(component="state", version=SCHEMA_VERSION))
        elif row.version > SCHEMA_VERSION:
            raise RuntimeError(
                f"icecommit state schema version {row.version} is newer than this icecommit "
                f"({SCHEMA_VERSION}); upgrade icecommit"
            )
        elif row.version < SCHEMA_VERSION:
            _migrate(engine, row.version)
            row.version = SCHEMA_VERSION


def dispose_state_engines() -> None:
    """Close every pooled connection of the state engines (tests, and long-lived hosts
    that switch databases)."""
    with _lock:
        for engine in _engines.values():
            engine.dispose()
        _engines.clear()
