"""The kept mutation verdicts (mutation/cache.py): a run starts from the last run's
verdicts and judges again exactly what the tests may no longer give."""

from __future__ import annotations

import io
import json
import shutil
import tarfile
from pathlib import Path

import pytest

from mutation import cache as mutation_cache
from mutation.cache import BASELINE, RUN_START, STATS, invalidate, killers_from_log, pack, restore, write_baseline

#: a method's mangled name, as mutmut spells it
COMMIT = "icecommit.committer.committer.xǁGlobalCommitterǁcommit"
DECIDE = "icecommit.core.decision.x_decide"


def _project(root: Path) -> Path:
    """A checkout with two test files, a conftest and mutmut's results for two functions."""
    (root / "tests" / "committer").mkdir(parents=True)
    (root / "tests" / "conftest.py").write_text("# fixtures\n")
    (root / "tests" / "committer" / "test_commit.py").write_text("def test_commit(): ...\n")
    (root / "tests" / "test_decide.py").write_text("def test_decide(): ...\n")
    mutants = root / "mutants"
    (mutants / "icecommit" / "committer").mkdir(parents=True)
    (mutants / "icecommit" / "committer" / "committer.py.meta").write_text(
        json.dumps(
            {
                "exit_code_by_key": {
                    f"{COMMIT}__mutmut_1": 1,  # killed by test_commit (recorded)
                    f"{COMMIT}__mutmut_2": 1,  # killed, killer not recorded
                    f"{COMMIT}__mutmut_3": 0,  # survived
                    f"{COMMIT}__mutmut_4": 37,  # caught by the type check
                    f"{COMMIT}__mutmut_5": None,  # not checked
                    f"{COMMIT}__mutmut_6": 36,  # timeout
                },
                "hash_by_function_name": {"xǁGlobalCommitterǁcommit": "abc"},
            }
        )
    )
    (mutants / "icecommit" / "decision.py.meta").write_text(
        json.dumps({"exit_code_by_key": {f"{DECIDE}__mutmut_1": 1}, "hash_by_function_name": {"x_decide": "def"}})
    )
    (mutants / "mutmut-stats.json").write_text(
        json.dumps(
            {
                "tests_by_mangled_function_name": {
                    COMMIT: ["tests/committer/test_commit.py::test_commit"],
                    DECIDE: ["tests/test_decide.py::test_decide"],
                },
                "duration_by_test": {
                    "tests/committer/test_commit.py::test_commit": 0.5,
                    "tests/test_decide.py::test_decide": 0.1,
                },
            }
        )
    )
    (mutants / "tests").mkdir()
    (mutants / "tests" / "copy.py").write_text("mutmut's copy of the tests is not kept\n")
    return mutants


KILLERS = {
    f"{COMMIT}__mutmut_1": "tests/committer/test_commit.py::test_commit",
    f"{DECIDE}__mutmut_1": "tests/test_decide.py::test_decide",
    f"{COMMIT}__mutmut_3": "tests/committer/test_commit.py::test_commit",  # survived since: not recorded
}
#: verdicts of tests kept when nothing changed: commit's two kills and its timeout, decide's kill
KEPT = 4


def _codes(mutants: Path) -> dict[str, int | None]:
    codes: dict[str, int | None] = {}
    for meta in sorted(mutants.rglob("*.meta")):
        codes.update(json.loads(meta.read_text())["exit_code_by_key"])
    return codes


def _judged(root: Path, killers: dict[str, str] = KILLERS) -> Path:
    """A run's results with their baseline, packed, and the checkout's mutants/ gone (a new
    session's checkout): returns the cache."""
    mutants = _project(root)
    write_baseline(killers, "abc1234", mutants=mutants)
    cache = root / "mutation" / "cache.tar.gz"
    assert pack(mutants=mutants, cache=cache) == 6  # every verdict but "not checked"
    shutil.rmtree(mutants)
    assert restore(mutants=mutants, cache=cache) == "abc1234"
    return cache


def test_unchanged_tests_keep_every_kill_and_judge_survivors_again(tmp_path: Path) -> None:
    _judged(tmp_path)
    mutants = tmp_path / "mutants"
    assert not (mutants / "tests" / "copy.py").exists()  # mutmut's copies are not kept
    start = invalidate(mutants=mutants)
    assert start.revision == "abc1234"
    assert start.changed == []
    assert start.forgotten == {"survived (run again)": 1}
    assert start.kept == KEPT
    codes = _codes(mutants)
    assert codes[f"{COMMIT}__mutmut_1"] == 1 and codes[f"{COMMIT}__mutmut_2"] == 1
    assert codes[f"{COMMIT}__mutmut_6"] == 36 and codes[f"{DECIDE}__mutmut_1"] == 1
    assert codes[f"{COMMIT}__mutmut_3"] is None  # the survivor runs again
    assert codes[f"{COMMIT}__mutmut_4"] is None  # the type check judges it again, without a test
    # only the killers of kept kills are carried (mutmut_3 survived since it was recorded)
    assert start.killed_by == {k: v for k, v in KILLERS.items() if not k.endswith("mutmut_3")}
    assert json.loads((mutants / RUN_START).read_text())["kept"] == KEPT
    assert json.loads((mutants / STATS).read_text())["duration_by_test"] == {
        "tests/committer/test_commit.py::test_commit": 0.5,
        "tests/test_decide.py::test_decide": 0.1,
    }


def test_a_changed_killing_test_file_forgets_the_kills_and_the_reach_of_its_tests(tmp_path: Path) -> None:
    _judged(tmp_path)
    (tmp_path / "tests" / "committer" / "test_commit.py").write_text("def test_commit(): assert True\n")
    start = invalidate(mutants=tmp_path / "mutants")
    assert start.changed == ["tests/committer/test_commit.py"]
    assert start.forgotten == {
        "its killing test changed": 1,  # mutmut_1: its recorded killer's file
        "a test reaching it changed": 1,  # mutmut_2: no killer recorded, a test reaching commit changed
        "survived (run again)": 1,
    }
    assert start.kept == KEPT - 2
    codes = _codes(tmp_path / "mutants")
    assert codes[f"{COMMIT}__mutmut_1"] is None and codes[f"{COMMIT}__mutmut_2"] is None
    assert codes[f"{DECIDE}__mutmut_1"] == 1  # its test file did not change
    assert codes[f"{COMMIT}__mutmut_6"] == 36  # a timeout is the mutant's, not a test's
    assert start.killed_by == {f"{DECIDE}__mutmut_1": "tests/test_decide.py::test_decide"}
    stats = json.loads((tmp_path / "mutants" / STATS).read_text())
    # the changed file's tests are new to mutmut: it collects what they reach again
    assert stats["duration_by_test"] == {"tests/test_decide.py::test_decide": 0.1}
    assert stats["tests_by_mangled_function_name"][COMMIT] == []
    assert stats["tests_by_mangled_function_name"][DECIDE] == ["tests/test_decide.py::test_decide"]


def test_a_deleted_killing_test_file_forgets_its_kills(tmp_path: Path) -> None:
    _judged(tmp_path)
    (tmp_path / "tests" / "test_decide.py").unlink()
    start = invalidate(mutants=tmp_path / "mutants")
    assert start.changed == ["tests/test_decide.py"]
    assert start.forgotten == {"its killing test changed": 1, "survived (run again)": 1}
    assert _codes(tmp_path / "mutants")[f"{DECIDE}__mutmut_1"] is None


def test_a_kill_recorded_by_a_test_of_an_unchanged_file_is_kept(tmp_path: Path) -> None:
    """The recorded killer decides, not every test reaching the function: mutmut_2 was
    killed by a test of a file that did not change, though a test reaching it did."""
    _judged(tmp_path, {**KILLERS, f"{COMMIT}__mutmut_2": "tests/test_decide.py::test_decide"})
    (tmp_path / "tests" / "committer" / "test_commit.py").write_text("# changed\n")
    invalidate(mutants=tmp_path / "mutants")
    codes = _codes(tmp_path / "mutants")
    assert codes[f"{COMMIT}__mutmut_2"] == 1
    assert codes[f"{COMMIT}__mutmut_1"] is None


def test_a_new_test_file_forgets_only_the_survivors(tmp_path: Path) -> None:
    _judged(tmp_path)
    (tmp_path / "tests" / "test_new.py").write_text("def test_new(): ...\n")
    start = invalidate(mutants=tmp_path / "mutants")
    assert start.changed == ["tests/test_new.py"]
    assert start.forgotten == {"survived (run again)": 1}
    assert start.kept == KEPT


@pytest.mark.parametrize("change", ["conftest", "new conftest", "helper", "fixture file", "mutmut", "no baseline"])
def test_changed_fixtures_helpers_or_mutmut_forget_every_verdict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    _judged(tmp_path)
    mutants = tmp_path / "mutants"
    if change == "conftest":
        (tmp_path / "tests" / "conftest.py").write_text("# other fixtures\n")
    elif change == "new conftest":
        (tmp_path / "tests" / "committer" / "conftest.py").write_text("# fixtures of a folder\n")
    elif change == "helper":
        (tmp_path / "tests" / "helpers.py").write_text("def helper(): ...\n")
    elif change == "fixture file":
        (tmp_path / "tests" / "committer" / "old.sqlite").write_bytes(b"\0")
    elif change == "mutmut":
        monkeypatch.setattr(mutation_cache, "mutmut_version", lambda: "99.0")
    else:
        (mutants / BASELINE).unlink()
    start = invalidate(mutants=mutants)
    assert start.kept == 0
    assert sum(start.forgotten.values()) == KEPT + 1
    assert start.forgotten["survived (run again)"] == 1
    assert not _codes(mutants)[f"{DECIDE}__mutmut_1"]
    assert {k: v for k, v in _codes(mutants).items() if v is not None} == {}
    assert not (mutants / STATS).exists()  # mutmut collects every test's reach again


def test_a_later_run_in_the_same_checkout_trusts_the_baseline_it_wrote(tmp_path: Path) -> None:
    """The baseline is the tests the verdicts were judged with: rewritten when a run starts,
    a killing test changed after it is seen by the next run, though the checkout kept its
    results (no restore)."""
    _judged(tmp_path)
    mutants = tmp_path / "mutants"
    invalidate(mutants=mutants)
    write_baseline(KILLERS, "def5678", mutants=mutants)  # the run starts: the tests as they are
    assert invalidate(mutants=mutants).forgotten == {}  # nothing changed since; no survivor left
    (tmp_path / "tests" / "test_decide.py").write_text("def test_decide(): assert True\n")
    start = invalidate(mutants=mutants)
    assert start.revision == "def5678"
    assert start.forgotten == {"its killing test changed": 1}


def test_restore_needs_a_cache_of_this_mutmut_and_a_checkout_without_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert restore(mutants=tmp_path / "mutants", cache=tmp_path / "none.tar.gz") is None
    cache = _judged(tmp_path)
    with pytest.raises(FileExistsError, match="mutants"):
        restore(mutants=tmp_path / "mutants", cache=cache)
    shutil.rmtree(tmp_path / "mutants")
    monkeypatch.setattr(mutation_cache, "mutmut_version", lambda: "99.0")
    assert restore(mutants=tmp_path / "mutants", cache=cache) is None  # its stats would not load
    assert not (tmp_path / "mutants").exists()


@pytest.mark.parametrize(
    "name", ["../escape.meta", "tests/conftest.json", "mutants/icecommit/decision.py", "/mutants/x.meta", "mutants"]
)
def test_an_archive_member_outside_mutants_or_not_a_result_is_refused(tmp_path: Path, name: str) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        info = tarfile.TarInfo(name)
        info.size = 2
        archive.addfile(info, io.BytesIO(b"{}"))
    cache = tmp_path / "cache.tar.gz"
    cache.write_bytes(buffer.getvalue())
    with pytest.raises(ValueError, match="unexpected member"):
        restore(mutants=tmp_path / "work" / "mutants", cache=cache)
    assert not (tmp_path / "work").exists()


def test_pack_refuses_results_without_verdicts_or_baseline(tmp_path: Path) -> None:
    mutants = _project(tmp_path)
    cache = tmp_path / "cache.tar.gz"
    with pytest.raises(ValueError, match="no baseline"):
        pack(mutants=mutants, cache=cache)
    for meta in mutants.rglob("*.meta"):
        data = json.loads(meta.read_text())
        data["exit_code_by_key"] = dict.fromkeys(data["exit_code_by_key"])
        meta.write_text(json.dumps(data))
    write_baseline({}, "abc1234", mutants=mutants)
    with pytest.raises(ValueError, match="no verdicts"):
        pack(mutants=mutants, cache=cache)
    assert not cache.exists()


def test_the_archive_depends_only_on_what_it_holds(tmp_path: Path) -> None:
    mutants = _project(tmp_path)
    first, second = tmp_path / "a.tar.gz", tmp_path / "b.tar.gz"
    write_baseline(KILLERS, "abc1234", mutants=mutants)
    pack(mutants=mutants, cache=first)
    (mutants / "icecommit" / "decision.py.meta").touch()  # a newer time, the same bytes
    write_baseline(dict(reversed(KILLERS.items())), "abc1234", mutants=mutants)
    pack(mutants=mutants, cache=second)
    assert first.read_bytes() == second.read_bytes()


def test_the_kill_log_gives_each_mutant_its_last_killer() -> None:
    lines = [
        "f\ttests/a.py::t1",  # an older line, without the mutant
        "f\ttests/a.py::t1\tf__mutmut_1",
        "f\ttests/b.py::t2[sqlite]\tf__mutmut_2",
        "f\ttests/c.py::t3\tf__mutmut_1",
        "",
    ]
    assert killers_from_log(lines) == {"f__mutmut_1": "tests/c.py::t3", "f__mutmut_2": "tests/b.py::t2[sqlite]"}
