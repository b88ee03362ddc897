"""The global committer: validate, stage, and commit checkpoints exactly once."""

from icecommit.ancestry import committed_checkpoints, find_checkpoint, last_committed_checkpoint
from icecommit.committer.committer import FAULT_POINTS, CommitResult, GlobalCommitter
from icecommit.committer.retry import RetryPolicy

__all__ = [
    "FAULT_POINTS",
    "CommitResult",
    "GlobalCommitter",
    "RetryPolicy",
    "committed_checkpoints",
    "find_checkpoint",
    "last_committed_checkpoint",
]
