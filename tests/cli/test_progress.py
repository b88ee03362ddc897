"""Progress of long work on the command line: plain lines under a pipe (periodic, and only
for work that lasts), nothing for a library user, a bar on a terminal."""

from __future__ import annotations

import io
import time
from pathlib import Path

import pytest
from rich.console import Console

import icecommit as ic
from icecommit.cli.progress_display import EVERY_ENV, Bar, PlainLines, every
from icecommit.core import progress
from tests.cli.runner import invoke
from tests.fakes import small_checkpoints
from tests.helpers import EVENTS_SCHEMA


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_plain_lines_come_every_period_and_at_the_end_only_if_one_came_before() -> None:
    out, clock = io.StringIO(), _Clock()
    with progress.showing(lambda: PlainLines(out, 10.0, clock, ticking=False)):
        with progress.step("expiry of ns.t: deleting files", 4, "file(s)") as advance:
            advance(1)
            clock.now = 10.5
            advance(1)  # a period passed: a line
            advance(1)  # not yet another
            clock.now = 12
            advance(1)
        with progress.step("quick", 3, "file(s)") as advance:
            advance(3)  # done within a period: nothing
    assert out.getvalue().splitlines() == [
        "expiry of ns.t: deleting files: 2/4 file(s) (50%), 10 s",
        "expiry of ns.t: deleting files: 4/4 file(s) (100%), 12 s",
    ]


def test_one_long_step_shows_that_it_goes_on_and_the_last_line_is_not_repeated() -> None:
    out = io.StringIO()
    with (
        progress.showing(lambda: PlainLines(out, 0.05)),
        progress.step("compaction of ns.t: commit groups", 2, "group(s)") as advance,
    ):
        time.sleep(0.2)  # one group rewriting: the ticking thread still prints
        advance(2)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("compaction of ns.t: commit groups: 0/2 group(s) (0%)"), lines
    assert lines[-1].startswith("compaction of ns.t: commit groups: 2/2 group(s) (100%)"), lines
    assert sum(1 for line in lines if "2/2" in line) == 1


def test_nothing_is_shown_unless_a_display_is_installed() -> None:
    with progress.step("anything", 10, "file(s)") as advance:
        advance(10)  # a no-op: no display, nothing printed, nothing raised


def test_a_bar_on_a_terminal_counts_to_the_total() -> None:
    console = Console(file=io.StringIO(), force_terminal=True, width=100)
    bar = Bar(console)
    bar.start("compaction of ns.t: commit groups", 3, "group(s)")
    for _ in range(3):
        bar.advance(1)
    task = bar._progress.tasks[0]
    assert (task.completed, task.total, task.finished) == (3, 3, True)
    bar.finish()


@pytest.mark.parametrize(("value", "seconds"), [("2.5", 2.5), ("banana", 10.0), ("-1", 10.0), (None, 10.0)])
def test_the_period_comes_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, value: str | None, seconds: float
) -> None:
    if value is None:
        monkeypatch.delenv(EVERY_ENV, raising=False)
    else:
        monkeypatch.setenv(EVERY_ENV, value)
    assert every() == seconds


@pytest.mark.parametrize(
    ("command", "line"),
    [
        (("compact", "ns.events", "--min-input-files", "2"),
         "compaction of ns.events: commit groups: 1/1 group(s) (100%)"),
        (("expire", "ns.events", "--older-than", "0s", "--retain-last", "1", "--no-dry-run"),
         "expiry of ns.events: deleting files:"),
        (("reconcile", "ns.events", "--deep"), "deep reconcile of ns.events: reading data files:"),
        (("orphans", "ns.events", "--older-than", "0s", "--delete"),
         "orphan sweep of ns.events: deleting files: 2/2 file(s) (100%)"),
    ],
)  # fmt: skip
def test_long_commands_print_progress_lines_under_a_pipe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: tuple[str, ...], line: str
) -> None:
    home = tmp_path / "home"
    catalog = ic.connect(uri=f"sqlite:///{home / 'catalog.db'}", warehouse=str(home))
    ic.create_table(catalog, "ns.events", EVENTS_SCHEMA, partition_by=["event"])
    table = small_checkpoints(catalog, "ns.events", 4)
    for stray in ("stray-1.parquet", "stray-2.parquet"):  # files no snapshot references: orphans
        (Path(table.location().removeprefix("file://")) / "data" / stray).write_bytes(b"x")
    catalog.engine.dispose()  # type: ignore[attr-defined]
    monkeypatch.setenv(EVERY_ENV, "0")  # a line for every step
    done = invoke(home, *command)
    assert done.returncode == 0, done.stderr
    assert line in done.stderr, done.stderr
    assert line not in done.stdout  # the command's own output is untouched
