"""Keep mutmut's verdicts between runs and sessions, so that a run judges only what changed.

A fresh run judges about 4,900 mutants and takes longer than an hour on 2 cores, and a
session's checkout starts without ``mutants/``. Every run records in ``mutants/`` the
baseline of its verdicts (``write_baseline``: the hash of every file under ``tests/``, the
test that killed each mutant, the revision, mutmut's version); a complete run then packs
it with what mutmut keeps (each source file's ``.meta``: the verdict of every mutant and
the hash of every function; ``mutmut-stats.json``: which tests reach which function, and
how long each takes) into ``mutation/cache.tar.gz`` (``pack``). ``restore`` unpacks that
into a checkout without ``mutants/``. Before every run, restored or not, ``invalidate``
compares the baseline with the tests as they are and forgets the verdicts they may no
longer give; mutmut itself judges again every mutant of a function whose code changed, and
collects the stats of new tests:

- a killed mutant whose killing test's file changed or is gone (its killer unknown: when a
  file of a test that reaches its function changed); the changed files' tests are dropped
  from mutmut's stats, so that what they reach is collected again;
- every survivor (new tests may kill it; an equivalent one whose changed lines still match
  ``mutation/equivalent.toml`` is recorded as survived again without running), every
  mutant no test reached and every one the type check caught (both are judged again
  without running a test);
- every verdict, when a file under ``tests/`` other than a ``test_*.py`` changed (a
  ``conftest.py``, a helper module, a fixture file), or mutmut's version did, or there is
  no baseline.

What it cannot see: a change outside the mutated modules (``icecommit`` code the tests reach
through, a dependency's version) can make a kept "killed" stale. The report names the
revision whose verdicts were kept; ``scripts/mutation.sh --fresh`` judges everything again.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path, PurePosixPath

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "mutation" / "cache.tar.gz"
MUTANTS = ROOT / "mutants"
#: in mutants/: what the kept verdicts were judged against
BASELINE = "icecommit-baseline.json"
#: in mutants/: what ``invalidate`` kept and forgot before this run (for the report)
RUN_START = "icecommit-run-start.json"
STATS = "mutmut-stats.json"
#: mutmut's exit codes
KILLED = {1, 3}
SURVIVED = 0
NO_TESTS = {5, 33}
TYPE_CHECK = 37


def tree_hashes(root: Path = ROOT) -> dict[str, str]:
    """The SHA-256 of every file under ``tests/`` (byte code left out), by path from ``root``."""
    return {
        path.relative_to(root).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted((root / "tests").rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
    }


def mutmut_version() -> str:
    try:
        return metadata.version("mutmut")
    except metadata.PackageNotFoundError:
        return "absent"


def _is_test_module(path: str) -> bool:
    name = PurePosixPath(path).name
    return name.startswith("test_") and name.endswith(".py")


def _test_file(test: str) -> str:
    return test.split("::", 1)[0]


def _function_of(mutant: str) -> str:
    """The mangled function name of a mutant (mutmut's key of the tests reaching it)."""
    return mutant.partition("__mutmut_")[0]


def _metas(mutants: Path) -> list[Path]:
    return sorted(mutants.rglob("*.meta"))


def _codes(meta: Path) -> dict[str, int | None]:
    return dict(json.loads(meta.read_text()).get("exit_code_by_key", {}))


def write_baseline(killed_by: dict[str, str], revision: str, *, mutants: Path = MUTANTS) -> None:
    """Record what the verdicts in ``mutants/`` are judged against: the tests as they are now
    and the killer of each mutant still killed. Written at the start of a run (after
    ``invalidate``, every kept verdict holds for the tests as they are; the run judges the
    rest with them) and again at its end with the run's killers, so that an interrupted run
    leaves a baseline that its next run can trust."""
    codes = {m: c for meta in _metas(mutants) for m, c in _codes(meta).items()}
    baseline = {
        "revision": revision,
        "mutmut": mutmut_version(),
        "tests": tree_hashes(mutants.parent),
        "killed_by": {m: t for m, t in sorted(killed_by.items()) if codes.get(m) in KILLED},
    }
    mutants.mkdir(exist_ok=True)
    (mutants / BASELINE).write_text(json.dumps(baseline, indent=1))


def pack(*, mutants: Path = MUTANTS, cache: Path = CACHE) -> int:
    """Pack the verdicts of ``mutants/`` with their baseline into ``cache``; returns how many
    verdicts it holds. The archive's bytes depend only on what it holds (no times, sorted
    members), so an unchanged run leaves the file unchanged. Refuses a ``mutants/`` without
    verdicts or baseline (a run that failed early must not replace a good cache)."""
    metas = _metas(mutants)
    verdicts = sum(1 for meta in metas for c in _codes(meta).values() if c is not None)
    if not verdicts or not (mutants / BASELINE).exists():
        raise ValueError(f"{mutants} holds no verdicts or no baseline: the cache is left as it was")
    members = [*metas, *(p for p in (mutants / STATS, mutants / "pinned-equivalent.json") if p.exists())]
    members.append(mutants / BASELINE)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for path in sorted(members):
            data = path.read_bytes()
            info = tarfile.TarInfo(path.relative_to(mutants.parent).as_posix())
            info.size = len(data)
            info.mode = 0o644
            archive.addfile(info, io.BytesIO(data))
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_bytes(gzip.compress(buffer.getvalue(), compresslevel=9, mtime=0))
    return verdicts


def restore(*, mutants: Path = MUTANTS, cache: Path = CACHE) -> str | None:
    """Unpack ``cache`` into ``mutants/`` (which must not exist); returns the revision of the
    verdicts, or None: no cache, or one made with another mutmut version (its stats would not
    load)."""
    if not cache.exists():
        return None
    if mutants.exists():
        raise FileExistsError(f"{mutants} exists: the cache is restored only into a checkout without it")
    with tarfile.open(cache, mode="r:gz") as archive:
        found: dict[str, bytes] = {}
        for member in archive.getmembers():
            parts = PurePosixPath(member.name).parts
            if (
                not member.isfile()
                or len(parts) < 2
                or parts[0] != mutants.name
                or ".." in parts
                or PurePosixPath(member.name).suffix not in (".meta", ".json")
            ):
                raise ValueError(f"{cache}: unexpected member {member.name!r} (only mutants/*.meta and *.json)")
            found[member.name] = archive.extractfile(member).read()  # type: ignore[union-attr]
    baseline = json.loads(found.get(f"{mutants.name}/{BASELINE}", b"{}"))
    if baseline.get("mutmut") != mutmut_version():
        return None
    for name, data in found.items():
        target = mutants.parent / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return str(baseline["revision"])


@dataclass
class RunStart:
    """What ``invalidate`` kept and forgot before a run (the report shows it)."""

    revision: str | None
    #: verdicts of tests kept (killed and timed-out mutants)
    kept: int = 0
    forgotten: dict[str, int] = field(default_factory=dict)
    changed: list[str] = field(default_factory=list)
    #: the killer of each kept kill
    killed_by: dict[str, str] = field(default_factory=dict)


def invalidate(*, mutants: Path = MUTANTS) -> RunStart:
    """Forget the verdicts in ``mutants/`` that the tests as they are may no longer give
    (the module's text says which), and write what was kept to ``mutants/`` for the report."""
    baseline_file = mutants / BASELINE
    baseline = json.loads(baseline_file.read_text()) if baseline_file.exists() else None
    then: dict[str, str] = baseline["tests"] if baseline else {}
    now = tree_hashes(mutants.parent)
    changed = sorted(p for p in then.keys() | now.keys() if then.get(p) != now.get(p))
    start = RunStart(revision=baseline["revision"] if baseline else None, changed=changed)
    everything = None
    if baseline is None:
        everything = "no record of the tests they were judged with"
    elif baseline.get("mutmut") != mutmut_version():
        everything = "mutmut changed"
    elif any(not _is_test_module(p) for p in changed):
        everything = "fixtures or helpers changed"
    changed_tests = {p for p in changed if _is_test_module(p)}
    stats_file = mutants / STATS
    stats = json.loads(stats_file.read_text()) if stats_file.exists() else {}
    reaching: dict[str, list[str]] = stats.get("tests_by_mangled_function_name", {})
    recorded: dict[str, str] = dict(baseline.get("killed_by", {})) if baseline else {}

    def forget(mutant: str, code: int) -> str | None:
        if code == SURVIVED:
            return "survived (run again)"
        if code in NO_TESTS or code == TYPE_CHECK:
            return None  # judged again every run, without a test: not counted
        if everything:
            return everything
        if code in KILLED:
            killer = recorded.get(mutant)
            if killer is not None:
                return "its killing test changed" if _test_file(killer) in changed_tests else None
            if any(_test_file(t) in changed_tests for t in reaching.get(_function_of(mutant), ())):
                return "a test reaching it changed"
        return None

    for meta in _metas(mutants):
        data = json.loads(meta.read_text())
        codes: dict[str, int | None] = data.get("exit_code_by_key", {})
        dirty = False
        for mutant, code in codes.items():
            if code is None:
                continue
            reason = forget(mutant, code)
            if reason is None and code not in NO_TESTS and code != TYPE_CHECK:
                start.kept += 1
                if code in KILLED and mutant in recorded:
                    start.killed_by[mutant] = recorded[mutant]
                continue
            codes[mutant] = None
            dirty = True
            if reason is not None:
                start.forgotten[reason] = start.forgotten.get(reason, 0) + 1
        if dirty:
            meta.write_text(json.dumps(data, indent=4))
    if stats and everything:
        stats_file.unlink()  # mutmut collects every test's reach again
    elif stats and changed_tests:
        # the changed files' tests become new to mutmut: their reach is collected again
        durations: dict[str, float] = stats["duration_by_test"]
        for test in [t for t in durations if _test_file(t) in changed_tests]:
            del durations[test]
        stats["tests_by_mangled_function_name"] = {
            f: [t for t in tests if _test_file(t) not in changed_tests] for f, tests in reaching.items()
        }
        stats_file.write_text(json.dumps(stats))
    mutants.mkdir(exist_ok=True)
    (mutants / RUN_START).write_text(json.dumps(asdict(start), indent=1))
    return start


def killers_from_log(lines: Iterable[str]) -> dict[str, str]:
    """A failing test of each mutant, from the run's kill log (one "function<TAB>test<TAB>mutant"
    line per failing test; the last is taken; lines without a mutant are left out)."""
    found: dict[str, str] = {}
    for line in lines:
        parts = line.split("\t")
        if len(parts) >= 3 and parts[2]:
            found[parts[2]] = parts[1]
    return found
