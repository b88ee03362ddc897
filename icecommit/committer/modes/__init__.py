"""Write modes: each a pure planner registered by name (:mod:`.registry`)."""

from icecommit.committer.modes.appending import AppendPlanner
from icecommit.committer.modes.partition_overwrite import PartitionOverwritePlanner
from icecommit.committer.modes.planner import CheckpointBase, Planner
from icecommit.committer.modes.registry import MODES, WriteMode, features, named, of_state, register, unregister
from icecommit.committer.modes.upserting import UpsertPlanner

__all__ = [
    "MODES",
    "AppendPlanner",
    "CheckpointBase",
    "PartitionOverwritePlanner",
    "Planner",
    "UpsertPlanner",
    "WriteMode",
    "features",
    "named",
    "of_state",
    "register",
    "unregister",
]
