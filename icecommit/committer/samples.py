"""Metrics samples the committer records at prepare and commit."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone

from icecommit.datafiles import WindowCount, WriteResult
from icecommit.state.checkpoints import SOURCE, WRITTEN, MetricSample


def minute_start(value: datetime) -> datetime:
    value = value if value.tzinfo is not None else value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc).replace(second=0, microsecond=0)


def _window(start_us: int | None) -> datetime | None:
    return None if start_us is None else datetime.fromtimestamp(start_us / 1_000_000, tz=timezone.utc)


def prepare_samples(results: Sequence[WriteResult]) -> list[MetricSample]:
    """``source`` and ``written`` metrics of each task attempt, per window."""
    samples = []
    for result in results:
        windows = result.windows or (WindowCount(None, result.source_records, result.records),)
        for window in windows:
            start = _window(window.window_start_us)
            samples.append(MetricSample(SOURCE, start, window.source_records, result.task_id, result.attempt))
            samples.append(MetricSample(WRITTEN, start, window.written_records, result.task_id, result.attempt))
    return samples
