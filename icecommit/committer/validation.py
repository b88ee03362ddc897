"""Pre-commit validation of a checkpoint's write results (pure, plus one I/O edge)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from pyiceberg.io import FileIO
from pyiceberg.table import Table
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.types import NestedField, StructType

from icecommit.committer.validators import files_added_by
from icecommit.core import ancestry
from icecommit.core.datafiles import DataFileRecord, WriteResult
from icecommit.core.errors import (
    CheckpointReusedError,
    DataFileMissingError,
    InvalidArgumentError,
    SchemaMismatchError,
    ValidationError,
)
from icecommit.core.pyiceberg_internals import field_ids


@dataclass(frozen=True)
class CheckpointFiles:
    """The validated content of one checkpoint, ready to stage."""

    checkpoint_id: int
    data_files: tuple[DataFileRecord, ...]
    source_records: int
    records: int
    bytes: int
    max_event_time_us: int | None

    @property
    def digest(self) -> str:
        """A digest of the file list, to tell a repeated prepare from a different one."""
        return files_digest(f.path for f in self.data_files)


def files_digest(paths: Iterable[str]) -> str:
    """sha256 over the sorted paths."""
    h = hashlib.sha256()
    for path in sorted(paths):
        h.update(path.encode())
        h.update(b"\n")
    return h.hexdigest()


def validate_results(
    results: Sequence[WriteResult],
    *,
    metadata: TableMetadata,
    job_id: str,
    checkpoint_id: int,
    table_name: str,
) -> CheckpointFiles:
    """Check that the results are complete and consistent and fit the table.

    Raises:
        SchemaMismatchError: a task saw nulls in a required column.
        ValidationError: a count, a file, a job or checkpoint id, or the partition spec
            does not hold; the message names it.
        InvalidArgumentError: ``results`` is not a list of :class:`WriteResult`.
    """
    if isinstance(results, (str, bytes)) or not isinstance(results, Sequence):
        raise InvalidArgumentError("results", results, "a list of WriteResult (what the writers returned)")
    for position, result in enumerate(results):
        if not isinstance(result, WriteResult):
            raise InvalidArgumentError(
                f"results[{position}]", result, "a WriteResult (what a writer task returned; WriteResult.from_json)"
            )
    for result in results:
        if result.violations:
            v = result.violations[0]
            total = sum(x.null_count for r in results for x in r.violations if x.column == v.column)
            raise SchemaMismatchError(v.column, f"{total} null value(s) in a required column", table=table_name)
    seen_tasks: dict[int, int] = {}
    seen_paths: set[str] = set()
    spec = metadata.spec()
    known_ids = field_ids(metadata.schema())
    required_ids = _required_leaves(metadata.schema().fields)
    for result in results:
        if (result.job_id is not None and result.job_id != job_id) or result.checkpoint_id != checkpoint_id:
            raise ValidationError(
                f"task {result.task_id} reported job {result.job_id!r} checkpoint "
                f"{result.checkpoint_id}, expected job {job_id!r} checkpoint {checkpoint_id}",
                checkpoint_id=checkpoint_id,
                expected=(job_id, checkpoint_id),
                actual=(result.job_id, result.checkpoint_id),
            )
        if result.task_id in seen_tasks:
            raise ValidationError(
                f"task {result.task_id} reported twice (attempts {seen_tasks[result.task_id]} "
                f"and {result.attempt}); its rows would count twice",
                checkpoint_id=checkpoint_id,
            )
        seen_tasks[result.task_id] = result.attempt
        in_files = sum(f.record_count for f in result.data_files)
        if in_files != result.records:
            raise ValidationError(
                f"task {result.task_id} reported {result.records} records but its data files hold {in_files}",
                checkpoint_id=checkpoint_id,
                expected=result.records,
                actual=in_files,
            )
        if result.source_records != result.records:
            raise ValidationError(
                f"task {result.task_id} received {result.source_records} records but wrote {result.records}",
                checkpoint_id=checkpoint_id,
                expected=result.source_records,
                actual=result.records,
            )
        for data_file in result.data_files:
            _validate_file(data_file, spec.spec_id, len(spec.fields), known_ids, required_ids, checkpoint_id)
            if data_file.path in seen_paths:
                raise ValidationError(
                    f"data file listed twice: {data_file.path}", checkpoint_id=checkpoint_id, path=data_file.path
                )
            seen_paths.add(data_file.path)
    files = tuple(f for r in sorted(results, key=lambda r: r.task_id) for f in r.data_files)
    times = [f.max_event_time_us for f in files if f.max_event_time_us is not None]
    return CheckpointFiles(
        checkpoint_id=checkpoint_id,
        data_files=files,
        source_records=sum(r.source_records for r in results),
        records=sum(r.records for r in results),
        bytes=sum(f.file_size_in_bytes for f in files),
        max_event_time_us=max(times) if times else None,
    )


def _validate_file(
    data_file: DataFileRecord,
    spec_id: int,
    arity: int,
    field_ids: set[int],
    required_ids: set[int],
    checkpoint_id: int,
) -> None:
    if data_file.spec_id != spec_id or len(data_file.partition) != arity:
        raise ValidationError(
            f"data file {data_file.path} was written for partition spec {data_file.spec_id} "
            f"({len(data_file.partition)} fields); the table's spec is {spec_id} ({arity} fields)",
            checkpoint_id=checkpoint_id,
            path=data_file.path,
        )
    unknown = set(data_file.column_sizes) - field_ids
    missing = required_ids - set(data_file.column_sizes)
    if unknown or missing:
        raise ValidationError(
            f"data file {data_file.path} does not match the table's current schema "
            f"(unknown field ids {sorted(unknown)}, missing required field ids {sorted(missing)})",
            checkpoint_id=checkpoint_id,
            path=data_file.path,
        )
    if data_file.record_count < 0 or data_file.file_size_in_bytes <= 0:
        raise ValidationError(
            f"data file {data_file.path} has impossible counts", checkpoint_id=checkpoint_id, path=data_file.path
        )


def _required_leaves(fields: Sequence[NestedField]) -> set[int]:
    """Ids of the leaf columns every data file must have: required primitive fields, and the
    required leaves of required structs (a struct itself is no column of the file)."""
    ids: set[int] = set()
    for f in fields:
        if not f.required:
            continue
        if isinstance(f.field_type, StructType):
            ids |= _required_leaves(f.field_type.fields)
        elif f.field_type.is_primitive:
            ids.add(f.field_id)
    return ids


def size_mismatches(files: Sequence[tuple[str, int]], io: FileIO, *, threads: int = 8) -> list[tuple[str, int | None]]:
    """(path, size on storage) of every file that is absent (None) or not the recorded size.

    Looks up each exact path; never lists a directory.
    """

    def size_of(path: str) -> int | None:
        try:
            return len(io.new_input(path))
        except FileNotFoundError:
            return None

    if not files:
        return []
    with ThreadPoolExecutor(max_workers=max(1, min(threads, len(files)))) as pool:
        sizes = list(pool.map(size_of, [p for p, _ in files]))
    return [(p, actual) for (p, expected), actual in zip(files, sizes, strict=True) if actual != expected]


def require_files_present(files: Sequence[DataFileRecord], io: FileIO, checkpoint_id: int) -> None:
    """Raise DataFileMissingError naming the first file that is absent or has the wrong size."""
    bad = size_mismatches([(f.path, f.file_size_in_bytes) for f in files], io)
    if bad:
        path, size = bad[0]
        expected = next(f.file_size_in_bytes for f in files if f.path == path)
        raise DataFileMissingError(
            path, checkpoint_id=checkpoint_id, expected=expected, actual=size, bad=len(bad), total=len(files)
        )


def refuse_reused_checkpoint(
    table: Table, job_id: str, checkpoint_id: int, branch: str, paths: set[str], table_name: str
) -> None:
    """A (job, checkpoint) already in the ancestry with other files means the job's
    checkpoint counter went back: committing would silently drop the new data.

    Raises:
        CheckpointReusedError: the snapshot that holds it added other files.
    """
    landed = ancestry.find_checkpoint(table.metadata, job_id, checkpoint_id, branch)
    if landed is None:
        return
    if files_added_by(table, landed) != paths:
        raise CheckpointReusedError(
            job_id, checkpoint_id, table_name, status="committed", snapshot_id=landed.snapshot_id
        )
