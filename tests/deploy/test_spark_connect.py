"""icecommit on Spark Connect (pyspark 4): a Connect server started by the fixture on
loopback (its own JVM; its Python workers import icecommit), the client in a process of its
own. ``ic.write``, its replay, a routed write, upserts (their keys looked up by the
server's tasks) and the streaming sink work unchanged, and a
streaming query restarted (its checkpoint location kept) after the Connect server itself
was restarted commits every batch exactly once."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.catalog import Catalog

import icecommit as ic
from icecommit.core.tableprops import CLUSTER_LOOKUP_PROPERTY

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]


def _connect_available() -> str | None:
    try:
        import grpc  # noqa: F401
        import pyspark
    except ImportError:
        return "Spark Connect's client needs pyspark[connect] (grpcio): pip install 'pyspark[connect]'"
    if int(pyspark.__version__.split(".")[0]) < 4:
        return f"Spark Connect's Python foreachBatch is tested on pyspark 4 (this is {pyspark.__version__})"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start_server(log: Path) -> tuple[subprocess.Popen[bytes], str]:
    import pyspark

    home = Path(pyspark.__file__).parent
    port = _free_port()
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_HOME": str(home)}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    command = [
        str(home / "bin" / "spark-submit"), "--master", "local[2]",
        "--class", "org.apache.spark.sql.connect.service.SparkConnectServer",
        "--conf", f"spark.connect.grpc.binding.port={port}",
        "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
        "--conf", "spark.ui.enabled=false",
        "spark-internal",
    ]  # fmt: skip
    with log.open("ab") as out:  # the server keeps its own copy of the descriptor
        server = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise AssertionError(f"the Connect server exited: {log.read_text()[-2000:]}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return server, f"sc://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.5)
    server.kill()
    raise AssertionError("the Connect server did not listen within 120 s")


def _stop(server: subprocess.Popen[bytes]) -> None:
    server.terminate()
    try:
        server.wait(30)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


@pytest.fixture
def connect_server(tmp_path: Path) -> Iterator[Callable[[], str]]:
    """Starts (and restarts) a Connect server; returns a function giving its address."""
    missing = _connect_available()
    if missing:
        pytest.skip(missing)
    running: list[subprocess.Popen[bytes]] = []

    def start() -> str:
        for server in running:
            _stop(server)
        running.clear()
        server, address = _start_server(tmp_path / "connect-server.log")
        running.append(server)
        return address

    yield start
    for server in running:
        _stop(server)


def _client(address: str, uri: str, warehouse: str, *extra: str) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    done = subprocess.run(
        [sys.executable, "-m", "tests.deploy.connect_client", "--remote", address, "--uri", uri,
         "--warehouse", warehouse, *extra],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=400,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def _ids(catalog: Catalog, name: str) -> Counter[int]:
    return Counter(catalog.load_table(name).scan(selected_fields=("id",)).to_arrow().column("id").to_pylist())


def test_writes_and_the_streaming_sink_on_spark_connect(connect_server: Callable[[], str], tmp_path: Path) -> None:
    uri, warehouse = f"sqlite:///{tmp_path / 'catalog.db'}", str(tmp_path / "warehouse")
    catalog = ic.connect("lake", uri=uri, warehouse=warehouse)
    ids = pa.schema([pa.field("id", pa.int64(), nullable=False)])
    kinds = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("kind", pa.string())])
    for name, schema in (("ns.events", kinds), ("ns.a", kinds), ("ns.b", kinds), ("ns.stream", ids)):
        ic.create_table(catalog, name, schema)
    ic.create_table(catalog, "ns.users", kinds, identifier_fields=["id"], properties={CLUSTER_LOOKUP_PROPERTY: "0"})
    address = connect_server()
    writes = _client(address, uri, warehouse, "--step", "writes")
    assert writes == {"first": "committed", "again": "already-committed", "routed": 100, "upserted": 20}
    users = catalog.load_table("ns.users").scan().to_arrow().to_pylist()
    assert sorted((r["id"], r["kind"]) for r in users) == [(i, "a" if i < 40 else "b") for i in range(60)]
    assert _ids(catalog, "ns.events") == Counter(range(100))
    assert _ids(catalog, "ns.a") + _ids(catalog, "ns.b") == Counter(range(100))

    source, checkpoints = tmp_path / "in", tmp_path / "chk"
    source.mkdir()
    (source / "1.json").write_text("".join(json.dumps({"id": i}) + "\n" for i in range(0, 30)))
    (source / "2.json").write_text("".join(json.dumps({"id": i}) + "\n" for i in range(30, 60)))
    stream = ["--step", "stream", "--source", str(source), "--checkpoints", str(checkpoints)]
    first = _client(address, uri, warehouse, *stream)
    assert first["exception"] is None, first
    assert "testing" not in str(first["sink"])
    (source / "3.json").write_text("".join(json.dumps({"id": i}) + "\n" for i in range(60, 90)))
    address = connect_server()  # the server restarts; the query resumes from its checkpoint location
    second = _client(address, uri, warehouse, *stream)
    assert second["exception"] is None, second
    assert _ids(catalog, "ns.stream") == Counter(range(90))
    states = ic.GlobalCommitter(catalog, "ns.stream", job_id="s").store.list("ns.stream", job_id="s")
    assert [s.status for s in states] == ["committed"] * 3
    assert len({s.query_id for s in states}) == 1 and None not in {s.query_id for s in states}
    report = ic.reconcile(catalog, "ns.stream", job_id="s")
    assert report.ok, report.to_markdown()
