"""What a table creation asks for, checked and built without changing the catalog: the
schema from a pyarrow or pyiceberg schema, the partition spec from Iceberg transform strings,
the properties and location, and how an existing table differs from it. The creation itself
is an operation of the commit protocol (:mod:`icecommit.committer.table_creation`)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import ValidationError as PyIcebergValidationError
from pyiceberg.io import load_file_io
from pyiceberg.io.pyarrow import UnsupportedPyArrowTypeException, visit_pyarrow
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC, PartitionField, PartitionSpec
from pyiceberg.schema import Schema, assign_fresh_schema_ids
from pyiceberg.table import StagedTable, Table
from pyiceberg.table.metadata import new_table_metadata
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
from pyiceberg.transforms import (
    BucketTransform,
    DayTransform,
    HourTransform,
    IdentityTransform,
    MonthTransform,
    Transform,
    TruncateTransform,
    YearTransform,
)
from pyiceberg.types import (
    DoubleType,
    FloatType,
    IcebergType,
    ListType,
    MapType,
    NestedField,
    PrimitiveType,
    StructType,
)

from icecommit.catalog.loading import load_table
from icecommit.catalog.storage import catalog_tables, keys_of
from icecommit.core.errors import InvalidArgumentError, SchemaMismatchError, TableSpecError, UnsafeLocationError
from icecommit.core.pyiceberg_internals import arrow_to_iceberg_without_ids
from icecommit.state.database import briefly

_CALL = re.compile(r"^\s*([a-z_]+)\s*\((.*)\)\s*$")
_SIMPLE = {
    "identity": IdentityTransform,
    "year": YearTransform,
    "month": MonthTransform,
    "day": DayTransform,
    "hour": HourTransform,
}
_SUFFIX = {"year": "year", "month": "month", "day": "day", "hour": "hour"}


def parse_transform(expression: str, table: str = "<new>") -> tuple[str, Transform[Any, Any], str]:
    """Parse ``col``, ``day(col)``, ``bucket(N, col)``, ``truncate(W, col)`` ...

    Returns:
        (source column, transform, partition field name), the name following Iceberg's
        conventions (``ts_day``, ``id_bucket``, ``name_trunc``; identity keeps the column name).

    Raises:
        TableSpecError: the transform is unknown or its arguments are malformed.
    """
    match = _CALL.match(expression)
    if match is None:
        column = expression.strip()
        if not column or "(" in column or ")" in column:
            raise TableSpecError(table, f"cannot parse partition expression {expression!r}")
        return column, IdentityTransform(), column
    name, args_text = match.group(1), match.group(2)
    args = [a.strip() for a in args_text.split(",")]
    if name in _SIMPLE:
        if len(args) != 1 or not args[0]:
            raise TableSpecError(table, f"{name}() takes one column, got {expression!r}")
        column = args[0]
        suffix = _SUFFIX.get(name)
        return column, _SIMPLE[name](), f"{column}_{suffix}" if suffix else column
    if name in ("bucket", "truncate"):
        if len(args) != 2 or not args[0].isdigit() or int(args[0]) <= 0:
            raise TableSpecError(table, f"{name}() takes a positive integer and a column, got {expression!r}")
        width, column = int(args[0]), args[1]
        if name == "bucket":
            return column, BucketTransform(width), f"{column}_bucket"
        return column, TruncateTransform(width), f"{column}_trunc"
    known = ", ".join([*_SIMPLE, "bucket", "truncate"])
    raise TableSpecError(table, f"unknown partition transform {name!r} in {expression!r} (known: {known})")


def build_partition_spec(schema: Schema, partition_by: Sequence[str], table: str) -> PartitionSpec:
    """Build a partition spec over ``schema`` from transform strings.

    Raises:
        TableSpecError: unknown transform, unknown column, or a transform that cannot
            apply to the column's type.
    """
    if not partition_by:
        return UNPARTITIONED_PARTITION_SPEC
    fields: list[PartitionField] = []
    names: set[str] = set()
    for offset, expression in enumerate(partition_by):
        column, transform, field_name = parse_transform(expression, table)
        try:
            source = schema.find_field(column)
        except ValueError as e:
            known = ", ".join(schema.column_names)
            raise TableSpecError(table, f"partition column {column!r} is not in the schema (columns: {known})") from e
        if not transform.can_transform(source.field_type):
            raise TableSpecError(
                table, f"{expression!r}: cannot apply {transform} to column {column!r} of type {source.field_type}"
            )
        if field_name in names:
            raise TableSpecError(table, f"partition field {field_name!r} appears twice")
        names.add(field_name)
        fields.append(
            PartitionField(source_id=source.field_id, field_id=1000 + offset, transform=transform, name=field_name)
        )
    return PartitionSpec(*fields, spec_id=0)


def to_iceberg_schema(schema: pa.Schema | Schema) -> Schema:
    """Convert a pyarrow schema (fresh field ids) or pass an Iceberg schema through."""
    if isinstance(schema, Schema):
        return schema
    if not isinstance(schema, pa.Schema):
        raise InvalidArgumentError("schema", type(schema).__name__, "a pyarrow schema or a pyiceberg Schema")
    seen: set[str] = set()
    for field in schema:
        if field.name in seen:
            raise SchemaMismatchError(field.name, "appears twice in the schema")
        seen.add(field.name)
        try:
            visit_pyarrow(pa.schema([field]), arrow_to_iceberg_without_ids())
        except (ValueError, TypeError, UnsupportedPyArrowTypeException) as e:
            raise SchemaMismatchError(field.name, f"type {field.type} has no Iceberg equivalent here: {e}") from e
    converted = visit_pyarrow(schema, arrow_to_iceberg_without_ids())
    if not isinstance(converted, Schema):
        raise InvalidArgumentError("schema", type(schema).__name__, "a pyarrow schema or a pyiceberg Schema")
    return assign_fresh_schema_ids(converted)


def _shape(field_type: IcebergType) -> object:
    """A comparable description of a type that ignores field ids."""
    if isinstance(field_type, StructType):
        return tuple((f.name, f.required, _shape(f.field_type)) for f in field_type.fields)
    if isinstance(field_type, ListType):
        return ("list", field_type.element_required, _shape(field_type.element_type))
    if isinstance(field_type, MapType):
        return (
            "map",
            _shape(field_type.key_type),
            field_type.value_required,
            _shape(field_type.value_type),
        )
    return str(field_type)


def schema_shape(schema: Schema) -> object:
    """Names, types and nullability of a schema, without field ids."""
    return _shape(schema.as_struct())


def spec_shape(schema: Schema, spec: PartitionSpec) -> list[tuple[str, str]]:
    """(source column, transform) pairs of a spec, without ids."""
    return [(schema.find_column_name(f.source_id) or "?", str(f.transform)) for f in spec.fields]


@dataclass(frozen=True)
class NewTable:
    """A table as a creation asks for it, its arguments checked (:func:`new_table`).

    Attributes:
        name: ``namespace.table``.
        schema: the schema, with its field ids and identifier fields.
        spec: the partition spec over ``schema``.
        properties: the table properties, the Parquet codec icecommit writes included.
        location: the table location; None for the catalog's default.
    """

    name: str
    schema: Schema
    spec: PartitionSpec
    properties: Mapping[str, str]
    location: str | None

    @property
    def namespace(self) -> str | None:
        """The namespace the table goes in (created with it when absent)."""
        return self.name.rsplit(".", 1)[0] if "." in self.name else None


def new_table(
    name: str,
    schema: pa.Schema | Schema,
    partition_by: Sequence[str] | None = None,
    *,
    properties: Mapping[str, str] | None = None,
    location: str | None = None,
    identifier_fields: Sequence[str] | None = None,
) -> NewTable:
    """The table ``create_table`` is asked for (see its arguments), checked without asking
    the catalog.

    Raises:
        InvalidArgumentError: an argument of the wrong kind.
        SchemaMismatchError: a column named twice, or of a type Iceberg cannot hold.
        TableSpecError: an unknown transform or column, a bad identifier field, or a name
            whose location would nest in or escape from another.
    """
    check_table_name(name)
    iceberg_schema = with_identifier_fields(to_iceberg_schema(schema), identifier_fields, name)
    if partition_by is not None and (
        isinstance(partition_by, str)
        or not isinstance(partition_by, Sequence)
        or not all(isinstance(p, str) for p in partition_by)
    ):
        raise InvalidArgumentError("partition_by", partition_by, "a list of transforms, such as ['day(ts)', 'event']")
    if properties is not None and (
        not isinstance(properties, Mapping)
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in properties.items())
    ):
        raise InvalidArgumentError("properties", properties, "a mapping of property names to string values")
    if location is not None and (not isinstance(location, str) or not location.strip()):
        raise InvalidArgumentError("location", location, "a location URI or path (a string), or None for the default")
    spec = build_partition_spec(iceberg_schema, list(partition_by or []), name)
    # the codec icecommit writes, recorded so that every engine writes the same
    # (Apache Iceberg's Java writer falls back to gzip where the property is unset)
    table_properties = {PARQUET_COMPRESSION: PARQUET_COMPRESSION_DEFAULT, **(properties or {})}
    return NewTable(name, iceberg_schema, spec, table_properties, location)


def difference(table: Table, asked: NewTable) -> str | None:
    """How an existing ``table`` differs from the one ``asked`` for (schema first, then
    partition spec; field ids aside), or None when it is the same."""
    if schema_shape(table.schema()) != schema_shape(asked.schema):
        return f"exists with a different schema: {table.schema()} (asked for {asked.schema})"
    if spec_shape(table.schema(), table.spec()) != spec_shape(asked.schema, asked.spec):
        return f"exists with a different partition spec: {table.spec()} (asked for {asked.spec})"
    return None


def staged_table(catalog: Catalog, asked: NewTable) -> StagedTable:
    """The table ``asked`` for as pyiceberg stages one before the catalog has it (its
    location empty when the catalog's default is asked for): what a creation works on
    while the catalog has no table of that name. Nothing is written.

    Raises:
        TableSpecError: metadata pyiceberg cannot make (an unknown ``format-version``, a
            type the format version does not have).
    """
    try:
        metadata = new_table_metadata(
            asked.schema, asked.spec, UNSORTED_SORT_ORDER, asked.location or "", dict(asked.properties)
        )
    except (ValueError, PyIcebergValidationError) as e:
        raise TableSpecError(asked.name, f"cannot be created: {briefly(e)}") from e
    io = load_file_io(dict(catalog.properties), asked.location)
    return StagedTable(Catalog.identifier_to_tuple(asked.name), metadata, "", io, catalog)


def with_identifier_fields(schema: Schema, names: Sequence[str] | None, table: str) -> Schema:
    """``schema`` with ``names`` as its identifier fields, made required.

    Raises:
        InvalidArgumentError: not a list of names.
        TableSpecError: a name that is no column, or a column of a type that cannot be a key.
    """
    if names is None:
        return schema
    if isinstance(names, str) or not all(isinstance(n, str) for n in names):
        raise InvalidArgumentError("identifier_fields", names, "a list of column names, such as ['user_id']")
    keys = {}
    for key in names:
        try:
            field = schema.find_field(key)
        except ValueError as e:
            columns = ", ".join(schema.column_names)
            raise TableSpecError(table, f"identifier field {key!r} is not a column ({columns})") from e
        if not isinstance(field.field_type, PrimitiveType) or isinstance(field.field_type, (FloatType, DoubleType)):
            raise TableSpecError(
                table, f"identifier field {key!r} is {field.field_type}: a key is a non-float primitive"
            )
        keys[field.field_id] = key
    if "." in "".join(keys.values()):
        raise TableSpecError(table, "identifier fields are top-level columns")
    fields = [f if f.field_id not in keys else NestedField(f.field_id, f.name, f.field_type, required=True, doc=f.doc)
              for f in schema.fields]  # fmt: skip
    return Schema(*fields, schema_id=schema.schema_id, identifier_field_ids=list(keys))


#: The Parquet codec property, and the codec a table gets when created without one (pyiceberg's).
PARQUET_COMPRESSION = "write.parquet.compression-codec"
PARQUET_COMPRESSION_DEFAULT = "zstd"

_FORBIDDEN_IN_NAMES = set("/\\%") | {chr(c) for c in range(32)} | {chr(127)}


def check_table_name(name: str) -> None:
    """Refuse a table name whose default location would nest inside another table's or
    escape the warehouse once a tool decodes it.

    Raises:
        TableSpecError: an empty part, a ``.`` or ``..`` part, or a ``/``, ``\\``, ``%`` or
            control character in any part.
    """
    parts = name.split(".")
    if len(parts) < 2:
        raise TableSpecError(name, "a table name is namespace.table")
    for part in parts:
        bad = sorted(set(part) & _FORBIDDEN_IN_NAMES)
        if not part.strip() or bad:
            what = f"contains {', '.join(repr(c) for c in bad)}" if bad else "is empty"
            raise TableSpecError(
                name,
                f"name part {part!r} {what}; table names may not hold path separators, percent signs or "
                "control characters (the location would nest in or escape from another)",
            )


def check_own_location(catalog: Catalog, name: str, location: str) -> None:
    """Refuse an explicit table location that holds the warehouse or another table, or
    lies inside another table's location (a sweep of one would reach the other).

    Raises:
        UnsafeLocationError: as above.
    """
    key = keys_of([location], name).pop()
    warehouse = catalog.properties.get("warehouse")
    if warehouse:
        root = keys_of([str(warehouse)], name).pop()
        if key == root or root.is_under(key):
            raise UnsafeLocationError(name, location, "a table location may not be the warehouse root or contain it")
    for other, table in catalog_tables(catalog):
        other_key = keys_of([table.metadata.location], other).pop()
        if other_key == key or other_key.is_under(key) or key.is_under(other_key):
            raise UnsafeLocationError(
                name, location, f"it would share files with table {other} ({table.metadata.location})"
            )


def resolve_table(catalog: Catalog, table: Table | str) -> Table:
    """A pyiceberg Table from a Table or a name; a Table is reloaded from ``catalog``."""
    return load_table(catalog, table)
