#!/usr/bin/env bash
# Create (or reuse) a virtualenv inside the repo and install icecommit into it, with the
# extras ICECOMMIT_EXTRAS names (default: dev, everything the tests need; the demo asks for
# spark only).
#   scripts/setup.sh [VENV_DIR] [EXTRA_PIP_REQUIREMENTS...]
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${1:-.venv}"
shift || true
python="${PYTHON:-python3}"
# apt's own output goes to a log, shown only when the install fails
apt_install() {
  local log
  log="$(mktemp -t icecommit-apt.XXXXXX)"
  if [ "$(id -u)" = 0 ]; then apt_get="apt-get"; else apt_get="sudo apt-get"; fi
  if (DEBIAN_FRONTEND=noninteractive $apt_get update -qq && \
      DEBIAN_FRONTEND=noninteractive $apt_get install -y -qq "$@") >"$log" 2>&1; then
    rm -f "$log"
  else
    tail -n 30 "$log" >&2
    echo "setup: apt-get install $* failed (log: $log)" >&2
    return 1
  fi
}
if ! command -v java >/dev/null 2>&1; then
  echo "setup: Java is required by Spark; installing a JRE with apt-get" >&2
  apt_install default-jre-headless
fi
if ! command -v chromium >/dev/null 2>&1 && [ "${ICECOMMIT_SKIP_CHROMIUM:-0}" != 1 ]; then
  # headless Chromium renders the reconciliation report in the tests
  echo "setup: installing Debian's chromium for the report tests" >&2
  apt_install chromium || echo "setup: could not install chromium" >&2
fi
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv"
fi
# pip's failures fail the script; only a local mirror's "is ignored" notices are dropped
quiet() { "$@" 2>&1 | { grep -v "is ignored: it is neither a file nor a directory" || true; }; }
quiet "$venv/bin/python" -m pip install -q --upgrade pip
# setuptools warns on every editable build that a folder named like the package may shadow
# it: this checkout is that folder, on purpose
PYTHONWARNINGS="ignore:Editable installation" \
  quiet "$venv/bin/python" -m pip install -q -e ".[${ICECOMMIT_EXTRAS:-dev}]" "$@"
"$venv/bin/python" -c "import icecommit, pyspark, pyiceberg; print('setup: icecommit', icecommit.__version__, 'pyspark', pyspark.__version__, 'pyiceberg', pyiceberg.__version__)"
