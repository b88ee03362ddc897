#!/usr/bin/env bash
# Create (or reuse) a virtualenv inside the repo and install icecommit into it.
#   scripts/setup.sh [VENV_DIR] [EXTRA_PIP_REQUIREMENTS...]
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${1:-.venv}"
shift || true
python="${PYTHON:-python3}"
if ! command -v java >/dev/null 2>&1; then
  echo "setup: Java is required by Spark; installing a JRE with apt-get" >&2
  (apt-get update -qq && apt-get install -y -qq default-jre-headless) >&2
fi
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q --upgrade pip 2>&1 | grep -v "is ignored" || true
"$venv/bin/python" -m pip install -q -e ".[dev]" "$@" 2>&1 | grep -v "is ignored" || true
"$venv/bin/python" -c "import icecommit, pyspark, pyiceberg; print('setup: icecommit', icecommit.__version__, 'pyspark', pyspark.__version__, 'pyiceberg', pyiceberg.__version__)"
