"""Fixtures of the lifecycle tests."""

from __future__ import annotations

import pytest
from pyiceberg.catalog.sql import SqlCatalog

import icecommit as ic
from tests.conftest import unique_table
from tests.fakes import TARGET
from tests.helpers import EVENTS_SCHEMA


@pytest.fixture
def table_name(catalog: SqlCatalog) -> str:
    """A new table of events partitioned by event, whose target file size is ``TARGET`` (small files to compact)."""
    name = unique_table()
    ic.create_table(
        catalog, name, EVENTS_SCHEMA, partition_by=["event"], properties={"write.target-file-size-bytes": str(TARGET)}
    )
    return name
