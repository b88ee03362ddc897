"""A table of the catalog that cannot be read (its metadata gone, its catalog row left
behind) cannot vouch for its files: expiry and the orphan sweep delete nothing while one is
left that the caller did not name, and say which and what to do; listing, dry runs and an
expiry that deletes no file still work and name it."""

from __future__ import annotations

import os
import time
from datetime import timedelta
from pathlib import Path

import pytest
from pyiceberg.catalog.sql import SqlCatalog

import icecommit as ic
from icecommit.errors import EnvironmentFailureError, UnreadableTablesError
from icecommit.maintenance import apply_expire, find_orphans, plan_expire
from tests.cli.runner import invoke
from tests.fakes import catalog_of
from tests.helpers import EVENTS_SCHEMA, events, write_arrow


def _commit(catalog: SqlCatalog, name: str, checkpoint_id: int) -> None:
    committer = ic.GlobalCommitter(catalog, name, job_id="j")
    rows = events(checkpoint_id * 10, checkpoint_id * 10 + 5)
    committer.prepare(
        checkpoint_id, [write_arrow(committer.load_table(), rows, job_id="j", checkpoint_id=checkpoint_id)]
    )
    committer.commit(checkpoint_id)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """ns.a with three checkpoints and an orphan file; ns.b broken: its metadata wiped."""
    catalog = catalog_of(tmp_path)
    catalog.create_namespace("ns")
    for name in ("ns.a", "ns.b"):
        ic.create_table(catalog, name, EVENTS_SCHEMA)
    for n in (1, 2, 3):
        _commit(catalog, "ns.a", n)
    _commit(catalog, "ns.b", 1)
    location = Path(catalog.load_table("ns.a").metadata.location.removeprefix("file://"))
    orphan = location / "data" / "left-behind.parquet"
    orphan.write_bytes(b"nobody's")
    old = time.time() - 3600
    os.utime(orphan, (old, old))
    broken = Path(catalog.load_table("ns.b").metadata.location.removeprefix("file://"))
    for file in (broken / "metadata").glob("*.metadata.json"):
        file.unlink()
    catalog.engine.dispose()
    return tmp_path


def _orphan(home: Path) -> Path:
    return next(home.rglob("left-behind.parquet"))


def test_the_sweep_lists_but_deletes_nothing_until_the_unreadable_table_is_named(home: Path) -> None:
    catalog = catalog_of(home)
    listed = find_orphans(catalog, "ns.a", older_than=timedelta(minutes=1))
    assert [Path(o.path).name for o in listed.orphans] == ["left-behind.parquet"]
    assert list(listed.unreadable_tables) == ["ns.b"] and "FileNotFoundError" in listed.unreadable_tables["ns.b"]
    with pytest.raises(UnreadableTablesError) as refused:
        find_orphans(catalog, "ns.a", older_than=timedelta(minutes=1), delete=True)
    assert isinstance(refused.value, EnvironmentFailureError) and list(refused.value.unreadable) == ["ns.b"]
    assert "nothing was deleted" in str(refused.value) and "--ignore-unreadable TABLE" in str(refused.value)
    assert _orphan(home).exists()
    swept = find_orphans(catalog, "ns.a", older_than=timedelta(minutes=1), delete=True, ignore_unreadable=["ns.b"])
    assert swept.deleted and swept.ignored_tables == ("ns.b",) and swept.unreadable_tables == {}
    assert not list(home.rglob("left-behind.parquet"))


def test_expiry_plans_but_deletes_nothing_until_the_unreadable_table_is_named(home: Path) -> None:
    catalog = catalog_of(home)
    nothing_goes = plan_expire(catalog, "ns.a", older_than=timedelta(days=365), retain_last=10)
    assert nothing_goes.files_to_delete == () and list(nothing_goes.unreadable_tables) == ["ns.b"]
    assert apply_expire(catalog, nothing_goes).applied  # deletes no file: needs no proof
    plan = plan_expire(catalog, "ns.a", older_than=timedelta(0), retain_last=1)
    assert plan.files_to_delete and list(plan.unreadable_tables) == ["ns.b"]
    before = catalog.load_table("ns.a").metadata
    with pytest.raises(UnreadableTablesError):
        apply_expire(catalog, plan)
    after = catalog.load_table("ns.a").metadata
    assert after.snapshots == before.snapshots and all(
        Path(p.removeprefix("file://")).exists() for p in plan.files_to_delete
    )
    named = plan_expire(catalog, "ns.a", older_than=timedelta(0), retain_last=1, ignore_unreadable=["ns.b"])
    assert named.unreadable_tables == {} and named.ignored_tables == ("ns.b",)
    done = apply_expire(catalog, named)
    assert done.deleted_files == len(named.files_to_delete) > 0
    assert catalog.load_table("ns.a").scan().to_arrow().num_rows == 15


def test_the_commands_name_the_unreadable_table_and_the_flag(home: Path) -> None:
    listed = invoke(home, "orphans", "ns.a", "--older-than", "1m")
    assert listed.returncode == 0 and "could not read table ns.b" in listed.stdout
    refused = invoke(home, "orphans", "ns.a", "--older-than", "1m", "--delete")
    assert refused.returncode == 4 and "ns.b" in refused.stderr and "--ignore-unreadable" in refused.stderr
    assert _orphan(home).exists()
    done = invoke(home, "orphans", "ns.a", "--older-than", "1m", "--delete", "--ignore-unreadable", "ns.b")
    assert done.returncode == 0 and "ignored as asked" in done.stdout
    expire = invoke(home, "expire", "ns.a", "--older-than", "0s", "--retain-last", "1", "--no-dry-run")
    assert expire.returncode == 4 and "nothing was deleted" in expire.stderr
