#!/usr/bin/env bash
# CI: build the wheel and the sdist, install the wheel (its core: no pyspark) into a fresh
# virtual environment outside the repository, and run a small pipeline and the CLI from it.
#   scripts/package_check.sh   (after scripts/setup.sh, which installs `build`)
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
out="$(mktemp -d -t icecommit-package.XXXXXX)"
s3=""
trap '[ -n "$s3" ] && kill "$s3" 2>/dev/null; rm -rf "$out"' EXIT
if ! "$repo/.venv/bin/python" -m build --outdir "$out/dist" "$repo" >"$out/build.log" 2>&1; then
  tail -n 40 "$out/build.log" >&2
  exit 1
fi
ls "$out/dist"
python3 -m venv "$out/venv"
"$out/venv/bin/python" -m pip install -q "$out"/dist/icecommit-*.whl 2>&1 \
  | { grep -v "is ignored: it is neither a file nor a directory" || true; }
cd "$out"  # outside the repository: nothing can be imported from the checkout
# nothing of the environment this runs in (CI's settings, a developer's catalogs) reaches the check
for setting in $(env | grep -oE '^(ICECOMMIT|PYICEBERG)_[A-Za-z0-9_]*'); do unset "$setting"; done
export ICECOMMIT_HOME="$out/home" PYICEBERG_HOME="$out"
# an S3 server on loopback (moto, from the development environment): the core install writes
# to object storage with nothing more (the `s3` extra adds nothing)
"$repo/.venv/bin/python" "$repo/scripts/package_s3_server.py" "$out/s3.endpoint" >"$out/s3.log" 2>&1 &
s3=$!
for _ in $(seq 100); do [ -s "$out/s3.endpoint" ] && break; sleep 0.2; done
[ -s "$out/s3.endpoint" ] || { cat "$out/s3.log" >&2; exit 1; }
export ICECOMMIT_SMOKE_S3_ENDPOINT="$(cat "$out/s3.endpoint")"
"$out/venv/bin/icecommit" --version
"$out/venv/bin/python" "$repo/scripts/package_smoke.py"
"$out/venv/bin/icecommit" tables
"$out/venv/bin/icecommit" reconcile shop.orders --job orders >/dev/null
if "$out/venv/bin/icecommit" demo --rows 10 2>"$out/demo.err"; then
  echo "package check: the demo ran without pyspark" >&2
  exit 1
fi
grep -q "pip install 'icecommit\[spark\]'" "$out/demo.err" || { cat "$out/demo.err" >&2; exit 1; }
# the demo's set-up (scripts/demo.sh): icecommit and Spark only, and one line of output
if ! ICECOMMIT_SKIP_CHROMIUM=1 ICECOMMIT_EXTRAS=spark "$repo/scripts/setup.sh" "$out/demo-venv" >"$out/setup.out" 2>&1; then
  echo "package check: the demo's set-up failed:" >&2
  cat "$out/setup.out" >&2
  exit 1
fi
if [ "$(grep -cv '^setup: icecommit ' "$out/setup.out")" != 0 ]; then
  echo "package check: the demo's set-up printed more than its one line:" >&2
  cat "$out/setup.out" >&2
  exit 1
fi
if "$out/demo-venv/bin/python" -c "import pytest" 2>/dev/null; then
  echo "package check: the demo's set-up installed the test tools" >&2
  exit 1
fi
echo "package check: wheel and sdist built; the wheel installs and runs without pyspark; the demo's set-up is quiet"
