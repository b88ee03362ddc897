"""The folder of the embedded default: the SQLite catalog, its warehouse and the state
database together, looked up on this machine (``ICECOMMIT_HOME``, else a per-user folder)."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from icecommit.core.settings import ENV_HOME

#: Where an earlier icecommit kept the embedded catalog: ``./warehouse`` of the working directory.
LEGACY_HOME = "warehouse"

_noticed: set[Path] = set()


def user_home() -> Path:
    """The per-user default folder of the embedded catalog and warehouse:
    ``$XDG_DATA_HOME/icecommit``, or ``~/.local/share/icecommit``."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return (Path(base) / "icecommit").resolve()


def icecommit_home() -> Path:
    """The folder of the embedded default (catalog and warehouse together):
    ``$ICECOMMIT_HOME``, else the per-user :func:`user_home`, whatever the working
    directory. A catalog an earlier version made in ``./warehouse`` of the working
    directory is still used, with a one-line notice saying where the default now lives."""
    configured = os.environ.get(ENV_HOME)
    if configured:
        return Path(configured).resolve()
    legacy = Path(LEGACY_HOME).resolve()
    if (legacy / "catalog.db").is_file():
        if legacy not in _noticed:
            _noticed.add(legacy)
            logging.getLogger("icecommit").warning(
                "using the catalog an earlier icecommit made in %s; the default now lives in %s "
                "(set ICECOMMIT_HOME to choose, or move the folder there)",
                legacy,
                user_home(),
            )
        return legacy
    return user_home()


__all__ = ["LEGACY_HOME", "icecommit_home", "user_home"]
