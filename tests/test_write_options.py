"""``WriteOptions``: ``ic.write``'s options defined once, frozen and picklable, carried by
the routed writer and the streaming sink; today's keywords keep working and override it."""

from __future__ import annotations

import dataclasses
import pickle
from datetime import timedelta

import pytest
from pyiceberg.catalog.sql import SqlCatalog

import icecommit as ic
from icecommit.errors import InvalidArgumentError
from icecommit.options import WriteOptions
from tests.helpers import EVENTS_SCHEMA


def test_options_are_frozen_and_survive_pickling() -> None:
    options = WriteOptions(
        route_by="kind",
        dead_letter="ns.unrouted",
        branch="audit",
        target_file_size=1 << 20,
        distribution="hash",
        completeness=ic.PartitionCompleteness(lateness=timedelta(minutes=5)),
        maintenance=ic.MaintenancePolicy(expire_older_than=timedelta(days=7)),
    )
    assert pickle.loads(pickle.dumps(options)) == options
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.branch = "main"  # type: ignore[misc]


def test_keywords_override_the_options_they_name() -> None:
    base = WriteOptions(branch="audit", distribution="none")
    assert WriteOptions.of(base, distribution="hash") == WriteOptions(branch="audit", distribution="hash")
    assert WriteOptions.of(None, recommit=True) == WriteOptions(recommit=True)
    assert WriteOptions.of() == WriteOptions()


def test_a_table_as_the_dead_letter_is_kept_by_its_name(sqlite_catalog: SqlCatalog) -> None:
    table = ic.create_table(sqlite_catalog, f"{sqlite_catalog.name}.unrouted", EVENTS_SCHEMA)
    assert WriteOptions.of(dead_letter=table).dead_letter == f"{sqlite_catalog.name}.unrouted"


def test_an_unknown_keyword_or_a_bad_value_is_named() -> None:
    with pytest.raises(InvalidArgumentError) as unknown:
        WriteOptions.of(brunch="main")
    assert unknown.value.argument == "brunch" and "branch" in unknown.value.accepted
    with pytest.raises(InvalidArgumentError) as bad:
        WriteOptions(target_file_size=-1)
    assert bad.value.argument == "target_file_size"
    with pytest.raises(InvalidArgumentError) as policy:
        WriteOptions(maintenance="nightly")  # type: ignore[arg-type]
    assert policy.value.argument == "maintenance"
    with pytest.raises(InvalidArgumentError) as not_options:
        WriteOptions.of({"branch": "main"})  # type: ignore[arg-type]
    assert not_options.value.argument == "options"


@pytest.mark.parametrize(
    ("field", "value"),
    [("mode", "replace"), ("mode", 5), ("key", "id"), ("key", [1]), ("order_by", 5), ("order_by", ["ts", 2]),
     ("change_column", 3)],
)  # fmt: skip
def test_the_write_mode_options_name_a_bad_value(field: str, value: object) -> None:
    with pytest.raises(InvalidArgumentError) as bad:
        WriteOptions.of(**{field: value})
    assert (bad.value.argument, bad.value.value) == (field, value)


def test_key_and_order_by_are_kept_as_tuples() -> None:
    options = WriteOptions(mode="upsert", key=["id", "region"], order_by="lsn")
    assert (options.key, options.order_by) == (("id", "region"), ("lsn",))
