"""Other engines agree on a held checkpoint: Apache Iceberg's Java reader (Spark) reads
``main`` without its rows and the audit branch with them, and after a publish reads ``main``
exactly as pyiceberg does, the fast-forwarded snapshot with the id it was held under."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.sql import SqlCatalog

import icecommit as ic
from icecommit import checks
from icecommit.committer.holding import Gate
from icecommit.errors import CheckpointHeldError
from tests import java_iceberg
from tests.conftest import unique_table
from tests.helpers import EVENTS_SCHEMA, events, write_arrow

pytestmark = pytest.mark.spark

AUDIT = "icecommit-audit-j"


@pytest.fixture
def java() -> Iterator[java_iceberg.JavaIceberg]:
    yield java_iceberg.found_or_skip()


def test_java_iceberg_reads_main_without_a_held_checkpoint_and_the_audit_branch_with_it(
    sqlite_catalog: SqlCatalog, java: java_iceberg.JavaIceberg, tmp_path: Path
) -> None:
    catalog, name = sqlite_catalog, unique_table()
    ic.create_table(catalog, name, EVENTS_SCHEMA, partition_by=["event"])
    committer = ic.GlobalCommitter(catalog, name, job_id="j", gate=Gate(checks=(checks.row_count(min=10),)))
    for checkpoint, rows in ((1, events(0, 20)), (2, events(100, 105))):
        committer.prepare(checkpoint, [write_arrow(committer.load_table(), rows, job_id="j", checkpoint_id=checkpoint)])
        if checkpoint == 2:
            with pytest.raises(CheckpointHeldError):
                committer.commit(checkpoint)
        else:
            committer.commit(checkpoint)
    table = catalog.load_table(name)
    held = table.metadata.refs[AUDIT].snapshot_id
    rows_file, report = java.read(table.metadata_location, tmp_path / "held", "--branch", AUDIT)
    assert sorted(pq.read_table(rows_file).column("id").to_pylist()) == list(range(20))  # main: not the held rows
    assert report["branch"] == [*range(20), *range(100, 105)]
    assert {(r["name"], r["snapshot_id"]) for r in report["refs"]} >= {(AUDIT, held)}

    ic.publish(catalog, name, job_id="j", checkpoint_id=2, force=True, reason="a short test batch")
    table = catalog.load_table(name)
    assert table.metadata.refs["main"].snapshot_id == held  # fast-forwarded: the id it was held under
    rows_file, _ = java.read(table.metadata_location, tmp_path / "published")
    ours = sorted(table.scan(selected_fields=("id",)).to_arrow().column("id").to_pylist())
    assert sorted(pq.read_table(rows_file).column("id").to_pylist()) == ours == [*range(20), *range(100, 105)]
