"""Fitting a Spark DataFrame to an Iceberg schema, or refusing it with the column named.

Timestamps are mapped deliberately: Spark ``TIMESTAMP`` (an instant) goes to Iceberg
``timestamptz`` and Spark ``TIMESTAMP_NTZ`` (a wall-clock value) to Iceberg ``timestamp``,
both at microsecond precision. Crossing the two would silently shift values by the
session time zone, so it is refused with a hint.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator

from pyiceberg.schema import Schema
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IcebergType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
)
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from icecommit.core.errors import SchemaMismatchError

_INTEGRAL = (T.ByteType, T.ShortType, T.IntegerType)


def spark_type(iceberg_type: IcebergType, path: str, table: str) -> T.DataType:
    """The Spark type that carries an Iceberg type exactly."""
    simple: list[tuple[type, T.DataType]] = [
        (BooleanType, T.BooleanType()),
        (IntegerType, T.IntegerType()),
        (LongType, T.LongType()),
        (FloatType, T.FloatType()),
        (DoubleType, T.DoubleType()),
        (DateType, T.DateType()),
        (TimestampType, T.TimestampNTZType()),
        (TimestamptzType, T.TimestampType()),
        (StringType, T.StringType()),
        (BinaryType, T.BinaryType()),
        (FixedType, T.BinaryType()),
    ]
    for iceberg_cls, spark in simple:
        if isinstance(iceberg_type, iceberg_cls):
            return spark
    if isinstance(iceberg_type, DecimalType):
        return T.DecimalType(iceberg_type.precision, iceberg_type.scale)
    # Nested fields are carried as nullable: Spark cannot cast a nullable field to a NOT
    # NULL one, so a required nested field would refuse every DataFrame. Its nulls are
    # found by the task writer instead, which refuses them naming the field.
    if isinstance(iceberg_type, StructType):
        return T.StructType(
            [
                T.StructField(f.name, spark_type(f.field_type, f"{path}.{f.name}", table), True)
                for f in iceberg_type.fields
            ]
        )
    if isinstance(iceberg_type, ListType):
        return T.ArrayType(spark_type(iceberg_type.element_type, f"{path}.element", table), True)
    if isinstance(iceberg_type, MapType):
        return T.MapType(
            spark_type(iceberg_type.key_type, f"{path}.key", table),
            spark_type(iceberg_type.value_type, f"{path}.value", table),
            True,
        )
    raise SchemaMismatchError(path, f"Iceberg type {iceberg_type} is not supported by the Spark writer", table=table)


def iceberg_struct(spark: T.StructType, table: str, *, known: Collection[str] = ()) -> StructType:
    """The Iceberg type of rows of ``spark``, for planning a schema change (its field ids
    are placeholders: the catalog's commit assigns the real ones). Spark ``TIMESTAMP`` is
    ``timestamptz`` and ``TIMESTAMP_NTZ`` is ``timestamp``; byte and short are int.

    A column of no type (Spark's ``NullType``, a literal null) fits any column the table
    has (``known``) and is left out; one the table lacks cannot be added.

    Raises:
        SchemaMismatchError: a type Iceberg cannot hold, or an untyped column to add.
    """
    ids = iter(range(1, 1 << 30))
    fields = []
    for f in spark.fields:
        if isinstance(f.dataType, T.NullType):
            if f.name in known:
                continue
            raise SchemaMismatchError(
                f.name, "has no type (a literal null): cast it to the type the new column should have", table=table
            )
        fields.append(NestedField(next(ids), f.name, _iceberg(f.dataType, f.name, table, ids), required=False))
    return StructType(*fields)


def _iceberg(spark: T.DataType, path: str, table: str, ids: Iterator[int]) -> IcebergType:
    simple: list[tuple[tuple[type, ...], IcebergType]] = [
        ((T.BooleanType,), BooleanType()),
        (_INTEGRAL, IntegerType()),
        ((T.LongType,), LongType()),
        ((T.FloatType,), FloatType()),
        ((T.DoubleType,), DoubleType()),
        ((T.DateType,), DateType()),
        ((T.TimestampNTZType,), TimestampType()),
        ((T.TimestampType,), TimestamptzType()),
        ((T.StringType, T.VarcharType, T.CharType), StringType()),
        ((T.BinaryType,), BinaryType()),
    ]
    for spark_classes, iceberg in simple:
        if isinstance(spark, spark_classes):
            return iceberg
    if isinstance(spark, T.DecimalType):
        return DecimalType(spark.precision, spark.scale)
    if isinstance(spark, T.StructType):
        return StructType(
            *(
                NestedField(next(ids), f.name, _iceberg(f.dataType, f"{path}.{f.name}", table, ids), required=False)
                for f in spark.fields
            )
        )
    if isinstance(spark, T.ArrayType):
        element = _iceberg(spark.elementType, f"{path}.element", table, ids)
        return ListType(next(ids), element, element_required=False)
    if isinstance(spark, T.MapType):
        key = _iceberg(spark.keyType, f"{path}.key", table, ids)
        value = _iceberg(spark.valueType, f"{path}.value", table, ids)
        return MapType(next(ids), key, next(ids), value, value_required=False)
    raise SchemaMismatchError(path, f"Spark type {spark.simpleString()} has no Iceberg type to add it as", table=table)


def _check(source: T.DataType, target: IcebergType, path: str, table: str) -> None:
    """Raise unless values of ``source`` can be written to ``target`` without loss."""
    if isinstance(source, T.NullType):
        return
    if isinstance(target, StructType):
        if not isinstance(source, T.StructType):
            raise _incompatible(source, target, path, table)
        _check_struct(source, target.fields, path, table)
        return
    if isinstance(target, ListType):
        if not isinstance(source, T.ArrayType):
            raise _incompatible(source, target, path, table)
        _check(source.elementType, target.element_type, f"{path}.element", table)
        return
    if isinstance(target, MapType):
        if not isinstance(source, T.MapType):
            raise _incompatible(source, target, path, table)
        _check(source.keyType, target.key_type, f"{path}.key", table)
        _check(source.valueType, target.value_type, f"{path}.value", table)
        return
    if isinstance(target, TimestamptzType) and isinstance(source, T.TimestampNTZType):
        raise SchemaMismatchError(
            path,
            "Spark TIMESTAMP_NTZ cannot be written to Iceberg timestamptz without a time zone; "
            "cast it to TIMESTAMP (an instant) first",
            table=table,
        )
    if isinstance(target, TimestampType) and isinstance(source, T.TimestampType):
        raise SchemaMismatchError(
            path,
            "Spark TIMESTAMP (an instant) cannot be written to Iceberg timestamp (no time zone); "
            "cast it to TIMESTAMP_NTZ first",
            table=table,
        )
    if not _compatible_primitive(source, target):
        raise _incompatible(source, target, path, table)


def _compatible_primitive(source: T.DataType, target: IcebergType) -> bool:
    if isinstance(target, DecimalType):
        return (
            isinstance(source, T.DecimalType) and source.scale == target.scale and source.precision <= target.precision
        )
    accepted: list[tuple[type, tuple[type, ...]]] = [
        (BooleanType, (T.BooleanType,)),
        (IntegerType, _INTEGRAL),
        (LongType, (*_INTEGRAL, T.LongType)),
        (FloatType, (T.FloatType,)),
        (DoubleType, (T.FloatType, T.DoubleType)),
        (DateType, (T.DateType,)),
        (TimestampType, (T.TimestampNTZType,)),
        (TimestamptzType, (T.TimestampType,)),
        (StringType, (T.StringType, T.VarcharType, T.CharType)),
        (BinaryType, (T.BinaryType,)),
        (FixedType, (T.BinaryType,)),
    ]
    for iceberg_cls, spark_classes in accepted:
        if isinstance(target, iceberg_cls):
            return isinstance(source, spark_classes)
    return False


def _incompatible(source: T.DataType, target: IcebergType, path: str, table: str) -> SchemaMismatchError:
    return SchemaMismatchError(
        path, f"Spark type {source.simpleString()} cannot be written to Iceberg type {target}", table=table
    )


def _check_struct(source: T.StructType, targets: tuple[NestedField, ...], path: str, table: str) -> None:
    by_name = {f.name: f for f in source.fields}
    known = {f.name for f in targets}
    for name in by_name:
        if name not in known:
            raise SchemaMismatchError(f"{path}.{name}", "not in the table's schema (unknown extra field)", table=table)
    for target in targets:
        field_path = f"{path}.{target.name}"
        if target.name not in by_name:
            if target.required:
                raise SchemaMismatchError(field_path, "required field is missing", table=table)
            continue
        _check(by_name[target.name].dataType, target.field_type, field_path, table)


def quoted(name: str) -> str:
    """A column name as Spark parses it literally: in backticks, a backtick doubled (so
    ``a.b``, ``with space`` and ``x`y`` are names, not paths or syntax)."""
    return "`" + name.replace("`", "``") + "`"


def align_to_schema(df: DataFrame, schema: Schema, table: str) -> DataFrame:
    """Project ``df`` onto the table's columns, in order, with the exact Spark types.

    Optional columns the DataFrame lacks are filled with nulls; widening casts (int to
    long, float to double, decimal precision) are applied. A DataFrame that already has
    the table's columns, in order, with their exact types is returned as it is (no
    projection to plan: a small checkpoint's fixed cost).

    Raises:
        SchemaMismatchError: a required column is missing, a column is unknown, or a type
            cannot be written; the error names the column.
    """
    plan = _alignment(df, schema, table, ignore=())
    if [f.name for f in df.schema.fields] == [t.name for t, _, _ in plan] and all(
        source is not None and source.dataType == wanted for _, source, wanted in plan
    ):
        return df
    return df.select(*_columns(plan))


def aligned_columns(df: DataFrame, schema: Schema, table: str, *, ignore: Collection[str] = ()) -> list[Column]:
    """The expressions that project ``df`` onto the table's columns (see :func:`align_to_schema`).

    Columns named in ``ignore`` may be in the DataFrame without being in the table (a
    routing column, or a column another routed table takes); any other extra is an error.
    """
    return _columns(_alignment(df, schema, table, ignore=ignore))


def check_distinct_columns(df: DataFrame, table: str) -> None:
    """Refuse a DataFrame with two columns of one name, or of names Spark takes for one
    (differing only by case while ``spark.sql.caseSensitive`` is false, its default): Spark
    would fail on them as ambiguous references, deep inside a job.

    Raises:
        SchemaMismatchError: names the column and the other spelling.
    """
    names = [f.name for f in df.schema.fields]
    case_sensitive = _case_sensitive(df)
    seen: dict[str, str] = {}
    for name in names:
        key = name if case_sensitive else name.lower()
        first = seen.setdefault(key, name)
        if first == name and names.count(name) > 1:
            reason = f"the DataFrame has {names.count(name)} columns of this name: rename or drop all but one"
            raise SchemaMismatchError(name, reason, table=table)
        if first != name:
            reason = (
                f"the DataFrame also has {name!r}, and Spark takes them for one column (spark.sql.caseSensitive "
                "is false): rename one of them"
            )
            raise SchemaMismatchError(first, reason, table=table)


def _case_sensitive(df: DataFrame) -> bool:
    """Whether the DataFrame's session tells column names apart by case (false by default)."""
    try:
        return str(df.sparkSession.conf.get("spark.sql.caseSensitive", "false")).strip().lower() == "true"
    except Exception:  # a session that cannot say: Spark's default
        return False


def _alignment(
    df: DataFrame, schema: Schema, table: str, *, ignore: Collection[str]
) -> list[tuple[NestedField, T.StructField | None, T.DataType]]:
    """Each table column with the DataFrame column that fills it (None: nulls) and the
    Spark type it must have; refuses what cannot be written (see :func:`align_to_schema`)."""
    check_distinct_columns(df, table)
    by_name = {f.name: f for f in df.schema.fields}
    known = {f.name for f in schema.fields}
    extras = [name for name in by_name if name not in known and name not in ignore]
    if extras:
        raise SchemaMismatchError(
            extras[0],
            f"not in the table's schema (unknown extra column; table columns: {', '.join(schema.column_names)}); "
            "schema_mode='add-columns' adds it to the table",
            table=table,
        )
    plan = []
    for target in schema.fields:
        wanted = spark_type(target.field_type, target.name, table)
        source = by_name.get(target.name)
        if source is None:
            if target.required:
                raise SchemaMismatchError(target.name, "required column is missing", table=table)
        else:
            _check(source.dataType, target.field_type, target.name, table)
        plan.append((target, source, wanted))
    return plan


def _columns(plan: list[tuple[NestedField, T.StructField | None, T.DataType]]) -> list[Column]:
    columns: list[Column] = []
    for target, source, wanted in plan:
        if source is None:
            columns.append(F.lit(None).cast(wanted).alias(target.name))
            continue
        column = _converted(F.col(quoted(target.name)), source.dataType, target.field_type, wanted)
        columns.append(column.alias(target.name))
    return columns


def _converted(column: Column, source: T.DataType, target: IcebergType, wanted: T.DataType) -> Column:
    """``column`` (of Spark type ``source``) as the table's type: structs member by member
    and by name (a member the rows lack is null; the table's order, which puts members an
    evolution added at the end, wherever the rows have them), lists and maps element by
    element, the rest cast. A null struct stays null."""
    if source == wanted:
        return column
    if isinstance(target, StructType) and isinstance(source, T.StructType) and isinstance(wanted, T.StructType):
        present = {f.name: f for f in source.fields}
        members = []
        for member, want in zip(target.fields, wanted.fields, strict=True):
            found = present.get(member.name)
            if found is None:
                members.append(F.lit(None).cast(want.dataType).alias(member.name))
            else:
                value = _converted(column.getField(member.name), found.dataType, member.field_type, want.dataType)
                members.append(value.alias(member.name))
        return F.when(column.isNull(), F.lit(None).cast(wanted)).otherwise(F.struct(*members))
    if isinstance(target, ListType) and isinstance(source, T.ArrayType) and isinstance(wanted, T.ArrayType):
        element, wanted_element = target.element_type, wanted.elementType
        return F.transform(column, lambda x: _converted(x, source.elementType, element, wanted_element))
    if isinstance(target, MapType) and isinstance(source, T.MapType) and isinstance(wanted, T.MapType):
        value_type, wanted_value = target.value_type, wanted.valueType
        mapped = F.transform_values(column, lambda _, v: _converted(v, source.valueType, value_type, wanted_value))
        if source.keyType != wanted.keyType:
            mapped = F.transform_keys(mapped, lambda k, _: k.cast(wanted.keyType))
        return mapped
    return column.cast(wanted)
