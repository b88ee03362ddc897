"""Recording how a commit ended: a checkpoint a rollback recorded as rolled back while its
append was in flight is recorded committed when the committer's branch holds it (the
append landed after the rollback), and stays rolled back when it does not."""

from __future__ import annotations

from pyiceberg.catalog.sql import SqlCatalog

import icecommit as ic
from icecommit.committer.recording import CheckpointRecorder
from icecommit.core.ancestry import rolled_back_snapshots
from icecommit.state.checkpoints import PublishCounters
from icecommit.writers import write_arrow
from tests.helpers import EVENTS_SCHEMA, events


def _committed_on_audit(catalog: SqlCatalog) -> tuple[str, ic.GlobalCommitter, int]:
    """Checkpoint 1 of job A committed to branch ``audit`` (main holds only job M's first)."""
    name = f"{catalog.name}.events"
    ic.create_table(catalog, name, EVENTS_SCHEMA)
    main = ic.GlobalCommitter(catalog, name, job_id="M")
    main.prepare(0, [write_arrow(main.load_table(), events(0, 5), job_id="M", checkpoint_id=0)])
    base = main.commit(0).snapshot_id
    assert base is not None
    catalog.load_table(name).manage_snapshots().create_branch(base, "audit").commit()
    audit = ic.GlobalCommitter(catalog, name, job_id="A", branch="audit")
    audit.prepare(1, [write_arrow(audit.load_table(), events(100, 110), job_id="A", checkpoint_id=1)])
    landed = audit.commit(1).snapshot_id
    assert landed is not None
    return name, audit, landed


def test_a_rollback_recorded_while_the_append_landed_on_its_branch_is_overruled(catalog: SqlCatalog) -> None:
    name, audit, landed = _committed_on_audit(catalog)
    audit.store.mark_rolled_back(name, [("A", 1)])  # a rollback's record, racing the append
    recorder = CheckpointRecorder(audit.store, name, "A", "audit", lambda: catalog.load_table(name).metadata)
    state = recorder.committed(1, landed, attempts=1, retries=0, counters=PublishCounters(), recommit=False)
    assert (state.status, state.snapshot_id) == ("committed", landed)


def test_a_rollback_recorded_after_the_append_landed_stays_when_the_branch_lacks_it(catalog: SqlCatalog) -> None:
    name, audit, landed = _committed_on_audit(catalog)
    audit.store.mark_rolled_back(name, [("A", 1)])
    recorder = CheckpointRecorder(audit.store, name, "A", "main", lambda: catalog.load_table(name).metadata)
    state = recorder.committed(1, landed, attempts=1, retries=0, counters=PublishCounters(), recommit=False)
    assert state.status == "rolled-back"  # main, this recorder's branch, does not hold it


def test_rolled_back_is_read_against_the_branches_asked_for(catalog: SqlCatalog) -> None:
    name, _audit, landed = _committed_on_audit(catalog)
    metadata = catalog.load_table(name).metadata
    assert rolled_back_snapshots(metadata, ["audit"]) == {}  # on audit's lineage: in
    assert rolled_back_snapshots(metadata, ["main"]) == {landed: ("A", 1)}  # on no lineage of main's
    assert rolled_back_snapshots(metadata, ["main", "audit"]) == {}
