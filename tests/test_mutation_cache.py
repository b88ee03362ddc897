"""The kept mutation verdicts (bench/mutation_cache.py): a run starts from the last run's
verdicts and judges again exactly what the tests may no longer give."""

from __future__ import annotations

import io
import json
import shutil
import tarfile
from pathlib import Path

import pytest

from bench import mutation_cache
from bench.mutation_cache import Restored, killers_from_log, restore, save

#: a method's mangled name, as mutmut spells it
COMMIT = "icecommit.committer.committer.xǁGlobalCommitter╳commit"  # noqa: RUF001
DECIDE = "icecommit.decision.x_decide"


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
                "hash_by_function_name": {"xǁGlobalCommitter╳commit": "abc"},  # noqa: RUF001
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
                }
            }
        )
    )
    (mutants / "tests").mkdir()
    (mutants / "tests" / "copy.py").write_text("mutmut's copy of the tests is not kept\n")
    return mutants


KILLERS = {
    f"{COMMIT}__mutmut_1": "tests/committer/test_commit.py::test_commit",
    f"{DECIDE}__mutmut_1": "tests/test_decide.py::test_decide",
    f"{COMMIT}__mutmut_3": "tests/committer/test_commit.py::test_commit",  # survived since: dropped
}


def _codes(mutants: Path) -> dict[str, int | None]:
    codes: dict[str, int | None] = {}
    for meta in sorted(mutants.rglob("*.meta")):
        codes.update(json.loads(meta.read_text())["exit_code_by_key"])
    return codes


def _saved_and_cleared(root: Path, killers: dict[str, str] = KILLERS) -> Path:
    mutants = _project(root)
    cache = root / "mutation" / "cache.tar.gz"
    assert save(killers, "abc1234", mutants=mutants, cache=cache) == 6  # every verdict but "not checked"
    shutil.rmtree(mutants)
    return cache


def test_unchanged_tests_keep_every_verdict_but_the_survivors(tmp_path: Path) -> None:
    cache = _saved_and_cleared(tmp_path)
    restored = restore(mutants=tmp_path / "mutants", cache=cache)
    assert isinstance(restored, Restored)
    assert restored.revision == "abc1234"
    assert restored.changed_test_files == []
    assert restored.forgotten == {"survived (run again)": 1}
    assert restored.kept == 4  # two killed of commit, the timeout, decide's; the type check's not counted
    codes = _codes(tmp_path / "mutants")
    assert codes[f"{COMMIT}__mutmut_3"] is None
    assert codes[f"{COMMIT}__mutmut_4"] == 37
    assert codes[f"{COMMIT}__mutmut_1"] == 1 and codes[f"{COMMIT}__mutmut_2"] == 1
    assert codes[f"{COMMIT}__mutmut_6"] == 36 and codes[f"{DECIDE}__mutmut_1"] == 1
    assert json.loads((tmp_path / "mutants" / "mutmut-stats.json").read_text())["tests_by_mangled_function_name"]
    assert not (tmp_path / "mutants" / "tests" / "copy.py").exists()
    # the killer of a mutant that survived since was not kept
    assert restored.killed_by == {k: v for k, v in KILLERS.items() if not k.endswith("mutmut_3")}


def test_a_changed_killing_test_file_forgets_the_kills_it_made(tmp_path: Path) -> None:
    cache = _saved_and_cleared(tmp_path)
    (tmp_path / "tests" / "committer" / "test_commit.py").write_text("def test_commit(): assert True\n")
    restored = restore(mutants=tmp_path / "mutants", cache=cache)
    assert restored is not None
    assert restored.changed_test_files == ["tests/committer/test_commit.py"]
    assert restored.forgotten == {
        "its killing test changed": 1,  # mutmut_1: its recorded killer's file
        "a test reaching it changed": 1,  # mutmut_2: no killer recorded, a test reaching commit changed
        "survived (run again)": 1,
    }
    codes = _codes(tmp_path / "mutants")
    assert codes[f"{COMMIT}__mutmut_1"] is None and codes[f"{COMMIT}__mutmut_2"] is None
    assert codes[f"{DECIDE}__mutmut_1"] == 1  # its test file did not change
    assert codes[f"{COMMIT}__mutmut_6"] == 36  # a timeout is the mutant's, not a test's
    assert f"{COMMIT}__mutmut_1" not in restored.killed_by


def test_a_kill_recorded_by_a_test_of_an_unchanged_file_is_kept(tmp_path: Path) -> None:
    """The recorded killer decides, not every test reaching the function: mutmut_2 was
    killed by a test of a file that did not change, though a test reaching it did."""
    killers = {**KILLERS, f"{COMMIT}__mutmut_2": "tests/test_decide.py::test_decide"}
    cache = _saved_and_cleared(tmp_path, killers)
    with tarfile.open(cache, "r:gz") as archive:
        manifest = json.loads(archive.extractfile(mutation_cache.MANIFEST).read())  # type: ignore[union-attr]
    assert manifest["killed_by"][f"{COMMIT}__mutmut_2"] == "tests/test_decide.py::test_decide"
    (tmp_path / "tests" / "committer" / "test_commit.py").write_text("# changed\n")
    assert restore(mutants=tmp_path / "mutants", cache=cache) is not None
    codes = _codes(tmp_path / "mutants")
    assert codes[f"{COMMIT}__mutmut_2"] == 1
    assert codes[f"{COMMIT}__mutmut_1"] is None


@pytest.mark.parametrize("change", ["conftest", "mutmut"])
def test_changed_fixtures_or_mutmut_forget_every_verdict_of_a_test(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    cache = _saved_and_cleared(tmp_path)
    if change == "conftest":
        (tmp_path / "tests" / "conftest.py").write_text("# other fixtures\n")
    else:
        monkeypatch.setattr(mutation_cache, "_mutmut_version", lambda: "99.0")
    restored = restore(mutants=tmp_path / "mutants", cache=cache)
    assert restored is not None
    assert restored.kept == 0
    assert restored.forgotten == {"fixtures or mutmut changed": 5}
    codes = _codes(tmp_path / "mutants")
    assert {k: v for k, v in codes.items() if v is not None} == {f"{COMMIT}__mutmut_4": 37}


def test_restore_needs_a_cache_and_a_checkout_without_results(tmp_path: Path) -> None:
    assert restore(mutants=tmp_path / "mutants", cache=tmp_path / "none.tar.gz") is None
    cache = _saved_and_cleared(tmp_path)
    (tmp_path / "mutants").mkdir()
    with pytest.raises(FileExistsError, match="mutants"):
        restore(mutants=tmp_path / "mutants", cache=cache)


def test_an_archive_member_outside_the_checkout_is_refused(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        info = tarfile.TarInfo("../escape.meta")
        info.size = 2
        archive.addfile(info, io.BytesIO(b"{}"))
    cache = tmp_path / "cache.tar.gz"
    cache.write_bytes(buffer.getvalue())
    with pytest.raises(ValueError, match="escape"):
        restore(mutants=tmp_path / "work" / "mutants", cache=cache)
    assert not (tmp_path / "escape.meta").exists()


def test_the_archive_depends_only_on_what_it_holds(tmp_path: Path) -> None:
    mutants = _project(tmp_path)
    first, second = tmp_path / "a.tar.gz", tmp_path / "b.tar.gz"
    save(KILLERS, "abc1234", mutants=mutants, cache=first)
    (mutants / "icecommit" / "decision.py.meta").touch()  # a newer time, the same bytes
    save(dict(reversed(KILLERS.items())), "abc1234", mutants=mutants, cache=second)
    assert first.read_bytes() == second.read_bytes()


def test_the_kill_log_gives_each_mutant_its_last_killer() -> None:
    lines = [
        "f\ttests/a.py::t1",  # an older line, without the mutant
        "f\ttests/a.py::t1\tf__mutmut_1",
        "f\ttests/b.py::t2\tf__mutmut_2",
        "f\ttests/c.py::t3\tf__mutmut_1",  # judged again in a later run
        "",
    ]
    assert killers_from_log(lines) == {"f__mutmut_1": "tests/c.py::t3", "f__mutmut_2": "tests/b.py::t2"}
