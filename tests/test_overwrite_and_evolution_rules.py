"""Two rules that a lost reply or an older partition spec exercise, each held by a test a
one-character change would fail (issue 52's hand-made mutants, which survived the suite):

- a partition overwrite under a newer spec places a file of an older spec in one partition
  only when the file's statistics say every row lies there: a source column that holds a
  single value beside nulls spans two partitions (the value's, and null's);
- the look-up after a schema change's lost reply says it landed only when none of its
  changes are left to make."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.conversions import to_bytes
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.typedef import Record
from pyiceberg.types import LongType, NestedField, StringType, StructType

import icecommit as ic
from icecommit.committer.schema_change import EvolveSchema
from icecommit.core.evolution import ADD_COLUMNS
from icecommit.core.overwrite import may_hold, partition_under

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "region", StringType(), required=False),
)
OLD = PartitionSpec(spec_id=0)  # unpartitioned
NEW = PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "region"), spec_id=1)
SPECS = {0: OLD, 1: NEW}


def _old_file(rows: int, nulls: int, value: str | None) -> DataFile:
    """A data file of the unpartitioned spec whose ``region`` holds ``nulls`` nulls and, in
    its other rows, only ``value``."""
    bounds = {2: to_bytes(StringType(), value)} if value is not None else {}
    data_file = DataFile.from_args(
        _table_format_version=2, content=DataFileContent.DATA, file_path="/w/old.parquet",
        file_format=FileFormat.PARQUET, partition=Record(), record_count=rows, file_size_in_bytes=100,
        value_counts={1: rows, 2: rows}, null_value_counts={1: 0, 2: nulls}, nan_value_counts={},
        lower_bounds=bounds, upper_bounds=bounds,
    )  # fmt: skip
    data_file.spec_id = 0
    return data_file


@pytest.mark.parametrize("rows", [2, 3, 10])
def test_a_file_with_one_value_beside_nulls_spans_two_partitions(rows: int) -> None:
    mixed = _old_file(rows, nulls=rows - 1, value="eu")  # one row in 'eu', the rest null
    assert partition_under(mixed, SPECS, SCHEMA, NEW) is None  # not all in one partition
    assert may_hold(mixed, SPECS, SCHEMA, NEW, [("eu",)]) == ("eu",)  # an overwrite of 'eu' takes it
    assert may_hold(mixed, SPECS, SCHEMA, NEW, [(None,)]) == (None,)  # and so does one of null's


def test_a_file_all_null_or_all_one_value_lies_in_one_partition() -> None:
    assert partition_under(_old_file(4, nulls=4, value=None), SPECS, SCHEMA, NEW) == (None,)
    assert partition_under(_old_file(4, nulls=0, value="eu"), SPECS, SCHEMA, NEW) == ("eu",)
    assert may_hold(_old_file(4, nulls=4, value=None), SPECS, SCHEMA, NEW, [("eu",)]) is None


def test_a_schema_change_is_found_landed_only_when_none_of_its_changes_are_left(tmp_path: Path) -> None:
    catalog = ic.connect(uri=f"sqlite:///{tmp_path / 'catalog.db'}", warehouse=str(tmp_path))
    ic.create_table(catalog, "ns.t", pa.schema([pa.field("id", pa.int64(), nullable=False)]))
    incoming = StructType(
        NestedField(1, "id", LongType(), required=True),
        NestedField(2, "note", StringType(), required=False),
        NestedField(3, "kind", StringType(), required=False),
    )

    def change() -> EvolveSchema:
        return EvolveSchema("ns.t", job_id="j", checkpoint_id=1, incoming=incoming, mode=ADD_COLUMNS)

    table = catalog.load_table("ns.t")
    assert change().find(table) is None  # both columns left: not landed
    with table.update_schema() as update:  # another writer added one of the two
        update.add_column("note", StringType())
    assert change().find(catalog.load_table("ns.t")) is None  # one change left: still not landed
    with catalog.load_table("ns.t").update_schema() as update:
        update.add_column("kind", StringType())
    assert change().find(catalog.load_table("ns.t")) is not None  # nothing left: it is there
    catalog.engine.dispose()  # type: ignore[attr-defined]
