"""icecommit: land data from parallel Spark writers into Apache Iceberg tables exactly once."""

from icecommit.catalog import connect, create_table
from icecommit.committer import CommitResult, GlobalCommitter, RetryPolicy
from icecommit.datafiles import DataFileRecord, WriteResult
from icecommit.errors import (
    CheckpointNotFoundError,
    CommitConflictError,
    CommitStateUnknownError,
    IcecommitError,
    SchemaMismatchError,
    SnapshotNotFoundError,
    TableSpecError,
    ValidationError,
)
from icecommit.pipeline import write

__version__ = "0.1.0"

__all__ = [
    "CheckpointNotFoundError",
    "CommitConflictError",
    "CommitResult",
    "CommitStateUnknownError",
    "DataFileRecord",
    "GlobalCommitter",
    "IcecommitError",
    "RetryPolicy",
    "SchemaMismatchError",
    "SnapshotNotFoundError",
    "TableSpecError",
    "ValidationError",
    "WriteResult",
    "__version__",
    "connect",
    "create_table",
    "write",
]
