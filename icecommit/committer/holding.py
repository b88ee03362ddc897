"""Nothing reaches readers unchecked: a prepared checkpoint's checks run before it is
committed, and a checkpoint that must wait (a failed check, a manual release, a held one
before it) is committed to its job's audit branch instead (the rules are
:mod:`icecommit.core.publishing`'s).

Where a checkpoint goes is decided once, after prepare and before any commit, and recorded
with its check results in its state row (a compare-and-set: a replay, a recovery or
another process commits it where the first decision sent it). A held checkpoint is then
committed to the audit branch through the same commit protocol as any other, exactly once
on that branch, and recorded ``held``; :mod:`icecommit.committer.release` brings it to
readers or gives it up.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyiceberg.manifest import DataFile
from pyiceberg.table import Table

from icecommit.catalog.data_file_keys import look_up_here
from icecommit.catalog.data_file_rows import read_columns
from icecommit.committer import planning, protocol
from icecommit.committer.modes.upserting import resolve_positions
from icecommit.committer.recording import CheckpointRecorder
from icecommit.committer.results import CommitResult, result_from_state
from icecommit.committer.retry import RetryPolicy
from icecommit.committer.staging import read_staged, staged_files
from icecommit.committer.validation import validate_results
from icecommit.core import ancestry
from icecommit.core.ancestry import MAIN_BRANCH
from icecommit.core.check_values import CheckpointFacts, CheckResult
from icecommit.core.checks import Check, evaluate_checks
from icecommit.core.datafiles import WriteResult
from icecommit.core.errors import CheckpointHeldError
from icecommit.core.identifiers import table_name
from icecommit.core.key_lookup import KeyLookup
from icecommit.core.publishing import audit_branch, hold_reason
from icecommit.state.checkpoints import HELD, CheckpointState, CheckpointStore, PublishCounters
from icecommit.state.samples import QUERY_INPUT, SOURCE

if TYPE_CHECKING:
    from icecommit.committer.committer import GlobalCommitter

logger = logging.getLogger(__name__)

#: The summary key of the empty first snapshot an audit branch left from (its branch's name).
AUDIT_BASE = "icecommit.audit-base"


#: Summaries of a checkpoint's rows made elsewhere, by check name, for those of the
#: checks (each reads rows and splits) it chose to summarize: (table, staged files, checks).
RowSummaries = Callable[[Table, Sequence[DataFile], Sequence[Check]], Mapping[str, Any]]


@dataclass(frozen=True)
class Gate:
    """What a job's checkpoints pass before they reach readers.

    Attributes:
        checks: the checks each checkpoint's rows must pass (:mod:`icecommit.checks`).
        on_check_failure: ``raise`` (the commit raises ``CheckpointHeldError``) or
            ``queue`` (the job goes on; its later checkpoints wait behind the held one).
        publish: ``auto`` (a checkpoint whose checks pass goes to readers) or ``manual``
            (every checkpoint waits on the audit branch for a release).
        audit_branch: the branch held checkpoints wait on (None: ``icecommit-audit-<job>``).
        row_summaries: where the checks that read rows summarize them (None: in this
            process; ``ic.write`` passes
            :class:`~icecommit.writers.spark_checks.SparkRowChecks`, Spark tasks for a
            large checkpoint).
    """

    checks: tuple[Check, ...] = ()
    on_check_failure: str = "raise"
    publish: str = "auto"
    audit_branch: str | None = None
    row_summaries: RowSummaries | None = field(default=None, compare=False)
    #: The last results judged, by table and staged files: a routed checkpoint's checks,
    #: judged before any table is prepared, are not judged again at its prepare.
    _last_judged: dict[tuple[str, tuple[str, ...]], tuple[CheckResult, ...]] = field(
        default_factory=dict, compare=False, repr=False
    )


def decide(
    store: CheckpointStore,
    gate: Gate | None,
    *,
    job_id: str,
    table: Table,
    checkpoint_id: int,
    files: Sequence[DataFile],
    received: int,
    live_branch: str = MAIN_BRANCH,
    lookup: KeyLookup | None = None,
    held_along: bool = False,
) -> dict[str, str | None]:
    """Where a checkpoint about to be prepared goes, recorded with its row (so that whoever
    commits it, a recovery or another process, sends it where its checks said): its checks'
    results (run on ``files``, the data files it stages; ``received``: the rows its tasks
    received, its source count when none was declared or reported) and, when it must wait,
    the audit branch and why. Empty when there is nothing to decide (no checks, no manual
    release, nothing of the job held before it). ``unique(..., against_table=True)`` looks
    its keys up among the live rows of ``live_branch`` with ``lookup`` (None: in this process),
    as an upsert does. ``held_along``: a check of another table of the same routed
    checkpoint failed, so this table's part waits too (all of them reach readers or none)."""
    if gate is None and not held_along:  # a job that asks for no checks goes on (it reads no state for them)
        return {}
    gate = gate or Gate()
    name = table_name(table)
    before = [s for s in store.waiting(name, job_id) if s.checkpoint_id < checkpoint_id]
    if not gate.checks and gate.publish == "auto" and not before and not held_along:
        return {}
    results: tuple[CheckResult, ...] = ()
    if gate.checks:
        results = _judged(store, gate, table, files, source_count(store, job_id, name, checkpoint_id, received),
                          live_duplicates=lambda keys: _live_keys(table, live_branch, keys, lookup))  # fmt: skip
    reason = hold_reason(
        checks_passed=all(r.ok for r in results), publish=gate.publish, held_before=bool(before),
        held_along=held_along,
    )  # fmt: skip
    branch = None
    if reason is not None:  # behind a held one: on its branch; else the job's
        branch = before[-1].audit_branch if before else audit_branch(job_id, gate.audit_branch)
    failed = [r for r in results if not r.ok]
    if failed:
        logger.warning(
            "checkpoint %d of job %s: %d check(s) failed (%s); it waits on branch %s",
            checkpoint_id, job_id, len(failed), "; ".join(f"{r.check}: {r.detail}" for r in failed), branch,
        )  # fmt: skip
    return {
        "check_results": json.dumps([r.to_dict() for r in results]) if results else None,
        "audit_branch": branch,
        "hold_reason": reason,
    }


def checks_fail(
    store: CheckpointStore,
    gate: Gate | None,
    *,
    job_id: str,
    table: Table,
    checkpoint_id: int,
    results: Sequence[WriteResult],
    live_branch: str = MAIN_BRANCH,
    lookup: KeyLookup | None = None,
) -> bool:
    """Whether write results ``results`` of a checkpoint fail one of ``gate``'s checks on
    ``table`` (judged before any table of a routed checkpoint is prepared, so that all its
    tables wait if one fails; ``live_branch`` and ``lookup`` as for :func:`decide`).
    Changes nothing."""
    if gate is None or not gate.checks:
        return False
    name = table_name(table)
    validated = validate_results(
        results, metadata=table.metadata, job_id=job_id, checkpoint_id=checkpoint_id, table_name=name
    )
    source = source_count(store, job_id, name, checkpoint_id, validated.source_records)
    judged = _judged(store, gate, table, staged_files(validated, table), source,
                     live_duplicates=lambda keys: _live_keys(table, live_branch, keys, lookup))  # fmt: skip
    return not all(r.ok for r in judged)


def _judged(
    store: CheckpointStore,
    gate: Gate,
    table: Table,
    files: Sequence[DataFile],
    source: int,
    live_duplicates: Callable[[pa.Table], int] | None = None,
) -> tuple[CheckResult, ...]:
    """``gate``'s checks judged on a checkpoint's staged ``files``: the rows its checks
    must read summarized by ``gate.row_summaries`` where it chooses to, else here; the
    results judged last for the same table and files are reused."""
    key = (table_name(table), tuple(f.file_path for f in files))
    if key in gate._last_judged:
        return gate._last_judged[key]
    facts = CheckpointFacts.of_files(files, table.schema(), now=store.clock(), source_records=source,
                                     rows=lambda columns: _rows(table, files, columns),
                                     live_duplicates=live_duplicates)  # fmt: skip
    summaries: Mapping[str, Any] = {}
    if gate.row_summaries is not None:
        split = [c for c in gate.checks if c.splits and c.needs_rows(facts)]
        summaries = gate.row_summaries(table, files, split) if split else {}
    results = evaluate_checks(gate.checks, facts, summaries)
    gate._last_judged.clear()  # one checkpoint's at a time
    gate._last_judged[key] = results
    return results


def route(
    committer: GlobalCommitter, gate: Gate | None, state: CheckpointState, table: Callable[[], Table]
) -> CheckpointState:
    """Where prepared checkpoint ``state`` goes, for a row prepared without a decision (by
    an earlier version, or a committer given its gate only at commit): decided as
    :func:`decide` does, on its staged files, and recorded once. Returns its row as
    recorded (unchanged when decided before, or when there is nothing to decide)."""
    if gate is None or state.check_results is not None or state.audit_branch is not None:
        return state  # decided before (a replay commits it where it was sent), or nothing asked
    loaded = table()
    decided = decide(
        committer.store, gate, job_id=state.job_id, table=loaded, checkpoint_id=state.checkpoint_id,
        files=read_staged(state, loaded), received=state.source_records,
    )  # fmt: skip
    if not decided:
        return state
    return committer.store.record_gate(
        state.job_id, state.table_name, state.checkpoint_id, check_results=decided["check_results"],
        audit_branch=decided["audit_branch"], hold_reason=decided["hold_reason"],
    )  # fmt: skip


def results_of(state: CheckpointState) -> tuple[CheckResult, ...]:
    """The check results recorded with a checkpoint (none when it had no checks)."""
    if state.check_results is None:
        return ()
    return tuple(CheckResult.from_dict(r) for r in json.loads(state.check_results))


def source_count(store: CheckpointStore, job_id: str, table_name: str, checkpoint_id: int, received: int) -> int:
    """A checkpoint's source count: the one its job declared (``declare_source``), else the
    one its streaming query's source reported, else ``received`` (what its tasks received)."""
    for stage in (SOURCE, QUERY_INPUT):
        counts = store.window_totals(job_id, table_name, checkpoint_id, stage)
        if counts:
            return sum(counts.values())
    return received


def _live_keys(table: Table, branch: str, keys: pa.Table, lookup: KeyLookup | None) -> int:
    """How many of ``keys`` (distinct) have live rows in ``branch``'s head (the upsert's
    look-up: only files whose bounds or partition can hold a key are read)."""
    hits = resolve_positions(
        table, keys, branch=branch, job_id="", checkpoint_id=0, table_name=table_name(table),
        lookup=lookup or look_up_here,
    )  # fmt: skip
    if not hits:
        return 0
    found = pa.concat_tables([matched.select(keys.column_names) for _, _, matched in hits])
    return len(found.group_by(keys.column_names).aggregate([]))


def _rows(table: Table, files: Sequence[DataFile], columns: tuple[str, ...] | None) -> Iterator[pa.RecordBatch]:
    """The rows of a checkpoint's data files, file by file (these top-level ``columns``)."""
    for data_file in files:
        yield from read_columns(table.io, data_file.file_path, columns)


def hold(committer: GlobalCommitter, state: CheckpointState) -> CommitResult:
    """Commit prepared checkpoint ``state`` to the audit branch its route recorded, exactly
    once on that branch, and record it ``held``. When no other checkpoint waits on that
    branch, it is first pointed at the head of the committer's branch, so that it holds
    what readers see plus what waits (a discarded checkpoint's rows do not linger there)."""
    branch = state.audit_branch
    assert branch is not None  # routed to it
    store = committer.store
    if not state.has_changes:  # nothing to commit: held as it is, released as empty
        recorded = store.mark_committed(
            state.job_id, state.table_name, state.checkpoint_id, snapshot_id=None, attempts=0, retries=0,
            counters=PublishCounters(), status=HELD,
        )  # fmt: skip
        return _with_checks(result_from_state(recorded, "held"), recorded)
    table = committer.load_table()
    others = [
        s for s in store.waiting(state.table_name)
        if s.audit_branch == branch and s.status == HELD and s.checkpoint_id != state.checkpoint_id
    ]  # fmt: skip
    policy = RetryPolicy.from_properties(table.metadata.properties)
    if ancestry.branch_head(table.metadata, committer.branch) is None and branch not in table.metadata.refs:
        # Iceberg writes a table's first snapshot to main only: an empty one first, which
        # the audit branch leaves from (readers see no row of it)
        outcome = protocol.run(FirstSnapshot(state.table_name, committer.branch, branch), base=table,
                               load=committer.load_table, policy=policy)  # fmt: skip
        table = outcome.table or committer.load_table()
    head = ancestry.branch_head(table.metadata, committer.branch)
    landed = ancestry.find_checkpoint(table.metadata, state.job_id, state.checkpoint_id, branch)
    if landed is None and not others and head is not None and planning.head_of(table, branch) != head.snapshot_id:
        protocol.run(
            PointBranch(state.table_name, branch, head.snapshot_id), base=table, load=committer.load_table,
            policy=policy,
        )  # fmt: skip
    audit = copy.copy(committer)  # the same catalog, state and hooks, committing to the audit branch
    audit.branch = branch
    audit._gate = committer._gate
    audit._latest = None
    audit._recorder = CheckpointRecorder(
        store, state.table_name, state.job_id, branch, lambda: audit.load_table().metadata, held=True
    )
    return _with_checks(audit._commit_prepared(state), state)


def let_go(committer: GlobalCommitter, branch: str) -> None:
    """Point audit branch ``branch`` at the head of the committer's branch when nothing
    waits on it any more (after a discard): the discarded snapshots then hang on no branch,
    so that expiry takes them and the orphan sweep their files."""
    if any(s.audit_branch == branch for s in committer.store.waiting(committer.table_name)):
        return
    table = committer.load_table()
    head = ancestry.branch_head(table.metadata, committer.branch)
    if head is None or branch not in table.metadata.refs or planning.head_of(table, branch) == head.snapshot_id:
        return
    policy = RetryPolicy.from_properties(table.metadata.properties)
    protocol.run(PointBranch(committer.table_name, branch, head.snapshot_id), base=table, load=committer.load_table,
                 policy=policy)  # fmt: skip


def settle(gate: Gate | None, state: CheckpointState, result: CommitResult) -> CommitResult:
    """``result`` with its checks; raises when the checkpoint is held because a check failed
    and the job stops on a failed check (``on_check_failure="raise"``).

    Raises:
        CheckpointHeldError: names each failed check and what it observed.
    """
    result = _with_checks(result, state)
    failed = [r for r in result.checks if not r.ok]
    if result.status == "held" and failed and (gate is None or gate.on_check_failure == "raise"):
        assert state.audit_branch is not None
        raise CheckpointHeldError(
            state.job_id, state.checkpoint_id, state.table_name, state.audit_branch,
            [(r.check, r.observed, r.detail) for r in failed],
        )  # fmt: skip
    return result


def _with_checks(result: CommitResult, state: CheckpointState) -> CommitResult:
    return dataclasses.replace(result, checks=results_of(state)) if state.check_results else result


class FirstSnapshot(protocol.Operation):
    """An empty first snapshot of a table's ``branch`` (main), for an audit branch to leave
    from: Iceberg writes a table's first snapshot to main only. Idempotent: a table whose
    branch has a head already needs none."""

    kind = "snapshot"
    idempotent = True

    def __init__(self, table_name: str, branch: str, audit_branch: str) -> None:
        self.table_name = table_name
        self.branch = branch
        self.audit_branch = audit_branch

    @property
    def label(self) -> str:
        return f"the empty first snapshot of {self.table_name}, for branch {self.audit_branch}"

    def check(self, table: Table, number: int) -> protocol.Found | None:
        head = ancestry.branch_head(table.metadata, self.branch)
        return protocol.Found(head.snapshot_id) if head is not None else None

    def apply(self, table: Table) -> protocol.Applied:
        with table.transaction() as tx:
            summary = {AUDIT_BASE: self.audit_branch}
            with tx.update_snapshot(snapshot_properties=summary).fast_append():
                pass  # no file: readers see no row
        return protocol.Applied(None, None)

    def find(self, table: Table) -> protocol.Found | None:
        return self.check(table, 1)


class PointBranch(protocol.Operation):
    """Pointing a branch at a snapshot (the audit branch at the head readers see, before a
    checkpoint is held on it): a compare-and-swap on the branch's head; idempotent."""

    kind = "branch"
    idempotent = True

    def __init__(self, table_name: str, branch: str, snapshot_id: int) -> None:
        self.table_name = table_name
        self.branch = branch
        self.snapshot_id = snapshot_id

    @property
    def label(self) -> str:
        return f"pointing branch {self.branch} of {self.table_name} at snapshot {self.snapshot_id}"

    def check(self, table: Table, number: int) -> protocol.Found | None:
        return protocol.Found(None) if planning.head_of(table, self.branch) == self.snapshot_id else None

    def apply(self, table: Table) -> protocol.Applied:
        table.manage_snapshots().create_branch(self.snapshot_id, self.branch).commit()
        return protocol.Applied(None, None)

    def find(self, table: Table) -> protocol.Found | None:
        return self.check(table, 1)


__all__ = [
    "FirstSnapshot",
    "Gate",
    "PointBranch",
    "checks_fail",
    "decide",
    "hold",
    "let_go",
    "results_of",
    "route",
    "settle",
    "source_count",
]
