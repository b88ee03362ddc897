"""The committer's commit calls, measured for the in-job metrics (:mod:`icecommit.core.telemetry`):
each call's time, outcome, attempts and conflicts, whatever it ended in."""

from __future__ import annotations

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
)

T = TypeVar("T")


def outcome_of(error: BaseException) -> str:
    """What a commit call that raised ``error`` ended in, as the metrics name it."""
    if isinstance(error, (CheckpointRefusedError, InvalidInputError)):
        return "refused"
    if isinstance(error, CommitStateUnknownError):
        return "unknown"
    if isinstance(error, CommitConflictError):
        return "conflict"
    return "failed"


def observed(method: Callable[..., CommitResult]) -> Callable[..., CommitResult]:
    """Record a commit method's call (``method(self, checkpoint_id, ...)``) in the in-job metrics."""

    @functools.wraps(method)
    def call(self: Any, *args: Any, **kwargs: Any) -> CommitResult:
        began = time.perf_counter()
        try:
            result = method(self, *args, **kwargs)
        except Exception as e:
            telemetry.record_commit(self.table_name, self.job_id, seconds=time.perf_counter() - began,
                                    outcome=outcome_of(e))  # fmt: skip
            raise
        telemetry.record_commit(self.table_name, self.job_id, seconds=time.perf_counter() - began,
                                outcome=result.status, attempts=result.attempts, retries=result.retries)  # fmt: skip
        return result

    return call


def observed_prepare(method: Callable[..., T]) -> Callable[..., T]:
    """Count a prepare method's call that raised (a refused checkpoint never reaches commit)."""

    @functools.wraps(method)
    def call(self: Any, *args: Any, **kwargs: Any) -> T:
        try:
            return method(self, *args, **kwargs)
        except Exception as e:
            telemetry.record_refused_prepare(self.table_name, self.job_id, outcome=outcome_of(e))
            raise

    return call
