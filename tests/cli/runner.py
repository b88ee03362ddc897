"""The CLI in the test process (click's CliRunner), for commands that need no Spark: a
subprocess per call costs seconds of start-up and shows nothing more. A few tests per
command still run a real process, for its exit code and its stdout apart from stderr."""

from __future__ import annotations

import subprocess
from pathlib import Path

from click.testing import CliRunner

from icecommit.cli.main import cli


def invoke(home: Path, *args: str, columns: int = 200) -> subprocess.CompletedProcess[str]:
    """Run ``icecommit ARGS`` with ``ICECOMMIT_HOME=home``; shaped like a finished process."""
    result = CliRunner().invoke(cli, list(args), env={"ICECOMMIT_HOME": str(home), "COLUMNS": str(columns)})
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return subprocess.CompletedProcess(list(args), result.exit_code, result.stdout, result.stderr)
