"""``icecommit partitions``: complete time partitions and late records, text and JSON."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa

import icecommit as ic
from icecommit.catalog import partition_status
from tests.cli.test_cli import run as wide_run
from tests.cli.test_maintenance_cli import catalog_of, js, run
from tests.helpers import EVENTS_SCHEMA, events, write_arrow

BASE = dt.datetime(2026, 3, 1, tzinfo=dt.timezone.utc)


def rows_at(first_id: int, *minutes: int) -> pa.Table:
    data = events(first_id, first_id + len(minutes), days=1)
    times = [BASE + dt.timedelta(minutes=m) for m in minutes]
    return data.set_column(1, "ts", pa.array(times, data.schema.field("ts").type))


def test_partitions_lists_completion_and_late_records(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    catalog = catalog_of(home)
    lateness = {"icecommit.partition-lateness": "5m"}
    table = ic.create_table(catalog, "ns.events", EVENTS_SCHEMA, partition_by=["hour(ts)"], properties=lateness)
    committer = ic.GlobalCommitter(catalog, table, job_id="job")
    batches = [rows_at(0, 1, 2, 50), rows_at(10, 66, 70), rows_at(20, 3, 130)]  # the last holds a late row for hour 0
    for checkpoint_id, data in enumerate(batches):
        committer.prepare(checkpoint_id, [write_arrow(table, data, job_id="job", checkpoint_id=checkpoint_id)])
        committer.commit(checkpoint_id)
    assert [(s.label, s.records_at_completion, s.late_records) for s in partition_status(catalog, "ns.events")] == [
        ("ts_hour=2026-03-01-00", 3, 1),
        ("ts_hour=2026-03-01-01", 2, 0),
    ]

    document = js(home, "partitions", "ns.events")
    assert [(p["label"], p["records_at_completion"], p["late_records"]) for p in document["partitions"]] == [
        ("ts_hour=2026-03-01-00", 3, 1),
        ("ts_hour=2026-03-01-01", 2, 0),
    ]
    first = document["partitions"][0]
    assert first["lateness"] == 300 and first["writers"] == ["job"] and first["notified_at"] is None
    assert first["start"].startswith("2026-03-01T00:00:00") and first["end"].startswith("2026-03-01T01:00:00")

    text = wide_run(home, "partitions", "ns.events")
    assert text.returncode == 0, text.stderr
    assert "ts_hour=2026-03-01-00" in text.stdout and "late records" in text.stdout

    missing = run(home, "partitions", "ns.nope")
    assert missing.returncode == 2 and "nope" in missing.stderr
