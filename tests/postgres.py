"""The PostgreSQL server the tests run against: probed once, required under CI, and one
database of its own per test session that uses it (created by its first PostgreSQL test,
dropped at the end).

Every such session gets a fresh database, so no two runs (or two checkouts on one machine)
share catalog rows, state rows or the state schema's version row. A database left behind
by a session that was killed is dropped by the next session that makes one (its name carries the pid of
the process that made it).

- ``ICECOMMIT_TEST_PG_URI``: the server and the database to connect to for administration
  (default ``postgresql+psycopg://postgres@127.0.0.1:5432/test``).
- ``ICECOMMIT_REQUIRE_POSTGRES=1``, or ``CI=true``: an unreachable server fails the run
  instead of skipping the PostgreSQL tests.
- ``ICECOMMIT_TEST_START_POSTGRES=0``: a server that does not answer at the default address
  (127.0.0.1:5432) is not installed or started by ``scripts/postgres.sh`` first.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import uuid
from pathlib import Path

from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import make_url

ADMIN_URI = os.environ.get("ICECOMMIT_TEST_PG_URI", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
#: Seconds the probe waits for the server before calling it unreachable.
CONNECT_TIMEOUT_S = 3
_PREFIX = "icecommit_test_"


def required() -> bool:
    """True when an unreachable PostgreSQL must fail the run (CI, or an explicit opt-in)."""
    return os.environ.get("CI", "").lower() == "true" or os.environ.get("ICECOMMIT_REQUIRE_POSTGRES") == "1"


#: Installs (from Debian's packages), configures and starts the server where it is absent.
START_SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "postgres.sh"
#: The address that script serves; a server configured elsewhere is the caller's to start.
STARTED_HOSTS = ("127.0.0.1", "localhost")
STARTED_PORT = int(os.environ.get("ICECOMMIT_PG_PORT", "5432"))
#: Seconds an install and first start may take (apt on a slow mirror included).
START_TIMEOUT_S = 600


def startable(uri: str) -> bool:
    """True when ``uri`` names the server ``scripts/postgres.sh`` installs and starts."""
    url = make_url(uri)
    return (url.host or "") in STARTED_HOSTS and (url.port or 5432) == STARTED_PORT


def start_where_absent() -> str | None:
    """Run ``scripts/postgres.sh`` (install where absent, start where stopped) when the
    tests' server is the default local one and does not answer; None when it answers now,
    otherwise why not. One process at a time runs the script (a lock file), so two xdist
    workers starting at once do not race apt or the cluster."""
    reason = unreachable_reason()
    if reason is None or os.environ.get("ICECOMMIT_TEST_START_POSTGRES", "1") == "0" or not startable(ADMIN_URI):
        return reason
    with open(Path("/tmp") / f"icecommit-postgres-{STARTED_PORT}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        reason = unreachable_reason()  # another process may have started it meanwhile
        if reason is None:
            return None
        try:
            done = subprocess.run(
                ["bash", str(START_SCRIPT)], capture_output=True, text=True, timeout=START_TIMEOUT_S, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            return f"{reason}\n{START_SCRIPT.name} could not start it: {e}"
        if done.returncode != 0:
            return f"{reason}\n{START_SCRIPT.name} could not start it:\n{done.stderr.strip()}"
    return unreachable_reason()


def _admin_engine() -> Engine:
    return create_engine(
        ADMIN_URI,
        isolation_level="AUTOCOMMIT",
        connect_args={"connect_timeout": CONNECT_TIMEOUT_S},
        pool_pre_ping=False,
    )


def unreachable_reason() -> str | None:
    """None when the server answers a query within the timeout; otherwise why not."""
    engine = _admin_engine()
    try:
        with engine.connect() as conn:
            conn.execute(text("select 1"))
        return None
    except Exception as e:  # the server is absent or refuses us: report, do not raise
        first = (str(e).splitlines() or [""])[0]
        return f"PostgreSQL is not reachable at {ADMIN_URI} within {CONNECT_TIMEOUT_S}s: {type(e).__name__}: {first}"
    finally:
        engine.dispose()


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class SessionDatabase:
    """A database of one test session on the server at ``ADMIN_URI``."""

    def __init__(self) -> None:
        self.name = f"{_PREFIX}{os.getpid()}_{uuid.uuid4().hex[:8]}"
        self.uri = make_url(ADMIN_URI).set(database=self.name).render_as_string(hide_password=False)

    def create(self) -> None:
        """Drop the databases of dead sessions, then create this one."""
        engine = _admin_engine()
        try:
            with engine.connect() as conn:
                names = conn.execute(
                    text("select datname from pg_database where datname like :p"), {"p": _PREFIX + "%"}
                ).scalars()
                for stale in list(names):
                    pid = stale[len(_PREFIX) :].split("_", 1)[0]
                    if pid.isdigit() and not _pid_alive(int(pid)):
                        conn.execute(text(f'drop database if exists "{stale}" with (force)'))
                conn.execute(text(f'create database "{self.name}"'))
        finally:
            engine.dispose()

    def drop(self) -> None:
        """Drop this session's database, closing whatever connections are left on it."""
        engine = _admin_engine()
        try:
            with engine.connect() as conn:
                conn.execute(text(f'drop database if exists "{self.name}" with (force)'))
        finally:
            engine.dispose()

    def exists(self) -> bool:
        engine = _admin_engine()
        try:
            with engine.connect() as conn:
                found = conn.execute(text("select 1 from pg_database where datname = :n"), {"n": self.name})
                return found.first() is not None
        finally:
            engine.dispose()
