#!/usr/bin/env bash
# The kept mutation score (not part of CI): mutmut mutates the committer, the ancestry and
# decision code, the state layer's checkpoint and partition stores, partition completeness,
# path handling, lineage, retry, time parsing and reconciliation's judgement ([tool.mutmut]
# in pyproject.toml); a mutant that fails mypy --strict (which CI runs) is caught without
# running tests, every other runs the fast tests (no Spark; SQLite, and PostgreSQL for the
# code only it reaches) of the selection there;
# then writes the score and every surviving mutant (killed since, or listed as equivalent
# with the reason in mutation/equivalent.toml) to MUTATION.md.
#   scripts/mutation.sh            # results are kept in mutants/: a second run only re-runs
#                                  # mutants of functions (or tests) that changed
#   scripts/mutation.sh --fresh    # start over
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || scripts/setup.sh .venv
.venv/bin/python -m pip install -q "mutmut>=3.8,<4" 2>&1 | { grep -v "is ignored: it is neither" || true; }
if [ "${1:-}" = "--fresh" ]; then rm -rf mutants; fi
export PATH="$PWD/.venv/bin:$PATH"  # the type check runs .venv's mypy
started=$(date +%s)
# one worker per core; mutmut's exit code says nothing about the score, the report does
.venv/bin/mutmut run --max-children "$(nproc)" || true
.venv/bin/python -m bench.mutation_report --seconds "$(( $(date +%s) - started ))"
