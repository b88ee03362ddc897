"""Run mutmut over the scope in ``[tool.mutmut]``, without running again the survivors already
shown to be equivalent.

An equivalent mutant survives every test by definition, and a survivor is the dearest
mutant to judge: it runs every test that reaches its function (the commit path's reach
hundreds). ``mutation/equivalent.toml`` records, beside each equivalent mutant's reason, the
lines it changes; a mutant whose name *and* changed lines still match is recorded as
survived without running it, and listed in ``mutants/pinned-equivalent.json`` so the report
says so. A mutant whose function changed (mutmut renumbers its mutants) no longer matches
and runs like any other.

    python -m bench.mutation_run [--max-children N] [--rerun-equivalent]
    python -m bench.mutation_run --pin    # record the changed lines of every listed mutant
                                          # from the last run's mutants/ (after adding one)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parents[1]
EQUIVALENT = ROOT / "mutation" / "equivalent.toml"
PINNED = ROOT / "mutants" / "pinned-equivalent.json"
HEADER = """\
# Surviving mutants that no test can kill, each with the reason it is equivalent to the
# original code (scripts/mutation.sh lists every other survivor as a gap in MUTATION.md).
# `change` is the mutant's changed lines (python -m bench.mutation_run --pin writes it): a
# mutant whose name and change still match is recorded as survived without running its
# tests again (bench/mutation_run.py); --rerun-equivalent runs them all.
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
    for name, entry in entries.items():
        try:
            entry["change"] = changed_lines(get_diff_for_mutant(name))
        except Exception as error:  # a mutant gone from the code: say which
            missing.append(f"{name}: {error}")
            entry.pop("change", None)
    write_equivalent(entries)
    print(f"pinned {len(entries) - len(missing)} of {len(entries)} equivalent mutants")
    for line in missing:
        print(f"  not found (its entry is left without a change): {line}")


def run(max_children: int, rerun_equivalent: bool) -> None:
    import mutmut.__main__ as mutmut_main
    from mutmut.mutation.diff_apply import get_diff_for_mutant

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
    if rerun_equivalent and PINNED.exists():
        PINNED.unlink()
    sys.argv = ["mutmut", "run", "--max-children", str(max_children)]
    try:
        mutmut_main.cli()
    except SystemExit as done:
        if done.code not in (0, None):
            raise


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--max-children", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--rerun-equivalent", action="store_true", help="run the listed equivalent mutants too")
    parser.add_argument("--pin", action="store_true", help="record the listed mutants' changed lines and stop")
    args = parser.parse_args()
    os.chdir(ROOT)
    if args.pin:
        pin()
    else:
        run(args.max_children, args.rerun_equivalent)


if __name__ == "__main__":
    main()
