"""The root of icecommit's errors and the four families that say what the caller does next."""

from __future__ import annotations


class IcecommitError(Exception):
    """Root of every error icecommit raises."""


class InvalidInputError(IcecommitError):
    """The input or the call is wrong (a column, a count, an argument, a name); nothing was
    staged, so the files a write made are removed. Fix the input and run again."""


class CheckpointRefusedError(IcecommitError):
    """The checkpoint decision refused this checkpoint; nothing was staged (the files a
    write made are removed). The message names the way forward."""


class CommitOutcomeError(IcecommitError):
    """A commit did not end as asked: lost to concurrent commits (retry later), or its
    outcome is unknown (run ``recover()``). Never a reason to delete a file."""


class EnvironmentFailureError(IcecommitError):
    """The catalog, the state database or storage failed, or holds something icecommit
    cannot use (a lost file, a changed table, another state database); an operator acts."""


#: The families. Every other icecommit error derives from exactly one of them, so an
#: ``except`` clause for one family never catches another's error.
FAMILIES: tuple[type[IcecommitError], ...] = (
    CommitOutcomeError,
    EnvironmentFailureError,
    CheckpointRefusedError,
    InvalidInputError,
)


def family_of(error: BaseException) -> type[IcecommitError] | None:
    """The family an error belongs to (None: not an icecommit error)."""
    for family in FAMILIES:
        if isinstance(error, family):
            return family
    return None


def nothing_staged(error: BaseException) -> bool:
    """True when the error proves that nothing of the checkpoint was staged, so the data
    files a write made for it may be removed: invalid input and the decision's refusals.
    Never for a commit outcome or an environment failure."""
    return family_of(error) in (InvalidInputError, CheckpointRefusedError)
