#!/usr/bin/env bash
# One command on a fresh machine: set up, then run every test (lint, types, pytest).
# Spark tests run on the newest pyspark 4.x installed by setup.
#   scripts/test.sh [PYTEST_ARGS...]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh .venv
.venv/bin/ruff check icecommit tests bench
.venv/bin/mypy
exec .venv/bin/python -m pytest "$@"
