"""Which operation of the commit protocol commits a prepared checkpoint: its features say."""

from __future__ import annotations

from typing import Any

from icecommit.committer.append import AppendCheckpoint
from icecommit.committer.overwrite import OverwriteCheckpoint
from icecommit.committer.upsert import UpsertCheckpoint
from icecommit.core.key_lookup import KeyLookup, look_up_here
from icecommit.core.overwrite import FEATURE_OVERWRITE_PARTITIONS
from icecommit.core.upsert import FEATURE_UPSERT
from icecommit.state.checkpoints import CheckpointState


def checkpoint_operation(
    state: CheckpointState, *args: Any, key_lookup: KeyLookup | None = None, **kwargs: Any
) -> AppendCheckpoint:
    """The operation that commits prepared checkpoint ``state`` (arguments: the append's):
    its upsert (its keys looked up by ``key_lookup``, default in this process) or partition
    overwrite when it recorded that feature, else its append."""
    if FEATURE_UPSERT in state.features and state.keys_path is not None:
        return UpsertCheckpoint(
            *args, keys_path=state.keys_path, base_sequence_number=state.base_sequence_number,
            key_lookup=key_lookup or look_up_here, **kwargs,
        )  # fmt: skip
    if FEATURE_OVERWRITE_PARTITIONS in state.features:  # no base recorded: every file of its partitions conflicts
        return OverwriteCheckpoint(*args, base_sequence_number=state.base_sequence_number or 0, **kwargs)
    return AppendCheckpoint(*args, **kwargs)


__all__ = ["checkpoint_operation"]
