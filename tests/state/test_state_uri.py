"""Where the state database is: the catalog's property ``icecommit.state-uri``, else
``ICECOMMIT_STATE_URI`` (or its earlier name ``ICECOMMIT_METRICS_URI``), else the SQL
catalog's own database, else a SQLite file in ``$ICECOMMIT_HOME``."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyiceberg.catalog.sql import SqlCatalog

import icecommit as ic
from icecommit.state.database import state_uri


@pytest.fixture
def sql_catalog(tmp_path: Path) -> SqlCatalog:
    catalog = ic.connect(uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=f"file://{tmp_path}/wh")
    assert isinstance(catalog, SqlCatalog)
    return catalog


def test_the_catalogs_property_wins_then_the_environment_then_the_catalogs_database(
    sql_catalog: SqlCatalog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert state_uri(sql_catalog) == f"sqlite:///{tmp_path}/catalog.db"
    monkeypatch.setenv("ICECOMMIT_METRICS_URI", "sqlite:////old/name.db")
    assert state_uri(sql_catalog) == "sqlite:////old/name.db"  # the earlier name still works
    monkeypatch.setenv("ICECOMMIT_STATE_URI", "sqlite:////env/state.db")
    assert state_uri(sql_catalog) == "sqlite:////env/state.db"  # and the new one wins over it
    named = ic.connect(
        uri=f"sqlite:///{tmp_path}/catalog.db",
        warehouse=f"file://{tmp_path}/wh",
        **{"icecommit.state-uri": "sqlite:////catalog/state.db"},
    )
    assert state_uri(named) == "sqlite:////catalog/state.db"  # where the catalog is configured wins


def test_without_a_sql_catalog_the_state_is_a_file_in_the_home_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ICECOMMIT_HOME", str(tmp_path / "home"))
    assert state_uri(None) == f"sqlite:///{tmp_path / 'home' / 'icecommit-state.db'}"
