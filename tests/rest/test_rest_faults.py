"""A REST catalog's failure modes, at seeded points: a commit carried out whose answer is a
500, 502, 503 or 504, a 503 answered without forwarding, and a 409 (tests/rest/proxy.py in
front of Iceberg's own REST handlers). Every checkpoint lands exactly once, the unknown
outcomes are resolved by the table's ancestry (no CommitStateUnknownError reaches the job),
and rollback, expiry, compaction and the orphan sweep that follow through the same proxy
delete nothing a landed commit needs."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from pyiceberg.catalog import Catalog
from pyiceberg.table import Table

import icecommit as ic
from icecommit.committer import RetryPolicy, committed_checkpoints
from icecommit.maintenance import apply_expire, apply_rollback, find_orphans, plan_expire, plan_rollback
from icecommit.maintenance.compaction import compact
from tests.committer.crash_driver import checkpoint_rows
from tests.conftest import pg_uri, rest_url
from tests.helpers import EVENTS_SCHEMA, write_arrow
from tests.rest.proxy import FORWARDED, KINDS, RestFaultProxy

pytestmark = pytest.mark.rest

POLICY = RetryPolicy(max_attempts=30, max_seconds=120, min_wait_s=0.001, max_wait_s=0.01)


@pytest.fixture
def proxy(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RestFaultProxy]:
    seed = getattr(request, "param", 0)
    started = RestFaultProxy(rest_url(tmp_path_factory), seed=seed, repeat=2, passes=4).start()
    yield started
    started.stop()


def _catalog(proxy: RestFaultProxy) -> Catalog:
    name = f"f{uuid.uuid4().hex[:10]}"
    return ic.connect(name, **{"type": "rest", "uri": proxy.url, "icecommit.state-uri": pg_uri()})


def _events(proxy: RestFaultProxy) -> tuple[Catalog, str, ic.GlobalCommitter]:
    """A new catalog behind ``proxy``, a table of events in it, and job "job"'s committer."""
    catalog = _catalog(proxy)
    name = f"{catalog.name}.events"
    ic.create_table(catalog, name, EVENTS_SCHEMA, partition_by=["event"])
    return catalog, name, ic.GlobalCommitter(catalog, name, job_id="job", retry_policy=POLICY)


def _land(committer: ic.GlobalCommitter, checkpoint_id: int) -> ic.CommitResult:
    rows = checkpoint_rows(checkpoint_id)
    results = [write_arrow(committer.load_table(), rows, job_id=committer.job_id, checkpoint_id=checkpoint_id)]
    committer.prepare(checkpoint_id, results)
    return committer.commit(checkpoint_id)


def _ids(table: Table) -> Counter[int]:
    return Counter(table.scan(selected_fields=("id",)).to_arrow().column("id").to_pylist())


def _expected(checkpoints: range) -> Counter[int]:
    return Counter(i for c in checkpoints for i in checkpoint_rows(c).column("id").to_pylist())


def _local(location: str) -> Path:
    return Path(urlsplit(location).path)


def _needed_files(table: Table) -> set[Path]:
    """Every file a snapshot of the table needs: manifest lists, manifests, data files."""
    needed = set()
    for snapshot in table.metadata.snapshots:
        needed.add(_local(snapshot.manifest_list))
        for manifest in snapshot.manifests(table.io):
            needed.add(_local(manifest.manifest_path))
            for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
                needed.add(_local(entry.data_file.file_path))
    return needed


@pytest.mark.parametrize("proxy", [11, 12, 13], indirect=True)
def test_every_checkpoint_lands_once_whatever_the_rest_server_answers(proxy: RestFaultProxy) -> None:
    _, _, committer = _events(proxy)
    checkpoint = 0
    while proxy.plan or checkpoint < 8:  # the whole seeded plan, and at least 8 checkpoints
        checkpoint += 1
        result = _land(committer, checkpoint)
        assert result.status == "committed", result
    assert proxy.done == Counter({**{k: 2 for k in KINDS}, "passed": proxy.done["passed"]})

    table = committer.load_table()
    assert _ids(table) == _expected(range(1, checkpoint + 1))
    landed = Counter((c.job_id, c.checkpoint_id) for c in committed_checkpoints(table.metadata))
    assert landed == Counter(("job", c) for c in range(1, checkpoint + 1))
    states = committer.store.list(committer.table_name, job_id="job")
    assert [(s.checkpoint_id, s.status) for s in states] == [(c, "committed") for c in range(1, checkpoint + 1)]
    # the lost answers were found in the table: attempts were sent again only after a 503
    # that never reached the server, or a 409
    retried = sum(s.retries for s in states)
    refused = sum(proxy.done[k] for k in ("refused-503", "refused-429", "conflict-409"))
    assert retried >= refused - 3  # three may hit the table's claim
    assert all(path.is_file() for path in _needed_files(table))


def test_rollback_expiry_compaction_and_the_orphan_sweep_keep_what_landed_commits_need(
    proxy: RestFaultProxy,
) -> None:
    proxy.calm()
    catalog, name, committer = _events(proxy)
    for checkpoint in range(1, 7):
        _land(committer, checkpoint)

    # a rollback whose answer is lost after the server made it: found in the table, recorded
    proxy.plan[:] = ["lost-504"]
    plan = plan_rollback(catalog, name, to_checkpoint=5, job_id="job")
    apply_rollback(catalog, plan)
    assert proxy.done["lost-504"] == 1
    assert _ids(committer.load_table()) == _expected(range(1, 6))
    assert committer.store.get("job", committer.table_name, 6).status == "rolled-back"  # type: ignore[union-attr]

    # compaction, its groups' commits answered 502 after landing, then one refused with a 409
    proxy.plan[:] = ["lost-502", "conflict-409"]
    done = compact(catalog, name, min_input_files=2, retry_policy=POLICY)
    assert done.committed >= 1
    assert _ids(committer.load_table()) == _expected(range(1, 6))

    # expiry whose answer is a 500 after it landed: found, and only then are files deleted
    proxy.plan[:] = ["lost-500"]
    expiry = apply_expire(catalog, plan_expire(catalog, name, older_than=timedelta(0), retain_last=1))
    assert proxy.done["lost-500"] == 1 and expiry is not None
    table = committer.load_table()
    assert len(table.metadata.snapshots) == 1
    assert _ids(table) == _expected(range(1, 6))

    sweep = find_orphans(catalog, name, older_than=timedelta(0), delete=True)
    table = committer.load_table()
    assert all(path.is_file() for path in _needed_files(table))
    assert not {_local(o.path) for o in sweep.orphans} & _needed_files(table)
    assert _ids(table) == _expected(range(1, 6))
    # the job goes on: checkpoint 7 lands, the rolled-back 6 is not committed again
    assert _land(committer, 7).committed
    assert _ids(committer.load_table()) == _expected(range(1, 6)) + _expected(range(7, 8))
    assert not set(proxy.done) - {*FORWARDED, "conflict-409", "passed"}


def test_a_compaction_whose_commit_lands_after_the_gateway_gave_up_keeps_its_files(proxy: RestFaultProxy) -> None:
    """A 504 answered at once while the commit is still on its way: the attempt's outcome is
    unknown, the table does not show it yet, and it lands seconds later. Its rewritten files
    must still be there then (the table would point at deleted files)."""
    proxy.calm()
    catalog, name, committer = _events(proxy)
    for checkpoint in range(1, 5):
        _land(committer, checkpoint)
    proxy.plan[:] = ["late-504"]
    with pytest.raises(ic.CommitStateUnknownError, match="its files are kept"):
        compact(catalog, name, min_input_files=2, retry_policy=RetryPolicy(max_attempts=1))
    for later in proxy.late:
        later.join(30)
    table = committer.load_table()
    assert table.current_snapshot().summary.operation.value == "replace"  # type: ignore[union-attr]
    assert all(path.is_file() for path in _needed_files(table))
    assert _ids(table) == _expected(range(1, 5))
