"""An Iceberg REST catalog server for the tests, one of two, started once per test process on
loopback and chosen by ``ICECOMMIT_REST_SERVER``:

- ``project`` (the default): ``tests/rest/java/.../TestRestServer.java``, on Apache Iceberg's
  own server-side code (``CatalogHandlers``, its JSON classes and ``JdbcCatalog``) from the
  environment's Spark runtime jar, with a route table and the REST specification's error
  statuses written for the tests;
- ``iceberg``: Iceberg's own server, ``RESTCatalogServer`` of iceberg-open-api's test fixtures
  (``RESTCatalogAdapter`` and ``RESTCatalogServlet`` behind Jetty), bound to loopback by
  ``tests/rest/java/.../LoopbackRESTCatalogServer.java``. How the two differ is written in
  docs/rest-servers.md.

What it needs, and where a piece is missing the REST tests skip saying so (or fail, where
``ICECOMMIT_REQUIRE_REST=1``, as in CI's REST passes):

- Java 17 and ``javac`` (the server is compiled at first use, into the Java Iceberg
  environment's folder, keyed by its source);
- the Java Iceberg environment of ``scripts/java_iceberg/setup.sh`` (``ICECOMMIT_JAVA_ICEBERG``):
  Iceberg's Spark runtime jar, the PostgreSQL JDBC driver (``DIR/jdbc``) and its pyspark's
  Hadoop jars for the server's ``HadoopFileIO`` on the local warehouse; for ``iceberg``, the
  server's classpath too (``setup.sh DIR --with-rest``: ``DIR/iceberg-rest``);
- the PostgreSQL server: the catalog's tables live in a database of their own, made for the
  server and dropped with it (the state database is the test session's, as for every other
  catalog).
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
from typing import Literal

from sqlalchemy.engine import make_url

from tests import java_iceberg, postgres

ROOT = Path(__file__).resolve().parents[2]
JAVA = ROOT / "tests" / "rest" / "java" / "org" / "apache" / "iceberg" / "rest"
#: Set (to 1) where the server must start: a missing piece fails instead of skipping.
REQUIRE_VAR = "ICECOMMIT_REQUIRE_REST"
#: Which server the REST tests run on: ``project`` (the default) or ``iceberg``.
SERVER_VAR = "ICECOMMIT_REST_SERVER"
START_TIMEOUT_S = 60.0

ServerKind = Literal["project", "iceberg"]


@dataclass(frozen=True)
class ServerProgram:
    """One server's Java source and where its classpath comes from in the environment."""

    kind: ServerKind
    source: Path
    #: the environment's folder of the server's own jars, "jars" being Iceberg's Spark runtime
    jar_folder: str

    @property
    def main_class(self) -> str:
        return f"org.apache.iceberg.rest.{self.source.stem}"


PROGRAMS: dict[ServerKind, ServerProgram] = {
    "project": ServerProgram("project", JAVA / "TestRestServer.java", "jars"),
    "iceberg": ServerProgram("iceberg", JAVA / "LoopbackRESTCatalogServer.java", "iceberg-rest"),
}


def required() -> bool:
    return os.environ.get(REQUIRE_VAR, "") not in ("", "0")


def server_kind() -> ServerKind:
    """The server ``ICECOMMIT_REST_SERVER`` names (``project`` where unset).

    Raises:
        ValueError: it names neither.
    """
    value = os.environ.get(SERVER_VAR, "") or "project"
    if value not in PROGRAMS:
        raise ValueError(f"{SERVER_VAR}={value}: the REST servers are {', '.join(PROGRAMS)}")
    return value  # type: ignore[return-value]


def _spark_jars(env: java_iceberg.JavaIceberg) -> Path:
    found = sorted(env.root.glob("venv/lib/python3*/site-packages/pyspark/jars"))
    if not found:
        raise RuntimeError(f"no pyspark jars in {env.root / 'venv'}")
    return found[0]


def _classpath(env: java_iceberg.JavaIceberg, program: ServerProgram) -> list[str]:
    """The server's own jars first (Iceberg's, then Jetty's for ``iceberg``), then the
    environment's pyspark jars for Hadoop."""
    return [*(str(j) for j in sorted((env.root / program.jar_folder).glob("*.jar"))), f"{_spark_jars(env)}/*"]


def missing() -> str | None:
    """Why the chosen server cannot start here, or None."""
    env = java_iceberg.find()
    if isinstance(env, str):
        return f"the REST catalog server runs on Iceberg's Java code: {env}"
    for tool in ("java", "javac"):
        if shutil.which(tool) is None:
            return f"the REST catalog server needs {tool} (a JDK 17) on PATH"
    if env.postgres_jdbc is None:
        return (
            f"the REST catalog server keeps its tables in PostgreSQL through the JDBC driver in "
            f"{env.root / 'jdbc'}: run scripts/java_iceberg/setup.sh {env.root}"
        )
    program = PROGRAMS[server_kind()]
    if not any((env.root / program.jar_folder).glob("*.jar")):
        return (
            f"{SERVER_VAR}={program.kind}: Iceberg's RESTCatalogServer is not in {env.root / program.jar_folder}: "
            f"run scripts/java_iceberg/setup.sh {env.root} --with-rest"
        )
    return None


def compiled(env: java_iceberg.JavaIceberg, program: ServerProgram) -> Path:
    """The server's classes, compiled once per source (concurrent test processes each
    compile into a folder of their own and the first to finish puts it in place)."""
    digest = hashlib.sha256(program.source.read_bytes()).hexdigest()[:16]
    target = env.root / "rest-server" / f"{program.source.stem}-{digest}"
    if (target / "org" / "apache" / "iceberg" / "rest" / f"{program.source.stem}.class").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(dir=target.parent, prefix=".build-"))
    classpath = ":".join(_classpath(env, program))
    done = subprocess.run(
        ["javac", "-nowarn", "-d", str(building), "-cp", classpath, str(program.source)], capture_output=True, text=True
    )
    if done.returncode != 0:
        shutil.rmtree(building, ignore_errors=True)
        raise RuntimeError(f"javac failed on {program.source}:\n{done.stderr[-4000:]}")
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
    kind: ServerKind = field(default_factory=server_kind)
    database: postgres.SessionDatabase = field(default_factory=postgres.SessionDatabase)
    process: subprocess.Popen[str] | None = None
    port: int = 0
    log: Path | None = None
    reader: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> RestServer:
        env = java_iceberg.find()
        assert not isinstance(env, str), env
        assert env.postgres_jdbc is not None, f"no PostgreSQL JDBC driver in {env.root / 'jdbc'}"
        program = PROGRAMS[self.kind]
        classes = compiled(env, program)
        self.database.create()
        self.warehouse.mkdir(parents=True, exist_ok=True)
        self.log = self.warehouse.parent / f"rest-server-{self.kind}.log"
        classpath = ":".join([*_classpath(env, program), str(env.postgres_jdbc), str(classes)])
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
            "-Dlog4j2.level=error", "-cp", classpath, program.main_class,
            *(["0"] if self.kind == "project" else []),  # the port: TestRestServer's first argument
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
        listening = threading.Event()
        stdout, log = self.process.stdout, self.log

        def read() -> None:
            # read to the end, not only to the port: a server that logs to its standard output
            # (RESTCatalogServer's servlet logs each error with its stack) would otherwise block
            # once the pipe is full
            for line in stdout:
                if not found and line.startswith("listening on "):
                    found.append(int(line.split()[-1]))
                    listening.set()
                elif log is not None:
                    with log.open("a") as out:
                        out.write(line)
            listening.set()

        self.reader = threading.Thread(target=read, daemon=True)
        self.reader.start()
        listening.wait(START_TIMEOUT_S)
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
            if self.reader is not None:
                self.reader.join(10)  # it reads to the end of the server's output
                self.reader = None
            if self.process.stdout is not None:
                self.process.stdout.close()
            self.process = None
        self.database.drop()
