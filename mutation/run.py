"""Run mutmut over the scope in ``[tool.mutmut]``, without running again the survivors already
shown to be equivalent.

An equivalent mutant survives every test by definition, and a survivor is the dearest
mutant to judge: it runs every test that reaches its function (the commit path's reach
hundreds). ``mutation/equivalent.toml`` records, beside each equivalent mutant's reason, the
lines it changes; a mutant whose name *and* changed lines still match is recorded as
survived without running it, and listed in ``mutants/pinned-equivalent.json`` so the report
says so. A mutant whose function changed (mutmut renumbers its mutants) no longer matches
and runs like any other.

Each mutant's tests run in this order: those that killed mutants of the same function, then
those that killed any mutant, then the rest fastest first (mutmut's order). The kills are
kept in ``mutation/killers.json`` for the next run. Only the order changes: a mutant is
killed by its first failing test, and a survivor still runs every test that reaches it.

    python -m mutation.run [--max-children N] [--fresh] [--rerun-equivalent] [MUTANT ...]
                                          # names or patterns: only these, run again
                                          # a checkout without mutants/ starts from the kept
                                          # verdicts of the last run (mutation/cache.py)
                                          # unless --fresh; every run keeps its own after
    python -m mutation.run --pin    # record the changed lines of every listed mutant
                                          # from the last run's mutants/ (after adding one)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from mutation import cache as mutation_cache

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parents[1]
EQUIVALENT = ROOT / "mutation" / "equivalent.toml"
PINNED = ROOT / "mutants" / "pinned-equivalent.json"
#: which tests killed mutants of which function, kept between runs: the order to try them in
KILLERS = ROOT / "mutation" / "killers.json"
#: this run's kills, one "function<TAB>test<TAB>mutant" line each, appended by the mutants' processes
KILL_LOG = ROOT / "mutants" / "kills.log"
HEADER = """\
# Surviving mutants that no test can kill, each with the reason it is equivalent to the
# original code (scripts/mutation.sh lists every other survivor as a gap in MUTATION.md).
# `change` is the mutant's changed lines (python -m mutation.run --pin writes it): a
# mutant whose name and change still match is recorded as survived without running its
# tests again (mutation/run.py); --rerun-equivalent runs them all.
"""


def changed_lines(diff: str) -> str:
    """The removed and added lines of a unified diff, without its file and hunk headers."""
    return "\n".join(line for line in diff.splitlines() if line[:1] in "+-" and not line.startswith(("+++", "---")))


def load_equivalent() -> dict[str, dict[str, str]]:
    return dict(tomllib.loads(EQUIVALENT.read_text()).get("mutants", {}))


def _toml_string(text: str) -> str:
    # a JSON string is a TOML basic string for everything a reason or a diff line holds
    return json.dumps(text, ensure_ascii=False)


def write_equivalent(entries: dict[str, dict[str, str]]) -> None:
    parts = [HEADER]
    for name, entry in entries.items():
        parts.append(f"\n[mutants.{_toml_string(name)}]\nreason = {_toml_string(entry['reason'])}\n")
        if entry.get("change"):
            parts.append(f"change = {_toml_string(entry['change'])}\n")
    EQUIVALENT.write_text("".join(parts))
    assert load_equivalent() == entries, "equivalent.toml did not read back as written"


def pin() -> None:
    """Record the changed lines of every listed mutant, from the mutants/ of the last run."""
    from mutmut.mutation.diff_apply import get_diff_for_mutant

    entries = load_equivalent()
    missing = []
    moved = []
    for name, entry in entries.items():
        try:
            change = changed_lines(get_diff_for_mutant(name))
        except Exception as error:  # a mutant gone from the code: say which
            missing.append(f"{name}: {error}")
            entry.pop("change", None)
            continue
        if entry.get("change") and entry["change"] != change:
            # the code changed and the name now belongs to another mutant: its reason is not this one's
            moved.append(f"{name}: now {change!r}")
            continue
        entry["change"] = change
    write_equivalent(entries)
    print(f"pinned {len(entries) - len(missing) - len(moved)} of {len(entries)} equivalent mutants")
    for line in missing:
        print(f"  not found (its entry is left without a change): {line}")
    for line in moved:
        print(f"  another mutant now (its entry is left as it was: review its reason, or remove it): {line}")


_kept: dict[str, dict[str, int]] | None = None


def _kept_kills() -> dict[str, dict[str, int]]:
    """The kills of earlier runs (mutation/killers.json), read once per process: the mutants'
    processes are forked from the one that read it first."""
    global _kept
    if _kept is None:
        _kept = json.loads(KILLERS.read_text()) if KILLERS.exists() else {}
    return _kept


def _kill_counts() -> tuple[dict[str, Counter[str]], Counter[str]]:
    """Kills per function and in all: the kept ones of earlier runs, then this run's."""
    by_function: dict[str, Counter[str]] = defaultdict(Counter)
    for function, tests in _kept_kills().items():
        by_function[function].update(tests)
    if KILL_LOG.exists():
        for line in KILL_LOG.read_text().splitlines():
            function, _, rest = line.partition("\t")
            test = rest.split("\t")[0]
            if test:
                by_function[function][test] += 1
    overall: Counter[str] = Counter()
    for tests in by_function.values():
        overall.update(tests)
    return by_function, overall


def killers_first(function: str, tests: list[str]) -> list[str]:
    """``tests`` (fastest first, as mutmut sorts them) with those that killed mutants of this
    function first, then those that killed any mutant: a mutant most tests cannot tell from
    the original is then caught by its first test instead of after every fast test that
    merely reaches it. Survivors still run every test; only the order changes."""
    by_function, overall = _kill_counts()
    rank = {t: i for i, t in enumerate(tests)}
    own = sorted((t for t in by_function.get(function, {}) if t in rank), key=lambda t: -by_function[function][t])
    first = set(own)
    rest = [t for t in tests if t not in first]
    others = sorted((t for t in rest if overall[t]), key=lambda t: (-overall[t], rank[t]))
    seen = first | set(others)
    return own + others + [t for t in rest if t not in seen]


def keep_killers() -> None:
    """Fold this run's kills into mutation/killers.json (the order hint of the next run)."""
    by_function, _ = _kill_counts()
    KILLERS.write_text(
        json.dumps({f: dict(sorted(c.items())) for f, c in sorted(by_function.items()) if c}, indent=1) + "\n"
    )


def _order_tests_by_kills() -> None:
    from mutmut.runners.harness import PytestRunner
    from mutmut.utils.file_utils import change_cwd
    from mutmut.utils.format_utils import mangled_name_from_mutant_name

    def run_tests(self: PytestRunner, *, mutant_name: str | None, tests: Iterable[str]) -> int:
        ordered = list(tests)
        function = mangled_name_from_mutant_name(mutant_name) if mutant_name else None
        if function is not None:
            ordered = killers_first(function, ordered)

        class RecordKiller:
            def pytest_runtest_logreport(self, report: Any) -> None:
                if report.failed and function is not None:
                    with KILL_LOG.open("a") as log:
                        log.write(f"{function}\t{report.nodeid}\t{mutant_name}\n")

        with change_cwd("mutants"):
            return int(self.execute_pytest(self._pytest_args_regular_run(ordered), plugins=[RecordKiller()]))

    PytestRunner.run_tests = run_tests  # type: ignore[method-assign]


def unselected_test_files() -> list[str]:
    """Test files that import a mutated module by name but are not among the tests mutants
    run: their mutants would survive tests that kill them (a new test file left out)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mutmut"]
    selected = {a for a in config["pytest_add_cli_args_test_selection"] if a.startswith("tests/")}
    modules = [m.removesuffix(".py").replace("/", ".") for m in config["only_mutate"]]
    found = []
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        name = str(path.relative_to(ROOT))
        text = path.read_text()
        if name not in selected and any(f"from {m} import" in text or f"import {m}" in text for m in modules):
            found.append(name)
    return found


def _revision() -> str:
    """The checkout's commit, marked when it holds uncommitted changes."""
    import subprocess

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
        return done.stdout.strip() if done.returncode == 0 else ""

    head = git("rev-parse", "--short", "HEAD") or "unknown"
    # mutation/ is rewritten by the run itself (killers.json, the cache)
    changes = git("status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)mutation")
    return head + ("+changes" if changes else "")


def start_from_kept_verdicts(cache: bool) -> dict[str, str]:
    """Restore the kept verdicts of the last run (``mutation/cache.tar.gz``) where this
    checkout has no ``mutants/`` yet, forget those the tests as they are may no longer give,
    and say what was kept; returns the killers of the kept kills."""
    if cache and not (ROOT / "mutants").exists():
        revision = mutation_cache.restore()
        where = mutation_cache.CACHE.relative_to(ROOT)
        print(f"restored the verdicts of {revision} from {where}" if revision else f"no usable {where}")
    if not (ROOT / "mutants").exists():
        print("every mutant is judged in this run")
        return {}
    start = mutation_cache.invalidate()
    forgotten = ", ".join(f"{n} {why}" for why, n in sorted(start.forgotten.items())) or "none"
    print(f"verdicts of tests kept from {start.revision}: {start.kept}; judged again: {forgotten}")
    if start.changed:
        print("  files under tests/ changed since: " + ", ".join(start.changed))
    return start.killed_by


def run(max_children: int, rerun_equivalent: bool, mutant_names: list[str], *, cache: bool = True) -> None:
    import mutmut.__main__ as mutmut_main
    from mutmut.mutation.diff_apply import get_diff_for_mutant

    killed_by = start_from_kept_verdicts(cache)
    revision = _revision()
    mutation_cache.write_baseline(killed_by, revision)
    KILL_LOG.unlink(missing_ok=True)  # folded into killers.json by the run that wrote it

    entries = {} if rerun_equivalent else load_equivalent()
    pinned: set[str] = set()
    collect = mutmut_main.collect_source_file_mutation_data

    def collect_skipping_pinned(*, mutant_names):  # type: ignore[no-untyped-def]
        mutants, by_path = collect(mutant_names=mutant_names)
        # pinned by an earlier run whose results mutmut kept, unless it runs this time
        earlier = set(json.loads(PINNED.read_text())) if PINNED.exists() else set()
        kept = []
        for data, name, result in mutants:
            change = entries.get(name, {}).get("change")
            if result is None:
                if change and changed_lines(get_diff_for_mutant(name, path=data.path)) == change:
                    data.exit_code_by_key[name] = 0  # survived, as recorded
                    data.save()
                    result = 0
                    pinned.add(name)
                else:
                    earlier.discard(name)
            kept.append((data, name, result))
        PINNED.parent.mkdir(exist_ok=True)
        PINNED.write_text(json.dumps(sorted(earlier | pinned), indent=1))
        print(f"{len(pinned)} equivalent mutants matched their recorded change: recorded as survived, not run")
        return kept, by_path

    mutmut_main.collect_source_file_mutation_data = collect_skipping_pinned
    _kept_kills()  # before mutmut forks its workers
    _order_tests_by_kills()
    if rerun_equivalent and PINNED.exists():
        PINNED.unlink()
    for name in unselected_test_files():
        print(f"note: {name} imports a mutated module but is not in the tests mutants run ([tool.mutmut])")
    sys.argv = ["mutmut", "run", "--max-children", str(max_children), *mutant_names]
    try:
        mutmut_main.cli()
    except SystemExit as done:
        if done.code not in (0, None):
            raise
    finally:
        keep_killers()
        if KILL_LOG.exists():
            killed_by.update(mutation_cache.killers_from_log(KILL_LOG.read_text().splitlines()))
        mutation_cache.write_baseline(killed_by, revision)
    held = mutation_cache.pack()
    print(f"kept {held} verdicts in {mutation_cache.CACHE.relative_to(ROOT)} for the next run")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--max-children", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--rerun-equivalent", action="store_true", help="run the listed equivalent mutants too")
    parser.add_argument("--pin", action="store_true", help="record the listed mutants' changed lines and stop")
    parser.add_argument(
        "--fresh", action="store_true",
        help="judge every mutant: do not start from the kept verdicts (mutation/cache.tar.gz)",
    )  # fmt: skip
    parser.add_argument(
        "mutants", nargs="*", help="run only these mutants (names or patterns), again even if judged before"
    )
    args = parser.parse_args()
    os.chdir(ROOT)
    if args.pin:
        pin()
    else:
        run(args.max_children, args.rerun_equivalent, args.mutants, cache=not args.fresh)


if __name__ == "__main__":
    main()
