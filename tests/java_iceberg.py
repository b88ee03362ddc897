"""Apache Iceberg's Java implementation as a reference, from tests and benchmarks.

The environment is built by ``scripts/java_iceberg/setup.sh DIR`` (PySpark 3.5.9 and Iceberg's
Spark runtime 1.10.2, or with ``--spark 4.1`` PySpark 4.1.4 and the runtime 1.12.0, with the
JDBC drivers, all from Maven Central at pinned versions and checksums; ``DIR/ready`` marks a
finished build) and found through ``ICECOMMIT_JAVA_ICEBERG=DIR``. Java runs in a subprocess
with that environment's interpreter (``tests/java_iceberg_driver.py``), whatever pyspark the
calling process has.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ENV_VAR = "ICECOMMIT_JAVA_ICEBERG"
#: Set (to 1) where the environment must be there: its absence fails instead of skipping.
REQUIRE_VAR = "ICECOMMIT_REQUIRE_JAVA_ICEBERG"
ROOT = Path(__file__).resolve().parent.parent
DRIVER = ROOT / "tests" / "java_iceberg_driver.py"
HOW_TO_BUILD = (
    f"build it with `scripts/java_iceberg/setup.sh /tmp/java-iceberg` (under a minute, 900 MB; "
    f"`--spark 4.1` for Spark 4.1), then set {ENV_VAR}=/tmp/java-iceberg"
)


@dataclass(frozen=True)
class JavaIceberg:
    """A built environment: its interpreter, the jars for ``spark.jars`` and the JDBC drivers
    (``DIR/jdbc``: the SQLite one for Java's JdbcCatalog on pyiceberg's SQLite catalog
    database, the PostgreSQL one for the REST servers' catalogs)."""

    root: Path
    python: Path
    jars: tuple[Path, ...]
    sqlite_jdbc: Path | None = None
    postgres_jdbc: Path | None = None

    @property
    def spark_line(self) -> str:
        """The Spark line it was built for ("3.5", "4.1")."""
        marker = self.root / "spark"
        return marker.read_text().strip() if marker.is_file() else "3.5"

    def run(self, *args: str, timeout_s: float = 900.0, sqlite_jdbc: bool = False) -> str:
        """Run the driver with ``args``; returns its standard output.

        Raises:
            AssertionError: the driver failed (with the end of its standard error).
        """
        command = [str(self.python), str(DRIVER), "--jars", ",".join(str(j) for j in self.jars)]
        if sqlite_jdbc:
            assert self.sqlite_jdbc is not None, f"no SQLite JDBC driver in {self.root / 'jdbc'}"
            command += ["--sqlite-jdbc", str(self.sqlite_jdbc)]
        done = subprocess.run(
            [*command, *args], env=_clean_environment(self.python), cwd=ROOT,
            capture_output=True, text=True, timeout=timeout_s,
        )  # fmt: skip
        if done.returncode != 0:
            raise AssertionError(f"Java Iceberg driver failed ({done.returncode}): {_cause(done.stderr)}")
        return done.stdout

    def read(self, metadata_location: str, out: Path, *extra: str) -> tuple[Path, dict[str, Any]]:
        """Java reads the table at ``metadata_location``: (its rows as Parquet, its report)."""
        self.run("read", metadata_location, str(out), *extra)
        report: dict[str, Any] = json.loads((out / "report.json").read_text())
        return out / "rows.parquet", report


def _cause(stderr: str) -> str:
    """The driver's Python traceback and the Java exception under it, without Java's stack."""
    lines = stderr.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("Traceback")), max(0, len(lines) - 40))
    kept = [line for line in lines[start:] if not line.lstrip().startswith("at ") and "WARN" not in line]
    return "\n".join(kept)[-6000:]


def _clean_environment(python: Path) -> dict[str, str]:
    """This process's environment without what would point the environment's Spark at another pyspark."""
    dropped = {"SPARK_HOME", "PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYSPARK_SUBMIT_ARGS"}
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    env["PYSPARK_PYTHON"] = env["PYSPARK_DRIVER_PYTHON"] = str(python)
    return env


def find() -> JavaIceberg | str:
    """The environment named by ``ICECOMMIT_JAVA_ICEBERG``, or why there is none (and how to build it)."""
    value = os.environ.get(ENV_VAR)
    if not value:
        return f"Java Iceberg environment not configured: {HOW_TO_BUILD}"
    root = Path(value).resolve()
    python = root / "venv" / "bin" / "python"
    jars = tuple(sorted((root / "jars").glob("iceberg-spark-runtime-*.jar")))
    if not (root / "ready").is_file() or not python.is_file() or not jars:
        return f"{ENV_VAR}={value} is not a finished Java Iceberg environment (no {root / 'ready'}): {HOW_TO_BUILD}"
    return JavaIceberg(root, python, jars, _driver(root, "sqlite-jdbc-*.jar"), _driver(root, "postgresql-*.jar"))


def _driver(root: Path, pattern: str) -> Path | None:
    found = sorted((root / "jdbc").glob(pattern))
    return found[-1] if found else None


def required() -> bool:
    return os.environ.get(REQUIRE_VAR, "") not in ("", "0")


def found_or_skip(*, sqlite_jdbc: bool = False) -> JavaIceberg:
    """The environment (with ``sqlite_jdbc``: and the SQLite JDBC driver Java's JdbcCatalog
    needs); where there is none, the test skips saying why (fails when
    ``ICECOMMIT_REQUIRE_JAVA_ICEBERG`` asks for it)."""
    java = find()
    if isinstance(java, str):
        missing = java
    elif sqlite_jdbc and java.sqlite_jdbc is None:
        missing = (
            f"Java's JdbcCatalog needs the SQLite JDBC driver in {java.root / 'jdbc'}: "
            f"run scripts/java_iceberg/setup.sh {java.root}"
        )
    else:
        return java
    if required():
        pytest.fail(f"{missing} ({REQUIRE_VAR} is set)")
    pytest.skip(missing)
