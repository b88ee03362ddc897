#!/usr/bin/env bash
# Build the documentation site (MkDocs, Material theme, API reference by mkdocstrings) into
# site/, failing on any warning (a broken link or reference); `scripts/docs.sh serve` serves
# it while you edit. The versions are pinned in docs/requirements.txt.
#   scripts/docs.sh [build|serve]
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv-docs/bin/mkdocs ]; then
  python3 -m venv .venv-docs
fi
# the API reference is read from the source (mkdocstrings' static analysis): icecommit itself
# is not installed here
.venv-docs/bin/python -m pip install -q -r docs/requirements.txt 2>&1 \
  | { grep -v "is ignored: it is neither a file nor a directory" || true; }
if [ "${1:-build}" = serve ]; then
  NO_MKDOCS_2_WARNING=1 exec .venv-docs/bin/mkdocs serve
fi
export NO_MKDOCS_2_WARNING=1
exec .venv-docs/bin/mkdocs build --strict
