"""A branch is a parameter: the rollback of a branch moves that branch's head only, and
keeps the checkpoints another branch holds; each branch has its own high-water mark (a
table property no other branch's or job's name can meet) that still de-duplicates once the
branch's snapshots are expired; the expiry of a branch takes only what that branch alone
holds; a branch lists and reconciles its own checkpoints; the branch every operation works
on by default is named in one place."""

from __future__ import annotations

import json
import re
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest
from pyiceberg.catalog.sql import SqlCatalog

import icecommit as ic
from icecommit.catalog import list_checkpoints
from icecommit.committer import RetryPolicy
from icecommit.core.ancestry import (
    MAIN_BRANCH,
    checkpoint_of,
    committed_checkpoints,
    find_checkpoint,
    highest_committed_checkpoint,
    job_checkpoint_property,
    recorded_highest_checkpoints,
)
from icecommit.errors import CheckpointOutOfOrderError, InvalidArgumentError
from icecommit.maintenance import apply_expire, apply_rollback, plan_expire, plan_rollback
from icecommit.maintenance.expire import ExpirePlan
from icecommit.state import CheckpointStore
from icecommit.state.database import state_engine, state_uri
from tests.fakes import Crash, crash_at
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


def _ids_on(catalog: SqlCatalog, branch: str) -> Counter[int]:
    table = catalog.load_table("ns.t")
    head = table.metadata.refs[branch].snapshot_id
    return Counter(table.scan(snapshot_id=head, selected_fields=("id",)).to_arrow()["id"].to_pylist())


def _expected(*keys: tuple[str, int]) -> Counter[int]:
    """The ids :func:`_commit` writes for these (job, checkpoint) pairs."""
    return Counter(i for _job, c in keys for i in range(c * 100, c * 100 + 5))


def test_each_branch_has_its_own_high_water_property_and_no_two_names_meet() -> None:
    assert job_checkpoint_property("j") == "icecommit.job.j.checkpoint"  # main's, as before branches had their own
    assert job_checkpoint_property("j", branch=MAIN_BRANCH) == "icecommit.job.j.checkpoint"
    assert job_checkpoint_property("j", branch="audit") == "icecommit.branch.audit.job.j.checkpoint"
    assert job_checkpoint_property("j", branch="v1.2") == "icecommit.branch.v1%2E2.job.j.checkpoint"
    # branches and jobs named like each other, like the names' parts, and like their encodings
    branches = [MAIN_BRANCH, "audit", "a", "job", "a.job.b", "a%2Ejob%2Eb", "feature/x", "x.checkpoint",
                "icecommit.job.a", "icecommit.branch.a", "audit.job", "ü"]  # fmt: skip
    jobs = ["a", "b", "b.c", "job.b", "a.job.b", "b.job.c", "audit", MAIN_BRANCH, "x.checkpoint", "branch.a.job.b"]
    names = {(branch, job): job_checkpoint_property(job, branch=branch) for branch in branches for job in jobs}
    assert len(set(names.values())) == len(names)
    properties = {name: str(number) for number, name in enumerate(names.values())}
    for branch in branches:  # each branch reads back exactly its own jobs' marks
        own = {job: int(properties[names[(branch, job)]]) for job in jobs}
        assert recorded_highest_checkpoints(properties, branch=branch) == own


def test_a_branch_reads_only_its_own_high_water_mark(sqlite_catalog: SqlCatalog) -> None:
    main, _audit = _branched(sqlite_catalog)
    _commit(main, 2)
    metadata = main.load_table().metadata
    # main's mark says 2; audit, made at checkpoint 1, has no mark yet and its ancestry says 1
    assert (highest_committed_checkpoint(metadata, "m"), highest_committed_checkpoint(metadata, "m", "audit")) == (2, 1)
    audit_mark = {job_checkpoint_property("m", branch="audit"): "7"}
    marked = metadata.model_copy(update={"properties": {**metadata.properties, **audit_mark}})
    assert (highest_committed_checkpoint(marked, "m"), highest_committed_checkpoint(marked, "m", "audit")) == (2, 7)
    other = metadata.model_copy(update={"properties": {job_checkpoint_property("m", branch="other"): "9"}})
    assert (highest_committed_checkpoint(other, "m"), highest_committed_checkpoint(other, "m", "audit")) == (2, 1)


def test_a_commit_to_a_branch_raises_that_branchs_mark_only(sqlite_catalog: SqlCatalog) -> None:
    main, audit = _branched(sqlite_catalog)
    for checkpoint_id in (4, 5):
        _commit(audit, checkpoint_id)
    properties = main.load_table().metadata.properties
    assert properties[job_checkpoint_property("a", branch="audit")] == "5"
    assert job_checkpoint_property("a") not in properties and properties[job_checkpoint_property("m")] == "1"
    # the same job may start on main below its branch's mark: main's own mark and ancestry say nothing of it
    on_main = ic.GlobalCommitter(sqlite_catalog, "ns.t", job_id="a", retry_policy=FAST)
    _commit(on_main, 3)
    assert main.load_table().metadata.properties[job_checkpoint_property("a")] == "3"


def test_expiry_of_a_branch_takes_only_what_that_branch_alone_holds(sqlite_catalog: SqlCatalog) -> None:
    catalog = sqlite_catalog
    main, audit = _branched(catalog)
    for checkpoint_id in (1, 2, 3):
        _commit(audit, checkpoint_id)
    _commit(main, 2)
    before = main.load_table().metadata
    snapshot = {key: s.snapshot_id for s in before.snapshots if (key := checkpoint_of(s)) is not None}

    def planned(branch: str | None = None) -> ExpirePlan:
        return plan_expire(catalog, "ns.t", older_than=timedelta(0), retain_last=1, branch=branch)

    every = planned()
    assert every.branch is None
    assert set(every.expired_snapshot_ids) == {snapshot[("m", 1)], snapshot[("a", 1)], snapshot[("a", 2)]}

    plan = planned("audit")
    # main's first checkpoint is audit's ancestor too, and main still holds it
    assert plan.branch == "audit" and set(plan.expired_snapshot_ids) == {snapshot[("a", 1)], snapshot[("a", 2)]}
    assert [rule.branch for rule in plan.retention] == ["audit"]
    assert plan.current_snapshot_id == snapshot[("a", 3)]
    assert planned(MAIN_BRANCH).expired_snapshot_ids == ()
    apply_expire(catalog, plan)

    after = main.load_table().metadata
    assert after.refs[MAIN_BRANCH].snapshot_id == before.refs[MAIN_BRANCH].snapshot_id
    assert [c.checkpoint_id for c in committed_checkpoints(after, MAIN_BRANCH, "m")] == [2, 1]
    assert [c.checkpoint_id for c in committed_checkpoints(after, "audit", "a")] == [3]
    assert _ids_on(catalog, "audit") == _expected(("m", 1), ("a", 1), ("a", 2), ("a", 3))
    assert _ids_on(catalog, MAIN_BRANCH) == _expected(("m", 1), ("m", 2))
    for checkpoint_id in (1, 2):  # expired on the branch, still in: nothing written again
        assert audit.commit(checkpoint_id).status == "already-committed"
    assert audit.is_committed(2) and highest_committed_checkpoint(after, "a", "audit") == 3
    with pytest.raises(InvalidArgumentError):
        planned("nosuch")


def test_a_landed_checkpoint_whose_branch_snapshot_expired_still_de_duplicates(sqlite_catalog: SqlCatalog) -> None:
    """The process died after the catalog took checkpoint 4 on audit (its state says
    prepared); another job moved audit on, and the expiry of audit removed the snapshot:
    the branch's own mark and the live files say it is in, and recovery writes nothing."""
    catalog = sqlite_catalog
    main, audit = _branched(catalog)
    _commit(audit, 3)
    fault = crash_at("after-commit", 4)
    dying = ic.GlobalCommitter(catalog, "ns.t", job_id="a", branch="audit", retry_policy=FAST, fault=fault)
    with pytest.raises(Crash):
        _commit(dying, 4)
    landed = find_checkpoint(main.load_table().metadata, "a", 4, "audit")
    assert landed is not None
    _commit(ic.GlobalCommitter(catalog, "ns.t", job_id="b", branch="audit", retry_policy=FAST), 1)
    apply_expire(catalog, plan_expire(catalog, "ns.t", older_than=timedelta(0), retain_last=1, branch="audit"))
    metadata = main.load_table().metadata
    assert find_checkpoint(metadata, "a", 4, "audit") is None and committed_checkpoints(metadata, "audit", "a") == []
    assert highest_committed_checkpoint(metadata, "a", "audit") == 4  # the branch's property alone says so
    assert highest_committed_checkpoint(metadata, "a") is None  # main holds nothing of job a

    [result] = ic.GlobalCommitter(catalog, "ns.t", job_id="a", branch="audit", retry_policy=FAST).recover()
    assert (result.status, result.snapshot_id) == ("already-committed", landed.snapshot_id)
    assert _ids_on(catalog, "audit") == _expected(("m", 1), ("a", 3), ("a", 4), ("b", 1))
    with pytest.raises(CheckpointOutOfOrderError):  # a replay of 2, never prepared here, is below the mark
        _commit(audit, 2)


def test_the_command_line_expires_one_branch(tmp_path: Path) -> None:
    from tests.cli.runner import invoke

    home = tmp_path / "home"
    catalog = ic.connect(uri=f"sqlite:///{home / 'catalog.db'}", warehouse=str(home), create=True)
    main, audit = _branched(catalog)  # type: ignore[arg-type]
    for checkpoint_id in (1, 2):
        _commit(audit, checkpoint_id)
    metadata = main.load_table().metadata
    first = next(c.snapshot_id for c in committed_checkpoints(metadata, "audit", "a") if c.checkpoint_id == 1)
    catalog.engine.dispose()  # type: ignore[attr-defined]

    args = ("expire", "ns.t", "--branch", "audit", "--older-than", "0s", "--retain-last", "1")
    planned = invoke(home, "--output", "json", *args)
    assert planned.returncode == 0, planned.stderr
    document = json.loads(planned.stdout)
    assert document["branch"] == "audit" and document["expired_snapshot_ids"] == [first]
    assert [rule["branch"] for rule in document["retention"]] == ["audit"]
    text = invoke(home, *args)
    assert text.returncode == 0 and "ns.t (branch audit): would expire (dry run) 1 snapshot(s)" in text.stdout
    unknown = invoke(home, *args[:3], "nosuch")
    assert unknown.returncode == 2 and "branch='nosuch'" in unknown.stderr and "audit" in unknown.stderr


def test_another_branchs_checkpoints_are_neither_listed_nor_judged_here(sqlite_catalog: SqlCatalog) -> None:
    """Checkpoints on audit only are not rolled back or lost on main, nor main's on audit:
    each branch lists and reconciles what its ancestry holds, read from its own head."""
    catalog = sqlite_catalog
    main, audit = _branched(catalog)
    for checkpoint_id in (1, 2):
        _commit(audit, checkpoint_id)
    _commit(main, 2)

    def listed(**kwargs: str) -> list[tuple[str, int, str, bool]]:
        return [
            (c.job_id, c.checkpoint_id, c.status, c.in_ancestry) for c in list_checkpoints(catalog, "ns.t", **kwargs)
        ]

    assert listed() == [("m", 1, "committed", True), ("m", 2, "committed", True)]
    on_audit = [("a", 1, "committed", True), ("a", 2, "committed", True), ("m", 1, "committed", True)]
    assert listed(branch="audit") == on_audit
    assert listed(job_id="a") == []  # a job of another branch: nothing here, and no unknown job
    for branch, rows in ((MAIN_BRANCH, listed()), ("audit", on_audit)):
        report = ic.reconcile(catalog, "ns.t", branch=branch)
        assert report.ok and report.problems == (), (branch, report.problems)
        readable = {(c.job_id, c.checkpoint_id): c.readable for c in report.checkpoints}
        assert readable == {(job, checkpoint): 5 for job, checkpoint, _, _ in rows}, branch
