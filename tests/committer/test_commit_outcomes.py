"""What a commit's outcome leaves in the state and at the command line: an unknown outcome
(the reply lost after the catalog accepted) is resolved by the ancestry and counted, an
empty checkpoint is recorded as committed with no snapshot, and an unknown outcome exits 3
at the command line."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from pyiceberg.catalog.sql import SqlCatalog

import icecommit as ic
from icecommit.committer import RetryPolicy
from tests.cli.runner import invoke
from tests.fakes import ScriptedCatalog, prepared_committer
from tests.helpers import EVENTS_SCHEMA, events, write_arrow


def test_an_unknown_outcome_is_counted(scripted_catalog: ScriptedCatalog) -> None:
    committer = prepared_committer(
        scripted_catalog, retry_policy=RetryPolicy(max_attempts=3, min_wait_s=0.001, max_wait_s=0.002)
    )

    def lost() -> None:
        raise ConnectionError("reply lost after the catalog accepted the commit")

    scripted_catalog.after = [lost]
    assert committer.commit(1).status == "committed"  # the ancestry shows it landed
    state = committer.store.get("A", committer.table_name, 1)
    assert state is not None and state.unknown_outcomes == 1
    assert len(scripted_catalog.load_table(committer.table_name).metadata.snapshots) == 1


def test_an_empty_checkpoint_is_recorded_committed(catalog: SqlCatalog) -> None:
    name = f"{catalog.name}.events"
    table = ic.create_table(catalog, name, EVENTS_SCHEMA)
    committer = ic.GlobalCommitter(catalog, name, job_id="A")
    committer.prepare(1, [write_arrow(table, events(0, 0), job_id="A", checkpoint_id=1)])
    assert committer.commit(1).status == "empty"
    state = committer.store.get("A", name, 1)
    assert state is not None and (state.status, state.snapshot_id) == ("committed", None)
    assert committer.recover() == []  # nothing left to do for it


def test_an_unknown_outcome_exits_3_at_the_command_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    ic.connect(uri=f"sqlite:///{home / 'catalog.db'}", warehouse=str(home))
    main = sys.modules["icecommit.cli.main"]

    def unknown(*_args: object, **_kwargs: object) -> Callable[[], None]:
        raise ic.CommitStateUnknownError("ns.events", 7, ConnectionError("reply lost"))

    monkeypatch.setattr(main, "list_snapshots", unknown)
    result = invoke(home, "snapshots", "ns.events")
    assert result.returncode == 3 and "checkpoint 7" in result.stderr and "Traceback" not in result.stderr
