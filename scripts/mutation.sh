#!/usr/bin/env bash
# The kept mutation score (not part of CI): mutmut mutates the committer, the ancestry and
# decision code, the state layer's checkpoint and partition stores, partition completeness,
# path handling, lineage, retry, time parsing and reconciliation's judgement ([tool.mutmut]
# in pyproject.toml); a mutant that fails mypy --strict (which CI runs) is caught without
# running tests, every other runs the fast tests (no Spark; SQLite, and PostgreSQL for the
# code only it reaches) of the selection there;
# a mutant listed as equivalent in mutation/equivalent.toml whose changed lines still match
# is recorded as survived without running its tests again (mutation/run.py); then
# writes the score and every surviving mutant (killed since, or listed as equivalent with
# the reason) to MUTATION.md.
#   scripts/mutation.sh                      # verdicts are kept in mutants/ and, between
#                                            # sessions, in mutation/cache.tar.gz: a run judges
#                                            # again only the mutants of functions that changed,
#                                            # those whose killing test changed, and survivors
#                                            # (mutation/cache.py says what it cannot see)
#   scripts/mutation.sh --fresh              # start over: judge every mutant
#   scripts/mutation.sh --fresh --rerun-equivalent   # and run the listed equivalent ones too
#   scripts/mutation.sh 'icecommit.committer.validation.*'  # only these mutants, again
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || scripts/setup.sh .venv
.venv/bin/python -m pip install -q "mutmut>=3.8,<4" 2>&1 | { grep -v "is ignored: it is neither" || true; }
rerun=()
names=()
for arg in "$@"; do
  case "$arg" in
    --fresh) rm -rf mutants; rerun+=(--fresh) ;;
    --rerun-equivalent) rerun+=(--rerun-equivalent) ;;
    -*) echo "scripts/mutation.sh: unknown option $arg (--fresh, --rerun-equivalent, or mutant names)" >&2; exit 2 ;;
    *) names+=("$arg") ;;
  esac
done
export PATH="$PWD/.venv/bin:$PATH"  # the type check runs .venv's mypy
started=$(date +%s)
# one worker per core; fails only where mutmut cannot run (its clean tests fail): the score
# is in the report
.venv/bin/python -m mutation.run --max-children "$(nproc)" "${rerun[@]}" "${names[@]}"
.venv/bin/python -m mutation.report --seconds "$(( $(date +%s) - started ))"
