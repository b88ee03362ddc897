"""A local SparkSession configured the way icecommit's writers expect."""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession


def local_session(
    app_name: str = "icecommit",
    *,
    master: str = "local[2]",
    config: dict[str, str] | None = None,
) -> SparkSession:
    """Get or create a local SparkSession whose Python workers run this interpreter.

    The session time zone is UTC so that Spark ``TIMESTAMP`` values print as they are
    stored; the UI is off. ``config`` adds or overrides settings.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.pyspark.python", sys.executable)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.driver.memory", "2g")
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "65536")
    )
    for key, value in (config or {}).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session
