"""``icecommit reconcile`` through a real subprocess, and its HTML chart in headless Chromium."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

import icecommit as ic
from icecommit.catalog.connect import DEFAULT_CATALOG_NAME
from tests import processes
from tests.cli.runner import invoke
from tests.committer.crash_driver import run_job
from tests.helpers import EVENTS_SCHEMA, events, write_arrow

TABLE = "ns.events"


def run(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return invoke(home, *args)


def process(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return processes.run(processes.cli, home, *args)


def test_a_real_process_exit_codes_and_stdout_kept_for_the_report(home: Path) -> None:
    clean = process(home, "--output", "json", "reconcile", TABLE, "--job", "job")
    assert clean.returncode == 0 and json.loads(clean.stdout)["ok"] is True
    usage = process(home, "reconcile", TABLE, "--since", "not-a-time")
    assert usage.returncode == 2 and usage.stdout == "" and "Traceback" not in usage.stderr


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """An embedded default catalog with a job's three committed checkpoints."""
    home = tmp_path / "home"
    home.mkdir()
    run_job(f"sqlite:///{home / 'catalog.db'}", home.as_uri(), TABLE, "job", 3, catalog_name=DEFAULT_CATALOG_NAME)
    return home


def test_reconcile_exit_codes_and_formats(home: Path, tmp_path: Path) -> None:
    clean = run(home, "reconcile", TABLE, "--job", "job")
    assert clean.returncode == 0, clean.stderr
    assert "**OK" in clean.stdout and "| job | 3 | committed |" in clean.stdout

    as_json = run(home, "--output", "json", "reconcile", TABLE, "--job", "job")
    assert as_json.returncode == 0
    document = json.loads(as_json.stdout)
    assert document["schema_version"] == 4 and document["ok"] is True
    assert document["changes"].startswith("since the last run") and document["summary"]["verdict"] == "ok"

    page = tmp_path / "report.html"
    html = run(home, "reconcile", TABLE, "--format", "html", "--out", str(page))
    assert html.returncode == 0 and page.read_text().startswith("<!doctype html>")
    assert str(page) in html.stdout

    # sabotage: a data file disappears
    victim = next((home / "ns" / "events" / "data").rglob("*.parquet"))
    victim.unlink()
    broken = run(home, "reconcile", TABLE, "--job", "job")
    assert broken.returncode == 1
    assert "missing-file" in broken.stdout and victim.name in broken.stdout

    usage = run(home, "reconcile", TABLE, "--since", "yesterday-ish")
    assert usage.returncode == 2 and "not an ISO 8601 time" in usage.stderr
    assert "'--since'" in usage.stderr  # the flag is named, as every bad value of a flag is
    missing = run(home, "reconcile", "ns.nope")
    assert missing.returncode == 2


def test_since_last_continues_from_the_previous_successful_run(home: Path) -> None:
    first = run(home, "--output", "json", "reconcile", TABLE, "--job", "job")
    assert json.loads(first.stdout)["since"] is None
    second = json.loads(run(home, "--output", "json", "reconcile", TABLE, "--job", "job", "--since", "last").stdout)
    assert second["since"] == json.loads(first.stdout)["until"]
    assert second["checkpoints"] == []  # nothing was prepared since
    run_job(f"sqlite:///{home / 'catalog.db'}", home.as_uri(), TABLE, "job", 4, catalog_name=DEFAULT_CATALOG_NAME)
    third = json.loads(run(home, "--output", "json", "reconcile", TABLE, "--job", "job", "--since", "last").stdout)
    assert [c["checkpoint_id"] for c in third["checkpoints"]] == [4]
    # the Markdown summary says what changed since the last stored run
    fourth = run(home, "reconcile", TABLE, "--job", "job").stdout
    changes = next((li for li in fourth.splitlines() if li.startswith("- **Changes**: since the last run")), fourth)
    assert "OK)" in changes and "checkpoints +" in changes and "no problems then or now" in changes, changes


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (scripts/setup.sh installs it)")
def test_the_html_chart_is_drawn_in_headless_chromium(home: Path, tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    assert run(home, "reconcile", TABLE, "--format", "html", "--out", str(page)).returncode == 0
    profile = tmp_path / "chromium-profile"
    dom = subprocess.run(
        [
            str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            f"--user-data-dir={profile}", "--virtual-time-budget=5000", "--dump-dom", page.as_uri(),
        ],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert 'data-drawn="' in dom.stdout and 'data-drawn="0"' not in dom.stdout
    for stage in ("source", "written", "committed"):
        assert f'data-stage="{stage}"' in dom.stdout
    assert dom.stdout.count("<polyline") >= 3


def test_information_alone_is_counted_as_notes_not_problems(tmp_path: Path) -> None:
    home = tmp_path / "home"
    catalog = ic.connect(uri=f"sqlite:///{home / 'catalog.db'}", warehouse=str(home))
    ic.create_table(catalog, "ns.users", EVENTS_SCHEMA, identifier_fields=["id"])
    committer = ic.GlobalCommitter(catalog, "ns.users", job_id="cdc")
    for checkpoint, rows in ((1, events(0, 10)), (2, events(0, 5))):  # the second replaces five rows of the first
        written = write_arrow(committer.load_table(), rows, job_id="cdc", checkpoint_id=checkpoint)
        committer.prepare(checkpoint, [written], mode="upsert", keys=rows.select(["id"]))
        committer.commit(checkpoint)
    catalog.engine.dispose()  # type: ignore[attr-defined]
    done = run(home, "reconcile", "ns.users", "--out", str(tmp_path / "report.md"))
    assert done.returncode == 0, done.stderr
    assert "ns.users reconciles: 0 problem(s), 1 note(s); report written to" in done.stdout


def test_output_and_debug_may_follow_the_command(home: Path) -> None:
    before = json.loads(run(home, "--output", "json", "snapshots", TABLE).stdout)
    after = run(home, "snapshots", TABLE, "--output", "json")
    assert after.returncode == 0 and json.loads(after.stdout) == before
    assert json.loads(run(home, "snapshots", TABLE, "--output=json", "--debug").stdout) == before
    wrong = run(home, "snapshots", TABLE, "--output", "yaml")
    assert wrong.returncode == 2 and "'--output'" in wrong.stderr


def test_tables_under_a_pipe_have_no_trailing_spaces(home: Path) -> None:
    for command in ("snapshots", "checkpoints"):
        done = process(home, command, TABLE)  # a real process: its stdout is a pipe
        assert done.returncode == 0, done.stderr
        lines = done.stdout.splitlines()
        assert len(lines) > 3 and [line for line in lines if line != line.rstrip()] == [], command


def test_rollback_without_one_target_names_the_flags(home: Path) -> None:
    for extra in ((), ("--to-snapshot", "1", "--to-checkpoint", "2", "--job", "job")):
        done = run(home, "rollback", TABLE, "--yes", *extra)
        assert done.returncode == 2 and "--to-snapshot, --to-timestamp, --to-checkpoint, --to-event-time" in done.stderr
        assert "to_snapshot" not in done.stderr + done.stdout


def test_tables_lists_what_each_table_holds(home: Path) -> None:
    text = process(home, "tables")
    assert text.returncode == 0, text.stderr
    row = next(line for line in text.stdout.splitlines() if line.strip().startswith(TABLE))
    assert row.split()[1:3] == ["v2", "3"] and row.split()[-1] == "job#3"
    document = json.loads(run(home, "tables", "ns", "--output", "json").stdout)
    (table,) = document["tables"]
    assert (table["name"], table["snapshots"], table["last_checkpoint"]) == (TABLE, 3, ["job", 3])
    assert table["records"] == sum(
        s["added_records"] for s in json.loads(run(home, "--output", "json", "snapshots", TABLE).stdout)["snapshots"]
    )
    missing = run(home, "tables", "nope")
    assert missing.returncode == 2 and "nope" in missing.stderr
