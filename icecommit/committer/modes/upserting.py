"""``upsert``: the checkpoint's data files join the table and the live rows of every key it
writes or deletes are deleted by position, in one snapshot (the rules are
:mod:`icecommit.core.upsert`'s).

On the head an attempt runs on, the checkpoint's staged keys are resolved to the positions
of the live rows that hold them (reading only the data files whose key column bounds or
partition can hold one, and leaving out positions earlier delete files removed). The
compare-and-swap requires that head, so the rows deleted are exactly the live rows of
those keys when the snapshot lands: a concurrent append, compaction, rollback or upsert
makes the attempt lose its compare-and-swap, and the next attempt resolves the keys again
on the table as it is then. It needs no conflict validator for that reason.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.conversions import from_bytes
from pyiceberg.manifest import DataFile, DataFileContent
from pyiceberg.table import Table
from pyiceberg.transforms import BucketTransform, TruncateTransform
from pyiceberg.types import PrimitiveType

from icecommit.catalog.data_file_keys import look_up_here
from icecommit.catalog.position_deletes import positions_by_path
from icecommit.committer.modes.planner import CheckpointBase, Planner
from icecommit.committer.table_changes import RowDeletes, TableChanges
from icecommit.committer.validators import live_files
from icecommit.core import ancestry
from icecommit.core.deletes import single_target
from icecommit.core.errors import EqualityDeletesError, StagedManifestError, ValidationError
from icecommit.core.key_lookup import KeyLookup
from icecommit.core.upsert import (
    CHECKPOINT_KEYS,
    DELETE_CHANGES,
    DELETED_FLAG,
    DELETED_KEYS,
    DELETED_ROWS,
    INSERTED_KEYS,
    RECEIVED_ROWS,
    UPDATED_KEYS,
    UPSERT,
    received_rows,
)
from icecommit.core.write_modes import WRITE_MODE_PROPERTY
from icecommit.state.manifests import read_staged_keys

logger = logging.getLogger(__name__)


class UpsertPlanner(Planner):
    """Plans an upsert whose keys were staged at ``keys_path`` (see the module); its keys
    are looked up by ``lookup`` (in this process, or Spark tasks)."""

    def __init__(self, keys_path: str, lookup: KeyLookup = look_up_here) -> None:
        self._keys_path = keys_path
        self._lookup = lookup
        self._keys: pa.Table | None = None  # the staged keys, read once (they never change)

    def plan(self, head: Table, base: CheckpointBase) -> TableChanges:
        """Raises:
        ValidationError: committing it now could put older rows of its keys over newer
            ones (a rolled-back upsert a later checkpoint followed; another job's take-over
            of an upsert after that job wrote).
        StagedManifestError: its staged keys are gone.
        EqualityDeletesError: the head holds equality delete files.
        """
        highest = base.highest_committed
        if base.recommit and highest is not None and highest > base.checkpoint_id:
            raise ValidationError(
                f"checkpoint {base.checkpoint_id} of job {base.job_id!r} is an upsert, and checkpoint {highest} of "
                "the job landed after the rollback removed it: committing it again would put older rows of its keys "
                "over newer ones, so nothing was committed; replay its changes from the source as a new checkpoint",
                checkpoint_id=base.checkpoint_id,
            )
        taker = base.summary.get(ancestry.RECOVERED_BY)
        if taker is not None:  # another job's take-over: never over rows that job wrote since
            _refuse_after(head, base, taker)
        keys = self._staged_keys(head, base)
        hits = resolve_positions(
            head, keys, branch=base.branch, job_id=base.job_id, checkpoint_id=base.checkpoint_id,
            table_name=base.table_name, lookup=self._lookup,
        )  # fmt: skip
        deletes = tuple(RowDeletes(data_file, tuple(sorted(positions))) for data_file, positions, _ in hits)
        return base.changes(
            row_deletes=deletes,
            summary={
                WRITE_MODE_PROPERTY: UPSERT,
                DELETED_ROWS: str(sum(len(d.positions) for d in deletes)),
                **change_counts(keys, [found for _, _, found in hits]),
                **received_counts(keys),
            },
        )

    def _staged_keys(self, head: Table, base: CheckpointBase) -> pa.Table:
        if self._keys is None:
            try:
                self._keys = read_staged_keys(head.io, self._keys_path)
            except FileNotFoundError as e:
                raise StagedManifestError(
                    base.job_id, base.checkpoint_id, base.table_name, self._keys_path, "(its staged keys) is missing"
                ) from e
        return self._keys


def _refuse_after(head: Table, base: CheckpointBase, taker: str) -> None:
    """Refuse a take-over when job ``taker`` committed after the upsert's writers' table."""
    for snapshot in ancestry.branch_ancestry(head.metadata, base.branch):
        if snapshot.sequence_number is None or snapshot.sequence_number <= base.sequence_number:
            return
        found = ancestry.checkpoint_of(snapshot)
        if found is not None and found[0] == taker:
            raise ValidationError(
                f"checkpoint {base.checkpoint_id} of job {base.job_id!r} is an upsert its writers computed before "
                f"checkpoint {found[1]} of job {taker!r} landed (snapshot {snapshot.snapshot_id}): taking it over "
                "now could put older rows of its keys over newer ones, so nothing was committed; abandon it "
                "and replay its changes from the source",
                checkpoint_id=base.checkpoint_id,
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
    if ancestry.branch_head(table.metadata, branch) is None or len(keys) == 0:
        return []
    schema = table.schema()
    names = [c for c in keys.column_names if c != DELETED_FLAG]
    fields = [schema.find_field(name) for name in names]
    data_files: list[DataFile] = []
    position_deletes: list[DataFile] = []
    for live in live_files(table, branch):
        found = live.data_file
        if not live.is_delete:
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


__all__ = ["UpsertPlanner", "change_counts", "received_counts", "resolve_positions"]
