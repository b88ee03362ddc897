"""What reconciliation says of checkpoints that met checks before the branch: held on
their job's audit branch (not on the branch by design: neither loss nor pending),
discarded from it (information, never loss), or published from it (by whom, and whether
past a failed check). Pure helpers of :func:`icecommit.metrics.judge.judge`."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence

from icecommit.core.check_values import CheckResult
from icecommit.metrics.report_model import CheckpointLine, Problem
from icecommit.state.checkpoints import CheckpointState


def checks_of(state: CheckpointState) -> tuple[CheckResult, ...]:
    """The check results recorded with a checkpoint (none when it had no checks)."""
    return tuple(CheckResult.from_dict(r) for r in json.loads(state.check_results)) if state.check_results else ()


def gated(line: CheckpointLine, state: CheckpointState, checks: tuple[CheckResult, ...]) -> CheckpointLine:
    """``line`` with what its checkpoint's checks said, where they sent it and its release."""
    if not checks and state.audit_branch is None:
        return line
    return dataclasses.replace(
        line, checks=checks, audit_branch=state.audit_branch, hold_reason=state.hold_reason,
        published_by=state.published_by, publish_forced=state.publish_forced,
    )  # fmt: skip


def failed_named(checks: Sequence[CheckResult]) -> str:
    """The failed checks, each with what it found."""
    return "; ".join(f"{r.check}: {r.detail}" for r in checks if not r.ok)


def held_note(state: CheckpointState, checks: Sequence[CheckResult]) -> str:
    """Why a held checkpoint waits, and where."""
    why = {
        "checks": f"its checks failed ({failed_named(checks)})",
        "manual": "every checkpoint of its job waits for a release (publish=manual)",
        "queued": "queued behind an earlier held checkpoint of its job",
    }.get(state.hold_reason or "", f"held ({state.hold_reason})")
    return f"held on audit branch {state.audit_branch}: {why}; not on this branch by design (held, not loss)"


def failed_checks(table: str, state: CheckpointState, checks: Sequence[CheckResult], written: int) -> list[Problem]:
    """A note for a checkpoint held (or about to be) because its checks failed."""
    if not any(not r.ok for r in checks):
        return []
    where = f"--job {state.job_id} --checkpoint {state.checkpoint_id}"
    return [
        Problem("failed-checks", f"checkpoint {state.checkpoint_id} of job {state.job_id}: its checks failed "
                f"({failed_named(checks)}); it waits on audit branch {state.audit_branch} and its {written:,} rows are "
                f"not on this branch: publish it anyway (icecommit publish {table} {where} --force --reason TEXT) or "
                f"discard it (icecommit discard {table} {where} --reason TEXT)", state.job_id, state.checkpoint_id,
                severity="info")
    ]  # fmt: skip


def discarded(state: CheckpointState, checks: Sequence[CheckResult], written: int) -> Problem:
    """Information on a checkpoint given up while it waited on its audit branch."""
    who = f" by {state.abandoned_by}" if state.abandoned_by else ""
    when = f" at {state.abandoned_at.isoformat()}" if state.abandoned_at else ""
    failed = f"; its checks had failed ({failed_named(checks)})" if any(not r.ok for r in checks) else ""
    return Problem("discarded", f"checkpoint {state.checkpoint_id} of job {state.job_id}: discarded from audit branch "
                   f"{state.audit_branch}{who}{when} ({state.abandon_reason}); its {written:,} rows never reached "
                   f"this branch{failed}; information, not loss", state.job_id, state.checkpoint_id,
                   severity="info")  # fmt: skip


__all__ = ["checks_of", "discarded", "failed_checks", "gated", "held_note"]
