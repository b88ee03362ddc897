#!/usr/bin/env bash
# icecommit against Apache Iceberg's own Spark writer, in one command on a fresh machine:
# sets up a PySpark 3.5 environment (.venv-spark35, as CI's second pass) and Iceberg's
# Spark runtime 1.10.2 from Maven Central (.java-iceberg), then
# runs bench.native_write (5M and 20M rows, both distribution modes, the fixed cost of a
# 10,000-row checkpoint on SQLite and PostgreSQL) and prints its tables for BENCHMARKS.md.
#   scripts/bench_native.sh [bench.native_write ARGS...]    e.g. --quick, --sizes 5000000
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh .venv-spark35 "pyspark>=3.5,<3.6" "pandas>=2.2,<3" "numpy<2.3"
scripts/java_iceberg/setup.sh .java-iceberg
PYTHONPATH="$PWD" exec .venv-spark35/bin/python -m bench.native_write --java "$PWD/.java-iceberg" "$@"
