"""The notebooks in notebooks/ run top to bottom on a fresh embedded catalog and show
what their text says they show.

Each notebook runs in a real IPython kernel on this interpreter, with ``ICECOMMIT_HOME``
and the working directory in a fresh temporary folder. A failing cell raises nbclient's
``CellExecutionError`` (the cell's source and traceback), which fails the test.
"""

from __future__ import annotations

import html
import json
import re
import sys
from pathlib import Path

import nbformat
import pyspark
import pytest
from nbclient import NotebookClient
from nbformat import NotebookNode

pytestmark = [pytest.mark.spark, pytest.mark.notebooks]

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
CELL_TIMEOUT_S = 600


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder for the kernel to run in, and a ``python3`` kernel on this interpreter.

    The kernel spec is written under ``JUPYTER_PATH``, which Jupyter searches before any
    user or system kernel spec, so the notebooks never run on another Python.
    """
    spec = tmp_path / "jupyter" / "kernels" / "python3"
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}", "--InteractiveShell.colors=nocolor"]
    (spec / "kernel.json").write_text(json.dumps({"argv": argv, "display_name": "Python 3", "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    # the platformdirs layout, the default from jupyter_core 6 on (older versions warn without it)
    monkeypatch.setenv("JUPYTER_PLATFORM_DIRS", "1")
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "runtime"))
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    # the conftest's autouse fixture already points ICECOMMIT_HOME at tmp_path / "home"
    return tmp_path


def execute(name: str, workdir: Path) -> NotebookNode:
    """Run ``notebooks/<name>.ipynb``; the executed copy is kept in ``workdir`` for a post-mortem."""
    notebook = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    client = NotebookClient(
        notebook,
        timeout=CELL_TIMEOUT_S,
        kernel_name="python3",
        resources={"metadata": {"path": str(workdir)}},
    )
    try:
        client.execute()
    finally:
        nbformat.write(notebook, workdir / f"{name}.executed.ipynb")
    return notebook


def stdout_lines(notebook: NotebookNode) -> list[str]:
    """Every line the notebook printed, in order."""
    text = "".join(
        output.get("text", "")
        for cell in notebook.cells
        for output in cell.get("outputs", [])
        if output.get("output_type") == "stream" and output.get("name") == "stdout"
    )
    return text.splitlines()


def rich_outputs(notebook: NotebookNode, mime: str) -> list[str]:
    """The ``mime`` representation of every displayed or returned value."""
    return [
        output["data"][mime]
        for cell in notebook.cells
        for output in cell.get("outputs", [])
        if mime in output.get("data", {})
    ]


def test_quickstart(workdir: Path) -> None:
    notebook = execute("01_quickstart", workdir)
    lines = stdout_lines(notebook)

    assert lines[0] == f"icecommit home: {(workdir / 'home').resolve()}"
    assert lines[2] == f"spark: {pyspark.__version__}", "the kernel runs on this interpreter"
    written = [line for line in lines if line.startswith("checkpoint ")]
    assert [re.sub(r" snapshot=\d+$", "", line) for line in written] == [
        "checkpoint 1: committed=True records=1000 files=7",
        "checkpoint 2: committed=True records=500 files=4",
    ]
    assert "rows in table: 1500" in lines
    assert "distinct order ids: 1500" in lines
    assert "purchases from 2026-01-02 on: 334" in lines
    assert "snapshots: 2" in lines
    assert "replay of checkpoint 2: committed=False status=already-committed" in lines
    assert "rows in table after replay: 1500" in lines
    summary = next(text for text in rich_outputs(notebook, "text/plain") if "icecommit.job-id" in text)
    assert "'icecommit.checkpoint-id': '2'" in summary
    assert "'icecommit.records': '500'" in summary


def test_exactly_once(workdir: Path) -> None:
    """Run in the home notebook 01 used just before (each notebook runs on its own, in a
    fresh home as in one another notebook used: its tables are its own)."""
    execute("01_quickstart", workdir)
    notebook = execute("02_exactly_once", workdir)
    lines = stdout_lines(notebook)

    assert "job: prepared checkpoint 2: 500 records in 2 files" in lines  # hash-distributed: one file per day
    assert "job exit code: -9 (SIGKILL)" in lines
    assert not any(line.startswith("job: committed") for line in lines), "the job was meant to die before committing"
    steps = [line for line in lines if line.startswith("step: ")]
    assert steps == [
        "step: checkpoint 1 written | rows in table: 500 | distinct order ids: 500 | snapshots: 1",
        "step: after the kill | rows in table: 500 | distinct order ids: 500 | snapshots: 1",
        "step: after recover() | rows in table: 1000 | distinct order ids: 1000 | snapshots: 2",
        "step: after replaying checkpoint 2 | rows in table: 1000 | distinct order ids: 1000 | snapshots: 2",
        "step: after checkpoint 3 | rows in table: 1500 | distinct order ids: 1500 | snapshots: 3",
    ]
    states = [line for line in lines if re.match(r"checkpoint \d+: (prepared|committed), in table", line)]
    assert states == [
        "checkpoint 1: committed, in table: True",
        "checkpoint 2: prepared, in table: False",
        "checkpoint 1: committed, in table: True",
        "checkpoint 2: committed, in table: True",
    ]
    assert any(re.fullmatch(r"recovered checkpoint 2: committed, 500 records, snapshot \d+", line) for line in lines)
    assert "recover() again: 0 checkpoint(s) committed" in lines
    assert "replay of checkpoint 2: committed=False status=already-committed" in lines
    assert "checkpoint 3: committed=True records=500" in lines


def test_reconciliation(workdir: Path) -> None:
    notebook = execute("03_reconciliation", workdir)
    lines = stdout_lines(notebook)

    assert lines.index("report ok: True") < lines.index("report ok: False")
    assert "checkpoints: 3, pending: 0, windows: 24" in lines
    assert "problems: 0" in lines
    markdown = rich_outputs(notebook, "text/markdown")
    assert len(markdown) == 1
    assert "**OK: every closed checkpoint and window reconciles**" in markdown[0]
    assert "| clicks-ingest | 2 | committed |" in markdown[0]

    pages = [html.unescape(out) for out in rich_outputs(notebook, "text/html") if "<iframe srcdoc=" in out]
    assert len(pages) == 2, "the clean and the broken report, each in its iframe"
    clean, broken = pages
    for page in pages:
        assert '<svg id="chart"' in page
        assert '<script type="application/json" id="report-data">' in page
    assert "The table reconciles." in clean
    assert "The table does NOT reconcile." in broken

    deleted = next(line for line in lines if line.startswith("deleted data file: ")).removeprefix("deleted data file: ")
    assert deleted.startswith("clicks-ingest-00000002-") and deleted.endswith(".parquet")
    problems = [line for line in lines if line.startswith("problem: ")]
    assert len(problems) == 1
    assert problems[0].startswith(f"problem: missing-file: {deleted} ")
    assert deleted in broken


def test_rollback(workdir: Path) -> None:
    notebook = execute("04_rollback", workdir)
    lines = stdout_lines(notebook)

    ids = [line for line in lines if line.startswith("ids ")]
    assert ids == [
        "ids after 4 checkpoints: 100-499 (400 rows)",
        "ids after planning (nothing changed yet): 100-499 (400 rows)",
        "ids after rollback to checkpoint 3: 100-399 (300 rows)",
        "ids after rollback to event time 2026-03-01T02:30:00+00:00: 100-199 (100 rows)",
        "ids after re-committing checkpoints 2 and 3: 100-399 (300 rows)",
    ]
    plans = [line for line in lines if line.startswith(("plan: ", "would hide: "))]
    assert [re.sub(r"snapshot \d+", "snapshot N", line) for line in plans] == [
        "plan: checkpoint 3 of job readings-ingest -> snapshot N",
        "would hide: 1 snapshot(s), 100 rows, checkpoints [4]",
        "plan: event time 2026-03-01T02:30:00+00:00 -> snapshot N",
        "would hide: 2 snapshot(s), 200 rows, checkpoints [3, 2]",
    ]
    assert "applied: True" in lines
    assert any(line.startswith("replay of checkpoint 2: CheckpointRolledBackError: ") for line in lines)
    recommits = [re.sub(r"snapshot \d+", "snapshot N", line) for line in lines if line.startswith("re-commit")]
    assert recommits == [
        "re-commit of checkpoint 2: committed, snapshot N",
        "re-commit of checkpoint 3: committed, snapshot N",
    ]
