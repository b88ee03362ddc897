"""Writing the rows a commit deletes by position as the table's format version takes them:
one position delete file per data file (format version 2)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.conversions import to_bytes
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.table import Table
from pyiceberg.types import LongType, StringType

from icecommit.committer.table_changes import RowDeletes
from icecommit.core.upsert import DELETE_FILE_PATH_ID, DELETE_POS_ID

_FIELD_ID = b"PARQUET:field_id"
#: The Arrow schema of a position delete file (Iceberg's reserved field ids).
DELETE_SCHEMA = pa.schema(
    [
        pa.field("file_path", pa.string(), nullable=False, metadata={_FIELD_ID: str(DELETE_FILE_PATH_ID)}),
        pa.field("pos", pa.int64(), nullable=False, metadata={_FIELD_ID: str(DELETE_POS_ID)}),
    ]
)


def write_row_deletes(
    table: Table, deletes: Sequence[RowDeletes], *, job_id: str, checkpoint_id: int
) -> tuple[DataFile, ...]:
    """The delete files of ``deletes``, written into the table's data location."""
    return tuple(
        write_position_deletes(table, d.data_file, d.positions, job_id=job_id, checkpoint_id=checkpoint_id)
        for d in deletes
    )


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


__all__ = ["DELETE_SCHEMA", "write_position_deletes", "write_row_deletes"]
