"""A short seeded slice of ``bench/compaction_injections.py``: a rollback, an expiry, a second
compaction or a live append at each step boundary of a compaction group, on SQLite and
PostgreSQL; no row lost or duplicated, an aborted group leaves nothing behind. The bench
runs 100 seeded trials per backend."""

from __future__ import annotations

import pytest
from pyiceberg.catalog.sql import SqlCatalog

from bench.compaction_injections import OPERATIONS, STEPS, run_trial

# one process, one step after another; the compaction tables' queries are tested in tests/state
pytestmark = pytest.mark.database_independent

SEED = 20261123
#: Every operation once, each at a different step boundary (all steps covered).
SLICE = [(STEPS[i % len(STEPS)], operation) for i, operation in enumerate(OPERATIONS)] + [("attempt", "rollback")]


@pytest.mark.parametrize(("step", "operation"), SLICE)
def test_an_operation_injected_at_a_step_boundary(catalog: SqlCatalog, step: str, operation: str) -> None:
    result = run_trial(0, SEED, catalog.name, catalog, step=step, operation=operation)
    assert result.failure is None, result
    assert (result.lost, result.duplicated, result.foreign, result.orphans) == (0, 0, 0, 0)
