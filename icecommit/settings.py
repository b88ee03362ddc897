"""Environment settings shared by every layer (no imports of other icecommit modules)."""

from __future__ import annotations

import os
from pathlib import Path

ENV_URI = "ICECOMMIT_CATALOG_URI"
ENV_WAREHOUSE = "ICECOMMIT_WAREHOUSE"
ENV_HOME = "ICECOMMIT_HOME"
ENV_METRICS_URI = "ICECOMMIT_METRICS_URI"


def icecommit_home() -> Path:
    """The folder of the embedded default: ``$ICECOMMIT_HOME`` or ``./warehouse``."""
    return Path(os.environ.get(ENV_HOME) or "warehouse").resolve()
