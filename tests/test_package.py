"""The package as a user installs it: its version on the command line, a license, and the
core without Spark (what needs pyspark says which extra to install). The built wheel itself
is installed into a fresh environment and run by ``scripts/package_check.sh`` in CI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import icecommit
from tests.cli.runner import invoke

ROOT = Path(__file__).resolve().parents[1]


def _project() -> dict[str, object]:
    """pyproject.toml's [project] table (tomllib is Python 3.11's; icecommit runs on 3.10)."""
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert isinstance(project, dict)
    return project


WITHOUT_SPARK = "import sys; sys.modules['pyspark'] = None; sys.modules['psycopg'] = None; "


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", WITHOUT_SPARK + code], capture_output=True, text=True, cwd=ROOT)


def test_the_version_is_the_packages_and_the_cli_prints_it(tmp_path: Path) -> None:
    version = _project()["version"]
    assert icecommit.__version__ == version
    for flag in ("--version", "-V"):
        done = invoke(tmp_path, flag)
        assert (done.returncode, done.stdout.strip()) == (0, f"icecommit {version}")


def test_dir_lists_the_public_api_only() -> None:
    assert dir(icecommit) == sorted(icecommit.__all__)
    assert "catalog" not in dir(icecommit) and "TYPE_CHECKING" not in dir(icecommit)
    assert all(hasattr(icecommit, name) for name in icecommit.__all__ if name not in icecommit._SPARK_NAMES)


def test_the_license_and_the_changelog_ship_with_the_source() -> None:
    assert "Apache License" in (ROOT / "LICENSE").read_text()
    project = _project()
    assert project["license"] == "Apache-2.0" and project["license-files"] == ["LICENSE"]
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert f"## {icecommit.__version__}" in changelog and "one minor release" in changelog


def test_the_core_extras_leave_spark_and_postgres_out() -> None:
    project = _project()
    core = " ".join(project["dependencies"])  # type: ignore[arg-type]
    assert "pyspark" not in core and "psycopg" not in core and "pandas" not in core
    extras = project["optional-dependencies"]
    assert {"spark", "postgres", "s3", "metrics"} <= set(extras)
    assert any(r.startswith("pyspark") for r in extras["spark"])


def test_the_core_runs_without_pyspark_and_spark_names_say_what_to_install() -> None:
    done = _run(
        "import icecommit as ic, icecommit.cli.main, icecommit.committer, icecommit.metrics; "
        "from icecommit.writers import write_arrow, WriteResult; "
        "assert 'pyspark' not in [m for m in sys.modules if sys.modules[m] is not None]; "
        "from icecommit.errors import MissingExtraError\n"
        "try:\n    ic.write\nexcept MissingExtraError as e:\n    print(e)\n"
        "try:\n    from icecommit.writers import SparkWriter\nexcept MissingExtraError as e:\n    print(e)\n"
    )
    assert done.returncode == 0, done.stderr
    assert "icecommit.write needs pyspark" in done.stdout and "pip install 'icecommit[spark]'" in done.stdout
    assert "icecommit.writers.SparkWriter needs pyspark" in done.stdout


def test_the_demo_without_pyspark_says_what_to_install(tmp_path: Path) -> None:
    done = _run(
        f"import os; os.environ['ICECOMMIT_HOME'] = {str(tmp_path)!r}; from icecommit.cli.main import main; "
        "sys.argv = ['icecommit', 'demo', '--rows', '10']; main()"
    )
    assert done.returncode == 4, done.stderr
    assert "icecommit demo needs pyspark" in done.stderr and "pip install 'icecommit[spark]'" in done.stderr
