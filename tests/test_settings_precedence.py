"""The table "Which settings win" of docs/production.md, row by row: for each setting, each
source beats every source to its right."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog

import icecommit as ic
from icecommit.committer import modes
from icecommit.errors import StateDatabaseNotConfiguredError
from icecommit.state import state_uri

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = pa.schema([pa.field("id", pa.int64())])


def _connect_in_a_fresh_process(tmp_path: Path, env: dict[str, str], code: str) -> dict[str, str]:
    """``code`` (it sets ``catalog``) in a new interpreter (pyiceberg reads its configuration
    once per process), with only ``env`` and a home of its own; the catalog's uri and warehouse."""
    shown = "print(json.dumps({k: catalog.properties.get(k) for k in ('uri', 'warehouse', 'py-io-impl')}))"
    script = f"import json, icecommit as ic\n{code}\n{shown}"
    base = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "ICECOMMIT_HOME": str(tmp_path / "home"),
            "PYICEBERG_HOME": str(tmp_path)}  # fmt: skip
    done = subprocess.run([sys.executable, "-c", script], env={**base, **env}, capture_output=True, text=True,
                          cwd=tmp_path, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def _yaml(tmp_path: Path, uri: str, warehouse: str) -> None:
    (tmp_path / ".pyiceberg.yaml").write_text(
        f"catalog:\n  prod:\n    type: sql\n    uri: {uri}\n    warehouse: {warehouse}\n"
    )


def test_the_catalog_an_explicit_uri_then_the_name_then_the_environment_then_the_embedded_one(tmp_path: Path) -> None:
    named, env, explicit = (f"sqlite:///{tmp_path / f'{n}.db'}" for n in ("named", "env", "explicit"))
    (tmp_path / "wh").mkdir()
    _yaml(tmp_path, named, (tmp_path / "wh").as_uri())
    environment = {"ICECOMMIT_CATALOG_URI": env}
    # 1 beats 2, 3: an explicit uri
    found = _connect_in_a_fresh_process(tmp_path, environment, f"catalog = ic.connect('prod', uri={explicit!r})")
    assert found["uri"] == explicit
    # 2 beats 3: the named catalog, whatever the environment's default says, with the same
    # defaults as a catalog opened by its URI (the FileIO that writes without probing)
    by_name = _connect_in_a_fresh_process(tmp_path, environment, "catalog = ic.connect('prod')")
    assert by_name["uri"] == named
    assert by_name["py-io-impl"] == found["py-io-impl"] == "icecommit.catalog.fileio.UniqueNamesFileIO"
    # pyiceberg's own rule inside 2: its environment variables over the file
    overridden = {"PYICEBERG_CATALOG__PROD__URI": env}
    assert _connect_in_a_fresh_process(tmp_path, overridden, "catalog = ic.connect('prod')")["uri"] == env
    # a default catalog by name: ICECOMMIT_CATALOG, as a name given (so over the environment's uri)
    defaulted = {**environment, "ICECOMMIT_CATALOG": "prod"}
    assert _connect_in_a_fresh_process(tmp_path, defaulted, "catalog = ic.connect()")["uri"] == named
    # 3 beats 4: without a name, the environment's uri
    assert _connect_in_a_fresh_process(tmp_path, environment, "catalog = ic.connect()")["uri"] == env
    # 4: the embedded catalog in $ICECOMMIT_HOME
    embedded = _connect_in_a_fresh_process(tmp_path, {}, "catalog = ic.connect()")["uri"]
    assert embedded == f"sqlite:///{tmp_path / 'home' / 'catalog.db'}"


def test_the_warehouse_an_explicit_one_then_the_named_catalogs_then_the_environment_then_home(tmp_path: Path) -> None:
    for name in ("named-wh", "env-wh", "explicit-wh"):
        (tmp_path / name).mkdir()
    _yaml(tmp_path, f"sqlite:///{tmp_path / 'named.db'}", (tmp_path / "named-wh").as_uri())
    environment = {"ICECOMMIT_WAREHOUSE": str(tmp_path / "env-wh")}
    explicit = str(tmp_path / "explicit-wh")
    found = _connect_in_a_fresh_process(tmp_path, environment, f"catalog = ic.connect('prod', warehouse={explicit!r})")
    assert found["warehouse"].endswith("explicit-wh")
    assert _connect_in_a_fresh_process(tmp_path, environment, "catalog = ic.connect('prod')")["warehouse"].endswith(
        "named-wh"
    )
    assert _connect_in_a_fresh_process(tmp_path, environment, "catalog = ic.connect()")["warehouse"].endswith("env-wh")
    assert _connect_in_a_fresh_process(tmp_path, {}, "catalog = ic.connect()")["warehouse"].endswith("home")


def test_the_state_database_named_in_pyicebergs_configuration_and_the_cli_flags(tmp_path: Path) -> None:
    (tmp_path / "wh").mkdir()
    _yaml(tmp_path, f"sqlite:///{tmp_path / 'named.db'}", (tmp_path / "wh").as_uri())
    state = f"sqlite:///{tmp_path / 'state.db'}"
    code = "catalog = ic.connect('prod')\nfrom icecommit.state import state_uri\nprint(state_uri(catalog))"
    script = f"import icecommit as ic\n{code}"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYICEBERG_HOME": str(tmp_path),
           "ICECOMMIT_HOME": str(tmp_path / "home"),
           "PYICEBERG_CATALOG__PROD__ICECOMMIT__STATE_URI": state}  # fmt: skip
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == state  # the documented environment variable names it
    # the command line: --catalog NAME and --uri reach the same resolution
    cli = [sys.executable, "-m", "icecommit.cli", "--output", "json"]
    named = subprocess.run([*cli, "--catalog", "prod", "tables"], env=env, capture_output=True, text=True, cwd=tmp_path)
    assert named.returncode == 0, named.stderr
    assert (tmp_path / "named.db").is_file()
    flag = ic.connect(uri=f"sqlite:///{tmp_path / 'flag.db'}", warehouse=str(tmp_path / "wh"))
    ic.create_table(flag, "ns.by_flag", SCHEMA)
    flag.engine.dispose()  # type: ignore[attr-defined]
    by_uri = subprocess.run([*cli, "--uri", f"sqlite:///{tmp_path / 'flag.db'}", "--warehouse", str(tmp_path / "wh"),
                             "tables"], env=env, capture_output=True, text=True, cwd=tmp_path)  # fmt: skip
    assert by_uri.returncode == 0, by_uri.stderr
    assert "ns.by_flag" in by_uri.stdout


def test_the_state_database_the_property_then_the_environment_then_the_sql_catalogs_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    own = f"sqlite:///{tmp_path / 'catalog.db'}"
    catalog = SqlCatalog("c", uri=own, warehouse=tmp_path.as_uri())
    assert state_uri(catalog) == own  # 3
    monkeypatch.setenv("ICECOMMIT_STATE_URI", f"sqlite:///{tmp_path / 'env-state.db'}")
    assert state_uri(catalog) == f"sqlite:///{tmp_path / 'env-state.db'}"  # 2 beats 3
    named = SqlCatalog("c", uri=own, warehouse=tmp_path.as_uri(),
                       **{"icecommit.state-uri": f"sqlite:///{tmp_path / 'prop.db'}"})  # fmt: skip
    assert state_uri(named) == f"sqlite:///{tmp_path / 'prop.db'}"  # 1 beats 2
    monkeypatch.delenv("ICECOMMIT_STATE_URI")

    class Rest:  # a catalog that is not a SQL catalog, with no state database named
        name, properties = "prod", {"uri": "https://catalog.example.com"}

    with pytest.raises(StateDatabaseNotConfiguredError, match=r"icecommit\.state-uri"):
        state_uri(Rest())  # type: ignore[arg-type]


def test_a_write_option_the_keyword_then_the_options_field_then_the_table_property_then_the_default() -> None:
    options = ic.WriteOptions(branch="from-options", target_file_size=1 << 20)
    assert ic.WriteOptions.of(options, branch="from-keyword").branch == "from-keyword"  # keyword over options
    assert ic.WriteOptions.of(options).branch == "from-options"
    upsert = {"icecommit.write-mode": "upsert"}
    assert modes.named("append", upsert).name == "append"  # the option over the table property
    assert modes.named(None, upsert).name == "upsert"  # the table property over the default
    assert modes.named(None, {}).name == "append"  # the default


def test_a_default_catalog_name_that_opens_nothing_says_where_it_came_from(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ICECOMMIT_CATALOG", "nowhere")
    with pytest.raises(ic.errors.CatalogUnavailableError, match=r"catalog nowhere \(named by ICECOMMIT_CATALOG\)"):
        ic.connect()
