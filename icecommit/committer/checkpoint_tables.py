"""One checkpoint committed to every table it was written to: the call a routed write makes.

Each table's part is its committer's commit: the one commit protocol, planned by the
table's write mode, retried on its own conflicts, found by its key after a lost reply.

Atomic (``together_in``): the parts are committed in one catalog commit
(:class:`~icecommit.committer.commit_group.CommitGroup`): a reader sees the checkpoint in
every table or in none, and a crash leaves it in all of them or none. Otherwise the
tables commit one after another, each a snapshot of its own (a crash between two is
settled by the next run's recovery, which commits the rest from their staged files).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from pyiceberg.catalog import Catalog

from icecommit.committer.commit_group import CommitGroup, GroupFault
from icecommit.committer.committer import GlobalCommitter
from icecommit.committer.planning import CheckpointPlan
from icecommit.committer.results import CommitResult


def commit_to_tables(
    committers: Mapping[str, GlobalCommitter],
    checkpoint_id: int,
    plans: Mapping[str, CheckpointPlan],
    *,
    together_in: Catalog | None = None,
    fault: GroupFault | None = None,
) -> dict[str, CommitResult]:
    """Commit prepared checkpoint ``checkpoint_id`` to each table of ``committers`` (by
    name), on its plan in ``plans``; the results by table, in the committers' order.
    ``together_in``: the catalog of every table, when they are committed in one catalog
    commit (one that can: :func:`~icecommit.catalog.multi_table.can_commit_together`;
    None: table by table); ``fault``: its crash points, for tests.

    Raises:
        What a table's commit raises (:meth:`GlobalCommitter.commit`). Table by table, the
        tables before it are committed and the ones after it are left prepared for
        recovery; atomic, no table is committed unless every one is (the others raise
        :class:`~icecommit.errors.TableGroupError` when one fails before its part is sent).
    """
    if together_in is None or len(committers) < 2:
        return {name: committer.commit(checkpoint_id, plan=plans[name]) for name, committer in committers.items()}
    group = CommitGroup(together_in, checkpoint_id, fault)
    return group.run({name: _commit_of(c, checkpoint_id, plans[name]) for name, c in committers.items()})


def _commit_of(committer: GlobalCommitter, checkpoint_id: int, plan: CheckpointPlan) -> Callable[[], CommitResult]:
    return lambda: committer.commit(checkpoint_id, plan=plan)


__all__ = ["commit_to_tables"]
