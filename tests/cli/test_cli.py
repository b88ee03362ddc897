"""The icecommit CLI through a real subprocess on a real table."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import icecommit as ic
from icecommit.cli.output import JsonOutput, Output, TextOutput
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
    assert report["rows_read_back"] == 20000
    assert [c["status"] for c in report["checkpoints"]] == ["committed"] * 3
    assert sum(c["records"] for c in report["checkpoints"]) == 20000

    second = run(home, "demo", "--rows", "20000", "--checkpoints", "3")
    assert second.returncode == 0, second.stderr
    assert "20,000 rows read back" in second.stdout
    assert "0 committed now, 3 already committed" in second.stdout

    snapshots = json.loads(run(home, "--output", "json", "snapshots", "demo.clickstream").stdout)
    assert [s["checkpoint_id"] for s in snapshots["snapshots"]] == [1, 2, 3]
    assert sum(s["is_current"] for s in snapshots["snapshots"]) == 1
    assert all(s["job_id"] == "clickstream-demo" for s in snapshots["snapshots"])

    text = run(home, "snapshots", "demo.clickstream")
    assert text.returncode == 0 and "clickstream-demo" in text.stdout

    checkpoints = json.loads(run(home, "--output", "json", "checkpoints", "demo.clickstream").stdout)
    assert [(c["checkpoint_id"], c["status"], c["in_ancestry"]) for c in checkpoints["checkpoints"]] == [
        (1, "committed", True),
        (2, "committed", True),
        (3, "committed", True),
    ]


def test_unknown_table_is_a_usage_error_in_one_line(tmp_path: Path) -> None:
    ic.connect(uri=f"sqlite:///{tmp_path / 'home' / 'catalog.db'}", warehouse=str(tmp_path / "home"))
    result = run(tmp_path / "home", "snapshots", "nope.missing")  # a real process: no traceback on stderr
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0 and "nope" in result.stderr
    as_json = run(tmp_path / "home", "--output", "json", "snapshots", "nope.missing")
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
