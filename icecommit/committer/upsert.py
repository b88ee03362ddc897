"""A checkpoint's upsert: the checkpoint's append, made a row delta that also deletes, by
position, the live rows of every key it writes or deletes (the rules are
:mod:`icecommit.core.upsert`'s).

It is the append operation of the commit protocol with one more step before each attempt:
on the branch head the attempt runs on, the checkpoint's staged keys are resolved to the
positions of the live rows that hold them (reading only the data files whose key column
bounds can hold one, and leaving out positions earlier delete files removed), and one
position delete file per data file is written (rows sorted by position, the data file's
path as the manifest spells it). The compare-and-swap requires that head, so the rows
deleted are exactly the live rows of those keys when the snapshot lands: a concurrent
append, compaction, rollback or upsert makes the attempt lose its compare-and-swap, and
the next attempt resolves the keys again on the table as it is then. Its key check,
lost-response search and lifecycle are the append's.
"""

from __future__ import annotations

import logging
import uuid
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.conversions import from_bytes, to_bytes
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat, ManifestContent
from pyiceberg.table import Table
from pyiceberg.transforms import BucketTransform, TruncateTransform
from pyiceberg.types import LongType, PrimitiveType, StringType

from icecommit.committer import protocol
from icecommit.committer.append import AppendCheckpoint
from icecommit.core import ancestry
from icecommit.core.deletes import positions_by_path, single_target
from icecommit.core.errors import EqualityDeletesError, StagedManifestError, ValidationError
from icecommit.core.key_lookup import KeyLookup, look_up_here
from icecommit.core.overwrite import UPSERT, WRITE_MODE_PROPERTY
from icecommit.core.upsert import (
    CHECKPOINT_KEYS,
    DELETE_CHANGES,
    DELETE_FILE_PATH_ID,
    DELETE_POS_ID,
    DELETED_FLAG,
    DELETED_KEYS,
    DELETED_ROWS,
    INSERTED_KEYS,
    RECEIVED_ROWS,
    UPDATED_KEYS,
    received_rows,
)
from icecommit.state.manifests import read_staged_keys

logger = logging.getLogger(__name__)

_FIELD_ID = b"PARQUET:field_id"
#: The Arrow schema of a position delete file (Iceberg's reserved field ids).
DELETE_SCHEMA = pa.schema(
    [
        pa.field("file_path", pa.string(), nullable=False, metadata={_FIELD_ID: str(DELETE_FILE_PATH_ID)}),
        pa.field("pos", pa.int64(), nullable=False, metadata={_FIELD_ID: str(DELETE_POS_ID)}),
    ]
)


class UpsertCheckpoint(AppendCheckpoint):
    """Committing one prepared upsert checkpoint as one snapshot (see the module)."""

    def __init__(
        self, *args: Any, keys_path: str, base_sequence_number: int | None, key_lookup: KeyLookup, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self._lookup = key_lookup
        self._keys_path = keys_path
        self._base = base_sequence_number or 0
        self._keys: pa.Table | None = None

    def check(self, table: Table, number: int) -> protocol.Found | None:
        found = super().check(table, number)
        if found is not None:
            return found
        highest = self.plan.view.highest_committed
        if self.plan.recommit and highest is not None and highest > self.checkpoint:
            raise ValidationError(
                f"checkpoint {self.checkpoint} of job {self.job_id!r} is an upsert, and checkpoint {highest} of the "
                "job landed after the rollback removed it: committing it again would put older rows of its keys over "
                "newer ones, so nothing was committed; replay its changes from the source as a new checkpoint",
                checkpoint_id=self.checkpoint,
            )
        taker = self.summary.get(ancestry.RECOVERED_BY)
        if taker is not None:  # another job's take-over: never over rows that job wrote since
            self._refuse_after(table, taker)
        if self._keys is None:
            try:
                self._keys = read_staged_keys(table.io, self._keys_path)
            except FileNotFoundError as e:
                raise StagedManifestError(
                    self.job_id, self.checkpoint, self.table_name, self._keys_path, "(its staged keys) is missing"
                ) from e
        hits = resolve_positions(
            table, self._keys, branch=self.branch, job_id=self.job_id, checkpoint_id=self.checkpoint,
            table_name=self.table_name, lookup=self._lookup,
        )  # fmt: skip
        self.deletes = tuple(
            write_position_deletes(table, data_file, positions, job_id=self.job_id, checkpoint_id=self.checkpoint)
            for data_file, positions, _ in hits
        )
        self.summary = {
            **self.summary,
            WRITE_MODE_PROPERTY: UPSERT,
            DELETED_ROWS: str(sum(len(positions) for _, positions, _ in hits)),
            **change_counts(self._keys, [found for _, _, found in hits]),
            **received_counts(self._keys),
        }
        return None

    def _refuse_after(self, table: Table, taker: str) -> None:
        for snapshot in ancestry.branch_ancestry(table.metadata, self.branch):
            if snapshot.sequence_number is None or snapshot.sequence_number <= self._base:
                return
            found = ancestry.checkpoint_of(snapshot)
            if found is not None and found[0] == taker:
                raise ValidationError(
                    f"checkpoint {self.checkpoint} of job {self.job_id!r} is an upsert its writers computed before "
                    f"checkpoint {found[1]} of job {taker!r} landed (snapshot {snapshot.snapshot_id}): taking it over "
                    "now could put older rows of its keys over newer ones, so nothing was committed; abandon it "
                    "and replay its changes from the source",
                    checkpoint_id=self.checkpoint,
                )


def resolve_positions(
    table: Table,
    keys: pa.Table,
    *,
    branch: str,
    job_id: str,
    checkpoint_id: int,
    table_name: str,
    lookup: KeyLookup = look_up_here,
) -> list[tuple[DataFile, list[int], pa.Table]]:
    """The live data files of ``branch``'s head that hold rows of ``keys``, each with the
    positions of those rows (sorted; positions earlier delete files removed left out) and
    their keys. Only the files whose key column bounds can hold a key are read, by
    ``lookup`` (in this process, or Spark tasks).

    Raises:
        EqualityDeletesError: the head holds equality delete files.
    """
    head = ancestry.branch_head(table.metadata, branch)
    if head is None or len(keys) == 0:
        return []
    schema = table.schema()
    names = [c for c in keys.column_names if c != DELETED_FLAG]
    fields = [schema.find_field(name) for name in names]
    data_files: list[DataFile] = []
    position_deletes: list[DataFile] = []
    for manifest in head.manifests(table.io):
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
            found = entry.data_file
            if manifest.content == ManifestContent.DATA:
                data_files.append(found)
            elif found.content == DataFileContent.EQUALITY_DELETES:
                raise EqualityDeletesError(job_id, checkpoint_id, table_name, found.file_path)
            else:
                position_deletes.append(found)
    ranges = [_key_range(field, keys.column(name)) for field, name in zip(fields, names, strict=True)]
    buckets = _partition_values(table, keys, {field.field_id: name for field, name in zip(fields, names, strict=True)})
    candidates = [f for f in data_files if _may_hold(f, ranges) and _partition_may_hold(f, buckets)]
    if not candidates:
        return []
    deleted = _deleted_positions(table, position_deletes, {f.file_path for f in candidates})
    matches = lookup(table, candidates, keys.select(names), deleted)
    hits = [(f, *matches[f.file_path]) for f in candidates if f.file_path in matches]
    logger.debug(
        "checkpoint %d of job %s: %d key(s) resolved in %d of %d candidate file(s)",
        checkpoint_id, job_id, len(keys), len(hits), len(candidates),
    )  # fmt: skip
    return hits


def change_counts(keys: pa.Table, found: Sequence[pa.Table]) -> dict[str, str]:
    """The summary's counts of an upsert: keys inserted (no live row had them), updated
    (live rows replaced) and deleted (a delete of a live key; one of no live key changes
    nothing)."""
    names = [c for c in keys.column_names if c != DELETED_FLAG]
    flags = keys.column(DELETED_FLAG) if DELETED_FLAG in keys.column_names else pa.array([False] * len(keys))
    flagged = keys.select(names).append_column(DELETED_FLAG, flags)
    live = pa.concat_tables(found).group_by(names).aggregate([]) if found else flagged.select(names).slice(0, 0)
    hit = flagged.join(live, keys=names, join_type="left semi")
    missed = flagged.join(live, keys=names, join_type="left anti")
    deleted_hits = pc.sum(hit.column(DELETED_FLAG)).as_py() or 0
    deleted_misses = pc.sum(missed.column(DELETED_FLAG)).as_py() or 0
    return {
        INSERTED_KEYS: str(len(missed) - deleted_misses),
        UPDATED_KEYS: str(len(hit) - deleted_hits),
        DELETED_KEYS: str(deleted_hits),
    }


def received_counts(keys: pa.Table) -> dict[str, str]:
    """The summary's account of the rows the checkpoint received (none where its keys do not
    say how many): the rows, their keys, and the keys it deleted."""
    received = received_rows(keys)
    if received is None:
        return {}
    deletes = keys.column(DELETED_FLAG) if DELETED_FLAG in keys.column_names else pa.array([], pa.bool_())
    return {
        RECEIVED_ROWS: str(received),
        CHECKPOINT_KEYS: str(len(keys)),
        DELETE_CHANGES: str(pc.sum(deletes).as_py() or 0),
    }


def _key_range(field: Any, column: pa.ChunkedArray) -> tuple[Any, Any, Any]:
    """(field, min, max) of a key column, as Iceberg's bounds hold them: dates as days,
    times and timestamps as microseconds (a datetime does not compare with a bound)."""
    kind = column.type
    if pa.types.is_timestamp(kind):
        column = column.cast(pa.timestamp("us", tz=kind.tz)).cast(pa.int64())
    elif pa.types.is_date(kind):
        column = column.cast(pa.date32()).cast(pa.int32())
    elif pa.types.is_time(kind):
        column = column.cast(pa.time64("us")).cast(pa.int64())
    low_high = pc.min_max(column)
    return field, low_high["min"].as_py(), low_high["max"].as_py()


def _partition_values(
    table: Table, keys: pa.Table, key_fields: dict[int, str]
) -> dict[int, list[tuple[int, set[Any]]]]:
    """Per partition spec: (position in the partition, the values the keys take there) for
    each bucket or truncate field of a key column. A file whose partition holds none of
    those values cannot hold a key, whatever its bounds say (a bucket's ids span the whole
    range of ids)."""
    schema = table.schema()
    found: dict[int, list[tuple[int, set[Any]]]] = {}
    for spec_id, spec in table.specs().items():
        for position, partition_field in enumerate(spec.fields):
            name = key_fields.get(partition_field.source_id)
            if name is None or not isinstance(partition_field.transform, (BucketTransform, TruncateTransform)):
                continue
            source = schema.find_field(partition_field.source_id).field_type
            values = partition_field.transform.pyarrow_transform(source)(keys.column(name))
            found.setdefault(spec_id, []).append((position, set(pc.unique(values).to_pylist())))
    return found


def _partition_may_hold(data_file: DataFile, values: dict[int, list[tuple[int, set[Any]]]]) -> bool:
    """Whether the file's partition (under its own spec) can hold a key (:func:`_partition_values`)."""
    return all(data_file.partition[position] in held for position, held in values.get(data_file.spec_id, ()))


def _may_hold(data_file: DataFile, ranges: Sequence[tuple[Any, Any, Any]]) -> bool:
    """Whether the file's key column bounds can hold a key of ``ranges`` (field, min, max)."""
    lower, upper = data_file.lower_bounds or {}, data_file.upper_bounds or {}
    for field, low, high in ranges:
        kind = field.field_type
        if not isinstance(kind, PrimitiveType) or field.field_id not in lower or field.field_id not in upper:
            continue
        try:
            if high < from_bytes(kind, lower[field.field_id]) or low > from_bytes(kind, upper[field.field_id]):
                return False
        except (TypeError, ValueError):  # a bound that does not compare: read the file
            continue
    return True


def _deleted_positions(table: Table, deletes: Sequence[DataFile], paths: set[str]) -> dict[str, set[int]]:
    """The positions earlier position delete files removed from the data files ``paths``."""
    removed: dict[str, set[int]] = defaultdict(set)
    for delete in deletes:
        only = single_target(delete)
        if only is not None and only not in paths:
            continue  # it references one data file, not one of these
        for path, positions in positions_by_path(table.io, delete.file_path).items():
            if path in paths:
                removed[path].update(positions)
    return removed


def write_position_deletes(
    table: Table, data_file: DataFile, positions: Sequence[int], *, job_id: str, checkpoint_id: int
) -> DataFile:
    """One position delete file for ``data_file`` (its path as the manifest spells it; rows
    sorted by position), in the table's data location, under the data file's spec and
    partition."""
    job = "".join(c if c.isalnum() or c in "-_" else "_" for c in job_id)[:64] or "job"
    name = f"{job}-{checkpoint_id:08d}-deletes-{uuid.uuid4().hex}.parquet"
    location = table.location_provider().new_data_location(name)
    path = data_file.file_path
    ordered = sorted(positions)
    rows = pa.table({"file_path": [path] * len(ordered), "pos": ordered}, schema=DELETE_SCHEMA)
    with table.io.new_output(location).create(overwrite=False) as stream:
        pq.write_table(rows, stream)
    delete = DataFile.from_args(
        _table_format_version=table.metadata.format_version,
        content=DataFileContent.POSITION_DELETES,
        file_path=location,
        file_format=FileFormat.PARQUET,
        partition=data_file.partition,
        record_count=len(positions),
        file_size_in_bytes=len(table.io.new_input(location)),
        value_counts={DELETE_FILE_PATH_ID: len(positions), DELETE_POS_ID: len(positions)},
        null_value_counts={DELETE_FILE_PATH_ID: 0, DELETE_POS_ID: 0},
        lower_bounds={
            DELETE_FILE_PATH_ID: to_bytes(StringType(), path),
            DELETE_POS_ID: to_bytes(LongType(), min(positions)),
        },
        upper_bounds={
            DELETE_FILE_PATH_ID: to_bytes(StringType(), path),
            DELETE_POS_ID: to_bytes(LongType(), max(positions)),
        },
    )
    delete.spec_id = data_file.spec_id
    return delete


__all__ = ["UpsertCheckpoint", "change_counts", "resolve_positions", "write_position_deletes"]
