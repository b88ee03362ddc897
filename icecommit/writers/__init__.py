"""Writers: Spark tasks that turn a DataFrame into Iceberg data files.

``write_arrow`` (Arrow record batches in, one task's files out) needs no Spark; the Spark
pieces (``SparkWriter``, ``TaskAttempt``, ``local_session``) are imported when first used,
so this package imports where pyspark is not installed (``pip install 'icecommit[spark]'``
adds it)."""

from __future__ import annotations

import importlib
from typing import Any

from icecommit.core.datafiles import DataFileRecord, WriteResult
from icecommit.core.errors import MissingExtraError
from icecommit.writers.arrow import write_arrow
from icecommit.writers.files import TaskFileWriter

_SPARK = {
    "SparkWriter": "icecommit.writers.spark",
    "TaskAttempt": "icecommit.writers.spark",
    "local_session": "icecommit.writers.session",
}


def __getattr__(name: str) -> Any:
    module = _SPARK.get(name)
    if module is None:
        raise AttributeError(f"module 'icecommit.writers' has no attribute {name!r}")
    try:
        return getattr(importlib.import_module(module), name)
    except ModuleNotFoundError as e:
        if (e.name or "").split(".")[0] != "pyspark":
            raise
        raise MissingExtraError(f"icecommit.writers.{name}", "pyspark", "spark") from e


__all__ = [
    "DataFileRecord",
    "SparkWriter",
    "TaskAttempt",
    "TaskFileWriter",
    "WriteResult",
    "local_session",
    "write_arrow",
]
