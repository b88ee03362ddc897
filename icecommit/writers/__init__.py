"""Writers: Spark tasks that turn a DataFrame into Iceberg data files.

``write_arrow`` (Arrow record batches in, one task's files out) needs no Spark; the Spark
pieces (``SparkWriter``, ``TaskAttempt``, ``local_session``) are imported when first used,
so this package imports where pyspark is not installed (``pip install 'icecommit[spark]'``
adds it)."""

from __future__ import annotations

from typing import Any

from icecommit.core.datafiles import DataFileRecord, WriteResult
from icecommit.core.extras import lazily
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
    return lazily(module, name, f"icecommit.writers.{name}")


__all__ = [
    "DataFileRecord",
    "SparkWriter",
    "TaskAttempt",
    "TaskFileWriter",
    "WriteResult",
    "local_session",
    "write_arrow",
]
