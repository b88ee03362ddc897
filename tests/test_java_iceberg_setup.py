"""scripts/java_iceberg/setup.sh takes its jars from Maven Central at pinned versions: every
jar is checked against jars.sha256, and one that differs fails the build naming it; a second
run resolves offline from the environment's own Maven repository.

The checksum check's decisions are tested on jars made here; the script itself, on a built
environment (``ICECOMMIT_JAVA_ICEBERG``; skipped without one), with Maven pointed at a
mirror on a closed loopback port so that any download would fail.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests import java_iceberg

SETUP = java_iceberg.ROOT / "scripts" / "java_iceberg"


def _checksums() -> ModuleType:
    spec = importlib.util.spec_from_file_location("java_iceberg_checksums", SETUP / "checksums.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


checksums = _checksums()


def _jar(folder: Path, name: str, content: bytes) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(content)
    return folder / name


def test_a_jar_whose_sha256_differs_or_that_is_not_listed_is_refused_by_name(tmp_path: Path) -> None:
    jdbc = tmp_path / "jdbc"
    good = _jar(jdbc, "good-1.0.jar", b"good")
    tampered = _jar(jdbc, "tampered-1.0.jar", b"as published")
    listing = tmp_path / "jars.sha256"
    checksums.update(listing, [jdbc])
    assert checksums.check(listing, [jdbc]) == []

    published = checksums.sha256(tampered)
    tampered.write_bytes(b"changed after publishing")
    _jar(jdbc, "stranger-1.0.jar", b"never reviewed")
    wrong = checksums.check(listing, [jdbc])
    assert [line.split(":")[0] for line in wrong] == ["jdbc/stranger-1.0.jar", "jdbc/tampered-1.0.jar"]
    assert wrong[1] == f"jdbc/tampered-1.0.jar: sha256 {checksums.sha256(tampered)}, jars.sha256 pins {published}"
    assert checksums.read(listing)["jdbc/good-1.0.jar"] == checksums.sha256(good)

    done = subprocess.run(
        [sys.executable, str(SETUP / "checksums.py"), "check", str(listing), str(jdbc)], capture_output=True, text=True
    )
    assert done.returncode == 1
    assert "checksum refused: jdbc/tampered-1.0.jar" in done.stderr and "good-1.0.jar" not in done.stderr


def test_every_jar_the_poms_pin_has_its_sha256_in_the_list() -> None:
    listed = set(checksums.read(SETUP / "jars.sha256"))
    poms = {p.parent.name: p.read_text() for p in SETUP.glob("*/pom.xml")}
    expected = {"spark-3.5": "jars", "spark-4.1": "jars", "jdbc": "jdbc", "rest-server": "iceberg-rest"}
    assert set(poms) == set(expected)
    for module, pom in poms.items():
        properties = dict(
            re.findall(r"<([\w.-]+)>([^<]+)</\1>", pom.partition("<properties>")[2].partition("</properties>")[0])
        )
        dependencies = pom.partition("<dependencies>")[2].partition("</dependencies>")[0]
        for artifact, version, classifier in re.findall(
            r"<artifactId>([^<]+)</artifactId>\s*<version>([^<]+)</version>(?:\s*<classifier>([^<]+)</classifier>)?",
            dependencies,
        ):
            version = re.sub(r"\$\{([^}]+)\}", lambda m, known=properties: known[m.group(1)], version)
            name = f"{expected[module]}/{artifact}-{version}{'-' + classifier if classifier else ''}.jar"
            assert name in listed, f"{module}/pom.xml pins {name}, which scripts/java_iceberg/jars.sha256 lacks"


def _offline_environment(tmp_path: Path, java: java_iceberg.JavaIceberg) -> tuple[Path, dict[str, str]]:
    """A copy of the built environment's finished state sharing its Maven repository, and an
    environment for setup.sh whose Maven would download only from a closed loopback port."""
    target = tmp_path / "env"
    target.mkdir()
    (target / "m2").symlink_to(java.root / "m2")
    (target / "spark").write_text(java.spark_line)
    (target / "ready").touch()
    home = tmp_path / "home"
    (home / ".m2").mkdir(parents=True)
    (home / ".m2" / "settings.xml").write_text(
        "<settings><mirrors><mirror><id>central</id><mirrorOf>*</mirrorOf>"
        "<url>http://127.0.0.1:9/</url></mirror></mirrors></settings>"
    )
    env = {**os.environ, "MAVEN_OPTS": f"-Duser.home={home}"}
    return target, env


def _setup(here: Path, target: Path, env: dict[str, str], spark_line: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(here / "setup.sh"), str(target), "--spark", spark_line],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_a_second_run_resolves_offline_and_a_tampered_pin_fails_naming_the_jar(tmp_path: Path) -> None:
    java = java_iceberg.found_or_skip()
    if not any((java.root / "m2").glob(".resolved-*")):
        pytest.skip(f"{java.root} was built before its Maven repository was kept")
    target, env = _offline_environment(tmp_path, java)
    done = _setup(SETUP, target, env, java.spark_line)
    assert done.returncode == 0, done.stderr
    runtime = f"iceberg-spark-runtime-{java.spark_line}_"
    assert [j.name for j in (target / "jars").glob("*.jar")] == [j.name for j in java.jars]
    assert runtime in java.jars[0].name
    assert {j.name.split("-")[0] for j in (target / "jdbc").glob("*.jar")} == {"postgresql", "sqlite"}

    # the same scripts with one pin changed: the build stops and says which jar
    scripts = tmp_path / "scripts"
    shutil.copytree(SETUP, scripts)
    pinned = checksums.read(scripts / "jars.sha256")
    name = f"jars/{java.jars[0].name}"
    listing = (scripts / "jars.sha256").read_text().replace(pinned[name], "0" * 64)
    (scripts / "jars.sha256").write_text(listing)
    refused = _setup(scripts, target, env, java.spark_line)
    assert refused.returncode != 0
    assert f"checksum refused: {name}: sha256 {pinned[name]}" in refused.stderr, refused.stderr
