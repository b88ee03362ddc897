"""Table identifiers (facts, no I/O)."""

from __future__ import annotations

from datetime import datetime, timedelta

from pyiceberg.table import Table

from icecommit.core.errors import InvalidArgumentError

#: The longest job id the state tables hold.
MAX_JOB_ID = 255


def checked_checkpoint_id(value: object, argument: str = "checkpoint_id") -> int:
    """A checkpoint id as given, if it is a non-negative integer (``bool`` is not).

    Raises:
        InvalidArgumentError: anything else (None, a string, a float, a negative number).
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < 0 or value >= 2**63:
        raise InvalidArgumentError(argument, value, "a non-negative integer below 2**63 (a Spark batch id works)")
    return value


def checked_job_id(value: object, argument: str = "job_id") -> str:
    """A job id as given, if it is a non-empty string of printable characters that fits
    the state tables.

    Raises:
        InvalidArgumentError: anything else.
    """
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_JOB_ID or not value.isprintable():
        raise InvalidArgumentError(argument, value, f"a non-empty string of printable characters, at most {MAX_JOB_ID}")
    return value


def checked_instant(value: object, argument: str) -> datetime:
    """A point in time given as a ``datetime`` (one without a time zone is UTC).

    Raises:
        InvalidArgumentError: anything else (a string, a number, None).
    """
    if not isinstance(value, datetime):
        raise InvalidArgumentError(argument, value, "a datetime (one without a time zone is UTC)")
    return value


def checked_duration(value: object, argument: str, *, positive: bool = False) -> timedelta:
    """A duration given as a ``timedelta`` of zero or more (more than zero when ``positive``).

    Raises:
        InvalidArgumentError: anything else (a string such as "3d", a number, a negative duration).
    """
    least = "more than zero" if positive else "zero or more"
    if not isinstance(value, timedelta) or value < timedelta(0) or (positive and value == timedelta(0)):
        raise InvalidArgumentError(argument, value, f"a timedelta of {least}")
    return value


def checked_count(value: object, argument: str, *, optional: bool = False) -> int | None:
    """A count given as a whole number of at least 1 (or None, where ``optional``).

    Raises:
        InvalidArgumentError: anything else (zero, a bool, a float, a string).
    """
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidArgumentError(argument, value, "a whole number of at least 1" + (", or None" if optional else ""))
    return value


def checked_file_size(value: object, argument: str = "target_file_size") -> int | None:
    """A target file size in bytes, or None for the table's ``write.target-file-size-bytes``.

    Raises:
        InvalidArgumentError: not a positive integer.
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise InvalidArgumentError(argument, value, "a positive number of bytes, or None for the table's property")
    return value


def table_name(table: Table | str) -> str:
    """The dotted identifier of a table.

    Raises:
        InvalidArgumentError: neither a pyiceberg Table nor a name of the form
            ``namespace.table``.
    """
    if isinstance(table, str):
        parts = table.split(".")
        if len(parts) < 2 or not all(part.strip() for part in parts):
            raise InvalidArgumentError("table", table, "a table name of the form namespace.table")
        return table
    if not hasattr(table, "name") or not callable(table.name):
        raise InvalidArgumentError("table", table, "a table name (namespace.table) or a pyiceberg Table")
    return ".".join(table.name())
