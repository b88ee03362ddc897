"""Each refusal of the committer is its own error class (a ValidationError, so existing
handlers still catch it) carrying its facts as attributes; and each leaves the table, its
files and the state as they were."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyiceberg.catalog.sql import SqlCatalog

import icecommit as ic
from icecommit.errors import CheckpointReusedError, DataFileMissingError, StagedManifestError
from icecommit.state import CheckpointStore, state_engine
from icecommit.state.database import state_identity
from icecommit.state.identity import STATE_ID_PROPERTY
from tests.helpers import EVENTS_SCHEMA, events, write_arrow


def _table(catalog: SqlCatalog) -> str:
    name = f"{catalog.name}.events"
    ic.create_table(catalog, name, EVENTS_SCHEMA, partition_by=["event"])
    return name


def _results(committer: ic.GlobalCommitter, checkpoint_id: int, start: int, task_id: int = 0) -> list[ic.WriteResult]:
    table = committer.load_table()
    rows = events(start, start + 10)
    return [write_arrow(table, rows, job_id=committer.job_id, checkpoint_id=checkpoint_id, task_id=task_id)]


def _local(path: str) -> Path:
    return Path(path.removeprefix("file://"))


def test_other_files_under_a_used_checkpoint_id(catalog: SqlCatalog, tmp_path: Path) -> None:
    name = _table(catalog)
    committer = ic.GlobalCommitter(catalog, name, job_id="A")
    first = _results(committer, 1, 0)
    committer.prepare(1, first)
    second = _results(committer, 1, 100) + _results(committer, 1, 200, task_id=1)
    with pytest.raises(CheckpointReusedError) as prepared:
        committer.prepare(1, second)
    e = prepared.value
    assert isinstance(e, ic.ValidationError)
    staged, offered = len(first[0].data_files), sum(len(r.data_files) for r in second)
    assert (e.job_id, e.checkpoint_id, e.table, e.status) == ("A", 1, name, "prepared")
    assert (e.expected, e.actual) == (staged, offered) and staged < offered

    landed = committer.commit(1)
    # the state lost (and the table pointed at a new one): the table alone refuses, naming
    # the snapshot that holds the id
    other_state = CheckpointStore(state_engine(f"sqlite:///{tmp_path / 'lost.db'}"))
    with catalog.load_table(name).transaction() as tx:
        tx.set_properties({STATE_ID_PROPERTY: state_identity(other_state.engine)})
    before = catalog.load_table(name).metadata_location
    lost = ic.GlobalCommitter(catalog, name, job_id="A", store=other_state)
    with pytest.raises(CheckpointReusedError) as committed:
        lost.prepare(1, _results(lost, 1, 300))
    assert (committed.value.status, committed.value.snapshot_id) == ("committed", landed.snapshot_id)
    assert catalog.load_table(name).metadata_location == before
    assert other_state.list(name) == []


def test_a_data_file_missing_at_prepare_and_a_staged_file_lost_before_commit(catalog: SqlCatalog) -> None:
    name = _table(catalog)
    committer = ic.GlobalCommitter(catalog, name, job_id="A")
    results = _results(committer, 1, 0)
    gone = results[0].data_files[0]
    _local(gone.path).unlink()
    with pytest.raises(DataFileMissingError) as at_prepare:
        committer.prepare(1, results)
    e = at_prepare.value
    assert (e.path, e.expected, e.actual, e.bad, e.total) == (
        gone.path,
        gone.file_size_in_bytes,
        None,
        1,
        len(results[0].data_files),
    )
    assert committer.store.get("A", name, 1) is None  # nothing recorded

    results = _results(committer, 2, 100)
    committer.prepare(2, results)
    lost = results[0].data_files[-1]
    _local(lost.path).write_bytes(b"truncated")
    with pytest.raises(DataFileMissingError) as at_commit:
        committer.commit(2)
    e = at_commit.value
    assert (e.table, e.job_id, e.checkpoint_id, e.path, e.actual) == (name, "A", 2, lost.path, len(b"truncated"))
    assert (e.expected, e.bad, e.total) == (lost.file_size_in_bytes, 1, len(results[0].data_files))
    assert catalog.load_table(name).current_snapshot() is None
    state = committer.store.get("A", name, 2)
    assert state is not None and (state.status, state.counters.missing) == ("prepared", 1)


@pytest.mark.parametrize("damage", ["corrupt", "missing"])
def test_a_staged_manifest_that_cannot_be_read_names_itself_and_how_to_abandon(
    catalog: SqlCatalog, damage: str
) -> None:
    name = _table(catalog)
    committer = ic.GlobalCommitter(catalog, name, job_id="A")
    state = committer.prepare(1, _results(committer, 1, 0))
    assert state.manifest_path is not None
    manifest = _local(state.manifest_path)
    if damage == "corrupt":
        manifest.write_bytes(b"Obj\x01 not an avro file")
    else:
        manifest.unlink()
    for attempt in (committer.commit, lambda _n: committer.recover()):
        with pytest.raises(StagedManifestError) as raised:
            attempt(1)
        e = raised.value
        assert isinstance(e, ic.ValidationError)
        assert (e.job_id, e.checkpoint_id, e.table, e.path) == ("A", 1, name, state.manifest_path)
        if damage == "corrupt":  # names the decoder's own error
            assert f"{state.manifest_path} cannot be read ({type(e.__cause__).__name__}: " in str(e), str(e)
        else:
            assert f"{state.manifest_path} is missing from storage;" in str(e)
        assert "abandon(1, reason=...)" in str(e) and "--" not in str(e)  # Python words, not CLI flags
    assert catalog.load_table(name).current_snapshot() is None
    assert committer.store.get("A", name, 1).status == "prepared"  # type: ignore[union-attr]
    # as the message says: abandon it and the job goes on
    committer.abandon(1, reason="staged manifest damaged")
    assert committer.recover() == []
    committer.prepare(2, _results(committer, 2, 100))
    assert committer.commit(2).status == "committed"
