"""Schema evolution on write: the changes a checkpoint's columns need in the table, and
how the table records which checkpoint made a change (pure rules on Iceberg types).

Modes (``schema_mode=``, or the table property ``icecommit.schema-mode``):

- ``strict``: the table's schema as it is (the default);
- ``add-columns``: columns the table lacks are added, at any depth (struct members, and
  structs inside lists and map values), always optional, at the end of their struct;
- ``merge``: also Iceberg's allowed promotions (int to long, float to double, a decimal's
  precision widened at the same scale), and a required column made optional when the
  checkpoint's rows hold nulls in it (never an identifier field).

Everything else (narrowing, an incompatible type, a required column missing, a column
whose name differs from another only by case) is refused with
:class:`~icecommit.errors.SchemaMismatchError` naming the column path and both types.

The table records each change with the checkpoint that made it: the schema change's
commit sets ``icecommit.schema-change.<job id>`` to ``<checkpoint id>:<schema id>``, and a
table a write created has ``icecommit.created-by`` = ``<job id>:<checkpoint id>``. A replay
reads them back (the change is found made, never made again) and the checkpoint's prepared
row records the features ``schema-change`` / ``table-create``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from pyiceberg.schema import Schema
from pyiceberg.types import (
    BinaryType,
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
    PrimitiveType,
    StructType,
)

from icecommit.core.choices import chosen
from icecommit.core.errors import SchemaMismatchError

STRICT, ADD_COLUMNS, MERGE = "strict", "add-columns", "merge"
SCHEMA_MODES = (STRICT, ADD_COLUMNS, MERGE)
#: The table property that sets the default mode of writes into the table.
SCHEMA_MODE_PROPERTY = "icecommit.schema-mode"
#: ``icecommit.schema-change.<job id>`` = ``<checkpoint id>:<schema id>``: the job's last change.
SCHEMA_CHANGE_PREFIX = "icecommit.schema-change."
#: ``<job id>:<checkpoint id>`` of the write that created the table.
CREATED_BY_PROPERTY = "icecommit.created-by"
#: The features a checkpoint's prepared row records (see :mod:`icecommit.committer.features`).
FEATURE_SCHEMA_CHANGE = "schema-change"
FEATURE_TABLE_CREATE = "table-create"


def dead_letter_mode(mode: str, properties: Mapping[str, str]) -> str:
    """The schema mode of a routed write's dead-letter table under the write's ``mode``: one
    icecommit made from the source's columns takes the source's new columns whatever the
    mode (``strict`` becomes ``add-columns``); one made by hand keeps the write's mode."""
    return ADD_COLUMNS if mode == STRICT and CREATED_BY_PROPERTY in properties else mode


def checked_mode(mode: str | None, properties: Mapping[str, str] | None = None) -> str:
    """The mode a write uses: ``mode``, else the table's ``icecommit.schema-mode``, else strict.

    Raises:
        InvalidArgumentError: a mode (argument or property) that is none of the three.
    """
    return chosen("schema_mode", mode, SCHEMA_MODES, prop=SCHEMA_MODE_PROPERTY, properties=properties, default=STRICT)


@dataclass(frozen=True)
class AddColumn:
    """Add ``name`` (optional) to the struct at ``parent`` (() for the table)."""

    parent: tuple[str, ...]
    name: str
    field_type: IcebergType

    @property
    def path(self) -> tuple[str, ...]:
        return (*self.parent, self.name)

    def __str__(self) -> str:
        return f"add {'.'.join(self.path)} {self.field_type}"


@dataclass(frozen=True)
class Promote:
    """Widen the column at ``path`` to ``field_type``."""

    path: tuple[str, ...]
    field_type: PrimitiveType

    def __str__(self) -> str:
        return f"widen {'.'.join(self.path)} to {self.field_type}"


@dataclass(frozen=True)
class MakeOptional:
    """Make the required column at ``path`` optional."""

    path: tuple[str, ...]

    def __str__(self) -> str:
        return f"make {'.'.join(self.path)} optional"


Change = AddColumn | Promote | MakeOptional


def plan_changes(
    schema: Schema,
    incoming: StructType,
    mode: str,
    *,
    table: str,
    nulls_in: Collection[str] = (),
    ignore: Collection[str] = (),
) -> list[Change]:
    """The changes that let rows of ``incoming`` be written to ``schema`` under ``mode``
    (none under ``strict``: what does not fit is refused where the rows are aligned).

    Args:
        incoming: the rows' columns as Iceberg types (their field ids are not used).
        nulls_in: dotted paths of required columns the rows hold nulls in (``merge`` makes
            them optional).
        ignore: top-level columns of the rows that are not the table's (a routing column).

    Raises:
        SchemaMismatchError: what ``mode`` cannot change (see the module), naming the path.
    """
    if mode == STRICT:
        return []
    changes: list[Change] = []
    identifiers = {schema.find_column_name(i) for i in schema.identifier_field_ids}
    fields = tuple(f for f in incoming.fields if f.name not in ignore)
    _struct(schema.as_struct(), fields, (), mode, table, changes)
    if mode == MERGE:
        for path in sorted(nulls_in):
            field = schema.find_field(path)
            if field.required:
                if path in identifiers:
                    raise SchemaMismatchError(
                        path, "holds nulls, and an identifier field stays required (it is the row key)", table=table
                    )
                changes.append(MakeOptional(tuple(path.split("."))))
    return changes


def _struct(
    target: StructType,
    fields: tuple[NestedField, ...],
    parent: tuple[str, ...],
    mode: str,
    table: str,
    changes: list[Change],
) -> None:
    by_name = {f.name: f for f in target.fields}
    by_folded: dict[str, str] = {f.name.lower(): f.name for f in target.fields}
    brought = {f.name for f in fields}
    for member in target.fields:  # refused here, before any change of this or another table
        if member.required and member.name not in brought:
            raise SchemaMismatchError(".".join((*parent, member.name)), "required column is missing", table=table)
    seen: dict[str, str] = {}
    for field in fields:
        path = ".".join((*parent, field.name))
        other = seen.setdefault(field.name.lower(), field.name)
        if other != field.name:
            raise SchemaMismatchError(
                path, f"differs only by case from the column {other!r} beside it: rename one of them", table=table
            )
        existing = by_name.get(field.name)
        if existing is None:
            folded = by_folded.get(field.name.lower())
            if folded is not None:
                raise SchemaMismatchError(
                    path,
                    f"differs only by case from the table's column {'.'.join((*parent, folded))!r}: names match "
                    "exactly, so rename it to that spelling",
                    table=table,
                )
            changes.append(AddColumn(parent, field.name, _optional(field.field_type)))
            continue
        _field(existing.field_type, field.field_type, (*parent, field.name), mode, table, changes)


def _field(
    target: IcebergType,
    source: IcebergType,
    path: tuple[str, ...],
    mode: str,
    table: str,
    changes: list[Change],
) -> None:
    if isinstance(target, StructType) and isinstance(source, StructType):
        _struct(target, source.fields, path, mode, table, changes)
    elif isinstance(target, ListType) and isinstance(source, ListType):
        if isinstance(target.element_type, StructType) and isinstance(source.element_type, StructType):
            _struct(target.element_type, source.element_type.fields, path, mode, table, changes)
        else:
            _field(target.element_type, source.element_type, (*path, "element"), mode, table, changes)
    elif isinstance(target, MapType) and isinstance(source, MapType):
        if not fits(source.key_type, target.key_type):  # Iceberg changes no map key
            raise _refused((*path, "key"), source.key_type, target.key_type, mode, table, promotable=False)
        if isinstance(target.value_type, StructType) and isinstance(source.value_type, StructType):
            _struct(target.value_type, source.value_type.fields, path, mode, table, changes)
        else:
            _field(target.value_type, source.value_type, (*path, "value"), mode, table, changes)
    elif isinstance(target, PrimitiveType) and isinstance(source, PrimitiveType):
        if fits(source, target):
            return
        wider = promoted(target, source)
        if wider is None or mode != MERGE:
            raise _refused(path, source, target, mode, table, promotable=wider is not None)
        changes.append(Promote(path, wider))
    else:
        raise _refused(path, source, target, mode, table, promotable=False)


def fits(source: IcebergType, target: IcebergType) -> bool:
    """Whether values of ``source`` are written to a ``target`` column as they are or widened
    (the write path's own widenings: int to long, float to double, a decimal's precision)."""
    if source == target:
        return True
    if isinstance(target, FixedType):  # Spark carries fixed as binary: the writer checks lengths
        return isinstance(source, BinaryType)
    if isinstance(target, LongType):
        return isinstance(source, IntegerType)
    if isinstance(target, DoubleType):
        return isinstance(source, FloatType)
    if isinstance(target, DecimalType) and isinstance(source, DecimalType):
        return source.scale == target.scale and source.precision <= target.precision
    return False


def promoted(target: IcebergType, source: IcebergType) -> PrimitiveType | None:
    """The type Iceberg allows ``target`` to be widened to so that ``source`` fits, or None."""
    if isinstance(target, IntegerType) and isinstance(source, LongType):
        return LongType()
    if isinstance(target, FloatType) and isinstance(source, DoubleType):
        return DoubleType()
    if not (isinstance(target, DecimalType) and isinstance(source, DecimalType)):
        return None
    if source.scale == target.scale and target.precision < source.precision <= 38:
        return DecimalType(source.precision, source.scale)
    return None


def _refused(
    path: tuple[str, ...], source: IcebergType, target: IcebergType, mode: str, table: str, *, promotable: bool
) -> SchemaMismatchError:
    hint = " (schema_mode='merge' widens it)" if promotable and mode != MERGE else ""
    return SchemaMismatchError(
        ".".join(path), f"the rows' type {source} cannot be written to the table's type {target}{hint}", table=table
    )


def _optional(field_type: IcebergType) -> IcebergType:
    """``field_type`` with every nested field optional (added columns never require values)."""
    if isinstance(field_type, StructType):
        return StructType(
            *(
                NestedField(f.field_id, f.name, _optional(f.field_type), required=False, doc=f.doc)
                for f in field_type.fields
            )
        )
    if isinstance(field_type, ListType):
        return ListType(field_type.element_id, _optional(field_type.element_type), element_required=False)
    if isinstance(field_type, MapType):
        return MapType(
            field_type.key_id, field_type.key_type, field_type.value_id, _optional(field_type.value_type),
            value_required=False,
        )  # fmt: skip
    return field_type


def schema_change_value(checkpoint_id: int, schema_id: int) -> str:
    return f"{checkpoint_id}:{schema_id}"


def schema_changed_by(properties: Mapping[str, str], job_id: str, checkpoint_id: int) -> int | None:
    """The schema id checkpoint ``checkpoint_id`` of ``job_id`` changed the table to, or None."""
    value = properties.get(SCHEMA_CHANGE_PREFIX + job_id, "")
    checkpoint, _, schema_id = value.partition(":")
    if checkpoint == str(checkpoint_id) and schema_id.isdigit():
        return int(schema_id)
    return None


def created_by(properties: Mapping[str, str], job_id: str, checkpoint_id: int) -> bool:
    """Whether checkpoint ``checkpoint_id`` of ``job_id`` created the table."""
    return properties.get(CREATED_BY_PROPERTY) == f"{job_id}:{checkpoint_id}"


def checkpoint_features(properties: Mapping[str, str], job_id: str, checkpoint_id: int) -> tuple[str, ...]:
    """The features a checkpoint's prepared row records, read from the table's properties."""
    features = []
    if created_by(properties, job_id, checkpoint_id):
        features.append(FEATURE_TABLE_CREATE)
    if schema_changed_by(properties, job_id, checkpoint_id) is not None:
        features.append(FEATURE_SCHEMA_CHANGE)
    return tuple(features)
