"""What changes a table's or a checkpoint's fate after it was written: rollback, snapshot
expiry, the orphan sweep, abandoning a checkpoint, compaction and the maintenance policy.

Compaction and the policy write data files through the Spark-side writers, so they are
imported from their modules (:mod:`icecommit.maintenance.compaction`,
:mod:`icecommit.maintenance.policy`), not here: importing this package loads no Spark.
"""

from icecommit.maintenance.abandon import abandon_checkpoint, acknowledge_checkpoint
from icecommit.maintenance.expire import ExpirePlan, apply_expire, plan_expire
from icecommit.maintenance.orphans import OrphanFile, OrphanSweep, find_orphans
from icecommit.maintenance.rollback import RollbackPlan, apply_rollback, apply_rollbacks, plan_rollback

__all__ = [
    "ExpirePlan",
    "OrphanFile",
    "OrphanSweep",
    "RollbackPlan",
    "abandon_checkpoint",
    "acknowledge_checkpoint",
    "apply_expire",
    "apply_rollback",
    "apply_rollbacks",
    "find_orphans",
    "plan_expire",
    "plan_rollback",
]
