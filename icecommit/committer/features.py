"""What a prepared checkpoint's commit needs, recorded with it at prepare.

A checkpoint is decided at prepare and committed later, maybe by another process or
another version of icecommit (a recovering job, a rolled-back deployment). Each prepared
row records the features its commit needs beyond appending its data files; code that does
not know one of them refuses to commit the checkpoint instead of committing it as a plain
append. A plain append needs none, so rows written before features were recorded commit
as they always did.
"""

from __future__ import annotations

from icecommit.committer import modes
from icecommit.core.errors import CheckpointFeatureError
from icecommit.core.evolution import FEATURE_SCHEMA_CHANGE, FEATURE_TABLE_CREATE
from icecommit.state.checkpoints import CheckpointState

#: The features this version commits beside its write modes': a checkpoint that changed
#: the table's schema or created the table before its tasks wrote (its files carry the new
#: field ids).
TABLE_FEATURES: frozenset[str] = frozenset({FEATURE_SCHEMA_CHANGE, FEATURE_TABLE_CREATE})


def supported() -> frozenset[str]:
    """Every feature this version commits: the table's, and each registered write mode's
    (one that overwrites the partitions it touches, an upsert, ...)."""
    return TABLE_FEATURES | modes.features()


def require_supported(state: CheckpointState, known: frozenset[str] | None = None) -> None:
    """Raise when ``state`` needs a feature outside ``known`` (None: :func:`supported`).

    Raises:
        CheckpointFeatureError: names the features this version does not know.
    """
    unknown = sorted(set(state.features) - (known if known is not None else supported()))
    if unknown:
        raise CheckpointFeatureError(state.job_id, state.checkpoint_id, state.table_name, unknown)
