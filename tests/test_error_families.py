"""Every error says what the caller does next: it belongs to exactly one of four families
(invalid input, refused by the checkpoint decision, commit outcome, environment), so an
``except`` clause written for one family never catches another's error; the files a write
made are removed only when the error proves nothing was staged, and the command line's exit
code follows the family."""

from __future__ import annotations

import inspect

import pytest
from pyiceberg.exceptions import NoSuchTableError

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
#: Every error class but the root and the families, as ``icecommit.errors`` exports them.
ERRORS = [c for c in CLASSES if c not in FAMILIES and c is not IcecommitError]

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
    "TableGroupError": CommitOutcomeError,
    "CheckpointHeldError": CommitOutcomeError,
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

#: Bases from outside icecommit that a caller's existing handler may name, and the one
#: family each may mean (an ``except ValueError`` must not catch a lost file).
FOREIGN_BASES: dict[type[BaseException], type[IcecommitError]] = {
    ValueError: InvalidInputError,
    NoSuchTableError: InvalidInputError,
}
_EVERY_EXCEPTION = (Exception, BaseException, object)
#: What a caller writes to catch bad input and fix it.
BAD_INPUT: tuple[type[BaseException], ...] = (InvalidInputError, *FOREIGN_BASES)

#: What the caller does next, per family: the exit code, and whether the files are removed.
NEXT_ACTION = {
    InvalidInputError: (EXIT_USAGE, True),
    CheckpointRefusedError: (EXIT_USAGE, True),
    CommitOutcomeError: (EXIT_OUTCOME, False),
    EnvironmentFailureError: (EXIT_ENVIRONMENT, False),
}


def _raised(cls: type[IcecommitError]) -> IcecommitError:
    """An error of the class as an ``except`` clause sees it (its facts do not matter here)."""
    try:
        raise cls.__new__(cls)
    except IcecommitError as e:
        return e


@pytest.mark.parametrize("cls", ERRORS, ids=lambda c: c.__name__)
def test_every_error_belongs_to_exactly_one_family_the_one_that_says_what_to_do(cls: type[IcecommitError]) -> None:
    assert cls.__name__ in EXPECTED, f"{cls.__name__}: place it in a family"
    assert [family for family in FAMILIES if issubclass(cls, family)] == [EXPECTED[cls.__name__]]
    error = _raised(cls)
    family = family_of(error)
    assert family is EXPECTED[cls.__name__]
    exit_code, removes_files = NEXT_ACTION[family]
    assert _EXIT_OF_FAMILY[family] == exit_code
    assert nothing_staged(error) is removes_files


@pytest.mark.parametrize("cls", ERRORS, ids=lambda c: c.__name__)
def test_an_except_clause_for_one_family_catches_no_other_familys_error(cls: type[IcecommitError]) -> None:
    for family in FAMILIES:
        try:
            raise _raised(cls)
        except family:
            caught = True
        except IcecommitError:
            caught = False
        assert caught is (family is EXPECTED[cls.__name__]), (cls.__name__, family.__name__)


@pytest.mark.parametrize("cls", [c for c in ERRORS if issubclass(c, EnvironmentFailureError)], ids=lambda c: c.__name__)
def test_except_invalid_input_catches_no_environment_failure(cls: type[IcecommitError]) -> None:
    with pytest.raises(EnvironmentFailureError):
        try:
            raise _raised(cls)
        except BAD_INPUT as e:
            pytest.fail(f"{type(e).__name__} is caught as bad input")


@pytest.mark.parametrize("cls", ERRORS, ids=lambda c: c.__name__)
def test_a_base_from_outside_icecommit_means_the_same_family(cls: type[IcecommitError]) -> None:
    for base in cls.__mro__:
        if issubclass(base, IcecommitError) or base in _EVERY_EXCEPTION:
            continue
        meaning = next((family for known, family in FOREIGN_BASES.items() if issubclass(base, known)), None)
        assert meaning is EXPECTED[cls.__name__], (cls.__name__, base.__name__)


def test_errors_that_left_the_input_family_keep_their_facts_and_message() -> None:
    lost = errors.DataFileMissingError("f", checkpoint_id=3, expected=10, actual=None, bad=1, total=2)
    assert (lost.checkpoint_id, lost.path, lost.expected, lost.actual) == (3, "f", 10, None)
    assert str(lost).startswith("checkpoint 3: data file f is missing from storage")
    behind = lost.behind(5)
    assert (behind.checkpoint_id, behind.waiting_checkpoint_id, behind.expected) == (3, 5, 10)
    staged = errors.StagedManifestError("j", 3, "t", "m.avro", "is missing from storage")
    assert (staged.checkpoint_id, staged.path) == (3, "m.avro") and str(staged).startswith("checkpoint 3: job j")
    assert errors.PartitionSpecChangedError("j", 3, "t", 0, 1).checkpoint_id == 3
    assert errors.SchemaChangedError("j", 3, "t", "id").checkpoint_id == 3
    reused = errors.CheckpointReusedError("j", 3, "t", status="prepared", staged=1, offered=2)
    assert (reused.checkpoint_id, reused.expected, reused.actual) == (3, 1, 2)
    assert str(reused).startswith("checkpoint 3: job j in table t: already prepared")
    assert str(errors.CheckpointOutOfOrderError("j", 3, 5, "t")).startswith("checkpoint 3: job 'j' has already")
    assert errors.StreamingQueryMismatchError("j", 3, "t", "q2", "q1").checkpoint_id == 3
    assert errors.CheckpointCommittedError("j", 3, None, "t").checkpoint_id == 3
    changed = errors.PlanChangedError("t", "rollback")
    assert (changed.table, changed.operation, changed.checkpoint_id) == ("t", "rollback", None)
    assert (
        str(changed) == "table t: changed since the rollback was planned (another commit landed meanwhile); plan again"
    )
    moved = errors.PlanChangedError("t", "expiry", since="a branch or tag moved")  # found before its commit
    assert str(moved) == "table t: changed since the expiry was planned (a branch or tag moved); plan again"


def test_files_are_removed_only_when_the_error_proves_nothing_was_staged() -> None:
    assert nothing_staged(errors.SchemaMismatchError("id", "required"))
    assert nothing_staged(errors.CheckpointOutOfOrderError("j", 1, 5, "t"))
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
    errors.TableGroupError("ns.a", 3, "ns.b", OSError("state database gone")),
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
