"""Fixtures of the committer tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyiceberg.catalog.sql import SqlCatalog

from tests.committer.test_committer import ScriptedCatalog


@pytest.fixture
def scripted_catalog(catalog: SqlCatalog) -> Iterator[ScriptedCatalog]:
    scripted = ScriptedCatalog(catalog.name, **catalog.properties)
    yield scripted
    scripted.engine.dispose()
