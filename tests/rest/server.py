"""An Iceberg REST catalog server for the tests, built on Apache Iceberg's own server-side
code (``tests/rest/java/.../TestRestServer.java``: Iceberg's ``CatalogHandlers``, its JSON
classes and ``JdbcCatalog``, with a route table and the REST specification's error statuses
written for the tests), started once per test process on loopback.

What it needs, and where a piece is missing the REST tests skip saying so (or fail, where
``ICECOMMIT_REQUIRE_REST=1``, as in CI's REST pass):

- Java 17 and ``javac`` (the server is compiled at first use, into the Java Iceberg
  environment's folder, keyed by its source);
- the Java Iceberg environment of ``scripts/java_iceberg/setup.sh`` (``ICECOMMIT_JAVA_ICEBERG``):
  Iceberg's Spark runtime jar, the Jackson shim, and Spark 3.5's Hadoop jars for the
  server's ``HadoopFileIO`` on the local warehouse;
- Debian's PostgreSQL JDBC driver (``libpostgresql-jdbc-java``) and the PostgreSQL server:
  the catalog's tables live in a database of their own, made for the server and dropped
  with it (the state database is the test session's, as for every other catalog).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy.engine import make_url

from tests import java_iceberg, postgres

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "tests" / "rest" / "java" / "org" / "apache" / "iceberg" / "rest" / "TestRestServer.java"
MAIN_CLASS = "org.apache.iceberg.rest.TestRestServer"
POSTGRES_JDBC = Path("/usr/share/java/postgresql.jar")
#: Set (to 1) where the server must start: a missing piece fails instead of skipping.
REQUIRE_VAR = "ICECOMMIT_REQUIRE_REST"
START_TIMEOUT_S = 60.0


def required() -> bool:
    return os.environ.get(REQUIRE_VAR, "") not in ("", "0")


def _spark_jars(env: java_iceberg.JavaIceberg) -> Path:
    found = sorted(env.root.glob("venv/lib/python3*/site-packages/pyspark/jars"))
    if not found:
        raise RuntimeError(f"no pyspark jars in {env.root / 'venv'}")
    return found[0]


def missing() -> str | None:
    """Why the server cannot start here, or None."""
    env = java_iceberg.find()
    if isinstance(env, str):
        return f"the REST catalog server runs on Iceberg's Java code: {env}"
    for tool in ("java", "javac"):
        if shutil.which(tool) is None:
            return f"the REST catalog server needs {tool} (a JDK 17) on PATH"
    if not POSTGRES_JDBC.is_file():
        return (
            f"the REST catalog server keeps its tables in PostgreSQL through {POSTGRES_JDBC}: "
            "install libpostgresql-jdbc-java"
        )
    return None


#: Iceberg's REST client's HttpClient 5, which ``setup.sh DIR --with-rest`` adds to the environment.
CLIENT_JAR = "iceberg-httpclient-shim.jar"


def client_missing(env: java_iceberg.JavaIceberg) -> str | None:
    """Why Iceberg's Java REST client cannot run in ``env``, or None."""
    if any(j.name == CLIENT_JAR for j in env.jars):
        return None
    return (
        f"Iceberg's Java REST client needs HttpClient 5 ({env.root / 'jars' / CLIENT_JAR}): "
        f"run scripts/java_iceberg/setup.sh {env.root} --with-rest"
    )


def compiled(env: java_iceberg.JavaIceberg) -> Path:
    """The server's classes, compiled once per source (concurrent test processes each
    compile into a folder of their own and the first to finish puts it in place)."""
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:16]
    target = env.root / "rest-server" / digest
    if (target / "org" / "apache" / "iceberg" / "rest" / "TestRestServer.class").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(dir=target.parent, prefix=".build-"))
    classpath = ":".join([*(str(j) for j in env.jars), f"{_spark_jars(env)}/*"])
    done = subprocess.run(
        ["javac", "-nowarn", "-d", str(building), "-cp", classpath, str(SOURCE)], capture_output=True, text=True
    )
    if done.returncode != 0:
        shutil.rmtree(building, ignore_errors=True)
        raise RuntimeError(f"javac failed on {SOURCE}:\n{done.stderr[-4000:]}")
    try:
        building.rename(target)
    except OSError:  # another process put it there first
        shutil.rmtree(building, ignore_errors=True)
    return target


@dataclass
class RestServer:
    """One server: a JVM serving ``url``, its catalog tables in a PostgreSQL database of
    its own, its warehouse in ``warehouse``."""

    warehouse: Path
    database: postgres.SessionDatabase = field(default_factory=postgres.SessionDatabase)
    process: subprocess.Popen[str] | None = None
    port: int = 0
    log: Path | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> RestServer:
        env = java_iceberg.find()
        assert not isinstance(env, str), env
        classes = compiled(env)
        self.database.create()
        self.warehouse.mkdir(parents=True, exist_ok=True)
        self.log = self.warehouse.parent / "rest-server.log"
        classpath = ":".join([*(str(j) for j in env.jars), f"{_spark_jars(env)}/*", str(POSTGRES_JDBC), str(classes)])
        admin = make_url(postgres.ADMIN_URI)
        properties = {
            "uri": f"jdbc:postgresql://{admin.host or '127.0.0.1'}:{admin.port or 5432}/{self.database.name}",
            "jdbc.user": admin.username or "postgres",
            "warehouse": f"file:{self.warehouse}",
        }
        if admin.password:
            properties["jdbc.password"] = admin.password
        command = [
            "java", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
            "-Dlog4j2.level=error", "-cp", classpath, MAIN_CLASS, "0",
            *(f"{k}={v}" for k, v in properties.items()),
        ]  # fmt: skip
        with self.log.open("a") as log:
            self.process = subprocess.Popen(
                command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True, cwd=self.warehouse.parent
            )
        self.port = self._wait_for_port()
        return self

    def _wait_for_port(self) -> int:
        assert self.process is not None and self.process.stdout is not None
        found: list[int] = []

        def read() -> None:
            assert self.process is not None and self.process.stdout is not None
            for line in self.process.stdout:
                if line.startswith("listening on "):
                    found.append(int(line.split()[-1]))
                    return

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(START_TIMEOUT_S)
        if not found:
            self.stop()
            tail = self.log.read_text()[-4000:] if self.log is not None else ""
            raise RuntimeError(f"the REST catalog server did not start within {START_TIMEOUT_S:.0f} s:\n{tail}")
        return found[0]

    def stop(self) -> None:
        if self.process is not None:
            if self.process.stdin is not None:
                self.process.stdin.close()  # the server exits when its standard input closes
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
            if self.process.stdout is not None:
                self.process.stdout.close()
            self.process = None
        self.database.drop()
