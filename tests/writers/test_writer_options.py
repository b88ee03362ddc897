"""The writers take the write's options as one frozen object (``ic.WriteOptions``), so a
new option reaches the tasks without a new parameter on every writer; a keyword given
directly still wins."""

from __future__ import annotations

import pytest
from pyiceberg.catalog.sql import SqlCatalog

import icecommit as ic
from icecommit.errors import InvalidArgumentError
from icecommit.writers.routing import RoutedSparkWriter
from icecommit.writers.spark import SparkWriter
from icecommit.writers.writer_options import WriterOptions
from tests.helpers import EVENTS_SCHEMA


def test_write_options_are_writer_options() -> None:
    options: WriterOptions = ic.WriteOptions(target_file_size=1 << 20, distribution="none")
    assert (options.target_file_size, options.distribution, options.route_by) == (1 << 20, "none", None)


def test_the_writers_read_the_options_object_and_a_keyword_wins(catalog: SqlCatalog) -> None:
    name = f"{catalog.name}.events"
    table = ic.create_table(catalog, name, EVENTS_SCHEMA, partition_by=["event"])
    options = ic.WriteOptions(target_file_size=4096, distribution="none", route_by="event")
    writer = SparkWriter(table, job_id="j", options=options)
    assert (writer._target_file_size, writer.distribution) == (4096, "none")
    assert SparkWriter(table, job_id="j", options=options, distribution="hash").distribution == "hash"
    routed = RoutedSparkWriter({name: table}, {"pv": name}, job_id="j", options=options)
    assert (routed._route_by, routed._target_file_size, routed.distribution) == ("event", 4096, "none")
    with pytest.raises(InvalidArgumentError, match="route_by"):
        RoutedSparkWriter({name: table}, {"pv": name}, job_id="j")
