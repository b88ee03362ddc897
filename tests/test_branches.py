"""A branch is a parameter: the rollback of a branch moves that branch's head only, and
keeps the checkpoints another branch holds; the branch every operation works on by default
is named in one place."""

from __future__ import annotations

import re
from pathlib import Path

from pyiceberg.catalog.sql import SqlCatalog

import icecommit as ic
from icecommit.committer import RetryPolicy
from icecommit.core.ancestry import MAIN_BRANCH, committed_checkpoints
from icecommit.maintenance import apply_rollback, plan_rollback
from icecommit.state import CheckpointStore
from icecommit.state.database import state_engine, state_uri
from tests.helpers import EVENTS_SCHEMA, events, write_arrow

ROOT = Path(__file__).resolve().parents[1]
FAST = RetryPolicy(max_attempts=5, max_seconds=30, min_wait_s=0.001, max_wait_s=0.01)


def _commit(committer: ic.GlobalCommitter, checkpoint_id: int) -> None:
    rows = events(checkpoint_id * 100, checkpoint_id * 100 + 5)
    committer.prepare(checkpoint_id, [write_arrow(committer.load_table(), rows, job_id=committer.job_id,
                                                  checkpoint_id=checkpoint_id)])  # fmt: skip
    committer.commit(checkpoint_id)


def _branched(catalog: SqlCatalog) -> tuple[ic.GlobalCommitter, ic.GlobalCommitter]:
    """Table ns.t with checkpoint 1 of job m on main, a branch 'audit' made there, and the
    committers of job m on main and of job a on the branch."""
    ic.create_table(catalog, "ns.t", EVENTS_SCHEMA)
    main = ic.GlobalCommitter(catalog, "ns.t", job_id="m", retry_policy=FAST)
    _commit(main, 1)
    loaded = main.load_table()
    loaded.manage_snapshots().create_branch(loaded.current_snapshot().snapshot_id, "audit").commit()  # type: ignore[union-attr]
    return main, ic.GlobalCommitter(catalog, "ns.t", job_id="a", branch="audit", retry_policy=FAST)


def test_a_rollback_of_a_branch_moves_that_branch_only(sqlite_catalog: SqlCatalog) -> None:
    catalog = sqlite_catalog
    main, audit = _branched(catalog)
    for checkpoint_id in (1, 2, 3):
        _commit(audit, checkpoint_id)
    _commit(main, 2)
    loaded = main.load_table()  # a retention set on the branch (a commit to it drops one: pyiceberg's)
    head = loaded.metadata.refs["audit"].snapshot_id
    loaded.manage_snapshots().create_branch(head, "audit", max_ref_age_ms=86_400_000).commit()
    before = main.load_table().metadata
    main_head = before.refs[MAIN_BRANCH].snapshot_id

    plan = plan_rollback(catalog, "ns.t", to_checkpoint=1, job_id="a", branch="audit")
    assert plan.branch == "audit" and plan.hidden_checkpoints == (("a", 3), ("a", 2))
    assert plan.current_snapshot_id == before.refs["audit"].snapshot_id
    apply_rollback(catalog, plan)

    after = main.load_table().metadata
    assert after.refs["audit"].snapshot_id == plan.target_snapshot_id
    assert after.refs["audit"].max_ref_age_ms == 86_400_000  # the branch's retention kept
    assert after.refs[MAIN_BRANCH].snapshot_id == main_head  # main untouched
    assert [c.checkpoint_id for c in committed_checkpoints(after, "audit", "a")] == [1]
    assert [c.checkpoint_id for c in committed_checkpoints(after, MAIN_BRANCH, "m")] == [2, 1]
    store = CheckpointStore(state_engine(state_uri(catalog)))
    statuses = {(s.job_id, s.checkpoint_id): s.status for s in store.list("ns.t")}
    assert statuses[("a", 2)] == statuses[("a", 3)] == "rolled-back"
    assert statuses[("a", 1)] == statuses[("m", 1)] == statuses[("m", 2)] == "committed"


def test_the_default_branch_is_named_in_one_place() -> None:
    """No ``"main"`` literal in the package but the constant (the CLI's entry point is a
    function named main, not a branch)."""
    found = []
    for path in sorted((ROOT / "icecommit").rglob("*.py")):
        for line in path.read_text().splitlines():
            if re.search(r"""["']main["']""", line) and "MAIN_BRANCH = " not in line:
                found.append(f"{path.relative_to(ROOT)}: {line.strip()}")
    assert found == ['icecommit/cli/__init__.py: __all__ = ["cli", "main"]', 'icecommit/cli/main.py: "main",']


def test_the_command_line_rolls_back_and_lists_a_branch(tmp_path: Path) -> None:
    from tests.cli.runner import invoke

    home = tmp_path / "home"
    catalog = ic.connect(uri=f"sqlite:///{home / 'catalog.db'}", warehouse=str(home), create=True)
    main, audit = _branched(catalog)  # type: ignore[arg-type]
    _commit(audit, 1)
    _commit(audit, 2)
    main_head = main.load_table().metadata.refs[MAIN_BRANCH].snapshot_id
    catalog.engine.dispose()  # type: ignore[attr-defined]

    listed = invoke(home, "--output", "json", "checkpoints", "ns.t", "--branch", "audit", "--job", "a")
    assert listed.returncode == 0, listed.stderr
    assert '"committed"' in listed.stdout and '"checkpoint_id": 2' in listed.stdout
    on_main = invoke(home, "checkpoints", "ns.t", "--job", "a")  # main's ancestry holds none of a's
    assert on_main.returncode == 0 and "committed" not in on_main.stdout.replace("committed and pending", "")
    done = invoke(home, "rollback", "ns.t", "--branch", "audit", "--to-checkpoint", "1", "--job", "a", "--yes")
    assert done.returncode == 0, done.stderr
    refs = ic.connect(uri=f"sqlite:///{home / 'catalog.db'}", warehouse=str(home)).load_table("ns.t").metadata.refs
    assert refs[MAIN_BRANCH].snapshot_id == main_head and refs["audit"].snapshot_id != main_head
    report = invoke(home, "reconcile", "ns.t", "--branch", "audit", "--job", "a")
    assert report.returncode == 0, report.stdout + report.stderr
    for command in ("checkpoints", "reconcile"):  # a branch the table lacks is named, not an empty list
        unknown = invoke(home, command, "ns.t", "--branch", "nosuch")
        assert unknown.returncode == 2 and "branch='nosuch'" in unknown.stderr and "audit" in unknown.stderr
