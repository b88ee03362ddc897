"""Durations and instants as people type them: one parser each, for the API and the CLI."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: str) -> timedelta:
    """A duration such as ``90s``, ``30m``, ``12h``, ``3d`` or ``1w`` (``0`` is zero).

    Raises:
        ValueError: the text is not such a duration.
    """
    value = text.strip().lower()
    if value == "0":
        return timedelta(0)
    if len(value) < 2 or value[-1] not in _UNITS or not value[:-1].isascii() or not value[:-1].isdigit():
        raise ValueError(f"{text!r} is not a duration like 90s, 30m, 12h, 3d or 1w")
    try:
        return timedelta(seconds=int(value[:-1]) * _UNITS[value[-1]])
    except OverflowError:
        raise ValueError(f"{text!r} is longer than any duration this can hold") from None


def format_duration(duration: timedelta) -> str:
    """``duration`` as :func:`parse_duration` reads it, in the largest unit that holds it
    whole (``2m``, ``90s``, ``0``); sub-second parts are dropped.

    Raises:
        ValueError: the duration is negative.
    """
    seconds = int(duration.total_seconds())
    if seconds < 0:
        raise ValueError(f"{duration} is negative; a duration is not")
    if seconds == 0:
        return "0"
    for unit in ("w", "d", "h", "m"):
        if seconds % _UNITS[unit] == 0:
            return f"{seconds // _UNITS[unit]}{unit}"
    return f"{seconds}s"


def parse_instant(text: str) -> datetime:
    """An ISO 8601 time; one without an offset is UTC.

    Raises:
        ValueError: the text is not an ISO 8601 time.
    """
    try:
        parsed = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"{text!r} is not an ISO 8601 time") from None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=timezone.utc)
