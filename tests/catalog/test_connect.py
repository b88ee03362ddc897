from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
import requests
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import (
    BadRequestError,
    CommitStateUnknownException,
    ForbiddenError,
    ServerError,
    ServiceUnavailableError,
    TooManyRequestsError,
)

import icecommit as ic
from icecommit.core.conflicts import is_commit_conflict
from icecommit.core.connections import is_transient
from icecommit.errors import CatalogUnavailableError

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False)])


def test_embedded_default_lives_under_icecommit_home(tmp_path: Path) -> None:
    catalog = ic.connect()
    assert isinstance(catalog, SqlCatalog)
    ic.create_table(catalog, "ns.t", SCHEMA)
    home = tmp_path / "home"
    assert (home / "catalog.db").is_file()
    assert catalog.load_table("ns.t").metadata.location.startswith(home.as_uri())


def test_the_default_home_is_per_user_whatever_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ICECOMMIT_HOME")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
    monkeypatch.chdir(tmp_path / "a")
    ic.create_table(ic.connect(), "ns.t", SCHEMA)
    assert (tmp_path / "xdg" / "icecommit" / "catalog.db").is_file()
    assert not (tmp_path / "a" / "warehouse").exists()
    monkeypatch.chdir(tmp_path / "b")
    assert ic.connect().load_table("ns.t") is not None  # the same catalog from another directory
    assert not (tmp_path / "b" / "warehouse").exists()


def test_a_catalog_an_earlier_version_made_in_dot_warehouse_is_still_found_with_a_notice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("ICECOMMIT_HOME")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.chdir(tmp_path)
    legacy = tmp_path / "warehouse"
    old = ic.connect(uri=f"sqlite:///{legacy / 'catalog.db'}", warehouse=str(legacy))
    ic.create_table(old, "ns.old", SCHEMA)
    with caplog.at_level("WARNING", logger="icecommit"):
        found = ic.connect()
    assert found.load_table("ns.old") is not None
    notices = [r.getMessage() for r in caplog.records if "earlier icecommit" in r.getMessage()]
    assert len(notices) == 1 and str(tmp_path / "xdg" / "icecommit") in notices[0]
    assert not (tmp_path / "xdg").exists()


def test_a_warehouse_without_a_uri_holds_the_embedded_catalog_too(tmp_path: Path) -> None:
    first = ic.connect(warehouse=str(tmp_path / "one"))
    ic.create_table(first, "ns.t", SCHEMA)
    assert (tmp_path / "one" / "catalog.db").is_file()
    assert first.load_table("ns.t").metadata.location.startswith(f"file://{tmp_path / 'one'}")
    assert not (tmp_path / "home" / "catalog.db").exists()  # not the home's
    fresh = ic.connect(warehouse=str(tmp_path / "two"))
    assert fresh.list_namespaces() == []  # another warehouse is another catalog
    with pytest.raises(ic.errors.CatalogUnavailableError, match="give a catalog URI"):
        ic.connect(warehouse="s3://bucket/wh")
    with pytest.raises(ic.errors.CatalogUnavailableError, match="does not exist"):
        ic.connect(warehouse=str(tmp_path / "three"), create=False)
    assert not (tmp_path / "three").exists()  # reading creates nothing


def test_environment_variables_come_before_the_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ICECOMMIT_CATALOG_URI", f"sqlite:///{tmp_path / 'env.db'}")
    monkeypatch.setenv("ICECOMMIT_WAREHOUSE", str(tmp_path / "env-wh"))
    catalog = ic.connect()
    ic.create_table(catalog, "ns.t", SCHEMA)
    assert (tmp_path / "env.db").is_file()
    assert catalog.load_table("ns.t").metadata.location.startswith((tmp_path / "env-wh").as_uri())


def test_explicit_arguments_come_before_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ICECOMMIT_CATALOG_URI", f"sqlite:///{tmp_path / 'env.db'}")
    catalog = ic.connect(uri=f"sqlite:///{tmp_path / 'explicit.db'}", warehouse=str(tmp_path / "wh"))
    ic.create_table(catalog, "ns.t", SCHEMA)
    assert (tmp_path / "explicit.db").is_file()
    assert not (tmp_path / "env.db").exists()


def test_named_catalog_is_configured_the_pyiceberg_way(tmp_path: Path) -> None:
    # pyiceberg reads its configuration once per process, so this runs in a fresh one
    (tmp_path / "prod-wh").mkdir()
    env = {
        **os.environ,
        "PYICEBERG_CATALOG__PROD__TYPE": "sql",
        "PYICEBERG_CATALOG__PROD__URI": f"sqlite:///{tmp_path / 'prod.db'}",
        "PYICEBERG_CATALOG__PROD__WAREHOUSE": (tmp_path / "prod-wh").as_uri(),
    }
    code = (
        "import pyarrow as pa, icecommit as ic\n"
        "c = ic.connect(name='prod')\n"
        "ic.create_table(c, 'ns.t', pa.schema([pa.field('id', pa.int64())]))\n"
        "print(c.name, c.load_table('ns.t').metadata.location)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    name, location = out.stdout.split()
    assert name == "prod"
    assert location.startswith((tmp_path / "prod-wh").as_uri())
    assert (tmp_path / "prod.db").is_file()


def test_postgres_uri(catalog: SqlCatalog) -> None:
    # the fixture runs on both backends; connect() with the same URI reaches the same catalog
    again = ic.connect(catalog.name, uri=catalog.properties["uri"], warehouse=catalog.properties["warehouse"])
    ic.create_table(catalog, f"{catalog.name}.t", SCHEMA)
    assert again.load_table(f"{catalog.name}.t").schema() == catalog.load_table(f"{catalog.name}.t").schema()
    catalog.drop_table(f"{catalog.name}.t")
    assert isinstance(again, SqlCatalog)
    again.engine.dispose()


def test_an_http_uri_is_a_rest_catalog_and_one_that_does_not_answer_is_named() -> None:
    # port 9 (discard) refuses at once: pyiceberg's first request, GET /v1/config, fails
    with pytest.raises(
        ic.errors.CatalogUnavailableError, match=r"catalog icecommit \(http://127\.0\.0\.1:9\): cannot be loaded"
    ):
        ic.connect(uri="http://127.0.0.1:9")
    with pytest.raises(CatalogUnavailableError, match=r"catalog prod \(http://127\.0\.0\.1:9\)"):
        ic.connect("prod", type="rest", uri="http://127.0.0.1:9")


@pytest.mark.parametrize(
    ("error", "transient"),
    [
        (requests.exceptions.ConnectionError("refused"), True),
        (requests.exceptions.ReadTimeout("slow"), True),
        (requests.exceptions.SSLError("certificate verify failed"), False),
        (ServiceUnavailableError("503"), True),
        (ServerError("500"), True),
        (TooManyRequestsError("429"), True),
        (CommitStateUnknownException("504"), True),
        (BadRequestError("400"), False),
        (ForbiddenError("403"), False),
    ],
    ids=repr,
)
def test_a_rest_catalogs_transient_failures_are_told_from_its_refusals(error: Exception, transient: bool) -> None:
    assert is_transient(error) is transient


def test_a_rest_servers_refusal_of_a_stale_sequence_number_is_a_conflict() -> None:
    assert is_commit_conflict(
        BadRequestError("Cannot add snapshot with sequence number 7 older than last sequence number 8")
    )
    assert not is_commit_conflict(BadRequestError("Invalid schema"))
