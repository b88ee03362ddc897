"""An upsert's rows, made ready on Spark before any task writes: one row per key, the keys
of every row (the ones a change column deletes included), refused with a named error when
the rows break the key (:mod:`icecommit.core.upsert`). The change column and the
``order_by`` columns the table does not have are used, not stored."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyiceberg.table import Table
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from icecommit.core.errors import ChangeTypeError, KeyViolationError, SchemaMismatchError
from icecommit.core.upsert import DELETE_TYPES, UPSERT_TYPES, key_columns, with_received_rows

_RANK = "__icecommit_rank"


@dataclass(frozen=True)
class Changes:
    """What an upsert checkpoint writes (``rows``: one per key, change column left out)
    and the keys it replaces or deletes (``keys``: Arrow, one row per key)."""

    rows: DataFrame
    keys: pa.Table
    key: tuple[str, ...]
    #: the rows the upsert received: per key, one is written or deletes it, and the others
    #: are superseded in the checkpoint by a later row of their key
    received: int


def upsert_changes(
    df: DataFrame,
    table: Table,
    *,
    key: Sequence[str] | None,
    change_column: str | None,
    order_by: Sequence[str],
    name: str,
) -> Changes:
    """The rows and keys of an upsert of ``df`` into ``table`` (see the module).

    Raises:
        InvalidArgumentError: no key (``key=`` nor the table's identifier fields).
        SchemaMismatchError: a key, change or order column the DataFrame lacks.
        KeyViolationError: a null key; several rows of one key without ``order_by``, or
            with equal ``order_by`` values.
        ChangeTypeError: a change type that is none of c, r, u, d.
    """
    names = key_columns(key, table.schema(), name)
    for column, role in [*((k, "a key column") for k in names), *((c, "an order_by column") for c in order_by),
                         *(((change_column, "the change column"),) if change_column else ())]:  # fmt: skip
        if column not in df.columns:
            raise SchemaMismatchError(column, f"is {role} of the upsert, but not a column of the DataFrame", table=name)
    # one pass over the rows for every count the checks need, and the rows received
    kinds = (*UPSERT_TYPES, *DELETE_TYPES)
    null_key = F.greatest(*[F.col(k).isNull() for k in names]) if len(names) > 1 else F.col(names[0]).isNull()
    change = F.lower(F.col(change_column)) if change_column is not None else None
    bad_change = (change.isNull() | ~change.isin(*kinds)) if change is not None else F.lit(False)
    counted = df.agg(
        F.count(F.lit(1)).alias("received"),
        F.count_if(null_key).alias("null_keys"),
        F.count_if(bad_change).alias("bad_changes"),
        *[F.count_if(F.col(c).isNull()).alias(f"unordered{i}") for i, c in enumerate(order_by)],
    ).first()
    assert counted is not None
    nulls = int(counted["null_keys"])
    if nulls:
        raise KeyViolationError(names, "null", nulls, None, table=name)
    wrong = int(counted["bad_changes"])
    if wrong:
        assert change_column is not None
        raise ChangeTypeError(change_column, df.filter(bad_change).first()[change_column], wrong, table=name)  # type: ignore[index]
    if order_by:
        for i, column in enumerate(order_by):  # a null orders nowhere: which row wins would be an accident
            unordered = int(counted[f"unordered{i}"])
            if unordered:
                raise SchemaMismatchError(column, f"is an order_by column of the upsert and holds nulls in "
                                          f"{unordered:,} row(s); order_by= cannot order them", table=name)  # fmt: skip
        window = Window.partitionBy(*names).orderBy(*[F.col(c).desc() for c in order_by])
        latest = df.withColumn(_RANK, F.rank().over(window)).filter(F.col(_RANK) == 1).drop(_RANK)
    else:
        latest = df
    repeated = latest.groupBy(*names).count().filter(F.col("count") > 1)
    duplicates = repeated.count()
    if duplicates:
        sample = repeated.first()
        assert sample is not None
        kind = "tie" if order_by else "duplicate"
        raise KeyViolationError(names, kind, duplicates, {k: sample[k] for k in names}, table=name)
    rows = latest
    if change_column is not None:
        rows = latest.filter(F.lower(F.col(change_column)).isin(*UPSERT_TYPES)).drop(change_column)
    # an order_by column orders the rows of a key; it is stored only where the table has it
    stored = {c.lower() for c in table.schema().column_names}
    unstored = [c for c in order_by if c.lower() not in stored and c != change_column]
    if unstored:
        rows = rows.drop(*unstored)
    received = int(counted["received"])
    return Changes(rows, with_received_rows(collect_arrow(latest.select(*names)), received), names, received)


def collect_arrow(df: DataFrame) -> pa.Table:
    """``df`` on the driver as an Arrow table (Spark 4's ``toArrow``; Spark 3.5's batches)."""
    if hasattr(type(df), "toArrow"):
        return df.toArrow()
    from pyspark.sql.pandas.types import to_arrow_schema

    schema = to_arrow_schema(df.schema)
    batches = df._collect_as_arrow()  # type: ignore[operator]  # Spark 3.5 has no toArrow
    # the JVM's batches carry the session's time zone: cast, as Spark 4's toArrow does
    return pa.Table.from_batches(batches).cast(schema) if batches else schema.empty_table()


__all__ = ["Changes", "collect_arrow", "upsert_changes"]
