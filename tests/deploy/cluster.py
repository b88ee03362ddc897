"""A Spark standalone cluster on loopback from the installed pyspark: a master and two
workers, each worker its own JVM with its own work directory, one core each. The workers'
environment carries the tests' Python and this checkout (their executors' Python workers
import icecommit and the tests' task hooks)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


@dataclass
class Cluster:
    folder: Path
    markers: Path
    port: int = 0
    master: subprocess.Popen[bytes] | None = None
    workers: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_HOME": str(_spark_home())}
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
        env.update(SPARK_LOCAL_IP="127.0.0.1", ICECOMMIT_TEST_MARKERS=str(self.markers))
        return env

    def _spawn(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        command = [str(_spark_home() / "bin" / "spark-class"), *args]
        with (self.folder / f"{name}.log").open("ab") as log:
            return subprocess.Popen(command, env=self.env(), stdout=log, stderr=subprocess.STDOUT)

    def start(self) -> Cluster:
        self.markers.mkdir(parents=True, exist_ok=True)
        self.port = _free_port()
        self.master = self._spawn(
            "master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(self.port),
            "--webui-port", "0",
        )  # fmt: skip
        _wait(lambda: _listening(self.port), "the master to listen", self.folder / "master.log")
        for number in (1, 2):
            self.start_worker(number)
        return self

    def start_worker(self, number: int) -> None:
        work = self.folder / f"worker-{number}"
        work.mkdir(exist_ok=True)
        log = self.folder / f"worker-{number}.log"
        registered = log.read_text().count("Successfully registered with master") if log.exists() else 0
        self.workers[number] = self._spawn(
            f"worker-{number}", "org.apache.spark.deploy.worker.Worker", self.url, "--host", "127.0.0.1",
            "--cores", "1", "--memory", "1g", "--work-dir", str(work), "--webui-port", "0",
        )  # fmt: skip
        _wait(
            lambda: log.exists() and log.read_text().count("Successfully registered with master") > registered,
            f"worker {number} to register",
            log,
        )

    def ensure_workers(self) -> None:
        """Both workers up (one a test killed is started again)."""
        for number, worker in list(self.workers.items()):
            if worker.poll() is not None:
                self.start_worker(number)

    def executor_of(self, pid: int) -> psutil.Process:
        """The executor JVM a task's Python worker runs under."""
        for parent in psutil.Process(pid).parents():
            if "CoarseGrainedExecutorBackend" in " ".join(parent.cmdline()):
                return parent
        raise AssertionError(f"process {pid} runs under no executor")

    def worker_of(self, executor: psutil.Process) -> psutil.Process:
        for parent in executor.parents():
            if "deploy.worker.Worker" in " ".join(parent.cmdline()):
                return parent
        raise AssertionError(f"executor {executor.pid} runs under no worker")

    def stop(self) -> None:
        for process in [*self.workers.values(), self.master]:
            if process is not None and process.poll() is None:
                for child in psutil.Process(process.pid).children(recursive=True):
                    child.kill()
                process.kill()
                process.wait()


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def _wait(condition: object, what: str, log: Path, timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}: {log.read_text()[-2000:] if log.exists() else ''}")
