"""A short seeded slice of the lifecycle soak (``bench/lifecycle_soak.py``): a few tables
through a randomized life of commits, crashes, foreign appends, expiries, rollbacks,
re-commits, abandons, orphan sweeps and schema changes, each step checked against a model.
Fixed seeds; the soak itself runs hundreds of trials with the seed it prints."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyiceberg.catalog.sql import SqlCatalog

from bench.lifecycle_soak import Trial, run_trial
from tests.conftest import pg_uri

# one process, one step after another; bench/lifecycle_soak.py runs it on PostgreSQL too
pytestmark = pytest.mark.database_independent

SEED = 20261123
#: Three of the soak's trials of this seed that between them take every kind of step,
#: crashes included (checked below): 5 s where its first six trials took 11 s and missed
#: foreign appends and commits under an older spec.
TRIALS = (13, 20, 22)
#: Every kind of step the slice must take: each operation, a replay after a crash, a crash
#: inside a rollback and inside an expiry, and a commit of files of an older spec.
KINDS = {name for name, _weight in Trial.OPERATIONS} | {
    "replay", "rollback-crash", "expire-crash", "commit-under-older-spec"
}  # fmt: skip


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_seeded_slice_of_the_lifecycle_soak(backend: str, tmp_path: Path) -> None:
    uri = pg_uri() if backend == "postgres" else None

    def factory(name: str) -> SqlCatalog:
        folder = tmp_path / name
        folder.mkdir()
        return SqlCatalog(name, uri=uri or f"sqlite:///{folder / 'catalog.db'}", warehouse=f"file://{folder}")

    results = [run_trial(trial, SEED, backend, factory, steps=14) for trial in TRIALS]
    failed = [r for r in results if r.failure or r.lost or r.duplicated or r.resurrected]
    assert not failed, failed
    taken = {kind for r in results for kind in r.operations}
    assert taken >= KINDS, f"the slice no longer takes {sorted(KINDS - taken)}: choose its trials again"
    assert sum(r.crashes for r in results) > 0
