"""Writers: Spark tasks that turn a DataFrame into Iceberg data files."""

from icecommit.core.datafiles import DataFileRecord, WriteResult
from icecommit.writers.arrow import write_arrow
from icecommit.writers.files import TaskFileWriter
from icecommit.writers.session import local_session
from icecommit.writers.spark import SparkWriter, TaskAttempt

__all__ = [
    "DataFileRecord",
    "SparkWriter",
    "TaskAttempt",
    "TaskFileWriter",
    "WriteResult",
    "local_session",
    "write_arrow",
]
