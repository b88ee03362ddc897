"""The one commit protocol: every catalog change icecommit makes goes through :func:`run`.

A change is an :class:`Operation`: what it checks before each attempt (its validators, and
whether its own key is already in the table), the one compare-and-swap it makes, how it
finds itself in the table after a lost response, and its conflict rule. The loop is the
same for all of them (pyiceberg's and Iceberg's ``SnapshotProducer`` shape, with Iceberg's
Kafka Connect idea of a key checked per attempt):

1. attempt ``n`` runs on the planned base (``n = 0``) or on the table loaded again;
   :meth:`Operation.check` finds the operation's key (it landed in an earlier attempt
   whose answer was lost: done, nothing is sent) or refuses (its validators);
2. :meth:`Operation.apply` makes one compare-and-swap;
3. an error that proves the attempt did not land (:func:`is_commit_conflict`) is a
   conflict: ``rebase`` operations wait as the retry policy says and go to 1 on the table
   as it is now; ``refuse`` operations (a planned rollback or expiry) raise
   :class:`PlanChangedError`: their plan may no longer hold, so it is never re-applied;
4. an error raised before the attempt reached the catalog (writing a metadata file, say)
   proves it did not land and goes to the caller as it is (unless the operation asks the
   table anyway, :attr:`Operation.resolve_unsent`); any other error of an attempt leaves
   the outcome unknown: the table is
   loaded again and :meth:`Operation.find` looks for the operation's key; found, the
   change landed; not found (or the table cannot be read), :class:`CommitStateUnknownError`
   names the operation and what resolves it. Nothing is deleted on the way.

Errors name the operation (``checkpoint 7 of job 'j' in ns.t``, ``compaction group g of
ns.t``, ``rollback of ns.t``). A new kind of change (a schema change, a table creation, a
row delta, a partition overwrite) is a new :class:`Operation`, not a new loop.
"""

from __future__ import annotations

import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar, Literal

from pyiceberg.table import Table

from icecommit.catalog.fileio import MetadataWriteError
from icecommit.catalog.loading import unreachable
from icecommit.committer.attempt import SendingCatalog
from icecommit.committer.retry import RetryPolicy, run_with_retries
from icecommit.core.conflicts import AttemptLostError, AttemptNotSentError, is_commit_conflict
from icecommit.core.connections import is_transient
from icecommit.core.errors import (
    CatalogUnavailableError,
    CommitConflictError,
    CommitStateUnknownError,
    IcecommitError,
    PlanChangedError,
    StateDatabaseUnavailableError,
    TableMetadataWriteError,
)

logger = logging.getLogger(__name__)

ConflictRule = Literal["rebase", "refuse"]

#: The policy of ``refuse`` operations: one attempt; a conflict is never retried.
ONCE = RetryPolicy(max_attempts=1)


@dataclass(frozen=True)
class Found:
    """What :meth:`Operation.check` or :meth:`Operation.find` returns when the operation's
    key is in the table: the snapshot that carries it (None for a change that makes no
    snapshot, such as a table property)."""

    snapshot_id: int | None


@dataclass(frozen=True)
class Applied:
    """What one compare-and-swap returns: the snapshot it made (None for a change that
    makes no snapshot) and the table as the commit left it (None where not known)."""

    snapshot_id: int | None
    table: Table | None


@dataclass(frozen=True)
class Outcome:
    """How an operation ended.

    Attributes:
        snapshot_id: the snapshot that carries the change.
        table: the table as this call's commit left it (None when the change was found
            rather than made by an answered attempt).
        found_before: the key was in the table before an attempt of this call was sent
            (an earlier run, or an attempt whose answer was lost and was taken for a
            conflict, landed it).
        recovered: an attempt's outcome was unknown and the key was found afterwards.
        sent: attempts sent to the catalog.
        retries: attempts made after a conflict.
    """

    snapshot_id: int | None
    table: Table | None
    found_before: bool
    recovered: bool
    sent: int
    retries: int


class Operation(ABC):
    """One kind of catalog change, as :func:`run` drives it.

    Attributes:
        conflict: ``rebase``: after a lost compare-and-swap, check and apply again on the
            table as it is now (appends, compaction, the table's claim); ``refuse``: raise
            :class:`PlanChangedError` (a planned rollback or expiry).
        table_name: the table changed.
        checkpoint_id: the checkpoint committed (None for other operations).
        remedy: what resolves an unknown outcome, for its error.
    """

    conflict: ClassVar[ConflictRule] = "rebase"
    #: the kind of change in one word (``rollback``, ``expiry``), for a refused plan
    kind: ClassVar[str] = "change"
    #: an error of an attempt that never reached the catalog (a validator's I/O, a fault):
    #: False, the caller gets it as it is (it proves nothing landed); True, the table is
    #: asked as after an unknown outcome (the checkpoint append's rule since its first release)
    resolve_unsent: ClassVar[bool] = False
    #: making the change twice is the same as once (a table property): an unknown outcome
    #: the table does not show is reported by the attempt's own error (doing it again is safe)
    idempotent: ClassVar[bool] = False
    table_name: str
    checkpoint_id: int | None = None
    remedy: str = "run recover() to resolve it"

    @property
    @abstractmethod
    def label(self) -> str:
        """The operation as errors and logs name it."""

    def check(self, table: Table, number: int) -> Found | None:
        """Before attempt ``number`` (0: on the planned base): the operation's key when the
        table already holds it (nothing is sent then); raise to refuse. Nothing by default."""
        return None

    @abstractmethod
    def apply(self, table: Table) -> Applied:
        """One compare-and-swap on the catalog. Raises what the catalog raised."""

    def find(self, table: Table) -> Found | None:
        """After an attempt whose outcome is unknown: the operation's key in ``table``, or
        None when the table does not show it. Nothing is found by default."""
        return None

    def unknown(self, cause: BaseException) -> None:
        """Called once when an attempt's outcome is unknown, before :meth:`find` (to record
        it); an error here is logged and does not hide the outcome."""
        return None


def run(
    operation: Operation,
    *,
    base: Table,
    load: Callable[[], Table],
    policy: RetryPolicy,
    sleep: Callable[[float], None] = time.sleep,
) -> Outcome:
    """Commit ``operation`` (see the module): at most one of its changes lands, whatever
    the catalog answers.

    Args:
        base: the table the operation was planned on (attempt 0 runs on it).
        load: loads the table as the catalog has it now.
        policy: bounds the retries of a ``rebase`` operation (``refuse`` ones try once).

    Raises:
        CommitConflictError: a ``rebase`` operation lost every attempt the policy allowed.
        PlanChangedError: a ``refuse`` operation lost its compare-and-swap.
        CommitStateUnknownError: an attempt's outcome is unknown and the table does not
            show the change.
        IcecommitError: what :meth:`Operation.check` raised (nothing was sent by it).
    """
    sent = 0
    retries = 0
    lost = False  # an attempt's connection failed after it was sent, and the table did not show it

    def attempt(number: int) -> Outcome:
        nonlocal sent, retries, lost
        retries = number
        table = base if number == 0 else load()
        watched: SendingCatalog | None = None
        try:
            found = operation.check(table, number)
            if found is not None:
                return Outcome(found.snapshot_id, table, found_before=True, recovered=False, sent=sent, retries=number)
            sent += 1
            inner = table.catalog._inner if isinstance(table.catalog, SendingCatalog) else table.catalog
            watched = SendingCatalog(inner)
            view = Table(table.name(), table.metadata, table.metadata_location, table.io, watched)  # type: ignore[arg-type]
            applied = operation.apply(view)
        except Exception as e:
            if isinstance(e, IcecommitError) or is_commit_conflict(e):
                raise  # a refusal, or a conflict for the retry policy
            if watched is not None and watched.sent and is_transient(e) and operation.conflict == "rebase":
                lost = True
                return _after_lost_connection(operation, e, load, sent, number)
            if operation.resolve_unsent or (watched is not None and watched.sent):
                raise  # the table tells whether it landed
            raise _NotSent(e) from e  # it never reached the catalog: it did not land
        return Outcome(
            applied.snapshot_id, applied.table, found_before=False, recovered=False, sent=sent, retries=number
        )

    started = time.monotonic()
    try:
        # a checkpoint's retries are logged as "commit of checkpoint N conflicted ..."
        label = None if operation.checkpoint_id is not None else operation.label
        return run_with_retries(
            policy if operation.conflict == "rebase" else ONCE,
            attempt,
            checkpoint_id=operation.checkpoint_id,
            label=label,
            sleep=sleep,
        ).value
    except (CatalogUnavailableError, StateDatabaseUnavailableError) as e:
        if lost:  # an attempt after a lost one could not look: whether that one landed late is not known
            raise _unknown_error(operation, e) from e
        raise
    except IcecommitError:
        raise  # a refusal of check(), or an error the operation itself named
    except _NotSent as e:
        raise e.error from e.error.__cause__
    except AttemptLostError as e:  # the policy stopped on an attempt whose connection failed
        return _resolve_unknown(operation, e.cause, load, sent, retries, base, noted=True)
    except Exception as e:
        if isinstance(e, AttemptNotSentError) and isinstance(e.__cause__, MetadataWriteError):
            # storage refused the new metadata file every time: named as such, not as a conflict
            raise TableMetadataWriteError(operation.table_name, operation.label, sent, e.__cause__) from e.__cause__
        if is_commit_conflict(e):
            if operation.conflict == "refuse":
                raise PlanChangedError(operation.table_name, operation.kind) from e
            raise CommitConflictError(
                operation.table_name,
                operation.checkpoint_id,
                sent,
                time.monotonic() - started,
                operation=operation.label,
            ) from e
        return _resolve_unknown(operation, e, load, sent, retries, base)


class _NotSent(Exception):
    """An attempt failed before it reached the catalog (writing its metadata file, say):
    proof that it did not land, so its error is the caller's to handle, not an unknown
    outcome."""

    def __init__(self, error: Exception) -> None:
        super().__init__(repr(error))
        self.error = error


def _after_lost_connection(
    operation: Operation, cause: Exception, load: Callable[[], Table], sent: int, number: int
) -> Outcome:
    """An attempt whose connection failed after it was sent: ask the table at once. Found,
    it landed; not found, :class:`AttemptLostError` has the retry policy try again (a
    compare-and-swap, so at most one attempt lands; the next one's check finds a late one)."""
    found = _ask_table(operation, cause, load, "the connection failed after the attempt was sent")
    if found is None:
        raise AttemptLostError(cause) from cause
    logger.info("%s: found in the table after a lost connection (snapshot %s)", operation.label, found.snapshot_id)
    return Outcome(found.snapshot_id, None, found_before=False, recovered=True, sent=sent, retries=number)


def _ask_table(
    operation: Operation, cause: Exception, load: Callable[[], Table], why: str, *, noted: bool = False
) -> Found | None:
    """Record an unknown outcome (unless ``noted`` already) and look for the operation's
    key in the table as it is now; a table that cannot be read leaves the outcome unknown."""
    logger.warning("%s: %s (%r); looking for it in the table", operation.label, why, cause)
    try:
        if not noted:
            operation.unknown(cause)
    except Exception:  # recording it is a courtesy: the outcome decides what the caller does
        logger.warning("%s: could not record the unknown outcome", operation.label, exc_info=True)
    try:
        return operation.find(load())
    except Exception as e:
        raise _unknown_error(operation, cause) from e


def _resolve_unknown(
    operation: Operation,
    cause: Exception,
    load: Callable[[], Table],
    sent: int,
    retries: int,
    base: Table,
    *,
    noted: bool = False,
) -> Outcome:
    """After an error that does not prove the attempt failed: ask the table. Deletes nothing."""
    found = _ask_table(operation, cause, load, "commit outcome unknown", noted=noted)
    if found is None:
        if operation.idempotent:  # doing it again is safe: the attempt's own error says what failed
            if is_transient(cause):
                raise unreachable(base.catalog, cause, f"{operation.label} did not land") from cause
            raise cause
        raise _unknown_error(operation, cause) from cause
    logger.info("%s: found in the table after an unknown outcome (snapshot %s)", operation.label, found.snapshot_id)
    return Outcome(found.snapshot_id, None, found_before=False, recovered=True, sent=sent, retries=retries)


def _unknown_error(operation: Operation, cause: Exception) -> CommitStateUnknownError:
    return CommitStateUnknownError(
        operation.table_name, operation.checkpoint_id, cause, operation=operation.label, remedy=operation.remedy
    )
