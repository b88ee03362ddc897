"""The global committer: validate, stage, and commit checkpoints exactly once."""

from icecommit.ancestry import committed_checkpoints, find_checkpoint, last_committed_checkpoint
from icecommit.committer.committer import FAULT_POINTS, GlobalCommitter
from icecommit.committer.completion import PartitionCompleteness
from icecommit.committer.results import CommitResult, RoutedCommitResult
from icecommit.committer.retry import RetryPolicy

__all__ = [
    "FAULT_POINTS",
    "CommitResult",
    "GlobalCommitter",
    "PartitionCompleteness",
    "RetryPolicy",
    "RoutedCommitResult",
    "committed_checkpoints",
    "find_checkpoint",
    "last_committed_checkpoint",
]
