"""``icecommit recover TABLE --job JOB``: commits what the job prepared, once; refuses a
checkpoint prepared by a newer icecommit (exit 4) and commits nothing."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import update
from sqlalchemy.orm import Session

import icecommit as ic
from icecommit.state.models import CheckpointRow
from icecommit.writers import write_arrow
from tests.cli.runner import invoke
from tests.fakes import catalog_of, cli_json
from tests.helpers import EVENTS_SCHEMA, events

TABLE = "ns.events"


def _prepared(home: Path, *checkpoints: int) -> ic.GlobalCommitter:
    catalog = catalog_of(home)
    catalog.create_namespace("ns")
    ic.create_table(catalog, TABLE, EVENTS_SCHEMA)
    committer = ic.GlobalCommitter(catalog, TABLE, job_id="job")
    for n in checkpoints:
        committer.prepare(
            n, [write_arrow(committer.load_table(), events(n * 10, n * 10 + 5), job_id="job", checkpoint_id=n)]
        )
    return committer


def test_recover_commits_what_the_job_prepared_once(tmp_path: Path) -> None:
    committer = _prepared(tmp_path, 1, 2)
    done = cli_json(tmp_path, "recover", TABLE, "--job", "job")
    assert [(c["checkpoint_id"], c["status"], c["records"]) for c in done["checkpoints"]] == [
        (1, "committed", 5),
        (2, "committed", 5),
    ]
    assert all(isinstance(c["snapshot_id"], str) for c in done["checkpoints"])
    assert committer.load_table().scan().to_arrow().num_rows == 10
    again = invoke(tmp_path, "recover", TABLE, "--job", "job")
    assert again.returncode == 0 and "no prepared checkpoint" in again.stdout
    typo = invoke(tmp_path, "recover", TABLE, "--job", "jbo")
    assert typo.returncode == 2 and "known jobs: job" in typo.stderr
    assert committer.load_table().scan().to_arrow().num_rows == 10


def test_recover_refuses_a_checkpoint_a_newer_icecommit_prepared(tmp_path: Path) -> None:
    committer = _prepared(tmp_path, 1)
    with Session(committer.store.engine) as session, session.begin():
        session.execute(update(CheckpointRow).values(features="row-delta"))
    refused = invoke(tmp_path, "recover", TABLE, "--job", "job")
    assert refused.returncode == 4 and "prepared by a newer icecommit" in refused.stderr
    assert "row-delta" in refused.stderr and "Traceback" not in refused.stderr
    assert committer.load_table().current_snapshot() is None
