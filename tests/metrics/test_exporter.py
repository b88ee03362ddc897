"""``icecommit metrics``: the state's numbers in the Prometheus text format, read back."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import urllib.request
from datetime import timedelta
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from pyiceberg.catalog.sql import SqlCatalog
from sqlalchemy import create_engine

import icecommit as ic
from icecommit.errors import CheckpointRolledBackError, ValidationError
from icecommit.maintenance.compaction import compact
from icecommit.maintenance.expire import apply_expire, plan_expire
from icecommit.maintenance.orphans import find_orphans
from icecommit.maintenance.rollback import apply_rollback, plan_rollback
from icecommit.metrics.exporter import StateMetrics, exposition
from icecommit.metrics.runs import record_run
from icecommit.state import state_engine, state_uri
from tests.cli.runner import invoke
from tests.conftest import unique_table
from tests.fakes import TARGET, small_checkpoints
from tests.helpers import EVENTS_SCHEMA, events, write_arrow

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parsed(text: str) -> Samples:
    """Every sample of a Prometheus text exposition, by (name, labels)."""
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, frozenset(labels.items()))]


def _table(catalog: SqlCatalog) -> str:
    name = unique_table()
    ic.create_table(catalog, name, EVENTS_SCHEMA, partition_by=["event"],
                    properties={"write.target-file-size-bytes": str(TARGET)})  # fmt: skip
    return name


def test_every_number_is_the_states(catalog: SqlCatalog) -> None:
    name = _table(catalog)
    small_checkpoints(catalog, name, 3, job="a")  # 3 x 60 rows
    assert ic.GlobalCommitter(catalog, name, job_id="a").commit(1).status == "already-committed"  # a replay
    # a replay of a checkpoint a rollback removed is refused, and counted; bad input is refused
    # too, and leaves the state as it was
    small_checkpoints(catalog, name, 2, job="c")
    apply_rollback(catalog, plan_rollback(catalog, name, to_checkpoint=0, job_id="c"))
    with pytest.raises(CheckpointRolledBackError):
        ic.GlobalCommitter(catalog, name, job_id="c").commit(1)
    refusing = ic.GlobalCommitter(catalog, name, job_id="c")
    with pytest.raises(ValidationError):
        refusing.prepare(9, [write_arrow(refusing.load_table(), events(0, 5), job_id="c", checkpoint_id=8)])
    stuck = ic.GlobalCommitter(catalog, name, job_id="b")
    stuck.prepare(7, [write_arrow(stuck.load_table(), events(1000, 1010), job_id="b", checkpoint_id=7)])
    engine = state_engine(state_uri(catalog))
    record_run(engine, ic.reconcile(catalog, name, job_id="a"))
    assert compact(catalog, name, min_input_files=2).committed >= 1
    expired = apply_expire(catalog, plan_expire(catalog, name, older_than=timedelta(0), retain_last=1))
    swept = find_orphans(catalog, name, older_than=timedelta(0), delete=True)

    text = exposition(StateMetrics(engine, tables=[name], stuck_after=timedelta(0)))
    found = parsed(text)
    assert value(found, "icecommit_state_up") == 1
    assert value(found, "icecommit_checkpoints", table=name, job="a", status="committed") == 3
    assert value(found, "icecommit_checkpoints", table=name, job="b", status="prepared") == 1
    assert value(found, "icecommit_checkpoints_stuck", table=name, job="b") == 1
    assert value(found, "icecommit_checkpoints_stuck", table=name, job="a") == 0
    assert value(found, "icecommit_rows_committed_total", table=name, job="a") == 180
    assert value(found, "icecommit_rows_committed_total", table=name, job="b") == 0  # prepared, not committed
    assert value(found, "icecommit_commit_attempts_total", table=name, job="a") == 3
    assert value(found, "icecommit_replays_skipped_total", table=name, job="a") == 1
    refused = "icecommit_checkpoints_refused_total"
    assert value(found, refused, table=name, job="c", kind="CheckpointRolledBackError") == 1
    assert [labels for n, labels in found if n == refused] == [
        frozenset({("table", name), ("job", "c"), ("kind", "CheckpointRolledBackError")})
    ]  # the bad input left no trace
    assert 0 <= value(found, "icecommit_seconds_since_last_commit", table=name, job="a") < 120
    assert ("icecommit_seconds_since_last_commit", frozenset({("table", name), ("job", "b")})) not in found
    assert value(found, "icecommit_reconcile_ok", table=name, job="a") == 1
    assert value(found, "icecommit_reconcile_lost_rows", table=name, job="a") == 0
    assert value(found, "icecommit_reconcile_duplicated_rows", table=name, job="a") == 0
    assert value(found, "icecommit_compaction_groups", table=name, status="committed") >= 1
    for kind in ("compaction", "expiry", "orphans"):
        assert value(found, "icecommit_maintenance_runs_total", table=name, kind=kind) == 1
    work = "icecommit_maintenance_work_total"
    assert value(found, work, table=name, kind="expiry", work="snapshots_expired") == len(expired.expired_snapshot_ids)
    assert value(found, work, table=name, kind="expiry", work="files_deleted") == expired.deleted_files
    assert value(found, work, table=name, kind="orphans", work="files_deleted") == len(swept.orphans)
    assert value(found, work, table=name, kind="compaction", work="files_rewritten") >= 2
    # counts and times only: no URI, path or row value
    for secret in ("sqlite", "postgresql", "file:", str(catalog.properties["warehouse"]), "click"):
        assert secret not in text

    later = parsed(exposition(StateMetrics(engine, tables=[name])))  # the default: stuck after 15 minutes
    assert value(later, "icecommit_checkpoints_stuck", table=name, job="b") == 0


@pytest.mark.database_independent
def test_only_the_tables_asked_for(catalog: SqlCatalog) -> None:
    first, second = _table(catalog), _table(catalog)
    small_checkpoints(catalog, first, 1, job="a")
    small_checkpoints(catalog, second, 2, job="a")
    engine = state_engine(state_uri(catalog))
    found = parsed(exposition(StateMetrics(engine, tables=[second])))
    assert value(found, "icecommit_checkpoints", table=second, job="a", status="committed") == 2
    assert not any(dict(labels).get("table") == first for _, labels in found)


def test_a_state_database_that_does_not_answer_is_up_0_and_nothing_else() -> None:
    engine = create_engine("postgresql+psycopg://postgres:secret@127.0.0.1:1/nothing")
    text = exposition(StateMetrics(engine))
    assert parsed(text) == {("icecommit_state_up", frozenset()): 0.0}
    assert "secret" not in text


def test_the_command_prints_them_and_says_what_to_install_without_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    catalog = ic.connect(uri=f"sqlite:///{home / 'catalog.db'}", warehouse=str(home))
    ic.create_table(catalog, "ns.events", EVENTS_SCHEMA, partition_by=["event"])
    small_checkpoints(catalog, "ns.events", 2, job="clicks")
    catalog.engine.dispose()  # type: ignore[attr-defined]
    done = invoke(home, "metrics", "--table", "ns.events")
    assert done.returncode == 0, done.stderr
    assert value(parsed(done.stdout), "icecommit_checkpoints", table="ns.events", job="clicks", status="committed") == 2
    typo = invoke(home, "metrics", "--table", "ns.evnets")
    assert typo.returncode == 2 and "--table='ns.evnets'" in typo.stderr and "ns.events" in typo.stderr, typo.stderr
    late = invoke(home, "metrics", "--stuck-after", "banana")
    assert late.returncode == 2 and "--stuck-after" in late.stderr
    monkeypatch.setitem(sys.modules, "prometheus_client", None)  # as if not installed
    missing = invoke(home, "metrics")
    assert missing.returncode == 4 and "pip install 'icecommit[metrics]'" in missing.stderr, missing.stderr


def test_serve_takes_the_options_given_before_it_and_binds_to_loopback(tmp_path: Path) -> None:
    home = tmp_path / "home"
    catalog = ic.connect(uri=f"sqlite:///{home / 'catalog.db'}", warehouse=str(home))
    for name in ("ns.one", "ns.two"):
        ic.create_table(catalog, name, EVENTS_SCHEMA, partition_by=["event"])
        small_checkpoints(catalog, name, 1, job="j")
    catalog.engine.dispose()  # type: ignore[attr-defined]
    command = [sys.executable, "-m", "icecommit.cli", "metrics", "--table", "ns.two", "serve", "--port", "0"]
    server = subprocess.Popen(
        command, stderr=subprocess.PIPE, text=True, env={**os.environ, "ICECOMMIT_HOME": str(home)}
    )
    try:
        url = served_url(server)
        assert url.startswith("http://127.0.0.1:")
        with urllib.request.urlopen(url, timeout=30) as response:
            found = parsed(response.read().decode())
        taken = invoke(home, "metrics", "serve", "--port", url.split(":")[-1].split("/")[0])  # its port, in use
        assert taken.returncode == 2 and "--port=" in taken.stderr and "--port 0" in taken.stderr, taken.stderr
    finally:
        server.terminate()
        server.communicate(timeout=30)
    assert value(found, "icecommit_checkpoints", table="ns.two", job="j", status="committed") == 1
    assert not any(dict(labels).get("table") == "ns.one" for _, labels in found)


def served_url(server: subprocess.Popen[str]) -> str:
    """The URL ``icecommit metrics serve`` says it serves (its first lines on stderr may be warnings)."""
    assert server.stderr is not None
    for _ in range(50):
        line = server.stderr.readline()
        if found := re.search(r"http://[^ ]+/metrics", line):
            return found.group(0)
        if not line:
            break
    raise AssertionError(f"no URL printed; exit code {server.poll()}")


def test_counts_for_the_metrics_never_fail_the_work_they_count(caplog: pytest.LogCaptureFixture) -> None:
    from icecommit.state.checkpoints import CheckpointStore
    from icecommit.state.maintenance_runs import MaintenanceRunStore

    down = create_engine("postgresql+psycopg://postgres@127.0.0.1:1/nothing")  # nothing answers there
    CheckpointStore(down).record_replay("j", "ns.t", 3)
    CheckpointStore(down).record_refusal("j", "ns.t", 3, "CheckpointRolledBackError")
    MaintenanceRunStore(down).record("ns.t", "expiry", 1.5, {"snapshots_expired": 2})
    logged = [r.getMessage() for r in caplog.records if "was not recorded for the metrics" in r.getMessage()]
    assert len(logged) == 3, caplog.text
