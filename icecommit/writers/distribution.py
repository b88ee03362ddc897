"""How rows reach the writer tasks: the distribution step before them.

Without one (``none``) every task writes a file for every partition value it sees, so a
checkpoint of T tasks into P partitions makes up to T x P files, most of them small.

- ``hash``: one shuffle on the partition values, so all rows of a partition value reach
  one task (Apache Iceberg's Spark writer does this by default for partitioned tables). A
  skewed partition makes one task, and its files, large; small ones still make one small
  file each.
- ``bin-pack``: one shuffle that packs partitions onto tasks by size: Spark's ``rebalance``
  under adaptive query execution, with the advisory partition size set from the table's
  target file size and the ratio of shuffle bytes to Parquet bytes this table showed in
  earlier writes (kept in icecommit's state). Small partitions are coalesced onto one task,
  a large one is split across several (at the boundaries of the input's map outputs).

Both read the input once: the shuffle runs after the scan, in the same Spark job. Keys
are Spark expressions that group rows exactly as the table's partition transforms do
(identity, year, month, day, hour and truncate); ``bucket(N, col)`` is keyed by ``col``
itself, so the rows of one value go together, and those of one bucket at most to as many
tasks as the bucket has values (Spark has no Iceberg bucket function here).
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Callable, Iterator, Sequence

from pyiceberg.partitioning import PartitionField
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.transforms import (
    DayTransform,
    HourTransform,
    IdentityTransform,
    MonthTransform,
    TruncateTransform,
    VoidTransform,
    YearTransform,
)
from pyiceberg.types import (
    DateType,
    IntegerType,
    LongType,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
)
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from icecommit.core.errors import InvalidArgumentError
from icecommit.core.tableprops import DISTRIBUTION_PROPERTY, distribution_property

logger = logging.getLogger(__name__)

MODES = ("none", "hash", "bin-pack")
#: Shuffle partitions a bin-packed write hashes into before adaptive execution packs them.
BIN_PACK_SHUFFLE_PARTITIONS = 1024
#: Shuffle bytes per Parquet byte assumed before a table has shown its own.
DEFAULT_SHUFFLE_RATIO = 2.0
#: Aim a little under the target: a task given slightly more than one file's worth would
#: otherwise close a full file and a sliver.
_AIM = 0.9
_US_PER_HOUR = 3_600_000_000
_US_PER_DAY = 86_400_000_000


def distribution_mode(metadata: TableMetadata, requested: object = None) -> str:
    """The mode a write uses: ``requested``, else the table's ``write.distribution-mode``,
    else ``hash`` for a partitioned table and ``none`` for an unpartitioned one (as Apache
    Iceberg's Spark writer). Iceberg's ``range`` is taken as ``hash`` (a range needs a
    sample, a second pass over the input).

    Raises:
        InvalidArgumentError: an unknown mode, given or in the property.
    """
    if requested is not None:
        if requested not in MODES:
            raise InvalidArgumentError("distribution", requested, "none, hash or bin-pack (None: the table's)")
        return str(requested)
    mode = distribution_property(dict(metadata.properties))
    if mode is None:
        partitioned = any(not isinstance(f.transform, VoidTransform) for f in metadata.spec().fields)
        return "hash" if partitioned else "none"
    return "hash" if mode == "range" else mode


def quoted_path(path: Sequence[str]) -> str:
    """A column path for ``F.col``: every name quoted, so dots and backticks in names stay."""
    return ".".join(f"`{part.replace('`', '``')}`" for part in path)


def field_path(struct: StructType, field_id: int) -> list[str] | None:
    """The names from the top-level column down to the field with ``field_id`` (a name may
    itself hold a dot), None when no struct field has that id."""
    for child in struct.fields:
        if child.field_id == field_id:
            return [child.name]
        if isinstance(child.field_type, StructType):
            below = field_path(child.field_type, field_id)
            if below is not None:
                return [child.name, *below]
    return None


def _by_path(path: list[str]) -> Column:
    return F.col(quoted_path(path))


def partition_keys(metadata: TableMetadata, column: Callable[[list[str]], Column] = _by_path) -> list[Column]:
    """Spark expressions that group rows exactly as the table's current partition spec does
    (``bucket`` by its source column); ``column`` finds a source column by its path of names."""
    schema = metadata.schema()
    keys = []
    for field in metadata.spec().fields:
        key = _key(field, schema, column)
        if key is not None:
            keys.append(key)
    return keys


def _key(field: PartitionField, schema: Schema, resolve: Callable[[list[str]], Column]) -> Column | None:
    transform = field.transform
    if isinstance(transform, VoidTransform):
        return None
    path = field_path(schema.as_struct(), field.source_id)
    if path is None:
        return None
    column = resolve(path)
    source = schema.find_field(field.source_id).field_type
    if isinstance(transform, IdentityTransform):
        return column
    if isinstance(transform, (YearTransform, MonthTransform, DayTransform, HourTransform)):
        return _time_key(column, source, transform)
    if isinstance(transform, TruncateTransform):
        if isinstance(source, StringType):
            return F.substring(column, 1, transform.width)
        if isinstance(source, (IntegerType, LongType)):
            return column - F.pmod(column, F.lit(transform.width))
    return column  # bucket, and truncate of decimals or binaries: by the value itself


def _time_key(column: Column, source: object, transform: object) -> Column:
    """The time partition of a value, computed without the session's time zone: a
    ``timestamptz`` (Spark TIMESTAMP) by its UTC micros, a ``timestamp`` (Spark
    TIMESTAMP_NTZ) and a ``date`` by their wall-clock fields."""
    if isinstance(source, TimestamptzType):
        micros = F.unix_micros(column)
        if isinstance(transform, HourTransform):
            return F.floor(micros / _US_PER_HOUR)
        day = F.floor(micros / _US_PER_DAY)
        if isinstance(transform, DayTransform):
            return day
        date = F.date_from_unix_date(day.cast("int"))
    elif isinstance(source, TimestampType):
        if isinstance(transform, HourTransform):
            return F.date_trunc("HOUR", column)
        date = F.to_date(column)
        if isinstance(transform, DayTransform):
            return date
    elif isinstance(source, DateType):
        date = column
        if isinstance(transform, DayTransform):
            return date
    else:
        return column
    if isinstance(transform, MonthTransform):
        return F.year(date) * 12 + F.month(date)
    return F.year(date)


def advisory_bytes(target_file_size: int, shuffle_ratio: float | None) -> int:
    """The shuffle bytes per task that make files near ``target_file_size``."""
    ratio = shuffle_ratio if shuffle_ratio and shuffle_ratio > 0 else DEFAULT_SHUFFLE_RATIO
    return max(1 << 20, int(target_file_size * ratio * _AIM))


@contextlib.contextmanager
def distributed(df: DataFrame, keys: list[Column], mode: str) -> Iterator[DataFrame]:
    """``df`` with the distribution step of ``mode`` over ``keys`` (nothing for ``none``),
    for the Spark jobs run inside. ``bin-pack`` goes through SQL's ``REBALANCE`` hint on a
    temporary view (pyspark 3.5's ``DataFrame.hint`` takes no columns), dropped on exit."""
    if mode == "none":
        yield df
        return
    if mode == "hash":
        yield df.repartition(*keys) if keys else df
        return
    names = [f"_icecommit_key{i}" for i in range(len(keys))]
    keyed = df.withColumns(dict(zip(names, keys, strict=True))) if keys else df
    view = f"icecommit_rebalance_{uuid.uuid4().hex}"
    keyed.createOrReplaceTempView(view)
    session = df.sparkSession
    try:
        hint = f"REBALANCE({', '.join(names)})" if names else "REBALANCE"  # no keys: even out the tasks
        rebalanced = session.sql(f"SELECT /*+ {hint} */ * FROM {view}")
        yield rebalanced.drop(*names) if names else rebalanced
    finally:
        session.catalog.dropTempView(view)


@contextlib.contextmanager
def bin_packing(session: SparkSession, advisory: int) -> Iterator[None]:
    """Spark's adaptive execution set to pack shuffle partitions to ``advisory`` bytes for
    the jobs run inside (and restored afterwards)."""
    settings = {
        "spark.sql.adaptive.enabled": "true",
        "spark.sql.adaptive.advisoryPartitionSizeInBytes": str(advisory),
        # pack to the advisory size rather than to as many tasks as there are cores
        "spark.sql.adaptive.coalescePartitions.parallelismFirst": "false",
        # hash into many shuffle partitions, so that partitions are packed and split one by
        # one (adaptive execution coalesces the empty and the small ones back)
        "spark.sql.adaptive.coalescePartitions.initialPartitionNum": str(BIN_PACK_SHUFFLE_PARTITIONS),
    }
    before = {key: session.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        session.conf.set(key, value)
    try:
        yield
    finally:
        for key, previous in before.items():
            if previous is None:
                session.conf.unset(key)
            else:
                session.conf.set(key, previous)


def learned_ratio(task_bytes: Sequence[int], advisory: int, ratio: float | None) -> float | None:
    """The shuffle-to-Parquet ratio a bin-packed write showed: each task was given about
    ``advisory`` shuffle bytes, except the last of a coalesced run and the parts of small
    partitions, so the fuller half of the tasks tells what ``advisory`` bytes became. None
    when it tells nothing (fewer than two tasks, or nothing written); the change from the
    ratio used is damped (halfway, at most 4x either way)."""
    written = sorted(b for b in task_bytes if b > 0)
    if len(written) < 2:
        return None
    fuller = written[len(written) // 2 :]
    typical = fuller[len(fuller) // 2]
    used = ratio if ratio and ratio > 0 else DEFAULT_SHUFFLE_RATIO
    shown = min(max(advisory / typical, used / 4), used * 4)
    return float((used * shown) ** 0.5)


__all__ = [
    "DEFAULT_SHUFFLE_RATIO",
    "DISTRIBUTION_PROPERTY",
    "MODES",
    "advisory_bytes",
    "bin_packing",
    "distributed",
    "distribution_mode",
    "learned_ratio",
    "partition_keys",
]
