"""What a prepared checkpoint's commit needs, recorded with it at prepare.

A checkpoint is decided at prepare and committed later, maybe by another process or
another version of icecommit (a recovering job, a rolled-back deployment). Each prepared
row records the features its commit needs beyond appending its data files; code that does
not know one of them refuses to commit the checkpoint instead of committing it as a plain
append. A plain append needs none, so rows written before features were recorded commit
as they always did.
"""

from __future__ import annotations

from icecommit.core.errors import CheckpointFeatureError
from icecommit.core.evolution import FEATURE_SCHEMA_CHANGE, FEATURE_TABLE_CREATE
from icecommit.core.overwrite import FEATURE_OVERWRITE_PARTITIONS
from icecommit.core.upsert import FEATURE_UPSERT
from icecommit.state.checkpoints import CheckpointState

#: The features this version commits: a checkpoint that changed the table's schema or
#: created the table before its tasks wrote (its files carry the new field ids), one that
#: overwrites the partitions it touches, and an upsert (a row delta by key).
SUPPORTED: frozenset[str] = frozenset(
    {FEATURE_SCHEMA_CHANGE, FEATURE_TABLE_CREATE, FEATURE_OVERWRITE_PARTITIONS, FEATURE_UPSERT}
)


def require_supported(state: CheckpointState, supported: frozenset[str] = SUPPORTED) -> None:
    """Raise when ``state`` needs a feature outside ``supported``.

    Raises:
        CheckpointFeatureError: names the features this version does not know.
    """
    unknown = sorted(set(state.features) - supported)
    if unknown:
        raise CheckpointFeatureError(state.job_id, state.checkpoint_id, state.table_name, unknown)
