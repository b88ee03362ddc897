"""The committer's calls, measured for the in-job metrics (:mod:`icecommit.core.telemetry`):
each commit's time, outcome, attempts and conflicts whatever it ended in, and each
checkpoint refused at prepare, validation or commit (counted once, however many of these
calls the refusal passed through)."""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable
from typing import Any, TypeVar

from icecommit.committer.results import CommitResult
from icecommit.core import telemetry
from icecommit.core.errors import (
    CheckpointRefusedError,
    CommitConflictError,
    CommitStateUnknownError,
    InvalidInputError,
    family_of,
)

T = TypeVar("T")

_COUNTED = "_icecommit_counted"  # set on an error once its checkpoint was counted


def outcome_of(error: BaseException) -> str:
    """What a call that raised ``error`` ended in, as the metrics name it, by the error's
    family (an environment failure such as ``DataFileMissingError`` is ``failed``):
    ``refused``, ``conflict``, ``unknown`` or ``failed``."""
    if family_of(error) in (CheckpointRefusedError, InvalidInputError):
        return "refused"
    if isinstance(error, CommitStateUnknownError):
        return "unknown"
    if isinstance(error, CommitConflictError):
        return "conflict"
    return "failed"


def _refused_in_state(committer: Any, args: tuple[Any, ...], kwargs: dict[str, Any], error: BaseException) -> None:
    """Count a refusal in the state (for ``icecommit metrics``) when the committer's decision
    refused the checkpoint (the ``CheckpointRefusedError`` family); never bad input, which
    leaves the state as it was."""
    checkpoint_id = args[0] if args else kwargs.get("checkpoint_id")
    if family_of(error) is CheckpointRefusedError and isinstance(checkpoint_id, int):
        committer.store.record_refusal(committer.job_id, committer.table_name, checkpoint_id, type(error).__name__)


def _first_time(error: BaseException) -> bool:
    """True the first time a call sees ``error`` (one refusal raised through nested calls)."""
    if getattr(error, _COUNTED, False):
        return False
    with contextlib.suppress(AttributeError):  # an error that takes no attributes: counted each time
        setattr(error, _COUNTED, True)
    return True


def observed(method: Callable[..., CommitResult]) -> Callable[..., CommitResult]:
    """Record a commit method's call (``method(self, checkpoint_id, ...)``) in the in-job metrics."""

    @functools.wraps(method)
    def call(self: Any, *args: Any, **kwargs: Any) -> CommitResult:
        began = time.perf_counter()
        try:
            result = method(self, *args, **kwargs)
        except Exception as e:
            if _first_time(e):
                attempts = getattr(e, "attempts", 0) if isinstance(e, CommitConflictError) else 0
                telemetry.record_commit(self.table_name, self.job_id, seconds=time.perf_counter() - began,
                                        outcome=outcome_of(e), attempts=attempts,
                                        retries=max(attempts - 1, 0))  # fmt: skip
                _refused_in_state(self, args, kwargs, e)
            raise
        telemetry.record_commit(self.table_name, self.job_id, seconds=time.perf_counter() - began,
                                outcome=result.status, attempts=result.attempts, retries=result.retries)  # fmt: skip
        if result.status == "already-committed":  # a replay, skipped: counted in the state for the exporter
            self.store.record_replay(self.job_id, self.table_name, result.checkpoint_id)
        return result

    return call


def observed_recovery(method: Callable[..., list[CommitResult]]) -> Callable[..., list[CommitResult]]:
    """Record each checkpoint a recovery call committed or settled (its time is the call's, not theirs)."""

    @functools.wraps(method)
    def call(self: Any, *args: Any, **kwargs: Any) -> list[CommitResult]:
        results = method(self, *args, **kwargs)
        for result in results:
            telemetry.record_checkpoint(self.table_name, self.job_id, outcome=result.status,
                                        attempts=result.attempts, retries=result.retries)  # fmt: skip
        return results

    return call


def observed_refusal(method: Callable[..., T]) -> Callable[..., T]:
    """Count a checkpoint that a call refused (bad input, or a decision that refuses it);
    other failures of the call (a state database error, a conflict while claiming the
    table) are retried by the caller and counted by the commit that follows."""

    @functools.wraps(method)
    def call(self: Any, *args: Any, **kwargs: Any) -> T:
        try:
            return method(self, *args, **kwargs)
        except Exception as e:
            if outcome_of(e) == "refused" and _first_time(e):
                telemetry.record_checkpoint(self.table_name, self.job_id, outcome="refused")
                _refused_in_state(self, args, kwargs, e)
            raise

    return call
