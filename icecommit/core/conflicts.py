"""Which errors of a catalog commit prove that it did not land (a conflict another attempt
may win), as opposed to an outcome that is not known."""

from __future__ import annotations

from pyiceberg.exceptions import BadRequestError, CommitFailedException
from sqlalchemy.exc import OperationalError


class AttemptNotSentError(Exception):
    """A commit attempt failed before it reached the catalog, so it cannot have landed
    (for example its base table was stale and a file it read had been expired). Retried
    on a fresh copy of the table, like a lost compare-and-swap."""


class AttemptLostError(Exception):
    """A commit attempt's connection failed after it was sent (a transient failure, see
    :func:`icecommit.core.connections.is_transient`) and the table, asked at once, does not
    show it. Retried like a lost compare-and-swap: the next attempt is a compare-and-swap too,
    so at most one of them lands, and its check finds the key of one that landed late.

    Attributes:
        cause: the attempt's error.
    """

    def __init__(self, cause: Exception) -> None:
        super().__init__(f"the connection failed after the attempt was sent, and the table does not show it: {cause!r}")
        self.cause = cause


#: pyiceberg's metadata update refusing a snapshot whose sequence number another commit
#: has passed since the attempt's base was loaded (a commit to another branch: the branch's
#: own requirement still held). Catalogs that apply updates in-process (SQL, Glue, Hive)
#: raise it while staging, before the swap, so nothing landed; a REST catalog's server
#: refuses the request with it (400), so nothing landed there either.
_STALE_SEQUENCE_NUMBER = "older than last sequence number"


def is_commit_conflict(error: BaseException) -> bool:
    """True for errors that prove an attempt did not land and another may succeed.

    A lost compare-and-swap (``CommitFailedException``), an attempt that failed before
    it reached the catalog (:class:`AttemptNotSentError`), one whose connection failed and
    that the table does not show (:class:`AttemptLostError`), a snapshot refused because a
    commit to another branch moved the table's sequence number on meanwhile, and SQLite's
    "database is locked" (the statement did not run; SQLite serialises writers across
    processes).
    """
    if isinstance(error, (CommitFailedException, AttemptNotSentError, AttemptLostError)):
        return True
    if isinstance(error, (ValueError, BadRequestError)) and _STALE_SEQUENCE_NUMBER in str(error):
        return True
    return isinstance(error, OperationalError) and "database is locked" in str(error)
