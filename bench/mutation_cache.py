"""Keep mutmut's verdicts between sessions, so that a run judges only what changed.

A fresh run judges about 4,800 mutants and takes longer than an hour on 2 cores; a
session's checkout starts without ``mutants/``. After every run ``save`` packs what mutmut
keeps of its verdicts (each source file's ``.meta``: the verdict of every mutant and the
hash of every function; ``mutmut-stats.json``: which tests reach which function, and how
long each takes) into ``mutation/cache.tar.gz``, with the hash of every test file and the
test that killed each mutant. ``restore`` unpacks it into a ``mutants/`` that does not
exist yet. mutmut itself then judges again every mutant of a function whose code changed
and runs its stats for new tests; ``restore`` also forgets the verdicts the tests may no
longer give:

- a killed mutant whose killing test's file changed or is gone (its killer unknown: any
  file of a test that reaches its function changed);
- every survivor (new tests may kill it; an equivalent one whose changed lines still match
  ``mutation/equivalent.toml`` is recorded as survived again without running);
- every verdict of a test, when a ``conftest.py`` (the fixtures of every test) or the
  mutmut version changed.

What it cannot see: a change outside the mutated modules (``icecommit`` code the tests
reach through, a dependency's version) can make a kept "killed" stale. The report names the
revision whose verdicts were kept; ``scripts/mutation.sh --fresh`` judges everything again.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "mutation" / "cache.tar.gz"
MUTANTS = ROOT / "mutants"
#: inside the archive, beside mutmut's files
MANIFEST = "icecommit-mutation-cache.json"
#: mutmut's exit codes that are a test's verdict (the type check runs again every run)
KILLED = {1, 3}
SURVIVED = 0
TYPE_CHECK = 37


def test_file_hashes(root: Path = ROOT) -> dict[str, str]:
    """The SHA-256 of every Python file under ``tests/``, by path from the project root."""
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted((root / "tests").rglob("*.py"))
    }


def _kept_files(mutants: Path) -> list[Path]:
    files = sorted(mutants.rglob("*.meta"))
    files += [p for p in (mutants / "mutmut-stats.json", mutants / "pinned-equivalent.json") if p.exists()]
    return files


def save(killed_by: dict[str, str], revision: str, *, mutants: Path = MUTANTS, cache: Path = CACHE) -> int:
    """Pack the verdicts of ``mutants/`` and the test that killed each mutant still killed
    into ``cache``; returns how many verdicts it holds. The archive's bytes depend only on
    what it holds (no times, sorted members), so an unchanged run leaves the file unchanged."""
    killed = set()
    for meta in mutants.rglob("*.meta"):
        killed |= {m for m, c in json.loads(meta.read_text()).get("exit_code_by_key", {}).items() if c in KILLED}
    killed_by = {m: t for m, t in killed_by.items() if m in killed}
    manifest = {
        "revision": revision,
        "mutmut": _mutmut_version(),
        "test_files": test_file_hashes(mutants.parent),
        "killed_by": dict(sorted(killed_by.items())),
    }
    verdicts = 0
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:

        def add(name: str, data: bytes) -> None:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            archive.addfile(info, io.BytesIO(data))

        add(MANIFEST, json.dumps(manifest, indent=1).encode())
        for path in _kept_files(mutants):
            data = path.read_bytes()
            if path.suffix == ".meta":
                verdicts += sum(1 for code in json.loads(data).get("exit_code_by_key", {}).values() if code is not None)
            add(str(path.relative_to(mutants.parent)), data)
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_bytes(gzip.compress(buffer.getvalue(), compresslevel=9, mtime=0))
    return verdicts


@dataclass
class Restored:
    """What ``restore`` kept and forgot, for the run's report."""

    revision: str
    #: verdicts of tests kept (the type check's are not counted: it runs again every run)
    kept: int = 0
    forgotten: dict[str, int] = field(default_factory=dict)
    changed_test_files: list[str] = field(default_factory=list)
    killed_by: dict[str, str] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {
            "revision": self.revision,
            "kept": self.kept,
            "forgotten": self.forgotten,
            "changed_test_files": self.changed_test_files,
            "killed_by": self.killed_by,
        }


def _test_file(test: str) -> str:
    return test.split("::", 1)[0]


def _function_of(mutant: str) -> str:
    """The mangled function name of a mutant (mutmut's key of the tests reaching it)."""
    return mutant.partition("__mutmut_")[0]


def _mutmut_version() -> str:
    try:
        return metadata.version("mutmut")
    except metadata.PackageNotFoundError:
        return "absent"


def restore(*, mutants: Path = MUTANTS, cache: Path = CACHE) -> Restored | None:
    """Unpack ``cache`` into ``mutants/`` (which must not exist) and forget the verdicts
    the tests may no longer give (the module's text says which). None: no cache."""
    if not cache.exists():
        return None
    if mutants.exists():
        raise FileExistsError(f"{mutants} exists: the cache is restored only into a fresh checkout")
    root = mutants.parent
    with tarfile.open(cache, mode="r:gz") as archive:
        members = archive.getmembers()
        for member in members:
            if not member.isfile() or member.name.startswith("/") or ".." in Path(member.name).parts:
                raise ValueError(f"{cache}: unexpected member {member.name!r}")
        manifest = json.loads(archive.extractfile(MANIFEST).read())  # type: ignore[union-attr]
        for member in members:
            if member.name != MANIFEST:
                target = root / member.name
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(archive.extractfile(member).read())  # type: ignore[union-attr]
    restored = Restored(revision=manifest["revision"], killed_by=dict(manifest.get("killed_by", {})))
    now = test_file_hashes(root)
    then: dict[str, str] = manifest["test_files"]
    changed = {path for path, digest in then.items() if now.get(path) != digest}
    restored.changed_test_files = sorted(changed)
    everything = manifest.get("mutmut") != _mutmut_version() or any(
        Path(p).name == "conftest.py" for p in changed
    )
    stats_file = mutants / "mutmut-stats.json"
    stats = json.loads(stats_file.read_text()) if stats_file.exists() else {}
    reaching: dict[str, list[str]] = stats.get("tests_by_mangled_function_name", {})

    def forget(mutant: str, code: int) -> str | None:
        if everything:
            return "fixtures or mutmut changed"
        if code == SURVIVED:
            return "survived (run again)"
        if code in KILLED:
            killer = restored.killed_by.get(mutant)
            if killer is not None:
                return "its killing test changed" if _test_file(killer) in changed else None
            if any(_test_file(t) in changed for t in reaching.get(_function_of(mutant), ())):
                return "a test reaching it changed"
        return None

    for meta in sorted(mutants.rglob("*.meta")):
        data = json.loads(meta.read_text())
        codes: dict[str, int | None] = data.get("exit_code_by_key", {})
        dirty = False
        for mutant, code in codes.items():
            if code is None or code == TYPE_CHECK:  # the type check runs again every run
                continue
            reason = forget(mutant, code)
            if reason is None:
                restored.kept += 1
                continue
            codes[mutant] = None
            restored.forgotten[reason] = restored.forgotten.get(reason, 0) + 1
            restored.killed_by.pop(mutant, None)
            dirty = True
        if dirty:
            meta.write_text(json.dumps(data, indent=4))
    return restored


def killers_from_log(lines: Iterable[str]) -> dict[str, str]:
    """A failing test of each mutant, from the kill log (one "function<TAB>test<TAB>mutant"
    line per failing test, appended run after run: the last run's is taken; older lines
    have no mutant)."""
    found: dict[str, str] = {}
    for line in lines:
        parts = line.split("\t")
        if len(parts) >= 3 and parts[2]:
            found[parts[2]] = parts[1]
    return found
