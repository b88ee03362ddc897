from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog

import icecommit as ic

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False)])


def test_embedded_default_lives_under_icecommit_home(tmp_path: Path) -> None:
    catalog = ic.connect()
    assert isinstance(catalog, SqlCatalog)
    ic.create_table(catalog, "ns.t", SCHEMA)
    home = tmp_path / "home"
    assert (home / "catalog.db").is_file()
    assert catalog.load_table("ns.t").metadata.location.startswith(home.as_uri())


def test_default_home_is_warehouse_in_the_working_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ICECOMMIT_HOME")
    monkeypatch.chdir(tmp_path)
    ic.connect()
    assert (tmp_path / "warehouse" / "catalog.db").is_file()


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
