"""A short seeded slice of the lifecycle soak (``bench/lifecycle_soak.py``): a few tables
through a randomized life of commits, crashes, foreign appends, expiries, rollbacks,
re-commits, abandons, orphan sweeps and schema changes, each step checked against a model.
Fixed seeds; the soak itself runs hundreds of trials with the seed it prints."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyiceberg.catalog.sql import SqlCatalog

from bench.lifecycle_soak import run_trial
from tests.conftest import pg_uri

# one process, one step after another; bench/lifecycle_soak.py runs it on PostgreSQL too
pytestmark = pytest.mark.database_independent

SEED = 20261123
TRIALS = 6


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_seeded_slice_of_the_lifecycle_soak(backend: str, tmp_path: Path) -> None:
    uri = pg_uri() if backend == "postgres" else None

    def factory(name: str) -> SqlCatalog:
        folder = tmp_path / name
        folder.mkdir()
        return SqlCatalog(name, uri=uri or f"sqlite:///{folder / 'catalog.db'}", warehouse=f"file://{folder}")

    results = [run_trial(trial, SEED, backend, factory, steps=14) for trial in range(TRIALS)]
    failed = [r for r in results if r.failure or r.lost or r.duplicated or r.resurrected]
    assert not failed, failed
    assert sum(r.steps for r in results) >= TRIALS * 7 and sum(r.crashes for r in results) > 0
