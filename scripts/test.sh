#!/usr/bin/env bash
# One command on a fresh machine: set up (the virtualenv, and PostgreSQL 15 on 127.0.0.1:5432
# installed from Debian's packages and started where it is absent), then run every test
# (lint, types, pytest).
# Spark tests run on the newest pyspark 4.x installed by setup. Tests run in
# ICECOMMIT_TEST_WORKERS (default 2) pytest-xdist workers, each with its own Spark session
# and PostgreSQL database; ICECOMMIT_TEST_WORKERS=0 runs them in this one process.
#   scripts/test.sh [PYTEST_ARGS...]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh .venv
scripts/postgres.sh
.venv/bin/ruff check icecommit tests bench mutation
.venv/bin/mypy
workers="${ICECOMMIT_TEST_WORKERS:-2}"
if [ "$workers" = 0 ]; then
  exec .venv/bin/python -m pytest "$@"
fi
exec .venv/bin/python -m pytest -n "$workers" --dist worksteal "$@"
