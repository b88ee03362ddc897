"""One checkpoint committed to every table it was written to: the call a routed write makes.

Each table's part is its committer's commit: the one commit protocol, planned by the
table's write mode, retried on its own conflicts, found by its key after a lost reply.
Today the tables commit one after another, each as a snapshot of its own (a crash between
two is settled by the next run's recovery, which commits the rest from their staged
files). Committing them in one catalog transaction is a change to this call alone.
"""

from __future__ import annotations

from collections.abc import Mapping

from icecommit.committer.committer import GlobalCommitter
from icecommit.committer.planning import CheckpointPlan
from icecommit.committer.results import CommitResult


def commit_to_tables(
    committers: Mapping[str, GlobalCommitter], checkpoint_id: int, plans: Mapping[str, CheckpointPlan]
) -> dict[str, CommitResult]:
    """Commit prepared checkpoint ``checkpoint_id`` to each table of ``committers`` (by
    name), on its plan in ``plans``; the results by table, in the committers' order.

    Raises:
        What a table's commit raises (:meth:`GlobalCommitter.commit`); the tables before
        it are committed, the ones after it are left prepared for recovery.
    """
    return {name: committer.commit(checkpoint_id, plan=plans[name]) for name, committer in committers.items()}


__all__ = ["commit_to_tables"]
