"""The global committer: validate, stage, and commit checkpoints exactly once."""

from icecommit.committer.committer import FAULT_POINTS, GlobalCommitter
from icecommit.committer.completion import PartitionCompleteness, publish_complete_partitions
from icecommit.committer.results import CommitResult, RoutedCommitResult
from icecommit.committer.retry import RetryPolicy
from icecommit.committer.schema_change import SchemaEvolver, evolve_schema
from icecommit.core.ancestry import committed_checkpoints, find_checkpoint, last_committed_checkpoint

__all__ = [
    "FAULT_POINTS",
    "CommitResult",
    "GlobalCommitter",
    "PartitionCompleteness",
    "RetryPolicy",
    "RoutedCommitResult",
    "SchemaEvolver",
    "committed_checkpoints",
    "evolve_schema",
    "find_checkpoint",
    "last_committed_checkpoint",
    "publish_complete_partitions",
]
