#!/usr/bin/env bash
# One command on a fresh machine: set up, then run the demo pipeline (icecommit demo).
#   scripts/demo.sh [--rows N] [--checkpoints K]
set -euo pipefail
cd "$(dirname "$0")/.."
# only what the demo needs: icecommit and Spark (the tests' tools come with scripts/test.sh)
ICECOMMIT_SKIP_CHROMIUM=1 ICECOMMIT_EXTRAS=spark scripts/setup.sh .venv
exec .venv/bin/icecommit demo "$@"
