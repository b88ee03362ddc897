"""Holding and publishing a checkpoint (pure rules): which checkpoints wait on the job's
audit branch instead of reaching the branch readers use, and how a held one is published.

A checkpoint is held when one of its checks failed (``on_check_failure``), when every
checkpoint waits for a release (``publish="manual"``), or when it comes after a held
checkpoint of its job under ``on_check_failure="queue"`` (it is *queued*: its own checks
passed, and it reaches readers only after the one before it). A held checkpoint is
committed to the audit branch, where any Iceberg reader can look at it; publishing brings
it to the branch readers use: by moving that branch to the held snapshot when nothing else
landed there since the audit branch left it (a fast-forward: the snapshot keeps its id),
else by committing its changes again on that branch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from icecommit.core.errors import InvalidArgumentError

#: The audit branch of a job, unless the write names one.
AUDIT_BRANCH_PREFIX = "icecommit-audit-"
#: What a failed check does: ``raise`` (the write raises ``CheckpointHeldError``) or
#: ``queue`` (the job goes on; its later checkpoints wait behind the held one).
ON_CHECK_FAILURE = ("raise", "queue")
#: When a checkpoint reaches readers: ``auto`` (once its checks pass) or ``manual`` (an
#: operator releases every checkpoint).
PUBLISH_MODES = ("auto", "manual")

#: Why a checkpoint is held: a check failed, every checkpoint waits, one before it is held,
#: or (a routed checkpoint) a check of another of its tables failed.
HoldReason = Literal["checks", "manual", "queued", "routed"]


def audit_branch(job_id: str, given: str | None = None) -> str:
    """The job's audit branch: ``given``, else ``icecommit-audit-<job id>``.

    Raises:
        InvalidArgumentError: ``given`` is not a branch name.
    """
    if given is None:
        return AUDIT_BRANCH_PREFIX + job_id
    if not isinstance(given, str) or not given.strip():
        raise InvalidArgumentError("audit_branch", given, "the name of a branch (default icecommit-audit-<job id>)")
    return given


def checked_on_check_failure(value: str | None) -> str:
    """``value`` (None: ``raise``), one of :data:`ON_CHECK_FAILURE`.

    Raises:
        InvalidArgumentError: any other value.
    """
    return _one_of("on_check_failure", value, ON_CHECK_FAILURE)


def checked_publish(value: str | None) -> str:
    """``value`` (None: ``auto``), one of :data:`PUBLISH_MODES`.

    Raises:
        InvalidArgumentError: any other value.
    """
    return _one_of("publish", value, PUBLISH_MODES)


def _one_of(argument: str, value: str | None, choices: Sequence[str]) -> str:
    if value is None:
        return choices[0]
    if value not in choices:
        raise InvalidArgumentError(argument, value, "one of " + ", ".join(choices))
    return value


def hold_reason(*, checks_passed: bool, publish: str, held_before: bool, held_along: bool = False) -> HoldReason | None:
    """Why a checkpoint waits on the audit branch; None when it goes to readers at once.
    A failed check holds it whatever else holds; then a release every checkpoint waits for;
    then one before it that is held (it waits behind it, in order); then, for one table of a
    routed checkpoint, a failed check of another of its tables (all of them or none)."""
    if not checks_passed:
        return "checks"
    if publish == "manual":
        return "manual"
    if held_before:
        return "queued"
    return "routed" if held_along else None


def can_fast_forward(branch_head: int | None, held_parent: int | None) -> bool:
    """Whether publishing a held snapshot may move the branch to it: the branch is where the
    audit branch left it when the snapshot was committed (its parent), so the snapshot holds
    exactly the branch's rows and the checkpoint's (both None: the table was empty)."""
    return branch_head == held_parent


def release_order(held: Sequence[tuple[int, HoldReason]], published: int) -> list[int]:
    """The checkpoints that follow ``published`` to readers: the queued ones right behind it
    (checkpoint id, hold reason; in checkpoint order), up to the next one held for its own
    reason (a failed check, a manual release)."""
    following = []
    for checkpoint_id, reason in sorted(held):
        if checkpoint_id <= published:
            continue
        if reason != "queued":
            break
        following.append(checkpoint_id)
    return following


__all__ = [
    "AUDIT_BRANCH_PREFIX",
    "ON_CHECK_FAILURE",
    "PUBLISH_MODES",
    "HoldReason",
    "audit_branch",
    "can_fast_forward",
    "checked_on_check_failure",
    "checked_publish",
    "hold_reason",
    "release_order",
]
