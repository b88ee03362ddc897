#!/usr/bin/env bash
# One command on a fresh machine: set up, then run the demo pipeline (icecommit demo).
#   scripts/demo.sh [--rows N] [--checkpoints K]
set -euo pipefail
cd "$(dirname "$0")/.."
ICECOMMIT_SKIP_CHROMIUM=1 scripts/setup.sh .venv
exec .venv/bin/icecommit demo "$@"
