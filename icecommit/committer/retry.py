"""The commit retry policy, built from tenacity strategies."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from pyiceberg.table import TableProperties
from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential_jitter,
)
from tenacity.stop import stop_base

from icecommit.core.conflicts import is_commit_conflict

__all__ = ["Retried", "RetryPolicy", "is_commit_conflict", "run_with_retries"]
from icecommit.core.errors import InvalidArgumentError
from icecommit.core.tableprops import whole_number

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RetryPolicy:
    """Retry commits that lost a compare-and-swap (see :func:`is_commit_conflict`);
    nothing else is retried.

    Waits grow exponentially from ``min_wait_s`` up to ``max_wait_s`` with random jitter;
    the policy stops after ``max_attempts`` attempts or ``max_seconds`` seconds, whichever
    comes first. Defaults follow Iceberg's ``commit.retry.*`` defaults.
    """

    max_attempts: int = 5
    max_seconds: float = 1800.0
    min_wait_s: float = 0.1
    max_wait_s: float = 60.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise InvalidArgumentError("max_attempts", self.max_attempts, "a whole number of at least 1")
        if self.max_seconds <= 0 or self.min_wait_s < 0 or self.max_wait_s < self.min_wait_s:
            raise InvalidArgumentError(
                "max_seconds/min_wait_s/max_wait_s",
                (self.max_seconds, self.min_wait_s, self.max_wait_s),
                "max_seconds > 0, min_wait_s >= 0 and max_wait_s >= min_wait_s",
            )

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> RetryPolicy:
        """The policy of a table's ``commit.retry.*`` properties (Iceberg defaults otherwise)."""

        def number(key: str, default: int) -> int:
            return whole_number(dict(properties), key, default)

        return cls(
            max_attempts=number(TableProperties.COMMIT_NUM_RETRIES, 4) + 1,
            max_seconds=max(number(TableProperties.COMMIT_TOTAL_RETRY_TIME_MS, 1_800_000), 1) / 1000,
            min_wait_s=number(TableProperties.COMMIT_MIN_RETRY_WAIT_MS, 100) / 1000,
            max_wait_s=max(
                number(TableProperties.COMMIT_MAX_RETRY_WAIT_MS, 60_000),
                number(TableProperties.COMMIT_MIN_RETRY_WAIT_MS, 100),
            )
            / 1000,
        )

    def retrying(
        self,
        *,
        checkpoint_id: int | None = None,
        label: str | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> Retrying:
        """A tenacity ``Retrying`` for one operation's commit, named by ``label`` (else by
        its checkpoint, or as a commit of table properties); every retry is logged.
        ``max_seconds`` counts on ``clock`` from now (tests inject one)."""
        what = label or (f"checkpoint {checkpoint_id}" if checkpoint_id is not None else "table properties")

        def before_sleep(state: RetryCallState) -> None:
            wait = state.next_action.sleep if state.next_action else 0.0
            logger.warning(
                "commit of %s conflicted (attempt %d); retrying in %.3fs",
                what,
                state.attempt_number,
                wait,
            )

        return Retrying(
            retry=retry_if_exception(is_commit_conflict),
            stop=stop_after_attempt(self.max_attempts) | _StopAfter(self.max_seconds, clock),
            wait=wait_exponential_jitter(
                multiplier=self.min_wait_s, max=self.max_wait_s, jitter=max(self.min_wait_s, 0.001)
            ),
            sleep=sleep,
            before_sleep=before_sleep,
            reraise=True,
        )


class _StopAfter(stop_base):
    """Stop once ``seconds`` have passed on ``clock`` since the first attempt (tenacity's
    ``stop_after_delay`` reads the wall clock, which a test cannot move)."""

    def __init__(self, seconds: float, clock: Callable[[], float]) -> None:
        self._seconds = seconds
        self._clock = clock
        self._started = clock()

    def __call__(self, retry_state: RetryCallState) -> bool:
        return self._clock() - self._started >= self._seconds


T = TypeVar("T")


@dataclass(frozen=True)
class Retried(Generic[T]):
    """What :func:`run_with_retries` returns: the last attempt's value and how many times
    a conflicting attempt was retried."""

    value: T
    retries: int


def run_with_retries(
    policy: RetryPolicy,
    attempt: Callable[[int], T],
    *,
    checkpoint_id: int | None = None,
    label: str | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> Retried[T]:
    """The commit retry loop: call ``attempt(0)``, and ``attempt(1)``, ``attempt(2)``...
    after each commit conflict (:func:`is_commit_conflict`), waiting as the policy says,
    until an attempt returns or the policy gives up. Any other error propagates at once;
    so does the last conflict once the policy stops. ``attempt`` gets the number of
    retries before it (0 for the first), so that a retry can start from a fresh table.
    The loop of :func:`icecommit.committer.protocol.run`, which every commit uses."""
    retrying = policy.retrying(checkpoint_id=checkpoint_id, label=label, sleep=sleep, clock=clock)
    for number, call in enumerate(retrying):
        with call:
            value = attempt(number)
        outcome = call.retry_state.outcome
        if outcome is not None and not outcome.failed:
            return Retried(value, number)
    raise AssertionError("the retry policy stopped without an outcome")  # tenacity re-raises the last error
