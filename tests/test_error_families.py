"""Every error says what the caller does next: it belongs to exactly one of four families
(invalid input, refused by the checkpoint decision, commit outcome, environment), classes
that moved keep their old base for one release, the files a write made are removed only
when the error proves nothing was staged, and the command line's exit code follows the
family."""

from __future__ import annotations

import inspect

import pytest

import icecommit.errors as errors
from icecommit.cli.main import _EXIT_OF_FAMILY, EXIT_ENVIRONMENT, EXIT_OUTCOME, EXIT_USAGE
from icecommit.errors import (
    FAMILIES,
    CheckpointRefusedError,
    CommitOutcomeError,
    EnvironmentFailureError,
    IcecommitError,
    InvalidInputError,
    family_of,
    nothing_staged,
)

CLASSES = sorted(
    (c for c in vars(errors).values() if inspect.isclass(c) and issubclass(c, IcecommitError)),
    key=lambda c: c.__name__,
)

#: The family each error belongs to (a new error is placed here on purpose).
EXPECTED = {
    "SchemaMismatchError": InvalidInputError,
    "ValidationError": InvalidInputError,
    "UnroutedRecordsError": InvalidInputError,
    "InvalidArgumentError": InvalidInputError,
    "InvalidRangeError": InvalidInputError,
    "CheckpointNotFoundError": InvalidInputError,
    "SnapshotNotFoundError": InvalidInputError,
    "CompletenessNotReachedError": InvalidInputError,
    "TableSpecError": InvalidInputError,
    "TableNotFoundError": InvalidInputError,
    "NotAnAncestorError": InvalidInputError,
    "JobNotFoundError": InvalidInputError,
    "CheckpointRolledBackError": CheckpointRefusedError,
    "CheckpointCommittedError": CheckpointRefusedError,
    "CheckpointOutOfOrderError": CheckpointRefusedError,
    "StreamingQueryMismatchError": CheckpointRefusedError,
    "CheckpointReusedError": CheckpointRefusedError,
    "CommitConflictError": CommitOutcomeError,
    "PlanChangedError": CommitOutcomeError,
    "OverwriteConflictError": CommitOutcomeError,
    "OverwriteSpansFileError": EnvironmentFailureError,
    "EqualityDeletesError": EnvironmentFailureError,
    "MissingExtraError": EnvironmentFailureError,
    "KeyViolationError": InvalidInputError,
    "ChangeTypeError": InvalidInputError,
    "CommitStateUnknownError": CommitOutcomeError,
    "DataFileMissingError": EnvironmentFailureError,
    "PartitionSpecChangedError": EnvironmentFailureError,
    "SchemaChangedError": EnvironmentFailureError,
    "StagedManifestError": EnvironmentFailureError,
    "UnsafeLocationError": EnvironmentFailureError,
    "CatalogUnavailableError": EnvironmentFailureError,
    "StagingError": EnvironmentFailureError,
    "TableMetadataWriteError": EnvironmentFailureError,
    "StateDatabaseError": EnvironmentFailureError,
    "StateDatabaseUnavailableError": EnvironmentFailureError,
    "StateDatabaseNotConfiguredError": EnvironmentFailureError,
    "StateSchemaError": EnvironmentFailureError,
    "StateDatabaseMismatchError": EnvironmentFailureError,
    "CheckpointFeatureError": EnvironmentFailureError,
    "UnreadableTablesError": EnvironmentFailureError,
}


@pytest.mark.parametrize("cls", [c for c in CLASSES if c not in FAMILIES and c is not IcecommitError], ids=str)
def test_every_error_belongs_to_the_family_that_says_what_to_do(cls: type[IcecommitError]) -> None:
    assert cls.__name__ in EXPECTED, f"{cls.__name__}: place it in a family"
    family = EXPECTED[cls.__name__]
    assert issubclass(cls, family) and cls.__mro__[1:].index(family) >= 0
    # its first family base decides (an old second base never outranks it)
    first = next(base for base in cls.__mro__ if base in FAMILIES)
    assert first is family


def test_classes_that_moved_keep_their_old_base_for_one_release() -> None:
    for name in ("CheckpointCommittedError", "CheckpointOutOfOrderError", "StreamingQueryMismatchError",
                 "CheckpointReusedError", "DataFileMissingError", "PartitionSpecChangedError", "SchemaChangedError",
                 "StagedManifestError"):  # fmt: skip
        assert issubclass(getattr(errors, name), errors.ValidationError), name
    assert issubclass(errors.PlanChangedError, errors.TableSpecError)


def test_files_are_removed_only_when_the_error_proves_nothing_was_staged() -> None:
    assert nothing_staged(errors.SchemaMismatchError("id", "required"))
    assert nothing_staged(errors.CheckpointOutOfOrderError("j", 1, 5, "t"))  # also a ValidationError
    assert not nothing_staged(errors.CommitStateUnknownError("t", 1, TimeoutError()))
    assert not nothing_staged(errors.CommitConflictError("t", 1, 5, 1.0))
    assert not nothing_staged(
        errors.DataFileMissingError("p", checkpoint_id=1, expected=1, actual=None, bad=1, total=1)
    )
    assert not nothing_staged(RuntimeError("not ours"))
    assert family_of(RuntimeError("not ours")) is None


def test_the_exit_code_follows_the_family() -> None:
    assert {
        InvalidInputError: EXIT_USAGE,
        CheckpointRefusedError: EXIT_USAGE,
        CommitOutcomeError: EXIT_OUTCOME,
        EnvironmentFailureError: EXIT_ENVIRONMENT,
    } == _EXIT_OF_FAMILY
    assert (EXIT_USAGE, EXIT_OUTCOME, EXIT_ENVIRONMENT) == (2, 3, 4)


def test_errors_name_the_operation_never_checkpoint_0() -> None:
    unknown = errors.CommitStateUnknownError(
        "ns.t", None, TimeoutError("lost"), operation="compaction group g1 of ns.t", remedy="the orphan sweep..."
    )
    assert str(unknown).startswith("compaction group g1 of ns.t: commit outcome unknown") and "checkpoint" not in str(
        unknown
    )
    conflict = errors.CommitConflictError("ns.t", None, 3, 1.5, operation="rollback of ns.t to snapshot 7")
    assert str(conflict).startswith("rollback of ns.t to snapshot 7: gave up after 3") and "retry later" in str(
        conflict
    )


#: Every error that stops a job, as it is raised (one of each kind).
STOPPING = [
    errors.DataFileMissingError("f", checkpoint_id=3, expected=10, actual=None, bad=1, total=2),
    errors.DataFileMissingError("f", checkpoint_id=3, expected=10, actual=None, bad=1, total=2, staged=True),
    errors.StagedManifestError("j", 3, "t", "m.avro", "is missing from storage"),
    errors.PartitionSpecChangedError("j", 3, "t", 0, 1),
    errors.SchemaChangedError("j", 3, "t", "id"),
    errors.CheckpointFeatureError("j", 3, "t", ["row-delta"]),
    errors.StagingError(3, "m.avro", OSError("disk full")),
    errors.StateDatabaseUnavailableError("sqlite:///s.db", "cannot be reached"),
    errors.StateDatabaseNotConfiguredError("prod", "RestCatalog"),
    errors.StateSchemaError("sqlite:///s.db", 99, 10),
    errors.StateDatabaseMismatchError("t", expected_id="a", expected_uri="x", actual_id="b", uri="y"),
    errors.CommitConflictError("t", 3, 5, 1.0),
    errors.CommitStateUnknownError("t", 3, TimeoutError()),
    errors.PlanChangedError("t", "rollback"),
    errors.OverwriteConflictError("t", 3, "j", partition="day=2026-11-25", snapshot_id=7, by=("k", 2), path="f"),
    errors.OverwriteSpansFileError("j", 3, "t", path="f", spec_id=0, partition="day=2026-11-25", own=False),
    errors.OverwriteSpansFileError("j", 3, "t", path="f", spec_id=0, partition="of spec 1", own=True),
    errors.EqualityDeletesError("j", 3, "t", "f"),
    errors.MissingExtraError("icecommit's Prometheus metrics", "prometheus-client", "metrics"),
    errors.CheckpointRolledBackError("j", 3, 7, "t"),
    errors.CheckpointOutOfOrderError("j", 3, 5, "t"),
    errors.StreamingQueryMismatchError("j", 3, "t", "q2", "q1"),
    errors.CheckpointReusedError("j", 3, "t", status="committed"),
    errors.CheckpointNotFoundError("j", 3, "t"),
    errors.UnroutedRecordsError("kind", 2, ["x"], checkpoint_id=3),
    errors.UnreadableTablesError("ns.a", "delete orphan files", {"ns.b": "FileNotFoundError: gone"}),
]
#: What a way forward says (one of these, in the message).
WAYS_FORWARD = (
    "abandon(", "recover()", "retry later", "again", "new job", "job_id", "upgrade icecommit", "recommit=True",
    "dead_letter=", "prepare it first", "icecommit.state-uri", "the icecommit version", "--ignore-unreadable",
    "pip install",
)  # fmt: skip


@pytest.mark.parametrize("error", STOPPING, ids=lambda e: type(e).__name__)
def test_every_message_that_stops_a_job_names_the_way_forward(error: IcecommitError) -> None:
    assert any(way in str(error) for way in WAYS_FORWARD), str(error)
