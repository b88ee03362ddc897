"""Rollback, expire and orphans through a real subprocess on a real table."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import click
import pyarrow as pa
import pyiceberg.table.snapshots
import pytest

import icecommit as ic
from icecommit.catalog.connect import DEFAULT_CATALOG_NAME
from icecommit.committer import committed_checkpoints
from icecommit.errors import InvalidArgumentError, NotAnAncestorError
from icecommit.maintenance import plan_rollback
from tests import processes
from tests.cli.runner import invoke
from tests.committer.crash_driver import run_job
from tests.fakes import catalog_of, cli_json
from tests.helpers import EVENTS_SCHEMA, DistinctMillis, events, write_arrow

TABLE = "ns.events"
BASE = dt.datetime(2026, 3, 1, tzinfo=dt.timezone.utc)


def run(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return invoke(home, *args)


def test_a_real_process_keeps_json_on_stdout_and_errors_on_stderr(home: Path) -> None:
    done = processes.run(processes.cli, home, "--output", "json", "checkpoints", TABLE)
    assert done.returncode == 0 and json.loads(done.stdout)["checkpoints"] and done.stderr == ""
    # its stdin is /dev/null: no one to answer the confirmation
    refused = processes.run(processes.cli, home, "rollback", TABLE, "--to-checkpoint", "2", "--job", "job")
    assert refused.returncode == 2 and "without --yes" in refused.stderr and "Traceback" not in refused.stderr


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Three checkpoints of job 'job', checkpoint c holding events in hour c of BASE."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setattr(pyiceberg.table.snapshots, "time", DistinctMillis())  # distinct commit timestamps
    catalog = catalog_of(home)
    table = ic.create_table(
        catalog, TABLE, EVENTS_SCHEMA, partition_by=["event"], properties={"icecommit.event-time-column": "ts"}
    )
    committer = ic.GlobalCommitter(catalog, table, job_id="job")
    for checkpoint_id in (1, 2, 3):
        rows = events(checkpoint_id * 100, checkpoint_id * 100 + 40, days=1)
        hour = BASE + dt.timedelta(hours=checkpoint_id)
        times = [hour + dt.timedelta(seconds=i) for i in range(40)]
        rows = rows.set_column(1, "ts", pa.array(times, rows.schema.field("ts").type))
        results = [write_arrow(committer.load_table(), rows, job_id="job", checkpoint_id=checkpoint_id)]
        committer.prepare(checkpoint_id, results)
        committer.commit(checkpoint_id)
    catalog.engine.dispose()
    return home


def rows(home: Path) -> int:
    catalog = catalog_of(home)
    count = catalog.load_table(TABLE).scan().to_arrow().num_rows
    catalog.engine.dispose()
    return count


def snapshot_ids(home: Path) -> list[int]:
    return [s["snapshot_id"] for s in cli_json(home, "snapshots", TABLE)["snapshots"]]


def test_snapshots_and_checkpoints_in_text_and_json(home: Path) -> None:
    snapshots = cli_json(home, "snapshots", TABLE)["snapshots"]
    assert [s["checkpoint_id"] for s in snapshots] == [1, 2, 3]
    assert snapshots[-1]["max_event_time"].startswith("2026-03-01T03:00:39")
    text = run(home, "snapshots", TABLE)
    assert text.returncode == 0 and "job" in text.stdout
    checkpoints = cli_json(home, "checkpoints", TABLE, "--job", "job")["checkpoints"]
    assert [(c["checkpoint_id"], c["status"]) for c in checkpoints] == [
        (1, "committed"),
        (2, "committed"),
        (3, "committed"),
    ]
    # the publishing counters and attempts of each checkpoint
    assert {
        (c["files_created"], c["files_committed"], c["files_skipped"], c["files_missing"]) for c in checkpoints
    } == {(c["files"], c["files"], 0, 0) for c in checkpoints}
    assert [(c["attempts"], c["retries"], c["unknown_outcomes"]) for c in checkpoints] == [(1, 0, 0)] * 3
    text = run(home, "checkpoints", TABLE)
    assert "committed" in text.stdout and "0 skipped" in text.stdout and "(0 retries)" in text.stdout


def test_a_dry_run_says_which_rows_an_overwrite_replaced_come_back(home: Path) -> None:
    catalog = catalog_of(home)
    committer = ic.GlobalCommitter(catalog, TABLE, job_id="job")
    clicks = catalog.load_table(TABLE).scan(row_filter="event == 'click'").to_arrow().num_rows
    batch = events(900, 930, days=1)
    rows_in = batch.filter(pa.array([event == "click" for event in batch.column("event").to_pylist()]))
    results = [write_arrow(committer.load_table(), rows_in, job_id="job", checkpoint_id=4)]
    committer.prepare(4, results, mode="overwrite-partitions")
    committer.commit(4)
    catalog.engine.dispose()
    plan = cli_json(home, "rollback", TABLE, "--to-checkpoint", "3", "--job", "job", "--dry-run")
    assert (plan["hidden_records"], plan["reappearing_records"]) == (len(rows_in), clicks)
    assert plan["reappearing_checkpoints"] == [["job", 4]]
    text = run(home, "rollback", TABLE, "--to-checkpoint", "3", "--job", "job", "--dry-run").stdout
    assert f"{len(rows_in)} rows would become invisible" in text
    assert f"{clicks} row(s) that overwrites or upserts replaced or deleted would be visible again" in text
    assert "job#4" in text


def test_end_of_input_at_the_rollback_prompt_changes_nothing(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = snapshot_ids(home)
    asked: list[str] = []

    def confirm_at_end_of_input(question: str, **_: object) -> bool:
        asked.append(question)
        raise click.Abort

    monkeypatch.setattr(sys.modules["icecommit.cli.maintenance"], "_interactive", lambda: True)
    monkeypatch.setattr(click, "confirm", confirm_at_end_of_input)
    refused = run(home, "rollback", TABLE, "--to-checkpoint", "2", "--job", "job")
    assert refused.returncode == 2 and "not confirmed; nothing changed" in refused.stderr, refused.stderr
    assert asked and "40 rows" in asked[0]
    assert rows(home) == 120 and snapshot_ids(home) == before


def test_rollback_dry_run_refusal_and_every_selector(home: Path) -> None:
    first, second, third = snapshot_ids(home)
    plan = cli_json(home, "rollback", TABLE, "--to-checkpoint", "2", "--job", "job", "--dry-run")
    assert plan["target_snapshot_id"] == second and plan["hidden_records"] == 40 and plan["applied"] is False
    assert plan["reappearing_records"] == 0  # appends only: nothing comes back
    assert rows(home) == 120  # the dry run changed nothing
    text = run(home, "rollback", TABLE, "--to-checkpoint", "2", "--job", "job", "--dry-run")
    assert text.returncode == 0 and "would roll back (dry run)" in text.stdout and "40 rows" in text.stdout

    refused = run(home, "rollback", TABLE, "--to-checkpoint", "2", "--job", "job")
    assert refused.returncode == 2 and "without --yes" in refused.stderr
    assert rows(home) == 120 and snapshot_ids(home) == [first, second, third]

    assert cli_json(home, "rollback", TABLE, "--to-checkpoint", "2", "--job", "job", "--yes")["applied"] is True
    assert rows(home) == 80
    statuses = [c["status"] for c in cli_json(home, "checkpoints", TABLE, "--job", "job")["checkpoints"]]
    assert statuses == ["committed", "committed", "rolled-back"]

    assert cli_json(home, "rollback", TABLE, "--to-snapshot", str(first), "--yes")["target_snapshot_id"] == first
    assert rows(home) == 40

    not_ancestor = run(home, "rollback", TABLE, "--to-snapshot", str(third), "--yes")
    assert not_ancestor.returncode == 2 and "not an ancestor" in not_ancestor.stderr
    assert "--allow-non-ancestor" in not_ancestor.stderr and "allow_non_ancestor=" not in not_ancestor.stderr
    # the Python API names its parameter, not the flag
    with pytest.raises(NotAnAncestorError) as raised:
        plan_rollback(catalog_of(home), TABLE, to_snapshot=third)
    assert raised.value.snapshot_id == third and "allow_non_ancestor=True" in str(raised.value)
    assert "--" not in str(raised.value)
    with pytest.raises(InvalidArgumentError) as no_job:
        plan_rollback(catalog_of(home), TABLE, to_checkpoint=2)
    assert no_job.value.argument == "job_id"
    needs_job = run(home, "rollback", TABLE, "--to-checkpoint", "2", "--yes")
    assert needs_job.returncode == 2 and "--to-checkpoint needs --job" in needs_job.stderr
    assert rows(home) == 40
    forward = cli_json(home, "rollback", TABLE, "--to-snapshot", str(third), "--allow-non-ancestor", "--yes")
    assert forward["applied"] and sorted(map(tuple, forward["restored_checkpoints"])) == [("job", 2), ("job", 3)]
    assert rows(home) == 120
    statuses = [c["status"] for c in cli_json(home, "checkpoints", TABLE, "--job", "job")["checkpoints"]]
    assert statuses == ["committed"] * 3

    committed_at = {s["snapshot_id"]: s["committed_at"] for s in cli_json(home, "snapshots", TABLE)["snapshots"]}
    plan = cli_json(home, "rollback", TABLE, "--to-timestamp", str(committed_at[second]), "--yes")
    assert plan["target_snapshot_id"] == second and rows(home) == 80

    assert cli_json(home, "rollback", TABLE, "--to-snapshot", str(third), "--allow-non-ancestor", "--yes")["applied"]
    plan = cli_json(
        home, "rollback", TABLE, "--to-event-time", (BASE + dt.timedelta(hours=2, minutes=30)).isoformat(), "--yes"
    )
    assert plan["target_snapshot_id"] == second and rows(home) == 80

    too_early = run(home, "rollback", TABLE, "--to-event-time", BASE.isoformat(), "--yes")
    assert too_early.returncode == 2 and "no snapshot" in too_early.stderr
    usage = run(home, "rollback", TABLE, "--to-timestamp", "not-a-time", "--yes")
    assert usage.returncode == 2


def test_rolled_back_checkpoints_are_neither_skipped_nor_duplicated(home: Path) -> None:
    cli_json(home, "rollback", TABLE, "--to-checkpoint", "2", "--job", "job", "--yes")
    catalog = catalog_of(home)
    committer = ic.GlobalCommitter(catalog, TABLE, job_id="job")
    with pytest.raises(ic.CheckpointRolledBackError, match="recommit=True"):
        committer.commit(3)
    assert committer.recommit(3).committed
    loaded = catalog.load_table(TABLE)
    assert loaded.scan().to_arrow().num_rows == 120
    lineage = [(c.job_id, c.checkpoint_id) for c in committed_checkpoints(loaded.metadata)]
    assert sorted(lineage) == [("job", 1), ("job", 2), ("job", 3)]
    assert committer.commit(3).status == "already-committed"
    catalog.engine.dispose()


def test_expire_pins_no_job_and_leaves_the_table_readable(home: Path) -> None:
    catalog = catalog_of(home)
    # a second job commits last; the first job keeps no snapshot alive for its own sake
    run_job(f"sqlite:///{home / 'catalog.db'}", home.as_uri(), TABLE, "other", 1, catalog_name=DEFAULT_CATALOG_NAME)
    first, second, third, other = snapshot_ids(home)
    before = {p for p in (home / "ns" / "events" / "metadata").iterdir()}

    plan = cli_json(home, "expire", TABLE, "--older-than", "0s")
    assert plan["applied"] is False and set(plan["expired_snapshot_ids"]) == {first, second, third}
    assert plan["rolled_back_checkpoints"] == []
    assert {p for p in (home / "ns" / "events" / "metadata").iterdir()} == before  # dry run deleted nothing

    done = cli_json(home, "expire", TABLE, "--older-than", "0s", "--no-dry-run")
    assert done["applied"] is True and done["deleted_files"] == len(plan["files_to_delete"]) > 0
    assert snapshot_ids(home) == [other]
    assert rows(home) == 160
    # time travel to a retained snapshot still reads
    assert catalog.load_table(TABLE).scan(snapshot_id=other).to_arrow().num_rows == 160
    text = run(home, "expire", TABLE, "--older-than", "0s")
    assert text.returncode == 0 and "would expire" in text.stdout
    # expired checkpoints are still committed: replays neither fail nor duplicate, and the
    # job resumes after its highest checkpoint, which the table property keeps
    committer = ic.GlobalCommitter(catalog, TABLE, job_id="job")
    assert [committer.commit(c).status for c in (1, 2, 3)] == ["already-committed"] * 3
    assert committer.last_committed_checkpoint() == 3
    assert rows(home) == 160
    catalog.engine.dispose()


def test_orphans_are_listed_then_deleted_and_prepared_files_are_never_orphans(home: Path) -> None:
    data = home / "ns" / "events" / "data"
    orphan = data / "event=pv" / "stray.parquet"
    orphan.write_bytes(b"not referenced")
    # a checkpoint prepared and not committed: its files must survive the sweep
    run_job(f"sqlite:///{home / 'catalog.db'}", home.as_uri(), TABLE, "pending", 1, catalog_name=DEFAULT_CATALOG_NAME,
            prepare_only=True)  # fmt: skip
    old = time.time() - 10 * 86400
    for path in (home / "ns" / "events").rglob("*"):
        if path.is_file():
            os.utime(path, (old, old))

    listed = cli_json(home, "orphans", TABLE, "--older-than", "1d")
    assert [o["path"] for o in listed["orphans"]] == [str(orphan)]
    assert listed["deleted"] is False and orphan.exists()
    text = run(home, "orphans", TABLE, "--older-than", "1d")
    assert text.returncode == 0 and "1 orphan file(s)" in text.stdout and "stray.parquet" in text.stdout
    assert cli_json(home, "orphans", TABLE, "--older-than", "30d")["orphans"] == []

    deleted = cli_json(home, "orphans", TABLE, "--older-than", "1d", "--delete")
    assert deleted["deleted"] is True and not orphan.exists()
    assert rows(home) == 120
    catalog = catalog_of(home)
    assert [r.status for r in ic.GlobalCommitter(catalog, TABLE, job_id="pending").recover()] == ["committed"]
    assert catalog.load_table(TABLE).scan().to_arrow().num_rows == 160
    assert run(home, "orphans", TABLE, "--older-than", "banana").returncode == 2
    catalog.engine.dispose()


def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    plain = run(tmp_path, "snapshots", "ns.missing")  # no catalog there: an environment failure
    assert plain.returncode == 4 and "Traceback" not in plain.stderr
    debug = run(tmp_path, "--debug", "snapshots", "ns.missing")
    assert debug.returncode == 4 and "Traceback" in debug.stderr


def test_every_command_has_an_example_in_its_help(tmp_path: Path) -> None:
    for command in ("snapshots", "checkpoints", "rollback", "reconcile", "expire", "orphans", "demo"):
        result = run(tmp_path, command, "--help")
        assert result.returncode == 0 and "Example:" in result.stdout, command


def test_ids_are_whole_under_a_pipe_and_exact_in_json(home: Path) -> None:
    """Under a pipe or in a log no cell is cut (the default console would cut at 80
    columns), and JSON carries every snapshot id also as a string (jq 1.6 and JavaScript
    round numbers above 2**53)."""
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    piped = processes.run(processes.cli, home, "snapshots", TABLE, env=env)
    assert piped.returncode == 0, piped.stderr
    ids = [str(s.snapshot_id) for s in catalog_of(home).load_table(TABLE).snapshots()]
    assert ids and all(i in piped.stdout for i in ids)
    assert "…" not in piped.stdout
    document = cli_json(home, "snapshots", TABLE)
    assert all(s["snapshot_id_str"] == str(s["snapshot_id"]) for s in document["snapshots"])
    parents = [s for s in document["snapshots"] if s["parent_id"] is not None]
    assert parents and all(s["parent_id_str"] == str(s["parent_id"]) for s in parents)
    checkpoints = cli_json(home, "checkpoints", TABLE)["checkpoints"]
    assert all(c["snapshot_id_str"] == str(c["snapshot_id"]) for c in checkpoints if c["snapshot_id"] is not None)
