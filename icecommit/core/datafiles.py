"""Values that cross the task -> driver boundary: data-file records and write results.

They are frozen dataclasses of plain values that round-trip through JSON, so a Spark task
can hand them to the driver (and the driver can stage them) without pickle. Column
bounds travel as hex strings of Iceberg's single-value binary serialisation.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from typing import Any

from icecommit.core.errors import ValidationError

#: A partition value in Iceberg's internal representation.
PartitionValue = Any


def encode_partition_value(value: PartitionValue) -> Any:
    """A JSON-ready form of a partition value (bytes, decimals and UUIDs are tagged)."""
    if isinstance(value, bytes):
        return {"$bytes": value.hex()}
    if isinstance(value, Decimal):
        return {"$decimal": str(value)}
    if isinstance(value, uuid.UUID):
        return {"$uuid": str(value)}
    return value


def decode_partition_value(value: Any) -> PartitionValue:
    """Inverse of :func:`encode_partition_value`."""
    if isinstance(value, dict):
        if "$bytes" in value:
            return bytes.fromhex(value["$bytes"])
        if "$decimal" in value:
            return Decimal(value["$decimal"])
        if "$uuid" in value:
            return uuid.UUID(value["$uuid"])
    return value


def _int_keys(mapping: dict[str, Any] | dict[int, Any]) -> dict[int, Any]:
    return {int(k): v for k, v in mapping.items()}


@dataclass(frozen=True)
class DataFileRecord:
    """One Parquet data file as written by a task, with its Iceberg metrics.

    Attributes:
        path: the full location of the file.
        file_size_in_bytes: its size on storage.
        record_count: rows in the file.
        spec_id: the partition spec the partition values belong to.
        partition: partition values in spec order (Iceberg's internal representation:
            days since epoch for ``day``, the bucket number for ``bucket`` ...).
        column_sizes / value_counts / null_value_counts / nan_value_counts: per field id.
        lower_bounds / upper_bounds: per field id, hex of the serialised bound.
        split_offsets: row-group start offsets.
        max_event_time_us: the largest event-time value in the file (microseconds since
            epoch), when the table has an event-time column.
    """

    path: str
    file_size_in_bytes: int
    record_count: int
    spec_id: int
    partition: tuple[PartitionValue, ...]
    column_sizes: dict[int, int] = field(default_factory=dict)
    value_counts: dict[int, int] = field(default_factory=dict)
    null_value_counts: dict[int, int] = field(default_factory=dict)
    nan_value_counts: dict[int, int] = field(default_factory=dict)
    lower_bounds: dict[int, str] = field(default_factory=dict)
    upper_bounds: dict[int, str] = field(default_factory=dict)
    split_offsets: tuple[int, ...] = ()
    max_event_time_us: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        data = asdict(self)
        data["partition"] = [encode_partition_value(v) for v in self.partition]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DataFileRecord:
        """Inverse of :meth:`to_dict` (accepts the string keys JSON produces)."""
        return cls(
            path=data["path"],
            file_size_in_bytes=int(data["file_size_in_bytes"]),
            record_count=int(data["record_count"]),
            spec_id=int(data["spec_id"]),
            partition=tuple(decode_partition_value(v) for v in data["partition"]),
            column_sizes=_int_keys(data.get("column_sizes", {})),
            value_counts=_int_keys(data.get("value_counts", {})),
            null_value_counts=_int_keys(data.get("null_value_counts", {})),
            nan_value_counts=_int_keys(data.get("nan_value_counts", {})),
            lower_bounds=_int_keys(data.get("lower_bounds", {})),
            upper_bounds=_int_keys(data.get("upper_bounds", {})),
            split_offsets=tuple(data.get("split_offsets", ())),
            max_event_time_us=data.get("max_event_time_us"),
        )


@dataclass(frozen=True)
class RequiredNullViolation:
    """A required column that received nulls in one task (the task then wrote nothing more)."""

    column: str
    null_count: int


@dataclass(frozen=True)
class WindowCount:
    """Rows of one task attempt in one one-minute event-time window.

    ``window_start_us`` is None for rows without an event time.
    """

    window_start_us: int | None
    source_records: int
    written_records: int


@dataclass(frozen=True)
class WriteResult:
    """What one successful task attempt wrote for one checkpoint.

    Attributes:
        job_id / checkpoint_id: the commit this output belongs to (job_id None when the
            writer was not given one).
        task_id: the Spark partition id; attempt: the attempt number of that task.
        source_records: rows the task received.
        records: rows the task wrote into ``data_files``.
        bytes: bytes of the files written.
        data_files: the files, with their metrics.
        violations: required columns that received nulls; a result with violations
            must not be committed.
        windows: rows received and written per one-minute event-time window.
        stage_seconds: where the task's time went, per stage (``arrow-in``: waiting for
            rows from the engine; ``split``: by partition; ``encode``: Parquet;
            ``file-stats``; ``close``: footers and statistics; ``window-counts``), for the
            write-path breakdown (``bench/write_breakdown.py``).
        base_sequence_number: the table's last sequence number in the metadata the writer
            was given (None: not known, an older writer); an overwrite conflicts with what
            was added after it.
    """

    job_id: str | None
    checkpoint_id: int
    task_id: int
    attempt: int
    source_records: int
    records: int
    bytes: int
    data_files: tuple[DataFileRecord, ...]
    violations: tuple[RequiredNullViolation, ...] = ()
    windows: tuple[WindowCount, ...] = ()
    stage_seconds: tuple[tuple[str, float], ...] = ()
    base_sequence_number: int | None = None

    def to_json(self) -> str:
        """Serialise to a JSON string."""
        data = asdict(self)
        data["data_files"] = [f.to_dict() for f in self.data_files]
        return json.dumps(data, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> WriteResult:
        """Parse the output of :meth:`to_json`.

        Raises:
            ValidationError: the text is not a write result (names what is missing).
        """
        try:
            return cls._from_dict(json.loads(text))
        except (ValueError, KeyError, TypeError) as e:
            shown = text[:80] + ("..." if len(text) > 80 else "") if isinstance(text, str) else repr(text)
            raise ValidationError(f"not a write result ({type(e).__name__}: {e}): {shown!r}") from e

    @classmethod
    def _from_dict(cls, data: dict[str, Any]) -> WriteResult:
        return cls(
            job_id=data["job_id"],
            checkpoint_id=int(data["checkpoint_id"]),
            task_id=int(data["task_id"]),
            attempt=int(data["attempt"]),
            source_records=int(data["source_records"]),
            records=int(data["records"]),
            bytes=int(data["bytes"]),
            data_files=tuple(DataFileRecord.from_dict(d) for d in data["data_files"]),
            violations=tuple(RequiredNullViolation(**v) for v in data.get("violations", ())),
            windows=tuple(WindowCount(**w) for w in data.get("windows", ())),
            stage_seconds=tuple((str(k), float(v)) for k, v in data.get("stage_seconds", ())),
            base_sequence_number=_optional_int(data.get("base_sequence_number")),
        )


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)
