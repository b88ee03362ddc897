"""The write and commit path on object storage lists nothing: writers, prepare, commit,
replay and recovery issue no LIST request (the orphan sweep is the only code that lists),
and per data file they make at most the requests pyiceberg's own ``append`` makes, plus
the one HEAD per file that the presence check needs."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

from pyiceberg.catalog import Catalog

import icecommit as ic
from icecommit.maintenance import find_orphans
from tests.helpers import EVENTS_SCHEMA, events, write_arrow
from tests.s3proxy import S3FaultProxy

#: four event types: four data files per checkpoint in a table partitioned by event
ROWS = 400


def _checkpoint(committer: ic.GlobalCommitter, checkpoint_id: int) -> int:
    """Write, prepare and commit one checkpoint as ``ic.write`` does (the table loaded
    once, the plan carried from prepare to commit); returns its data files."""
    rows = events(checkpoint_id * 1000, checkpoint_id * 1000 + ROWS)
    table = committer.load_table()
    results = [write_arrow(table, rows, job_id=committer.job_id, checkpoint_id=checkpoint_id)]
    plan = committer.prepare_planned(checkpoint_id, results, table=table)
    assert committer.commit(checkpoint_id, plan=plan).status == "committed"
    return sum(len(r.data_files) for r in results)


def test_the_write_and_commit_path_lists_nothing_and_costs_what_an_append_costs(
    s3_catalog: Catalog, s3_proxy: S3FaultProxy
) -> None:
    catalog = s3_catalog
    ours, theirs = f"{catalog.name}.events", f"{catalog.name}.appended"
    for name in (ours, theirs):
        ic.create_table(catalog, name, EVENTS_SCHEMA, partition_by=["event"])
    committer = ic.GlobalCommitter(catalog, ours, job_id="j")
    _checkpoint(committer, 1)  # the table's claim of its state database, once in its life

    s3_proxy.reset_counts()
    files = sum(_checkpoint(committer, c) for c in (2, 3, 4))
    written = Counter(s3_proxy.counts)
    # a replay of a committed checkpoint, and the recovery of a prepared one by a new process
    s3_proxy.reset_counts()
    assert committer.commit(3).status == "already-committed"
    rows = events(5000, 5000 + ROWS)
    committer.prepare(5, [write_arrow(committer.load_table(), rows, job_id="j", checkpoint_id=5)])
    assert [r.status for r in ic.GlobalCommitter(catalog, ours, job_id="j").recover()] == ["committed"]
    replayed = Counter(s3_proxy.counts)

    s3_proxy.reset_counts()
    for c in (2, 3, 4):
        table = catalog.load_table(theirs)
        table.append(events(c * 1000, c * 1000 + ROWS).cast(table.schema().as_arrow()))
    appended = Counter(s3_proxy.counts)
    appended_files = len(list(catalog.load_table(theirs).scan().plan_files()))

    assert written["ListObjects"] == replayed["ListObjects"] == 0, (written, replayed)
    per_file = sum(written.values()) / files
    allowed = sum(appended.values()) / appended_files + 1  # the presence check's HEAD
    assert files == appended_files == 12
    assert per_file <= allowed, (
        f"{per_file:.2f} requests per data file, pyiceberg's append {allowed - 1:.2f}: {written} vs {appended}"
    )

    s3_proxy.reset_counts()
    find_orphans(catalog, ours, older_than=timedelta(0))
    assert s3_proxy.counts["ListObjects"] >= 1  # the sweep lists: the only code that does
