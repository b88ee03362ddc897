"""The commit retry loop on its own, without a catalog: what is retried, how often, and
what each attempt is told."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from pyiceberg.exceptions import CommitFailedException
from sqlalchemy.exc import OperationalError

from icecommit.committer.retry import RetryPolicy, run_with_retries
from icecommit.core.conflicts import AttemptNotSentError

FAST = RetryPolicy(max_attempts=4, min_wait_s=0.01, max_wait_s=0.02)


def _script(*outcomes: BaseException | str) -> tuple[list[int], Callable[[int], str]]:
    seen: list[int] = []

    def attempt(number: int) -> str:
        seen.append(number)
        outcome = outcomes[number]
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    return seen, attempt


@pytest.mark.parametrize(
    "conflict",
    [
        CommitFailedException("lost the compare-and-swap"),
        AttemptNotSentError("stale base"),
        OperationalError("update", {}, Exception("database is locked")),
    ],
    ids=["lost-cas", "not-sent", "sqlite-locked"],
)
def test_conflicts_are_retried_and_counted(conflict: Exception) -> None:
    seen, attempt = _script(conflict, conflict, "landed")
    waits: list[float] = []
    result = run_with_retries(FAST, attempt, checkpoint_id=3, sleep=waits.append)
    assert (result.value, result.retries) == ("landed", 2)
    assert seen == [0, 1, 2]  # each attempt knows how many retries came before it
    assert len(waits) == 2 and all(w > 0 for w in waits)


def test_any_other_error_propagates_at_once() -> None:
    seen, attempt = _script(CommitFailedException("conflict"), ValueError("outcome unknown"), "never")
    with pytest.raises(ValueError, match="outcome unknown"):
        run_with_retries(FAST, attempt, checkpoint_id=3, sleep=lambda _s: None)
    assert seen == [0, 1]


def test_the_last_conflict_is_raised_once_the_policy_stops() -> None:
    conflicts = [CommitFailedException(f"conflict {n}") for n in range(4)]
    seen, attempt = _script(*conflicts, "never")
    with pytest.raises(CommitFailedException, match="conflict 3"):
        run_with_retries(FAST, attempt, checkpoint_id=3, sleep=lambda _s: None)
    assert seen == [0, 1, 2, 3]


def test_slow_conflicting_attempts_stop_at_the_total_time_bound_long_before_the_attempt_limit() -> None:
    """``max_seconds`` bounds the whole loop even where ``max_attempts`` would allow far more:
    attempts that each take a while stop once the time since the first is past the bound,
    and the last conflict is raised. The time is an injected clock: each attempt moves it
    by ``attempt_s``, each wait by what the policy waited (nothing real sleeps)."""
    policy = RetryPolicy(max_attempts=1000, max_seconds=0.3, min_wait_s=0.01, max_wait_s=0.02)
    attempt_s = 0.05
    now = [100.0]
    seen: list[int] = []

    def slow_conflict(number: int) -> str:
        seen.append(number)
        if number >= 50:  # far past the bound: fail now instead of running 1000 slow attempts
            raise RuntimeError(f"attempt {number} ran: the loop did not stop at max_seconds")
        now[0] += attempt_s
        raise CommitFailedException(f"conflict {number}")

    waits: list[float] = []

    def wait(seconds: float) -> None:
        waits.append(seconds)
        now[0] += seconds

    with pytest.raises(CommitFailedException) as raised:
        run_with_retries(policy, slow_conflict, checkpoint_id=3, sleep=wait, clock=lambda: now[0])
    elapsed = now[0] - 100.0
    assert str(raised.value) == f"conflict {seen[-1]}"  # the last conflict, re-raised
    # stopped by time: the bound reached by the last attempt, not by the one before it
    assert elapsed - attempt_s - waits[-1] < policy.max_seconds <= elapsed
    assert 2 <= len(seen) <= round(policy.max_seconds / attempt_s) < policy.max_attempts
    assert len(waits) == len(seen) - 1  # every wait went to the injected sleep, none after the last
    assert all(policy.min_wait_s / 2 <= w <= policy.max_wait_s + policy.min_wait_s for w in waits)


def test_a_first_attempt_that_lands_is_not_a_retry() -> None:
    seen, attempt = _script("landed")
    slept: list[float] = []
    result = run_with_retries(FAST, attempt, checkpoint_id=None, sleep=slept.append)
    assert (result.value, result.retries, seen, slept) == ("landed", 0, [0], [])


def test_each_retry_is_logged_with_what_conflicted_and_the_wait_actually_taken(
    caplog: pytest.LogCaptureFixture,
) -> None:
    for checkpoint_id, what in ((3, "checkpoint 3"), (None, "table properties")):
        caplog.clear()
        waits: list[float] = []
        _, attempt = _script(CommitFailedException("lost"), CommitFailedException("lost"), "landed")
        with caplog.at_level("WARNING", logger="icecommit.committer.retry"):
            run_with_retries(FAST, attempt, checkpoint_id=checkpoint_id, sleep=waits.append)
        assert [r.getMessage() for r in caplog.records] == [
            f"commit of {what} conflicted (attempt {n}); retrying in {wait:.3f}s" for n, wait in ((1, waits[0]),
                                                                                                    (2, waits[1]))
        ]  # fmt: skip


def test_waits_start_at_the_minimum_and_grow_to_the_maximum_never_past_it() -> None:
    policy = RetryPolicy(max_attempts=12, min_wait_s=0.01, max_wait_s=0.05)
    waits: list[float] = []
    _, attempt = _script(*[CommitFailedException("lost")] * 11, "landed")
    assert run_with_retries(policy, attempt, checkpoint_id=1, sleep=waits.append).retries == 11
    assert 0.01 <= waits[0] <= 0.02  # the minimum, plus jitter of up to the minimum
    assert all(w <= 0.05 for w in waits) and waits[-1] == 0.05  # capped at the maximum, and reaching it


def test_a_maximum_wait_below_the_default_minimum_is_raised_to_it() -> None:
    policy = RetryPolicy.from_properties({"commit.retry.max-wait-ms": "50"})
    assert (policy.min_wait_s, policy.max_wait_s) == (0.1, 0.1)
    policy = RetryPolicy.from_properties({"commit.retry.max-wait-ms": "50", "commit.retry.min-wait-ms": "20"})
    assert (policy.min_wait_s, policy.max_wait_s) == (0.02, 0.05)
