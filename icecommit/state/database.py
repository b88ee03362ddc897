"""Where icecommit's state tables live, and their creation on first use."""

from __future__ import annotations

import functools
import logging
import os
import threading
import uuid
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime, timezone
from typing import Any, TypeVar

from pyiceberg.catalog import Catalog
from pyiceberg.catalog.sql import SqlCatalog
from sqlalchemy import Engine, create_engine, event, inspect, select, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import (
    DisconnectionError,
    IntegrityError,
    InterfaceError,
    OperationalError,
    ProgrammingError,
    SQLAlchemyError,
)
from sqlalchemy.exc import TimeoutError as PoolTimeoutError
from sqlalchemy.orm import Session

from icecommit.core.connections import is_transient, retry_transient
from icecommit.core.errors import (
    StateDatabaseError,
    StateDatabaseNotConfiguredError,
    StateDatabaseUnavailableError,
    StateSchemaError,
)
from icecommit.core.settings import ENV_METRICS_URI, ENV_STATE_URI, STATE_URI_PROPERTY
from icecommit.state.home import icecommit_home
from icecommit.state.models import SCHEMA_VERSION, Base, SchemaVersionRow, StateIdentityRow

logger = logging.getLogger(__name__)

_engines: dict[str, Engine] = {}
_identities: weakref.WeakKeyDictionary[Engine, str] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def state_uri(catalog: Catalog | None = None) -> str:
    """The database URL of icecommit's state tables, the first of:

    1. the catalog's property ``icecommit.state-uri`` (set where the catalog is configured,
       so every process that opens the catalog finds the same state);
    2. the environment variable ``ICECOMMIT_STATE_URI`` (or its earlier name
       ``ICECOMMIT_METRICS_URI``);
    3. the catalog's own database, when it is a SQL catalog;
    4. a SQLite file under ``$ICECOMMIT_HOME``, for the embedded default (no catalog).

    Two processes that pick different state databases for one table do not disagree
    silently: the table records its state database, and every other one is refused.

    Raises:
        StateDatabaseNotConfiguredError: another kind of catalog (REST, Glue, Hive) with no
            state database configured: a local file would be a state other processes miss.
    """
    named = catalog.properties.get(STATE_URI_PROPERTY) if catalog is not None else None
    if named:
        return str(named)
    configured = os.environ.get(ENV_STATE_URI) or os.environ.get(ENV_METRICS_URI)
    if configured:
        return configured
    if isinstance(catalog, SqlCatalog):
        return str(catalog.properties["uri"])
    if catalog is not None:
        raise StateDatabaseNotConfiguredError(catalog.name, type(catalog).__name__)
    home = icecommit_home()
    home.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{home / 'icecommit-state.db'}"


#: How long a SQLite connection waits for another writer's lock before it reports the
#: database locked (then retried as a transient failure); a URL's ``?timeout=SECONDS`` sets it.
SQLITE_BUSY_TIMEOUT_S = 30.0


def _sqlite_engine(uri: str) -> Engine:
    """A SQLite engine whose connections wait for a lock (``?timeout=`` of the URL, else
    :data:`SQLITE_BUSY_TIMEOUT_S`) and that keeps to its database file.

    Once the file holds icecommit's state, a file removed since is refused (SQLite would
    make an empty one in its place, and a new process a new state there); a pooled
    connection to a file replaced since is dropped for one to the file there now, which is
    used only when it holds the same state database (restored from a backup, say)."""
    url = make_url(uri)
    timeout = float(url.query.get("timeout", SQLITE_BUSY_TIMEOUT_S))  # type: ignore[arg-type]
    engine = create_engine(url.difference_update_query(["timeout"]), connect_args={"timeout": timeout})
    if url.database in (None, "", ":memory:") or str(url.database).startswith("file:"):
        return engine
    path = os.path.abspath(str(url.database))  # the file opened, whatever the working directory becomes
    shown = shown_uri(engine)

    def inode() -> tuple[int, int] | None:
        try:
            found = os.stat(str(path))
        except FileNotFoundError:
            return None
        return found.st_dev, found.st_ino

    def removed() -> StateDatabaseUnavailableError:
        return StateDatabaseUnavailableError(
            shown,
            "the database file was removed since this process opened it; nothing more was written to it. "
            "Put the file back (restore it) and run again: a new empty database in its place would not know "
            "the tables' checkpoints",
        )

    def before_connect(_dialect: object, _record: object, _cargs: object, _cparams: object) -> None:
        if inode() is None and engine in _identities:  # made once, gone now
            raise removed()

    def connected(_dbapi: Any, record: Any) -> None:
        record.info["inode"] = inode()

    def same_identity(dbapi: Any) -> None:
        known = _identities.get(engine)
        if known is None:
            return
        row = dbapi.execute("SELECT identity FROM icecommit_state_identity WHERE key = 1").fetchone()
        if row is None or row[0] != known:
            raise StateDatabaseUnavailableError(
                shown,
                f"the database file was replaced by another database (identity {row[0] if row else 'none'}, not "
                f"{known}) since this process opened it; nothing was written to it. Put the original back",
            )

    def checked_out(dbapi: Any, record: Any, _proxy: object) -> None:
        now = inode()
        if now is None:
            raise removed()
        if record.info.get("inode") != now:  # a connection to the file as it was: open the one there now
            raise DisconnectionError("the database file was replaced")
        same_identity(dbapi)  # a file copied over this one keeps its inode (tens of microseconds)

    event.listen(engine, "do_connect", before_connect)
    event.listen(engine, "connect", connected)
    event.listen(engine, "checkout", checked_out)
    return engine


def shown_uri(engine_or_uri: Engine | str) -> str:
    """A database URL as it may be printed: the password hidden."""
    if isinstance(engine_or_uri, Engine):
        return engine_or_uri.url.render_as_string(hide_password=True)
    try:
        return make_url(engine_or_uri).render_as_string(hide_password=True)
    except SQLAlchemyError:  # not a URL at all: show no more than its scheme
        return engine_or_uri.split(":", 1)[0] + ":..."


def briefly(error: BaseException) -> str:
    """An error in one line: its type and the first line of its message (a database
    driver's messages run over several lines)."""
    return f"{type(error).__name__}: {(str(error).splitlines() or [''])[0]}"


#: The extra that installs each database driver icecommit's URLs name, by module.
_DRIVER_EXTRAS = {"psycopg": "postgres", "psycopg2": "postgres"}


def missing_driver(error: BaseException) -> str | None:
    """What to install when ``error`` is a database driver that is not installed (None
    otherwise): running again will not help, installing will."""
    if not isinstance(error, ImportError):
        return None
    module = (error.name or "").split(".", 1)[0]
    extra = _DRIVER_EXTRAS.get(module)
    if extra is None:
        return f"needs the database driver {module or error}, which is not installed here"
    return f"needs the database driver {module}, which is not installed here: pip install 'icecommit[{extra}]'"


def state_engine(uri: str) -> Engine:
    """A process-wide engine for ``uri`` with icecommit's tables created (or migrated).

    Raises:
        StateDatabaseUnavailableError: the database cannot be reached or opened.
        StateSchemaError: it was written by a newer icecommit.
    """
    with _lock:
        engine = _engines.get(uri)
        if engine is not None:
            return engine
        try:
            # on a server, a connection it or the network dropped is found before use (pre-ping)
            engine = _sqlite_engine(uri) if uri.startswith("sqlite") else create_engine(uri, pool_pre_ping=True)
            created = engine
            retry_transient(lambda _: _create_schema(created), what=f"state database {shown_uri(uri)}")
        except (SQLAlchemyError, ImportError) as e:  # ImportError: the URL's driver is not installed
            if engine is not None:
                engine.dispose()
            if (install := missing_driver(e)) is not None:
                raise StateDatabaseError(shown_uri(uri), install) from e
            raise StateDatabaseUnavailableError(shown_uri(uri), f"cannot be opened: {briefly(e)}") from e
        except StateSchemaError:
            if engine is not None:
                engine.dispose()
            raise
        _engines[uri] = engine
        return engine


@contextmanager
def state_errors(store_or_engine: object, then: str) -> Iterator[None]:
    """Turn a database error of the state (raw, or the store's own after its retries)
    into :class:`StateDatabaseUnavailableError` saying what it means for the caller
    (``then``), the original as ``__cause__``."""
    try:
        yield
    except StateDatabaseUnavailableError as e:
        raise StateDatabaseUnavailableError(e.uri, f"{e.reason}; {then}") from e.__cause__ or e
    except SQLAlchemyError as e:
        engine = getattr(store_or_engine, "engine", store_or_engine)
        shown = shown_uri(engine) if isinstance(engine, Engine) else "the state database"
        raise StateDatabaseUnavailableError(shown, f"failed: {briefly(e)}; {then}") from e


@contextmanager
def counted_or_logged(what: str) -> Iterator[None]:
    """A write of counts for the metrics only, after the work it counts is done: a state
    database that cannot take it is logged (``what`` was not recorded), never raised, so
    that it never fails that work or hides its own outcome. Not retried: a lost reply
    could count it twice."""
    try:
        yield
    except (SQLAlchemyError, StateDatabaseError) as e:
        logger.warning("%s was not recorded for the metrics: %s", what, str(e).splitlines()[0])


def unavailable(engine: Engine, error: SQLAlchemyError) -> StateDatabaseError:
    """The error a state database's failure surfaces as (its retries spent): a connection
    that failed is :class:`StateDatabaseUnavailableError` (run again once it is back);
    anything else (a constraint, a statement the database refused) is a
    :class:`StateDatabaseError` saying so, for it will fail again."""
    if isinstance(error, (OperationalError, InterfaceError, DisconnectionError, PoolTimeoutError)) or is_transient(
        error
    ):
        return StateDatabaseUnavailableError(shown_uri(engine), f"failed: {briefly(error)}")
    return StateDatabaseError(shown_uri(engine), f"refused a statement: {briefly(error)}; nothing was changed")


#: How many tries of the running state call came before this one (0: the first).
_tries_before: ContextVar[int] = ContextVar("icecommit_state_tries_before", default=0)


def is_retry() -> bool:
    """True inside a state call that is being tried again after a transient failure (its
    earlier try may have landed: a write then accepts finding its own result)."""
    return _tries_before.get() > 0


F = TypeVar("F", bound=Callable[..., Any])


def guarded(*, retried: bool) -> Callable[[F], F]:
    """Wrap a method of a state store (anything with an ``_engine``): a transient
    connection failure (see :func:`icecommit.core.connections.is_transient`) is retried
    with bounded backoff when ``retried`` (reads, and writes that are the same done once
    or twice), and whatever database error is left becomes
    :class:`StateDatabaseUnavailableError` naming the database (password hidden).

    Applied after the method's ``def`` (``get = retried(get)``), not as a decorator:
    mutmut, which runs the mutation tests, leaves every decorated function unmutated."""

    def decorate(method: F) -> F:
        @functools.wraps(method)
        def call(self: Any, *args: Any, **kwargs: Any) -> Any:
            engine = self._engine
            what = f"state database {shown_uri(engine)}: {method.__name__}"

            def once(tries: int) -> Any:
                token = _tries_before.set(tries)
                try:
                    return method(self, *args, **kwargs)
                finally:
                    _tries_before.reset(token)

            try:
                return retry_transient(once, what=what) if retried else once(0)
            except SQLAlchemyError as e:
                raise unavailable(engine, e) from e

        return call  # type: ignore[return-value]

    return decorate


#: Reads, and writes safe to run twice: retried.
retried = guarded(retried=True)
#: Writes that would count twice (an increment, an added sample): tried once.
tried_once = guarded(retried=False)


def state_identity(engine: Engine) -> str:
    """The identity of the state database behind ``engine`` (made with its schema)."""
    with _lock:
        known = _identities.get(engine)
    if known is not None:
        return known
    try:
        identity = retry_transient(lambda _: _read_identity(engine), what=f"state database {shown_uri(engine)}")
    except SQLAlchemyError as e:
        raise unavailable(engine, e) from e
    with _lock:
        _identities[engine] = identity
    return identity


def _read_identity(engine: Engine) -> str:
    with Session(engine) as session:
        try:
            identity = session.execute(
                select(StateIdentityRow.identity).where(StateIdentityRow.key == 1)
            ).scalar_one_or_none()
        except (OperationalError, ProgrammingError):  # an engine whose schema predates the identity
            identity = None
    if identity is None:  # an engine made outside state_engine: give it its schema (idempotent)
        _create_schema(engine)
        with Session(engine) as session:
            identity = session.execute(select(StateIdentityRow.identity).where(StateIdentityRow.key == 1)).scalar_one()
    return str(identity)


#: Tries at making the schema. A try fails only on a race lost to another process making
#: the same thing (a table, the version row, the identity row; or, on SQLite, a lock that
#: two writers deadlocked on, which one of them wins), so each failure is a step another
#: process got further: there cannot be more failures than there are things to make.
SCHEMA_TRIES = len(Base.metadata.tables) + 3


def _create_schema(engine: Engine) -> None:
    # Several processes may create the schema at once: the loser of a race looks again,
    # and once one of them has made all of it, the others find it current.
    for attempt in range(SCHEMA_TRIES):
        if _is_current(engine):
            return
        try:
            _create_schema_once(engine)
            return
        except (IntegrityError, ProgrammingError, OperationalError) as e:
            if is_transient(e) or attempt == SCHEMA_TRIES - 1:
                raise  # a lock or a lost connection is the caller's bounded retry's


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
    # 5 added the identity table (create_all makes it; _create_schema_once fills it)
    5: [],
    6: [
        ("icecommit_checkpoints", "watermark_us", "BIGINT"),
        ("icecommit_checkpoints", "future_records", "BIGINT NOT NULL DEFAULT 0"),
        ("icecommit_checkpoints", "query_id", "VARCHAR(64)"),
    ],
    7: [("icecommit_checkpoints", "source_offsets", "TEXT")],
    # 8 added the compaction tables (compactions, rewritten rows) and the maintenance lease
    # table; create_all makes them
    8: [],
    9: [],
    # 10: the features a prepared checkpoint's commit needs (NULL in older rows: an append)
    10: [("icecommit_checkpoints", "features", "TEXT")],
    # 11: the schema a checkpoint's change made; the sequence number an overwrite started from;
    # an upsert's staged keys
    11: [
        ("icecommit_checkpoints", "schema_id", "BIGINT"),
        ("icecommit_checkpoints", "base_sequence_number", "BIGINT"),
        ("icecommit_checkpoints", "keys_path", "TEXT"),
    ],
    # 12 added the maintenance runs and refusals tables (create_all makes them) and the count
    # of replays a committed checkpoint's commit skipped
    12: [("icecommit_checkpoints", "replays", "INTEGER NOT NULL DEFAULT 0")],
    # 13: a checkpoint's check results, the audit branch it is held on and why, and its release
    13: [
        ("icecommit_checkpoints", "check_results", "TEXT"),
        ("icecommit_checkpoints", "audit_branch", "VARCHAR(255)"),
        ("icecommit_checkpoints", "hold_reason", "VARCHAR(16)"),
        ("icecommit_checkpoints", "published_by", "VARCHAR(255)"),
        ("icecommit_checkpoints", "published_at", "TIMESTAMP WITH TIME ZONE"),
        ("icecommit_checkpoints", "publish_reason", "TEXT"),
        ("icecommit_checkpoints", "publish_forced", "BOOLEAN NOT NULL DEFAULT FALSE"),
    ],
}

#: Columns made wider after they shipped: version -> (table, column, SQL type). Schema 9
#: widened the metrics' stage from 16 characters, too short for ``query-input-routed-kept``:
#: PostgreSQL refused the row, so a routed streaming sink's source counts went unrecorded.
#: SQLite does not enforce a VARCHAR's length and needs nothing.
WIDENINGS: dict[int, list[tuple[str, str, str]]] = {
    9: [("icecommit_metrics", "stage", "VARCHAR(32)")],
}


def _widen(table: str, column: str, definition: str, dialect: str) -> str | None:
    """The statement that widens ``column`` on ``dialect`` (None: nothing to do); the
    state database is SQLite or PostgreSQL (the earlier migrations' types are theirs)."""
    if dialect == "sqlite":
        return None
    return f"ALTER TABLE {table} ALTER COLUMN {column} TYPE {definition}"


def _migrate(engine: Engine, from_version: int) -> None:
    inspector = inspect(engine)
    with engine.begin() as conn:
        for version in range(from_version + 1, SCHEMA_VERSION + 1):
            for table, column, definition in MIGRATIONS.get(version, []):
                present = {c["name"] for c in inspector.get_columns(table)}
                if column not in present:
                    conn.execute(text(f"ALTER TABLE {table} ADD COLUMN {column} {definition}"))
            for table, column, definition in WIDENINGS.get(version, []):
                statement = _widen(table, column, definition, engine.dialect.name)
                if statement is not None:
                    conn.execute(text(statement))


def _is_current(engine: Engine) -> bool:
    """Whether the database already holds this version's schema and its identity, asked
    in one query: what every process but the first finds. Creating or checking the schema
    table by table costs a round trip per table (about 70 ms on PostgreSQL); anything
    else (no tables yet, an older or newer version, no identity) takes that full path."""
    with engine.connect() as conn:  # a server that cannot be reached fails here, once
        try:
            found = conn.execute(
                select(SchemaVersionRow.version)
                .join(StateIdentityRow, StateIdentityRow.key == 1)
                .where(SchemaVersionRow.component == "state")
            ).first()
        except (OperationalError, ProgrammingError) as e:
            if is_transient(e):
                raise
            return False  # no such tables yet
    return found is not None and found.version == SCHEMA_VERSION


def _refuse_newer(engine: Engine) -> None:
    """Raise before anything is created when a newer icecommit wrote the database."""
    if not inspect(engine).has_table(SchemaVersionRow.__tablename__):
        return
    with Session(engine) as session:
        found = session.execute(
            select(SchemaVersionRow.version).where(SchemaVersionRow.component == "state")
        ).scalar_one_or_none()
    if found is not None and found > SCHEMA_VERSION:
        raise StateSchemaError(shown_uri(engine), found, SCHEMA_VERSION)


def _create_schema_once(engine: Engine) -> None:
    _refuse_newer(engine)
    Base.metadata.create_all(engine, checkfirst=True)
    with Session(engine) as session, session.begin():
        row = session.execute(
            select(SchemaVersionRow).where(SchemaVersionRow.component == "state").with_for_update()
        ).scalar_one_or_none()
        if row is None:
            session.add(SchemaVersionRow(component="state", version=SCHEMA_VERSION))
        elif row.version > SCHEMA_VERSION:
            raise StateSchemaError(shown_uri(engine), row.version, SCHEMA_VERSION)
        elif row.version < SCHEMA_VERSION:
            _migrate(engine, row.version)
            row.version = SCHEMA_VERSION
        identity = session.execute(select(StateIdentityRow).where(StateIdentityRow.key == 1)).scalar_one_or_none()
        if identity is None:
            session.add(StateIdentityRow(key=1, identity=str(uuid.uuid4()), created_at=datetime.now(timezone.utc)))


def dispose_state_engines() -> None:
    """Close every pooled connection of the state engines (tests, and long-lived hosts
    that switch databases)."""
    with _lock:
        for engine in _engines.values():
            engine.dispose()
        _engines.clear()
        _identities.clear()
