"""Write MUTATION.md from mutmut's results: the score, per file, and every surviving mutant
with its diff, each either listed as equivalent (``mutation/equivalent.toml``, with the
reason) or as a gap a test should close.

    .venv/bin/python -m mutation.report [--seconds N]
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import subprocess
from collections import Counter, defaultdict
from datetime import datetime, timezone
from pathlib import Path

import psutil

from mutation import cache as mutation_cache

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parents[1]
_LINE = re.compile(r"^\s+(?P<name>\S+): (?P<status>.+)$")


LAST_RUN = "## The last run"


def _kept_preface() -> list[str]:
    """The title and what people wrote above the last run's heading, kept as it is: the report
    replaces only what follows it."""
    report = ROOT / "MUTATION.md"
    text = report.read_text() if report.exists() else ""
    head = text.split(f"\n{LAST_RUN}\n", 1)[0] if f"\n{LAST_RUN}\n" in text else "# Mutation score\n"
    return [*head.rstrip("\n").split("\n"), "", LAST_RUN, ""]


def _mutmut(*args: str) -> str:
    done = subprocess.run([str(ROOT / ".venv" / "bin" / "mutmut"), *args], cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        return f"(mutmut {' '.join(args)} failed: {done.stderr.strip().splitlines()[-1:] or done.returncode})"
    return done.stdout


def _restored_line() -> str:
    """What the run took from the verdicts of an earlier one (mutation/cache.py)."""
    start_file = mutation_cache.MUTANTS / mutation_cache.RUN_START
    if not start_file.exists():
        return "- Every verdict was judged in this run (`--fresh`, or no kept verdicts)."
    start = json.loads(start_file.read_text())
    forgotten = sum(start["forgotten"].values())
    reasons = ", ".join(f"{n:,} {why}" for why, n in sorted(start["forgotten"].items()))
    changed = f"; files under `tests/` changed since: {len(start['changed'])}" if start["changed"] else ""
    return (
        f"- Verdicts of tests kept from the run of {start['revision']} (`mutation/cache.tar.gz`, "
        f"`mutation/cache.py`): {start['kept']:,}; forgotten and judged again: {forgotten:,}"
        + (f" ({reasons})" if reasons else "")
        + f"{changed}; with them every mutant of a function that changed, every one no test reached "
        "and every one the type check caught. `--fresh` judges everything."
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=int, default=None, help="how long the run took (for the report)")
    args = parser.parse_args()
    statuses = {}
    for line in _mutmut("results", "--all", "true").splitlines():
        if match := _LINE.match(line):
            statuses[match["name"]] = match["status"].strip()
    equivalent = tomllib.loads((ROOT / "mutation" / "equivalent.toml").read_text()).get("mutants", {})
    by_module: dict[str, Counter[str]] = defaultdict(Counter)
    for name, status in statuses.items():
        by_module[name.split(".x_")[0].split(".xǁ")[0]][status] += 1
    counts = Counter(statuses.values())
    survivors = sorted(n for n, s in statuses.items() if s == "survived")
    # mutants the type check CI runs (mypy --strict) refuses never reach a test: they cannot land
    typed = counts["caught by type check"]
    judged = sum(n for s, n in counts.items() if s in ("killed", "survived", "timeout", "segfault", "suspicious"))
    killed = counts["killed"] + counts["timeout"] + counts["segfault"]
    gaps = [n for n in survivors if n not in equivalent]
    killable = judged - (len(survivors) - len(gaps))
    pinned_file = ROOT / "mutants" / "pinned-equivalent.json"
    pinned = set(json.loads(pinned_file.read_text())) if pinned_file.exists() else set()
    pinned &= {n for n in survivors if n in equivalent}
    lines = [
        *_kept_preface(),
        f"`scripts/mutation.sh`, run {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC on {platform.node()} "
        f"({psutil.cpu_count()} cores)" + (f", {args.seconds // 60} min {args.seconds % 60} s" if args.seconds else "")
        + ". mutmut mutates the modules in `[tool.mutmut]` of `pyproject.toml`; a mutant that fails the type "
        "check CI runs (`mypy --strict`) is caught there; every other runs the fast tests of the selection in "
        "`pyproject.toml` (no Spark; SQLite, and PostgreSQL where only it reaches the code).",
        "",
        f"- **Killed by the tests: {killed:,} of {judged:,} mutants that pass the type check "
        f"({100 * killed / max(judged, 1):.1f}%)**; of those that can be killed (equivalent ones left out): "
        f"{killed:,} of {killable:,} ({100 * killed / max(killable, 1):.1f}%).",
        f"- Caught by the type check before any test: {typed:,} (of {len(statuses):,} "
        f"mutants in all; with them, {100 * (killed + typed) / max(judged + typed, 1):.1f}% caught).",
        f"- Survived: {len(survivors):,} ({len(survivors) - len(gaps):,} equivalent, with the reason below; "
        f"{len(gaps):,} gaps). Not reached by any fast test: {counts['no tests']:,}. Other: "
        + (", ".join(f"{s} {n}" for s, n in sorted(counts.items())
                     if s not in ("killed", "survived", "no tests", "timeout", "caught by type check")) or "none")
        + ".",
        f"- Equivalent survivors recorded as survived without running their tests again (name and changed "
        f"lines match `mutation/equivalent.toml`; `scripts/mutation.sh --fresh --rerun-equivalent` runs them): "
        f"{len(pinned):,} of {len(survivors) - len(gaps):,}.",
        _restored_line(),
        "",
        "| module | mutants | caught by type check | killed by tests | survived | no tests | not checked |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]  # fmt: skip
    for module, c in sorted(by_module.items()):
        lines.append(
            f"| `{module}` | {sum(c.values()):,} | {c['caught by type check']:,} | "
            f"{c['killed'] + c['timeout'] + c['segfault']:,} | "
            f"{c['survived']:,} | {c['no tests']:,} | {c['not checked']:,} |"
        )
    lines += ["", "## Equivalent survivors", ""]
    for name in survivors:
        if name in equivalent:
            rerun = " (recorded, not run again)" if name in pinned else ""
            lines.append(f"- `{name}`{rerun}: {equivalent[name]['reason']}")
    lines += ["", "## Gaps (survivors no test kills yet)", ""]
    for name in gaps:
        diff = _mutmut("show", name).split("\n", 1)[-1].strip()
        lines += [f"### `{name}`", "", "```diff", diff, "```", ""]
    if not gaps:
        lines.append("None.")
    (ROOT / "MUTATION.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines[:12]))


if __name__ == "__main__":
    main()
