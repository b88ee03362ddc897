"""Staging a checkpoint durably at prepare, and reading its staged file list back at commit."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyiceberg.manifest import DataFile
from pyiceberg.table import Table

from icecommit.catalog.data_file_keys import key_rows
from icecommit.committer import modes
from icecommit.committer.checkpoint_samples import capped_watermark, max_of, prepare_samples, routed_watermark
from icecommit.committer.completion import CompletionPublisher
from icecommit.committer.modes import WriteMode
from icecommit.committer.planning import CheckpointPlan
from icecommit.committer.validation import CheckpointFiles, require_files_present, size_mismatches
from icecommit.core import telemetry
from icecommit.core.completeness import micros
from icecommit.core.datafiles import WriteResult
from icecommit.core.decision import Action
from icecommit.core.errors import (
    CheckpointReusedError,
    DataFileMissingError,
    InvalidArgumentError,
    KeyViolationError,
    SchemaMismatchError,
    StagedManifestError,
    StagingError,
    ValidationError,
)
from icecommit.core.evolution import checkpoint_features, schema_changed_by
from icecommit.core.overwrite import sequence_number
from icecommit.core.tableprops import future_skew
from icecommit.core.upsert import DELETED_FLAG, key_columns, received_rows, with_received_rows
from icecommit.core.write_modes import APPEND
from icecommit.state.checkpoints import PREPARED, CheckpointState, CheckpointStore
from icecommit.state.database import state_errors
from icecommit.state.manifests import (
    read_staged_manifest,
    staged_keys_path,
    staged_manifest_path,
    to_data_file,
    write_staged_keys,
    write_staged_manifest,
)

logger = logging.getLogger(__name__)


def read_staged(state: CheckpointState, table: Table) -> list[DataFile]:
    """The data files of a prepared checkpoint's staged manifest.

    Raises:
        StagedManifestError: the manifest is gone or cannot be read (names it, and how to
            abandon the checkpoint).
        OSError: storage failed to answer (not a damaged manifest: the caller retries).
    """
    if state.manifest_path is None:
        return []  # an upsert that only deletes
    try:
        return read_staged_manifest(table.io, state.manifest_path, table.spec().spec_id)
    except FileNotFoundError as e:
        raise StagedManifestError(
            state.job_id, state.checkpoint_id, state.table_name, state.manifest_path, "is missing from storage"
        ) from e
    except OSError:
        raise
    except Exception as e:  # Avro decoding raises many kinds on a truncated or foreign file
        raise StagedManifestError(
            state.job_id,
            state.checkpoint_id,
            state.table_name,
            state.manifest_path,
            f"cannot be read ({type(e).__name__}: {e})",
        ) from e


def staged_paths(state: CheckpointState, table: Table) -> list[str]:
    """The data files a checkpoint staged ([] when its staged manifest is gone or
    unreadable: then its files cannot tell, and the decision does without them)."""
    if state.manifest_path is None or not table.io.new_input(state.manifest_path).exists():
        return []
    try:
        return [f.file_path for f in read_staged(state, table)]
    except StagedManifestError:
        return []


def stage_checkpoint(
    store: CheckpointStore,
    table: Table,
    validated: CheckpointFiles,
    results: Sequence[WriteResult],
    *,
    routed_with: Sequence[WriteResult],
    job_id: str,
    table_name: str,
    query_id: str | None,
    fault: Callable[[str, int], None],
    replacing: CheckpointState | None = None,
    mode: WriteMode | None = None,
    keys: pa.Table | None = None,
    gate: Mapping[str, str | None] | None = None,
) -> tuple[CheckpointState, bool]:
    """Stage a validated checkpoint durably: its files present on storage, its staged
    manifest written, then its ``prepared`` row (with its task attempts, metric samples and
    records per time partition) inserted in one transaction. Returns (row, inserted); not
    inserted means another process prepared it first.

    ``mode``: the write mode (None: append), recorded as the checkpoint's feature; the
    ``keys`` of a mode that stages them (an upsert's: every key its rows replace or delete)
    are staged beside its manifest.

    ``replacing``: the prepared row of the same checkpoint whose staged files were lost
    (:func:`lost_files`); it is replaced instead (a compare-and-set on that row: not
    inserted, and the row as it is now, when another process changed it first).

    Raises:
        DataFileMissingError: a data file is absent or not its recorded size.
        StagingError: storage failed while the manifest was written; nothing recorded.
        StateDatabaseError: the row could not be recorded; prepare again.
    """
    checkpoint_id = validated.checkpoint_id
    mode = mode or modes.MODES[APPEND]
    version = table.metadata.format_version
    if version < mode.min_format_version:
        raise InvalidArgumentError(
            "mode", mode.name, f"append: {table_name} is an Iceberg format version {version} table, which has no "
            f"sequence numbers to tell what an overwrite did not see, and no delete files (upgrade it to version "
            f"{mode.min_format_version})",
        )  # fmt: skip
    if mode.max_format_version is not None and version > mode.max_format_version:
        others = " or ".join(m for m in modes.MODES if m != mode.name and _writes(modes.MODES[m], version))
        raise InvalidArgumentError(
            "mode", mode.name, f"{others}: {table_name} is an Iceberg format version {version} table, where "
            f"{mode.newer_format}",
        )  # fmt: skip
    staged_keys = checked_keys(keys, table, table_name) if mode.stages_keys else None
    unknown = [r for r in results if r.data_files and r.base_sequence_number is None]
    if mode.needs_writers_table and unknown:  # what its writers saw decides what it may replace
        raise ValidationError(
            f"task {unknown[0].task_id}'s result does not say which table its writer was given (a writer of an older "
            f"icecommit): {mode.name!r} cannot tell what it did not see; write the checkpoint again",
            checkpoint_id=checkpoint_id,
        )
    require_files_present(validated.data_files, table.io, checkpoint_id)
    manifest_path = None
    if validated.data_files:
        manifest_path = staged_manifest_path(table, job_id, checkpoint_id)
        try:
            write_staged_manifest(table, manifest_path, validated.data_files)
        except OSError as e:  # a full disk, a lost connection: nothing recorded yet
            raise StagingError(checkpoint_id, manifest_path, e) from e
    keys_path = None
    if staged_keys is not None:
        flagged = flagged_deletes(table, staged_keys, [f.path for f in validated.data_files])
        received = received_rows(keys)
        staged_keys = flagged if received is None else with_received_rows(flagged, received)
    if staged_keys is not None and len(staged_keys):  # no rows and no keys: an empty checkpoint
        keys_path = staged_keys_path(table, job_id, checkpoint_id)
        try:
            write_staged_keys(table.io, keys_path, staged_keys)
        except OSError as e:
            raise StagingError(checkpoint_id, keys_path, e) from e
    fault("after-stage", checkpoint_id)
    skew = future_skew(table.metadata.properties)
    limit_us = micros(store.clock() + skew)
    watermark_us, future_records = capped_watermark(results, validated.max_event_time_us, limit_us)
    if routed_with:
        watermark_us = max_of(watermark_us, routed_watermark(routed_with, limit_us))
    if future_records:
        logger.warning(
            "checkpoint %d of job %s: %d row(s) lie more than %s ahead of the clock; they are committed, "
            "but do not move the watermark",
            checkpoint_id, job_id, future_records, skew,
        )  # fmt: skip
    row: dict[str, Any] = dict(
        manifest_path=manifest_path,
        files_digest=validated.digest,
        source_records=validated.source_records,
        records=validated.records,
        files=len(validated.data_files),
        bytes_=validated.bytes,
        max_event_time_us=validated.max_event_time_us,
        watermark_us=watermark_us,
        future_records=future_records,
        tasks=[(r.task_id, r.attempt) for r in results],
        samples=prepare_samples(results),
        partitions=CompletionPublisher.partition_records(table.metadata, validated.data_files),
        # the schema change or creation the checkpoint made before its tasks wrote, and its mode
        features=checkpoint_features(table.metadata.properties, job_id, checkpoint_id)
        + ((mode.feature,) if mode.feature is not None else ()),
        schema_id=schema_changed_by(table.metadata.properties, job_id, checkpoint_id),
        base_sequence_number=base_sequence_number(results, table),
        keys_path=keys_path,
    )
    if gate:  # where its checks sent it, recorded with it (a replaced row keeps the first decision)
        row["gate"] = gate
    with state_errors(store, "nothing was recorded: prepare it again"):
        if replacing is not None:
            replaced = store.replace_prepared(replacing, **{k: v for k, v in row.items() if k != "gate"})
            if replaced is None:
                now = store.get(job_id, table_name, checkpoint_id)
                assert now is not None  # a prepared row is never deleted
                return now, False
            logger.warning(
                "checkpoint %d of job %s: its staged files were lost; prepared again from %d new files "
                "(the old ones left are orphans for the sweep)",
                checkpoint_id, job_id, len(validated.data_files),
            )  # fmt: skip
            telemetry.record_written(table_name, job_id, files=len(validated.data_files), bytes_=validated.bytes,
                                     rows=validated.records)  # fmt: skip
            return replaced, True
        state, inserted = store.insert_prepared(
            job_id=job_id, table_name=table_name, checkpoint_id=checkpoint_id, query_id=query_id, **row
        )
    if inserted:
        telemetry.record_written(table_name, job_id, files=len(validated.data_files), bytes_=validated.bytes,
                                 rows=validated.records)  # fmt: skip
        logger.info(
            "prepared checkpoint %d of job %s: %d records in %d files",
            checkpoint_id, job_id, validated.records, len(validated.data_files),
        )  # fmt: skip
    return state, inserted


def same_files_or_error(
    existing: CheckpointState, digest: str, files: int, mode: WriteMode | None = None
) -> CheckpointState:
    """``existing`` when it staged the same files under the same mode (None: append; a
    repeated prepare is a no-op).

    Raises:
        CheckpointReusedError: the checkpoint id already holds other files.
        InvalidArgumentError: it was prepared under another write mode (a replay keeps it).
    """
    recorded = modes.of_state(existing).name
    asked = mode.name if mode is not None else APPEND
    if existing.files_digest == digest and recorded != asked:
        raise InvalidArgumentError(
            "mode", asked, f"{recorded!r}: checkpoint {existing.checkpoint_id} of job {existing.job_id} was prepared "
            f"as {recorded!r} (a replay commits it as it was prepared)",
        )  # fmt: skip
    if existing.files_digest == digest:
        logger.info("checkpoint %d of job %s is already %s", existing.checkpoint_id, existing.job_id, existing.status)
        return existing
    raise CheckpointReusedError(
        existing.job_id,
        existing.checkpoint_id,
        existing.table_name,
        status=existing.status,
        snapshot_id=existing.snapshot_id,
        staged=existing.files,
        offered=files,
    )


def lost_files(state: CheckpointState, table: Table) -> list[str]:
    """The staged data files of a prepared checkpoint that storage confirms absent (not
    found; a file of another size, or a storage error, is not a loss it can confirm), or
    its staged manifest's path when that is gone. [] when nothing is confirmed lost.

    Raises:
        OSError: storage failed to answer.
    """
    if state.status != PREPARED or state.manifest_path is None:
        return []
    try:
        staged = read_staged(state, table)
    except StagedManifestError:
        if table.io.new_input(state.manifest_path).exists():
            return []  # there but unreadable: damaged, not lost
        return [state.manifest_path]
    mismatched = size_mismatches([(f.file_path, f.file_size_in_bytes) for f in staged], table.io)
    return [path for path, size in mismatched if size is None]


def replays_lost(plan: CheckpointPlan, digest: str) -> bool:
    """Whether a prepare with the files of ``digest`` replays a checkpoint that was
    prepared, is not in the table, and whose staged files are confirmed lost: then it is
    prepared again from the replay's files."""
    state = plan.state
    return (
        state is not None
        and state.files_digest != digest
        and plan.action is Action.COMMIT
        and bool(lost_files(state, plan.table))
    )


@contextmanager
def waits_behind(checkpoint_id: int, asked_for: int) -> Iterator[None]:
    """Committing ``checkpoint_id`` on the way to ``asked_for``: a staged file it lost is
    reported as the asked-for checkpoint waiting behind it."""
    try:
        yield
    except DataFileMissingError as e:
        if checkpoint_id == asked_for:
            raise
        raise e.behind(asked_for) from e


def staged_files(validated: CheckpointFiles, table: Table) -> tuple[DataFile, ...]:
    """The data files of a checkpoint just staged, as its staged manifest holds them."""
    version = table.metadata.format_version
    return tuple(to_data_file(record, version) for record in validated.data_files)


def base_sequence_number(results: Sequence[WriteResult], table: Table) -> int:
    """The table's last sequence number when the checkpoint's writers were given it (the
    lowest any of them reports); the table's at prepare where none reports one (a writer
    of an older version, or no task at all)."""
    seen = [r.base_sequence_number for r in results if r.base_sequence_number is not None]
    return min(seen) if seen else sequence_number(table.metadata)


def checked_keys(keys: pa.Table | None, table: Table, name: str) -> pa.Table:
    """An upsert's keys, as they are staged: the key columns in the table's types, one row
    per key (a key given twice is one key).

    Raises:
        InvalidArgumentError: no keys given.
        SchemaMismatchError: a key column the table lacks, or a value that does not fit its type.
        KeyViolationError: a null key.
    """
    if not isinstance(keys, pa.Table):
        raise InvalidArgumentError(
            "keys", keys, "a pyarrow Table of the key columns of every row the upsert writes or deletes"
        )
    schema = table.schema()
    names = key_columns(keys.column_names, schema, name)
    types = schema_to_pyarrow(schema.select(*names))
    columns = []
    for column in names:
        target = types.field(column).type
        try:
            columns.append(keys.column(column).cast(target))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise SchemaMismatchError(column, f"key values of type {keys.column(column).type} do not fit the "
                                      f"column's type {target}: {e}", table=name) from None  # fmt: skip
    typed = pa.table(columns, names=list(names))
    nulls = sum(c.null_count for c in typed.columns) and len(typed) - len(typed.drop_null())
    if nulls:
        raise KeyViolationError(names, "null", nulls, None, table=name)
    return typed.group_by(list(names)).aggregate([]).combine_chunks() if len(typed) else typed


def flagged_deletes(table: Table, keys: pa.Table, paths: Sequence[str]) -> pa.Table:
    """The keys an upsert stages: ``keys`` and the keys of its own rows (the data files at
    ``paths``; a row whose key the caller left out still replaces its key's live rows),
    with the column that marks the ones it deletes (none of its own rows holds them)."""
    names = keys.column_names
    schema = table.schema()
    fields = [schema.find_field(name) for name in names]
    types = schema_to_pyarrow(schema.select(*names))
    own = [
        rows.select(names)
        for path in paths
        if (rows := key_rows(table.metadata, table.io, path, fields, types)) is not None
    ]
    written = pa.concat_tables(own).group_by(names).aggregate([]) if own else keys.slice(0, 0)
    every = pa.concat_tables([keys, written.cast(keys.schema)]).group_by(names).aggregate([])
    indexed = every.append_column("__i", pa.array(range(len(every)), pa.int64()))
    kept = indexed.join(written, keys=names, join_type="left semi").column("__i")
    return every.append_column(
        DELETED_FLAG, pc.invert(pc.is_in(indexed.column("__i"), value_set=kept.combine_chunks()))
    )


def _writes(mode: WriteMode, version: int) -> bool:
    """Whether ``mode`` writes to a table of format ``version``."""
    return mode.min_format_version <= version and (
        mode.max_format_version is None or version <= mode.max_format_version
    )
