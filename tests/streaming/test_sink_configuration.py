"""The streaming sink is configuration, not connections: it pickles (as Spark Connect
pickles a ``foreachBatch`` function), its repr shows no credential, and an unpickled sink
opens the catalog and the state from what it holds. Where a batch cannot see its query
(Spark Connect), the query id comes from the query's checkpoint location, so a job id
reused by a query with a new location is still refused."""

from __future__ import annotations

import json
import pickle
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyspark.sql import SparkSession

import icecommit as ic
from icecommit.errors import InvalidArgumentError, StreamingQueryMismatchError
from icecommit.streaming import StreamingSink, query_id_at

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False)])
SECRET = "s3cr3t-do-not-show"


def _catalog(tmp_path: Path) -> SqlCatalog:
    warehouse = tmp_path / "warehouse"
    warehouse.mkdir(exist_ok=True)
    return SqlCatalog(
        "lake",
        uri=f"sqlite:///{tmp_path / 'catalog.db'}",
        warehouse=warehouse.as_uri(),
        **{"s3.secret-access-key": SECRET, "s3.access-key-id": "AKIDEXAMPLE"},
    )


def _location(tmp_path: Path, name: str, query_id: str) -> str:
    """A streaming query's checkpoint location, as Spark leaves it after its first start."""
    folder = tmp_path / name
    folder.mkdir()
    (folder / "metadata").write_text(json.dumps({"id": query_id}) + "\n")
    return str(folder)


def test_the_sink_pickles_without_connections_or_credentials_in_its_repr(tmp_path: Path) -> None:
    catalog = _catalog(tmp_path)
    ic.create_table(catalog, "ns.events", SCHEMA)
    sink = ic.streaming_sink("ns.events", catalog=catalog, job_id="events", target_file_size=1 << 20)
    assert isinstance(sink, StreamingSink)
    sink.catalog()  # opened in this process ...
    revived = pickle.loads(pickle.dumps(sink))  # ... and not pickled
    assert revived._catalog is None and revived._store is None
    assert (revived.targets, revived.job_id, revived.options.target_file_size) == ("ns.events", "events", 1 << 20)
    assert SECRET not in repr(sink) and "AKIDEXAMPLE" not in repr(sink) and "***" in repr(sink)
    assert revived.catalog().load_table("ns.events").name() == ("ns", "events")


@pytest.mark.spark
def test_an_unpickled_sink_commits_each_batch_once_and_guards_the_query(spark: SparkSession, tmp_path: Path) -> None:
    catalog = _catalog(tmp_path)
    ic.create_table(catalog, "ns.events", SCHEMA)
    location = _location(tmp_path, "chk", "query-one")
    sink = pickle.loads(
        pickle.dumps(ic.streaming_sink("ns.events", catalog=catalog, job_id="events", checkpoint_location=location))
    )
    batch = spark.createDataFrame([(i,) for i in range(10)], "id long")
    for batch_id in (0, 1, 1):  # batch 1 replayed after a restart
        sink(batch.withColumn("id", batch.id + 100 * batch_id), batch_id)
    table = catalog.load_table("ns.events")
    ids = Counter(table.scan().to_arrow().column("id").to_pylist())
    assert ids == Counter([*range(10), *range(100, 110)])
    states = ic.GlobalCommitter(catalog, "ns.events", job_id="events").store.list("ns.events", job_id="events")
    assert [(s.checkpoint_id, s.query_id) for s in states] == [(0, "query-one"), (1, "query-one")]
    # the same job id, a new checkpoint location: another query, whose batch 1 is refused
    other = pickle.loads(
        pickle.dumps(
            ic.streaming_sink(
                "ns.events", catalog=catalog, job_id="events", checkpoint_location=_location(tmp_path, "new", "two")
            )
        )
    )
    with pytest.raises(StreamingQueryMismatchError):
        other(batch, 1)


def test_a_checkpoint_location_without_query_metadata_is_named(tmp_path: Path) -> None:
    assert query_id_at(None) is None
    assert query_id_at(_location(tmp_path, "chk", "abc")) == "abc"
    with pytest.raises(InvalidArgumentError, match="checkpoint_location"):
        query_id_at(str(tmp_path / "nowhere"))


def test_every_kind_of_secret_is_hidden_in_the_repr(tmp_path: Path) -> None:
    catalog = _catalog(tmp_path)
    ic.create_table(catalog, "ns.events", SCHEMA)
    sink = ic.streaming_sink("ns.events", job_id="j", catalog=catalog)
    sink.catalog_properties = {
        "uri": "postgresql+psycopg://ingest:pw-one@db:5432/lake",
        "adls.account-key": "pw-two",
        "adls.connection-string": "AccountKey=pw-three",
        "header.Authorization": "Bearer pw-four",
        "s3.proxy-uri": "http://user:pw-five@proxy:3128",
        "token": "pw-six",
        "warehouse": "s3://lake/wh",
    }
    shown = repr(sink)
    assert not any(f"pw-{n}" in shown for n in ("one", "two", "three", "four", "five", "six")), shown
    assert "s3://lake/wh" in shown and "ingest" in shown


def test_an_unpickled_sink_never_creates_the_catalog_it_was_given(tmp_path: Path) -> None:
    catalog = _catalog(tmp_path)
    ic.create_table(catalog, "ns.events", SCHEMA)
    revived = pickle.loads(pickle.dumps(ic.streaming_sink("ns.events", catalog=catalog, job_id="j")))
    catalog.engine.dispose()
    (tmp_path / "catalog.db").rename(tmp_path / "moved.db")  # where the batch runs, it is not there
    with pytest.raises(ic.errors.CatalogUnavailableError, match="does not exist"):
        revived.catalog()
    assert not (tmp_path / "catalog.db").exists()
