"""The mutation report (mutation/report.py) rewrites only the last run: what people
wrote above its heading (how the score came about, what changed since) stays."""

from __future__ import annotations

from pathlib import Path

import pytest

from mutation import report as mutation_report
from mutation.report import LAST_RUN


def test_the_text_above_the_last_run_is_kept_and_the_run_below_is_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mutation_report, "ROOT", tmp_path)
    (tmp_path / "MUTATION.md").write_text(
        "# Mutation score\n\nWhy the score is what it is.\n\n"
        f"{LAST_RUN}\n\nthe old run's score\n\n## Equivalent survivors\n\n- an old one\n"
    )
    preface = mutation_report._kept_preface()
    assert preface == ["# Mutation score", "", "Why the score is what it is.", "", LAST_RUN, ""]


def test_a_report_without_the_heading_or_without_a_file_starts_with_the_title_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mutation_report, "ROOT", tmp_path)
    assert mutation_report._kept_preface() == ["# Mutation score", "", LAST_RUN, ""]
    # a report written before the heading existed: everything in it was generated, none kept
    (tmp_path / "MUTATION.md").write_text("# Mutation score\n\n`scripts/mutation.sh`, run ...\n")
    assert mutation_report._kept_preface() == ["# Mutation score", "", LAST_RUN, ""]
