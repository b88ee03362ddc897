"""Metrics samples the committer records at prepare and commit."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timezone

from icecommit.core.datafiles import WindowCount, WriteResult
from icecommit.state.samples import SOURCE, WRITTEN, MetricSample


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


_MINUTE_US = 60_000_000


def capped_watermark(
    results: Sequence[WriteResult], max_event_time_us: int | None, limit_us: int
) -> tuple[int | None, int]:
    """What a checkpoint lets its job's watermark reach, and how many of its rows lie in
    the future: rows in one-minute windows that start after ``limit_us`` (the clock plus
    the table's max future skew) are committed but do not move the watermark. With such
    rows, the watermark is the start of the latest window at or before the limit (never
    past a row that was really there); without them it is the largest event time."""
    future = 0
    latest: int | None = None
    for result in results:
        for window in result.windows:
            if window.window_start_us is None or not window.written_records:
                continue
            if window.window_start_us > limit_us:
                future += window.written_records
            elif latest is None or window.window_start_us > latest:
                latest = window.window_start_us
    if not future:
        return max_event_time_us, 0
    if latest is None:
        return None, future
    return min(latest, max_event_time_us) if max_event_time_us is not None else latest, future


def routed_watermark(results: Sequence[WriteResult], limit_us: int) -> int | None:
    """What the rows a checkpoint routed to other tables let this table's watermark reach
    (their future rows left out, as for its own)."""
    times = [f.max_event_time_us for r in results for f in r.data_files if f.max_event_time_us is not None]
    watermark, _ = capped_watermark(results, max(times) if times else None, limit_us)
    return watermark


def max_of(a: int | None, b: int | None) -> int | None:
    """The larger of two optional values (None when both are None)."""
    if a is None:
        return b
    return a if b is None else max(a, b)


def source_samples(counts: Mapping[datetime | None, int]) -> list[MetricSample]:
    """Source counts a caller declares, per one-minute event-time window, as samples."""
    return [
        MetricSample(SOURCE, minute_start(window) if window is not None else None, int(records))
        for window, records in counts.items()
    ]
