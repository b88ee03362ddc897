"""The icecommit CLI through a real subprocess on a real table."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import icecommit as ic
from icecommit.cli.output import JsonOutput, Output, TextOutput
from tests import processes
from tests.cli.runner import invoke

ICECOMMIT = [sys.executable, "-m", "icecommit.cli"]


def run(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ICECOMMIT_HOME": str(home), "COLUMNS": "200"}
    return subprocess.run(
        [*ICECOMMIT, *args], env=env, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL
    )


@pytest.mark.spark
def test_demo_lands_every_row_once_even_when_run_twice(tmp_path: Path) -> None:
    home = tmp_path / "home"
    first = run(home, "--output", "json", "demo", "--rows", "20000", "--checkpoints", "3")
    assert first.returncode == 0, first.stderr
    report = json.loads(first.stdout)
    assert report["rows_read_back"] == report["distinct_read_back"] == 20000
    assert [c["status"] for c in report["checkpoints"]] == ["committed"] * 3
    assert sum(c["records"] for c in report["checkpoints"]) == 20000
    assert 0 < report["late_rows"] < 20000 * 0.01  # a few rows of each stretch arrive with the next one
    assert report["location"].endswith("/demo/clickstream") and str(home) in report["catalog"]
    assert len(report["try_next"]) == 3

    # the text run under a pipe: Spark's start-up noise is not shown, no cell is cut, and it
    # ends with where the table lives and what to try next
    second = run(home, "demo", "--rows", "20000", "--checkpoints", "3")
    assert second.returncode == 0, second.stderr
    assert second.stderr == "", second.stderr  # Spark's messages (and the pipeline's) went to the home's log
    assert "is already committed to demo.clickstream" in (home / "logs" / "spark-demo.log").read_text()
    assert "This run continued the table an earlier run made" in second.stdout
    assert "demo --reset --rows 20000 --checkpoints 3 --hours 6` starts over" in second.stdout
    assert (home / "logs" / "spark-demo.log").stat().st_size > 0
    assert "20,000 rows landed exactly once (20,000 read back, 20,000 distinct event ids)" in second.stdout
    assert "0 committed now, 3 already committed" in second.stdout
    assert "…" not in second.stdout and "━" not in second.stdout  # plain rows, nothing cut
    lines = second.stdout.rstrip().splitlines()
    assert lines[-4] == "Try next:" and "The table lives in" in lines[-5]
    assert [line.strip() for line in lines[-3:]] == report["try_next"]

    snapshots = json.loads(run(home, "--output", "json", "snapshots", "demo.clickstream").stdout)
    assert [s["checkpoint_id"] for s in snapshots["snapshots"]] == [1, 2, 3]
    assert sum(s["is_current"] for s in snapshots["snapshots"]) == 1
    assert all(s["job_id"] == "clickstream-demo" for s in snapshots["snapshots"])
    for line in snapshots["snapshots"]:  # whole in the text view
        assert str(line["snapshot_id"]) in second.stdout

    checkpoints = json.loads(run(home, "--output", "json", "checkpoints", "demo.clickstream").stdout)
    assert [(c["checkpoint_id"], c["status"], c["in_ancestry"]) for c in checkpoints["checkpoints"]] == [
        (1, "committed", True),
        (2, "committed", True),
        (3, "committed", True),
    ]

    # every command the demo suggested succeeds exactly as printed, from another directory
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "ICECOMMIT_HOME": str(home), "COLUMNS": "200"}
    outputs = []
    for command in report["try_next"]:
        argv = shlex.split(command)
        assert argv[:3] == ICECOMMIT  # how it was run: python -m icecommit.cli here
        done = subprocess.run(argv, env=env, cwd=elsewhere, capture_output=True, text=True, timeout=600,
                              stdin=subprocess.DEVNULL)  # fmt: skip
        assert done.returncode == 0, (command, done.stdout, done.stderr)
        outputs.append(done.stdout)
    partitions, reconciled, rolled = outputs
    # the demo's two late figures: the late column of `partitions` counts the late rows that
    # landed after their hour was published, the demo's first figure every late row
    published = json.loads(run(home, "--output", "json", "partitions", "demo.clickstream").stdout)["partitions"]
    assert sum(p["late_records"] for p in published) == report["late_after_published"] <= report["late_rows"]
    assert f"{report['late_after_published']:,} of them after their hour was published complete" in second.stdout
    assert "reconciles" in reconciled and "demo-report.html" in reconciled
    assert "ts_hour=2026-11-20-00" in partitions  # the first hours are complete
    assert (elsewhere / "demo-report.html").read_text().startswith("<!doctype html>")
    assert "would roll back (dry run)" in rolled and "clickstream-demo#3" in rolled
    after = json.loads(run(home, "--output", "json", "snapshots", "demo.clickstream").stdout)
    assert after == snapshots  # the dry run changed nothing

    # other arguments for the same table: refused, naming the table's and the way to start over
    other = run(home, "demo", "--rows", "30000", "--checkpoints", "3")
    assert other.returncode == 2 and "--rows 20000 --checkpoints 3 --hours 6" in other.stderr
    assert "demo --reset --rows 30000 --checkpoints 3 --hours 6" in other.stderr
    assert json.loads(run(home, "--output", "json", "snapshots", "demo.clickstream").stdout) == snapshots
    # after the rollback it suggested, applied: the demo says how to go on, with its own flags
    applied = shlex.split(report["try_next"][2].replace(" --dry-run", " --yes"))
    assert subprocess.run(applied, env=env, capture_output=True, text=True, timeout=600).returncode == 0
    stuck = run(home, "demo", "--rows", "20000", "--checkpoints", "3")
    assert stuck.returncode == 2 and "recommit=True" not in stuck.stderr
    assert "demo --rows 20000 --checkpoints 3 --hours 6 --recommit` to commit it again" in stuck.stderr
    again = run(home, "--output", "json", "demo", "--rows", "20000", "--checkpoints", "3", "--recommit")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["rows_read_back"] == 20000
    # a fresh start, run by its path as a user of a virtual environment types it: the
    # suggestions name that path, and run as printed from that directory
    program = Path(sys.executable).parent / "icecommit"
    typed = os.path.relpath(program, tmp_path)
    fresh = subprocess.run([typed, "--output", "json", "demo", "--reset", "--rows", "10000", "--checkpoints", "2"],
                           env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)  # fmt: skip
    assert fresh.returncode == 0, fresh.stderr
    restarted = json.loads(fresh.stdout)
    assert restarted["rows_read_back"] == restarted["distinct_read_back"] == 10000 and not restarted["continued"]
    assert [c["status"] for c in restarted["checkpoints"]] == ["committed"] * 2
    first_step = shlex.split(restarted["try_next"][0])
    assert first_step[0] == typed or (first_step[0] == "icecommit" and shutil.which("icecommit") is not None)
    assert subprocess.run(first_step, env=env, cwd=tmp_path, capture_output=True, timeout=600).returncode == 0


def test_unknown_table_is_a_usage_error_in_one_line(tmp_path: Path) -> None:
    ic.connect(uri=f"sqlite:///{tmp_path / 'home' / 'catalog.db'}", warehouse=str(tmp_path / "home"))
    # a real process: no traceback on stderr
    result = processes.run(processes.cli, tmp_path / "home", "snapshots", "nope.missing")
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0 and "nope" in result.stderr
    as_json = processes.run(processes.cli, tmp_path / "home", "--output", "json", "snapshots", "nope.missing")
    assert as_json.returncode == 2
    assert json.loads(as_json.stdout)["exit_code"] == 2


def test_every_command_help_has_an_example(tmp_path: Path) -> None:
    for command in ("demo", "snapshots", "checkpoints", "partitions"):
        result = invoke(tmp_path, command, "--help")
        assert result.returncode == 0 and "Example:" in result.stdout


def test_both_outputs_implement_every_view() -> None:
    views = {name for name in dir(Output) if not name.startswith("_")}
    for implementation in (JsonOutput, TextOutput):
        assert views <= {name for name in dir(implementation) if callable(getattr(implementation, name))}
