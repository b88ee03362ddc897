"""Transient connection failures of a database (the state database, a SQL catalog): which
errors they are, and the bounded retry of what may safely run again after one.

A transient failure is one that a moment later may not recur: a connection dropped or
refused, a server restarting, a serialisation failure, a SQLite database locked by another
writer. What is retried is only what is safe to run twice: reads, and writes that are the
same done once or twice (an insert by key that finds its own row, a compare-and-set of a
status). A catalog commit is never simply repeated: the commit protocol asks the table
first (:mod:`icecommit.committer.protocol`).
"""

from __future__ import annotations

import logging
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from pyiceberg.exceptions import (
    CommitStateUnknownException,
    ServerError,
    ServiceUnavailableError,
    TooManyRequestsError,
)
from requests.exceptions import ConnectionError as RequestsConnectionError
from requests.exceptions import SSLError as RequestsSSLError
from requests.exceptions import Timeout as RequestsTimeout
from sqlalchemy.exc import DBAPIError, DisconnectionError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError

from icecommit.core.errors import InvalidArgumentError

logger = logging.getLogger(__name__)

#: Environment variables bounding the retries: attempts in all, and seconds in all.
ENV_ATTEMPTS = "ICECOMMIT_CONNECTION_ATTEMPTS"
ENV_SECONDS = "ICECOMMIT_CONNECTION_RETRY_SECONDS"

#: SQLite's transient states, in its messages: another connection holds the lock.
_SQLITE_TRANSIENT = ("database is locked", "database table is locked", "database schema is locked")


#: A REST catalog's transient failures (see :func:`is_transient`).
REST_TRANSIENT = (
    RequestsConnectionError,
    RequestsTimeout,
    ServerError,
    ServiceUnavailableError,
    TooManyRequestsError,
    CommitStateUnknownException,
)


def is_transient(error: BaseException) -> bool:
    """True for a failure of the connection rather than of the statement: the same call
    may succeed a moment later.

    A dropped or refused connection (a driver's ``OperationalError``, or any error after
    which SQLAlchemy invalidated the connection), a pool that timed out, and SQLite's
    "database is locked". SQLite's other operational errors (no such table, a file that is
    not a database) are not: running them again gives the same answer.

    Of a REST catalog: a connection refused, dropped or timed out, and a 5xx answer (500,
    502 and 504 on a commit are pyiceberg's ``CommitStateUnknownException``, 503 its
    ``ServiceUnavailableError``), and 429 (too many requests): a gateway or the server failed, perhaps after it made the
    change, so a commit that gets one is looked for in the table before it is tried again.
    """
    if isinstance(error, (DisconnectionError, PoolTimeoutError, ConnectionError)):
        return True
    if isinstance(error, RequestsSSLError):  # a certificate refused: the same a moment later
        return False
    if isinstance(error, REST_TRANSIENT):
        return True
    if not isinstance(error, DBAPIError):
        return False
    if error.connection_invalidated:
        return True
    if not isinstance(error, (OperationalError, InterfaceError)):
        return False
    if type(error.orig).__module__.startswith("sqlite3"):
        message = str(error.orig).lower()
        return any(m in message for m in _SQLITE_TRANSIENT)
    return True  # a server database's OperationalError: the connection, not the statement


@dataclass(frozen=True)
class ConnectionRetry:
    """How long a transient connection failure is retried: at most ``attempts`` tries in
    at most ``max_seconds``, waiting from ``first_wait_s`` doubling up to ``max_wait_s``
    (with jitter) between them. The defaults ride out a database restart of a few seconds;
    ``ICECOMMIT_CONNECTION_ATTEMPTS`` and ``ICECOMMIT_CONNECTION_RETRY_SECONDS`` set them."""

    attempts: int = 6
    max_seconds: float = 30.0
    first_wait_s: float = 0.05
    max_wait_s: float = 2.0

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise InvalidArgumentError("attempts", self.attempts, "a whole number of at least 1")
        if self.max_seconds < 0 or self.first_wait_s < 0 or self.max_wait_s < self.first_wait_s:
            raise InvalidArgumentError(
                "max_seconds/first_wait_s/max_wait_s",
                (self.max_seconds, self.first_wait_s, self.max_wait_s),
                "max_seconds >= 0, first_wait_s >= 0 and max_wait_s >= first_wait_s",
            )

    @classmethod
    def from_environment(cls) -> ConnectionRetry:
        """The defaults, with what the environment variables set."""
        attempts = os.environ.get(ENV_ATTEMPTS)
        seconds = os.environ.get(ENV_SECONDS)
        try:
            return cls(
                attempts=int(attempts) if attempts else cls.attempts,
                max_seconds=float(seconds) if seconds else cls.max_seconds,
            )
        except ValueError as e:
            raise InvalidArgumentError(
                f"{ENV_ATTEMPTS}/{ENV_SECONDS}", (attempts, seconds), "a whole number and a number of seconds"
            ) from e

    def wait(self, retry: int) -> float:
        """The wait before retry ``retry`` (1 for the first)."""
        ceiling = min(self.first_wait_s * 2 ** (retry - 1), self.max_wait_s)
        return float(ceiling / 2 + random.uniform(0, ceiling / 2))


#: The policy every database call of this process uses (tests shorten it).
_policy: ConnectionRetry | None = None


def connection_retry() -> ConnectionRetry:
    """The process's connection retry policy (the environment's, read once)."""
    global _policy
    if _policy is None:
        _policy = ConnectionRetry.from_environment()
    return _policy


def set_connection_retry(policy: ConnectionRetry | None) -> None:
    """Set the process's policy (None: the environment's again)."""
    global _policy
    _policy = policy


T = TypeVar("T")


#: The level retries are logged at: a warning inside a job; the command line, whose failure
#: is one line on stderr, logs them at debug (:func:`log_retries_at`).
_retry_level = logging.WARNING


def log_retries_at(level: int) -> None:
    """Log the retries of transient failures at ``level`` from now on in this process."""
    global _retry_level
    _retry_level = level


def retry_transient(
    call: Callable[[int], T],
    *,
    what: str,
    policy: ConnectionRetry | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """``call(0)``, and ``call(1)``, ``call(2)``... after each transient failure
    (:func:`is_transient`), waiting as the policy says; any other error, and the last
    transient one once the policy stops, propagate. ``call`` gets the number of tries
    before it, so that a write can tell a retry (whose earlier try may have landed)."""
    policy = policy or connection_retry()
    started = time.monotonic()
    tries = 0
    while True:
        try:
            return call(tries)
        except Exception as e:
            tries += 1
            if not is_transient(e) or tries >= policy.attempts:
                raise
            wait = policy.wait(tries)
            if time.monotonic() - started + wait > policy.max_seconds:
                raise
            logger.log(_retry_level, "%s: %s (try %d); retrying in %.2fs", what, _briefly(e), tries, wait)
            sleep(wait)


def _briefly(error: BaseException) -> str:
    return f"{type(error).__name__}: {(str(error).splitlines() or [''])[0]}"
