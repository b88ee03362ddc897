"""The write modes, by name: one line each (:data:`MODES`), or :func:`register` at run time.

A mode is its name (``mode=``), the feature a prepared checkpoint records so that a
replay, a recovering job or another version commits it as it was prepared (none for an
append, so rows from before features were recorded commit as they always did), its
planner, and what its prepare needs (format versions, staged keys, the table its writers
were given).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from icecommit.committer.modes.appending import AppendPlanner
from icecommit.committer.modes.partition_overwrite import PartitionOverwritePlanner
from icecommit.committer.modes.planner import Planner
from icecommit.committer.modes.upserting import UpsertPlanner
from icecommit.core.errors import InvalidArgumentError
from icecommit.core.key_lookup import KeyLookup
from icecommit.core.overwrite import FEATURE_OVERWRITE_PARTITIONS, OVERWRITE_PARTITIONS
from icecommit.core.upsert import FEATURE_UPSERT, UPSERT
from icecommit.core.write_modes import APPEND, checked_write_mode
from icecommit.state.checkpoints import CheckpointState

#: Makes the planner of one prepared checkpoint (its state row; how keys are looked up).
PlannerFactory = Callable[[CheckpointState, KeyLookup], Planner]


@dataclass(frozen=True)
class WriteMode:
    """One write mode (see the module).

    Attributes:
        name: its ``mode=`` value.
        planner: makes its planner for a prepared checkpoint.
        feature: what a prepared checkpoint of the mode records (None: an append).
        min_format_version: the oldest Iceberg format version it writes.
        max_format_version: the newest (None: any).
        newer_format: why a newer format version is refused (for its error).
        stages_keys: its prepare stages the keys its rows replace or delete.
        needs_writers_table: its results must say which table their writers were given
            (what it may replace depends on it).
    """

    name: str
    planner: PlannerFactory
    feature: str | None = None
    min_format_version: int = 1
    max_format_version: int | None = None
    newer_format: str = ""
    stages_keys: bool = False
    needs_writers_table: bool = False


def _upsert_planner(state: CheckpointState, lookup: KeyLookup) -> Planner:
    # an upsert with no keys staged has nothing to delete: its rows are an append
    return UpsertPlanner(state.keys_path, lookup) if state.keys_path is not None else AppendPlanner()


#: The modes this version writes, by name.
MODES: dict[str, WriteMode] = {
    mode.name: mode
    for mode in (
        WriteMode(APPEND, lambda state, lookup: AppendPlanner()),
        WriteMode(
            OVERWRITE_PARTITIONS,
            lambda state, lookup: PartitionOverwritePlanner(),
            feature=FEATURE_OVERWRITE_PARTITIONS,
            min_format_version=2,
            needs_writers_table=True,
        ),
        WriteMode(
            UPSERT,
            _upsert_planner,
            feature=FEATURE_UPSERT,
            min_format_version=2,
            max_format_version=2,
            newer_format="row deletes are deletion vectors, which icecommit does not write yet (upserts need a "
            "version 2 table)",
            stages_keys=True,
        ),
    )
}


def register(mode: WriteMode) -> WriteMode:
    """Add ``mode`` (a new name and feature) to :data:`MODES`; returns it.

    Raises:
        InvalidArgumentError: its name or feature is another mode's.
    """
    taken = mode.name in MODES or (mode.feature is not None and mode.feature in features())
    if taken:
        raise InvalidArgumentError("mode", mode.name, "a name and a feature no other write mode has")
    MODES[mode.name] = mode
    return mode


def unregister(name: str) -> None:
    """Remove the mode ``name`` added by :func:`register` (append and the built-in ones stay)."""
    if name not in _BUILT_IN:
        MODES.pop(name, None)


def named(mode: str | None, properties: dict[str, str] | None = None) -> WriteMode:
    """The mode a write uses: ``mode``, else the table's ``icecommit.write-mode``, else append.

    Raises:
        InvalidArgumentError: a mode (argument or property) this version does not have.
    """
    return MODES[checked_write_mode(mode, properties, tuple(MODES))]


def of_state(state: CheckpointState) -> WriteMode:
    """The mode a prepared checkpoint was prepared under (by its features; append when it
    records none)."""
    return next((m for m in MODES.values() if m.feature is not None and m.feature in state.features), MODES[APPEND])


def features() -> frozenset[str]:
    """The features of every mode."""
    return frozenset(m.feature for m in MODES.values() if m.feature is not None)


_BUILT_IN = frozenset(MODES)

__all__ = ["MODES", "PlannerFactory", "WriteMode", "features", "named", "of_state", "register", "unregister"]
