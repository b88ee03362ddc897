"""The checks a checkpoint's data must pass before it reaches readers:
``ic.write(..., checks=[checks.row_count(min=1), checks.not_null("id")])``.

Defined in :mod:`icecommit.core.checks` and :mod:`icecommit.core.value_checks`; a failed
check holds the checkpoint on the job's audit branch until it is published or discarded.
"""

from icecommit.core.checks import (
    Check,
    CheckResult,
    Verdict,
    custom,
    matches_source,
    not_null,
    row_count,
    unique,
)
from icecommit.core.value_checks import accepted_values, freshness, in_range

__all__ = [
    "Check",
    "CheckResult",
    "Verdict",
    "accepted_values",
    "custom",
    "freshness",
    "in_range",
    "matches_source",
    "not_null",
    "row_count",
    "unique",
]
