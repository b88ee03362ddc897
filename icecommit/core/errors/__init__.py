"""The icecommit error hierarchy.

Every error icecommit raises derives from :class:`IcecommitError` and carries the facts
of the failure as attributes (table, checkpoint id, column, expected vs actual), so a
caller can act on them without parsing the message. Each belongs to one of four families,
which say what the caller does next:

- :class:`InvalidInputError`: the input or the call is wrong; nothing was staged. Fix it.
- :class:`CheckpointRefusedError`: the checkpoint decision refused the checkpoint (rolled
  back, out of order, reused, another query's batch); nothing was staged. The message says
  the way forward (a new job id, ``recommit=True``, leave it out).
- :class:`CommitOutcomeError`: a commit did not end as asked. A conflict
  (:class:`CommitConflictError`) did not land: retry later. An unknown outcome
  (:class:`CommitStateUnknownError`) may have landed: run ``recover()``; nothing was deleted.
- :class:`EnvironmentFailureError`: the catalog, the state database or storage failed or
  holds something icecommit cannot use; an operator acts.

Every error belongs to exactly one family, so an ``except`` clause written for one family
never catches another's error (``except InvalidInputError`` catches no environment
failure); :func:`family_of` names it. The only other bases are Python's and pyiceberg's
errors that mean the same to a caller: :class:`InvalidArgumentError` is a ``ValueError``,
:class:`TableNotFoundError` a pyiceberg ``NoSuchTableError``.
"""

from icecommit.core.errors.base import (
    FAMILIES,
    CheckpointRefusedError,
    CommitOutcomeError,
    EnvironmentFailureError,
    IcecommitError,
    InvalidInputError,
    family_of,
    nothing_staged,
)
from icecommit.core.errors.environment import (
    CatalogUnavailableError,
    CheckpointFeatureError,
    DataFileMissingError,
    EqualityDeletesError,
    MissingExtraError,
    OverwriteSpansFileError,
    PartitionSpecChangedError,
    SchemaChangedError,
    StagedManifestError,
    StagingError,
    StateDatabaseError,
    StateDatabaseMismatchError,
    StateDatabaseNotConfiguredError,
    StateDatabaseUnavailableError,
    StateSchemaError,
    TableMetadataWriteError,
    UnreadableTablesError,
    UnsafeLocationError,
)
from icecommit.core.errors.input import (
    ChangeTypeError,
    CheckpointNotFoundError,
    CompletenessNotReachedError,
    InvalidArgumentError,
    InvalidRangeError,
    JobNotFoundError,
    KeyViolationError,
    NotAnAncestorError,
    SchemaMismatchError,
    SnapshotNotFoundError,
    TableNotFoundError,
    TableSpecError,
    UnroutedRecordsError,
    ValidationError,
)
from icecommit.core.errors.outcome import (
    CheckpointHeldError,
    CommitConflictError,
    CommitStateUnknownError,
    OverwriteConflictError,
    PlanChangedError,
    TableGroupError,
)
from icecommit.core.errors.refused import (
    CheckpointCommittedError,
    CheckpointOutOfOrderError,
    CheckpointReusedError,
    CheckpointRolledBackError,
    StreamingQueryMismatchError,
)

__all__ = [
    "FAMILIES",
    "CatalogUnavailableError",
    "ChangeTypeError",
    "CheckpointCommittedError",
    "CheckpointFeatureError",
    "CheckpointHeldError",
    "CheckpointNotFoundError",
    "CheckpointOutOfOrderError",
    "CheckpointRefusedError",
    "CheckpointReusedError",
    "CheckpointRolledBackError",
    "CommitConflictError",
    "CommitOutcomeError",
    "CommitStateUnknownError",
    "CompletenessNotReachedError",
    "DataFileMissingError",
    "EnvironmentFailureError",
    "EqualityDeletesError",
    "IcecommitError",
    "InvalidArgumentError",
    "InvalidInputError",
    "InvalidRangeError",
    "JobNotFoundError",
    "KeyViolationError",
    "MissingExtraError",
    "NotAnAncestorError",
    "OverwriteConflictError",
    "OverwriteSpansFileError",
    "PartitionSpecChangedError",
    "PlanChangedError",
    "SchemaChangedError",
    "SchemaMismatchError",
    "SnapshotNotFoundError",
    "StagedManifestError",
    "StagingError",
    "StateDatabaseError",
    "StateDatabaseMismatchError",
    "StateDatabaseNotConfiguredError",
    "StateDatabaseUnavailableError",
    "StateSchemaError",
    "StreamingQueryMismatchError",
    "TableGroupError",
    "TableMetadataWriteError",
    "TableNotFoundError",
    "TableSpecError",
    "UnreadableTablesError",
    "UnroutedRecordsError",
    "UnsafeLocationError",
    "ValidationError",
    "family_of",
    "nothing_staged",
]
