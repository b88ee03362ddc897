"""Fixtures of the committer tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyiceberg.catalog.sql import SqlCatalog

from tests.fakes import ScriptedCatalog


@pytest.fixture
def scripted_catalog(catalog: SqlCatalog) -> Iterator[ScriptedCatalog]:
    """The test's catalog (SQLite and PostgreSQL) as a ScriptedCatalog, with no script yet."""
    scripted = ScriptedCatalog(catalog.name, **catalog.properties)
    yield scripted
    scripted.engine.dispose()
