"""Each commit attempt after the first reads only what changed since the planned head: its
(job, checkpoint) key among the new snapshots, on the branch (it landed: an earlier
attempt's answer was lost) or off it (it landed and a rollback took it off: refused), and
the job's high-water mark; where those cannot tell, it plans again."""

from __future__ import annotations

import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import CommitFailedException

import icecommit as ic
from icecommit.committer import RetryPolicy
from icecommit.core import ancestry
from icecommit.errors import CheckpointRefusedError, CheckpointRolledBackError
from icecommit.writers import write_arrow
from tests.fakes import ScriptedCatalog, concurrent_append
from tests.helpers import EVENTS_SCHEMA, events

FAST = RetryPolicy(max_attempts=4, max_seconds=60, min_wait_s=0.001, max_wait_s=0.002)


def _committer(catalog: SqlCatalog, name: str) -> ic.GlobalCommitter:
    return ic.GlobalCommitter(catalog, name, job_id="A", retry_policy=FAST, sleep=lambda _s: None)


def _prepare(committer: ic.GlobalCommitter, checkpoint_id: int) -> None:
    rows = events(checkpoint_id * 100, checkpoint_id * 100 + 10)
    committer.prepare(
        checkpoint_id, [write_arrow(committer.load_table(), rows, job_id="A", checkpoint_id=checkpoint_id)]
    )


def _prepared_table(catalog: SqlCatalog) -> tuple[str, ic.GlobalCommitter]:
    """A new table whose job ``A`` has prepared checkpoint 1."""
    name = f"{catalog.name}.events"
    ic.create_table(catalog, name, EVENTS_SCHEMA, partition_by=["event"])
    committer = _committer(catalog, name)
    _prepare(committer, 1)
    return name, committer


def _rows(catalog: SqlCatalog, name: str) -> int:
    return catalog.load_table(name).scan().to_arrow().num_rows


def test_a_rollback_that_lands_between_two_attempts_is_refused(scripted_catalog: ScriptedCatalog) -> None:
    catalog = scripted_catalog
    name, committer = _prepared_table(catalog)
    committer.commit(1)
    _prepare(committer, 2)
    before = catalog.load_table(name).metadata.current_snapshot_id

    def landed_then_rolled_back_and_the_answer_lost() -> None:
        other = SqlCatalog(catalog.name, **catalog.properties)
        other.load_table(name).manage_snapshots().rollback_to_snapshot(before).commit()
        other.engine.dispose()
        raise CommitFailedException("the answer was lost; the catalog says it conflicted")

    catalog.after = [landed_then_rolled_back_and_the_answer_lost]
    catalog.calls = 0
    with pytest.raises(CheckpointRolledBackError) as refused:
        committer.commit(2)
    assert isinstance(refused.value, CheckpointRefusedError)
    table = catalog.load_table(name)
    off_branch = [s for s in table.metadata.snapshots if ancestry.checkpoint_of(s) == ("A", 2)]
    assert refused.value.snapshot_id == off_branch[0].snapshot_id
    assert catalog.calls == 1  # the second attempt was never sent
    assert table.metadata.current_snapshot_id == before and _rows(catalog, name) == 10


def test_an_attempt_whose_answer_was_lost_is_found_by_its_key_and_never_sent_again(
    scripted_catalog: ScriptedCatalog,
) -> None:
    catalog = scripted_catalog
    name, committer = _prepared_table(catalog)

    def lost() -> None:
        raise CommitFailedException("the answer was lost; the catalog says it conflicted")

    catalog.after = [lost]
    catalog.calls = 0
    result = committer.commit(1)
    assert (result.status, result.attempts, result.retries) == ("already-committed", 1, 1)
    assert catalog.calls == 1 and _rows(catalog, name) == 10


def test_a_conflict_with_another_writer_retries_on_the_new_head_and_commits_once(
    scripted_catalog: ScriptedCatalog,
) -> None:
    catalog = scripted_catalog
    name, committer = _prepared_table(catalog)
    catalog.before = [concurrent_append(catalog, name)]
    result = committer.commit(1)
    assert (result.status, result.attempts, result.retries) == ("committed", 2, 1)
    assert _rows(catalog, name) == 11
    assert [c.checkpoint_id for c in ancestry.committed_checkpoints(catalog.load_table(name).metadata)] == [1]
