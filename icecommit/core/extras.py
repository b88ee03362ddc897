"""Names that need an optional extra, imported on first use: a missing extra is an error
that says which one to install, not a bare ``ModuleNotFoundError``."""

from __future__ import annotations

import importlib
from typing import Any

from icecommit.core.errors import MissingExtraError

#: The extra that installs each optional top-level package.
_EXTRA_OF = {"pyspark": ("pyspark", "spark")}


def lazily(module: str, name: str, shown: str) -> Any:
    """``module.name``, imported now; ``shown`` names it in the error when the package it
    needs (pyspark) is not installed.

    Raises:
        MissingExtraError: the package is missing; names the extra that installs it.
    """
    try:
        return getattr(importlib.import_module(module), name)
    except ModuleNotFoundError as e:
        needed = _EXTRA_OF.get((e.name or "").split(".")[0])
        if needed is None:
            raise
        raise MissingExtraError(shown, *needed) from e
