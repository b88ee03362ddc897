"""The HTML report as a person sees it, rendered in headless Chromium (Debian's, driven by
Playwright): the chart draws every stage and marks every problem, a rollback's loss is
visible, the stored runs are drawn over time, nothing is fetched from the network, and
the page fits a phone (390 px) and a laptop (1,280 px) without horizontal scrolling.
Screenshots go to ``$ICECOMMIT_TEST_ARTEFACTS`` (default ``test-artefacts/`` in the
checkout) so a run's pages can be looked at afterwards."""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table import Table

import icecommit as ic
from icecommit.maintenance import apply_rollback, plan_rollback
from icecommit.metrics.report_model import PartitionLine
from icecommit.metrics.runs import history_points, record_run
from icecommit.state import CheckpointStore, state_engine, state_uri
from tests.helpers import DAY0, EVENTS_SCHEMA, events, write_arrow

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ARTEFACTS = Path(os.environ.get("ICECOMMIT_TEST_ARTEFACTS", Path(__file__).resolve().parents[2] / "test-artefacts"))
JOB = "pages"
CLOCK = DAY0 + dt.timedelta(days=4)

#: CI installs Chromium (scripts/setup.sh): there, a missing browser fails these tests
REQUIRED = os.environ.get("CI", "").lower() == "true"
pytestmark = pytest.mark.skipif(
    CHROMIUM is None and not REQUIRED, reason="Debian's chromium is not installed (scripts/setup.sh installs it)"
)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if CHROMIUM is None:
        pytest.fail("CI=true and Debian's chromium is not installed: scripts/setup.sh installs it")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield launched
        finally:
            launched.close()


def _pipeline(catalog: SqlCatalog) -> Table:
    table = ic.create_table(
        catalog, f"{catalog.name}.pages", EVENTS_SCHEMA, partition_by=["event"],
        properties={"icecommit.event-time-column": "ts"},
    )  # fmt: skip
    store = CheckpointStore(state_engine(state_uri(catalog)), clock=lambda: CLOCK)
    committer = ic.GlobalCommitter(catalog, table, job_id=JOB, store=store)
    for checkpoint_id in range(1, 4):
        loaded = committer.load_table()
        rows = events(checkpoint_id * 1000, checkpoint_id * 1000 + 300, days=1)
        committer.prepare(checkpoint_id, [write_arrow(loaded, rows, job_id=JOB, checkpoint_id=checkpoint_id)])
        committer.commit(checkpoint_id)
    return committer.load_table()


def _look(browser: Any, page_html: str, name: str) -> dict[str, Any]:
    """Render at 390 and 1,280 px; what the charts drew, whether the page overflows, and
    every request the page tried to make (there must be none)."""
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    seen: dict[str, Any] = {}
    for width in (390, 1280):
        page = browser.new_page(viewport={"width": width, "height": 900})
        requests: list[str] = []
        page.on("request", lambda request, into=requests: into.append(request.url))
        page.set_content(page_html, wait_until="load")
        seen[f"requests@{width}"] = [r for r in requests if not r.startswith(("about:", "data:"))]
        seen[f"overflow@{width}"] = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        seen["charts"] = page.evaluate(
            """() => Object.fromEntries([...document.querySelectorAll('svg')].map(svg => [svg.id, {
                 drawn: Number(svg.getAttribute('data-drawn') || 0),
                 stages: [...svg.querySelectorAll('polyline')].map(p => p.getAttribute('data-stage')),
                 problems: [...svg.querySelectorAll('[data-problem]')].map(m => m.getAttribute('data-problem')),
                 removed: [...svg.querySelectorAll('[data-removed]')].map(m => m.getAttribute('data-removed')),
                 verdicts: [...svg.querySelectorAll('[data-verdict]')].map(m => m.getAttribute('data-verdict')),
                 readableLast: (() => { const p = svg.querySelector('polyline[data-stage=readable]');
                   return p ? Number(p.getAttribute('points').trim().split(' ').pop().split(',')[1]) : null; })(),
                 sourceLast: (() => { const p = svg.querySelector('polyline[data-stage=source]');
                   return p ? Number(p.getAttribute('points').trim().split(' ').pop().split(',')[1]) : null; })(),
               }]))"""
        )
        seen["failing rows"] = page.evaluate("document.querySelectorAll('tr.bad').length")
        page.screenshot(path=str(ARTEFACTS / f"report-{name}-{width}px.png"), full_page=True)
        page.close()
    return seen


def _report(catalog: SqlCatalog, table: Table, *, deep: bool = False) -> str:
    report = ic.reconcile(catalog, table, job_id=JOB, deep=deep)
    engine = state_engine(state_uri(catalog))
    record_run(engine, report)
    return report.to_html(history=history_points(engine, report.table, JOB))


def _fits(seen: dict[str, Any]) -> None:
    assert seen["overflow@390"] <= 0 and seen["overflow@1280"] <= 0, seen
    assert seen["requests@390"] == [] and seen["requests@1280"] == []


def test_a_clean_report_draws_every_stage_and_no_marker(browser: Any, sqlite_catalog: SqlCatalog) -> None:
    table = _pipeline(sqlite_catalog)
    seen = _look(browser, _report(sqlite_catalog, table), "clean")
    _fits(seen)
    chart = seen["charts"]["chart"]
    assert chart["drawn"] == 3 and chart["stages"] == ["source", "written", "committed", "readable"]
    assert chart["problems"] == [] and chart["removed"] == []
    windows = seen["charts"]["chart-windows"]
    assert windows["drawn"] > 100 and windows["stages"] == ["source", "written", "committed"]  # readable: deep only
    assert seen["charts"]["history"]["verdicts"] == ["ok"]
    assert seen["failing rows"] == 0


def test_a_rollback_shows_as_a_drop_of_the_readable_line_and_a_marker(browser: Any, sqlite_catalog: SqlCatalog) -> None:
    table = _pipeline(sqlite_catalog)
    _report(sqlite_catalog, table)  # a run before the rollback: the history shows both
    second = next(s for s in table.metadata.snapshots if s.summary and s.summary.get("icecommit.checkpoint-id") == "2")
    apply_rollback(sqlite_catalog, plan_rollback(sqlite_catalog, table, to_snapshot=second.snapshot_id))
    seen = _look(browser, _report(sqlite_catalog, table), "rollback")
    _fits(seen)
    chart = seen["charts"]["chart"]
    assert "readable" in chart["stages"]
    assert chart["removed"] == ["checkpoint 3"]
    # the readable line falls to the axis for the rolled-back checkpoint while source stays up
    assert chart["readableLast"] == 320 - 40 and chart["sourceLast"] < chart["readableLast"]
    assert seen["charts"]["history"]["drawn"] == 2


def test_a_sabotaged_file_is_marked_in_both_charts_and_its_rows_highlighted(
    browser: Any, sqlite_catalog: SqlCatalog
) -> None:
    table = _pipeline(sqlite_catalog)
    _report(sqlite_catalog, table)
    victim = next(iter(table.scan().plan_files())).file.file_path
    Path(victim.removeprefix("file://")).unlink()
    seen = _look(browser, _report(sqlite_catalog, table, deep=True), "sabotaged")
    _fits(seen)
    chart = seen["charts"]["chart"]
    assert chart["stages"] == ["source", "written", "committed", "readable"]
    assert chart["problems"], "the checkpoint that lost a file is not marked"
    windows = seen["charts"]["chart-windows"]
    assert "readable" in windows["stages"] and windows["problems"], "no failing window is marked"
    assert seen["charts"]["history"]["verdicts"] == ["ok", "mismatch"]
    assert seen["failing rows"] >= 2  # the checkpoint and its windows


def test_every_section_of_the_markdown_is_on_the_page_and_its_tables_fit_a_laptop(
    browser: Any, sqlite_catalog: SqlCatalog
) -> None:
    table = _pipeline(sqlite_catalog)
    report = ic.reconcile(sqlite_catalog, table, job_id=JOB)
    # as a production job's: a long job id, tens of millions of rows, 19-digit snapshot ids,
    # notes, and published partitions
    big = dataclasses.replace(
        report,
        checkpoints=tuple(
            dataclasses.replace(c, job_id="clickstream-production-eu-west-1", checkpoint_id=1_000_000 + i,
                                snapshot_id=8_123_456_789_012_345_678, source=12_345_678, written=12_345_678,
                                committed=12_345_678, readable=12_300_000, removed=45_678,
                                note="45,678 superseded by checkpoint 1000012 of job clickstream-production-eu-west-1")
            for i, c in enumerate(report.checkpoints)
        ),
        partitions=(PartitionLine("ts_hour=2026-01-01-00", DAY0, DAY0, 1_234_567, 1_234_600, 33),),
    )  # fmt: skip
    markdown_sections = set(re.findall(r"^## (.+)$", big.to_markdown(), flags=re.M))
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    try:
        page.set_content(big.to_html(), wait_until="load")
        headings = set(page.evaluate("[...document.querySelectorAll('h2')].map(h => h.textContent)"))
        boxes = page.evaluate("[...document.querySelectorAll('.scroll')].map(d => d.scrollWidth - d.clientWidth)")
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        page.screenshot(path=str(ARTEFACTS / "report-wide-1280px.png"), full_page=True)
    finally:
        page.close()
    assert markdown_sections - headings == set()
    assert {"Commit health", "Complete time partitions", "Checkpoints"} <= headings
    assert overflow <= 0 and boxes and max(boxes) <= 0, (overflow, boxes)
