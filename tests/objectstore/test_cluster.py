"""A Spark standalone cluster (a master and two worker JVMs on loopback, from the installed
pyspark) writing to an ``s3://`` warehouse, the driver in a process of its own: ``ic.write``
with the executor JVM (or the Worker daemon) that runs one of its write tasks SIGKILLed
mid-task lands its checkpoint exactly once; a routed write and the streaming sink run there
too. Tasks depend on nothing of the driver's file system or process state."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyiceberg.catalog import Catalog

import icecommit as ic
from tests.deploy.cluster import ROOT, Cluster
from tests.s3proxy import S3FaultProxy

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    folder = tmp_path_factory.mktemp("cluster")
    running = Cluster(folder, folder / "markers").start()
    yield running
    running.stop()


def _driver(cluster: Cluster, catalog: Catalog, s3: str, *args: str) -> subprocess.Popen[str]:
    env = {**cluster.env(), "PYTHONPATH": cluster.env()["PYTHONPATH"]}
    env.pop("ICECOMMIT_TEST_MARKERS")  # the driver's own tasks are on the executors
    return subprocess.Popen(
        [sys.executable, "-m", "tests.deploy.cluster_driver", "--master", cluster.url, "--catalog", catalog.name,
         "--uri", str(catalog.properties["uri"]), "--warehouse", str(catalog.properties["warehouse"]),
         "--s3", s3, *args],
        env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _finish(driver: subprocess.Popen[str]) -> dict[str, object]:
    out, err = driver.communicate(timeout=400)
    assert driver.returncode == 0, err[-4000:]
    return dict(json.loads(out.strip().splitlines()[-1]))


def _ids(catalog: Catalog, name: str) -> Counter[int]:
    return Counter(catalog.load_table(name).scan(selected_fields=("id",)).to_arrow().column("id").to_pylist())


@pytest.mark.parametrize("victim", ["executor", "worker"])
def test_a_write_task_whose_executor_or_worker_is_killed_lands_once(
    cluster: Cluster, s3_catalog: Catalog, s3_proxy: S3FaultProxy, victim: str
) -> None:
    cluster.ensure_workers()
    for marker in cluster.markers.iterdir():
        marker.unlink()
    ic.create_table(s3_catalog, "ns.events", _schema())
    driver = _driver(cluster, s3_catalog, s3_proxy.endpoint, "--step", "write")
    killed: list[int] = []

    def kill_when_announced() -> None:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and not killed:
            for marker in cluster.markers.iterdir():
                executor = cluster.executor_of(int(marker.read_text()))
                target = executor if victim == "executor" else cluster.worker_of(executor)
                for child in target.children(recursive=True) if victim == "worker" else []:
                    child.kill()  # a worker's death takes its executors with it
                os.kill(target.pid, signal.SIGKILL)
                killed.append(target.pid)
                return
            time.sleep(0.2)

    watcher = threading.Thread(target=kill_when_announced)
    watcher.start()
    result = _finish(driver)
    watcher.join()
    assert killed, "no write task announced itself"
    assert result == {"status": "committed", "records": 4000}
    assert _ids(s3_catalog, "ns.events") == Counter(range(4000))
    report = ic.reconcile(s3_catalog, "ns.events", job_id="w", deep=True)
    assert report.ok, report.to_markdown()


def test_a_routed_write_and_the_streaming_sink_on_the_cluster(
    cluster: Cluster, s3_catalog: Catalog, s3_proxy: S3FaultProxy, tmp_path: Path
) -> None:
    cluster.ensure_workers()
    for name in ("ns.a", "ns.b"):
        ic.create_table(s3_catalog, name, _schema())
    ic.create_table(s3_catalog, "ns.stream", _schema(kind=False))
    source = tmp_path / "in"
    source.mkdir()
    for n in range(2):
        (source / f"{n}.json").write_text("".join(json.dumps({"id": i}) + "\n" for i in range(n * 100, n * 100 + 100)))
    args = ["--step", "routed-and-stream", "--source", str(source), "--checkpoints", str(tmp_path / "chk")]
    result = _finish(_driver(cluster, s3_catalog, s3_proxy.endpoint, *args))
    assert result == {"routed": 4000, "exception": None}
    assert _ids(s3_catalog, "ns.a") + _ids(s3_catalog, "ns.b") == Counter(range(4000))
    assert _ids(s3_catalog, "ns.stream") == Counter(range(200))
    for name, job in (("ns.a", "r"), ("ns.b", "r"), ("ns.stream", "s")):
        report = ic.reconcile(s3_catalog, name, job_id=job)
        assert report.ok, report.to_markdown()


def _schema(kind: bool = True) -> object:
    import pyarrow as pa

    fields = [pa.field("id", pa.int64(), nullable=False)]
    return pa.schema([*fields, pa.field("kind", pa.string())] if kind else fields)
