"""Where the tests' temporary folders live: on the machine's tmpfs when it has one with room,
otherwise where pytest puts them."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests import conftest


def test_a_tmpfs_with_room_is_chosen_and_a_small_one_is_not(monkeypatch: pytest.MonkeyPatch) -> None:
    if not conftest._is_tmpfs(conftest.TMPFS):
        pytest.skip(f"this machine has no tmpfs at {conftest.TMPFS}")
    if conftest._free_bytes(conftest.TMPFS) < conftest.TMPFS_MIN_FREE:
        pytest.skip(f"this machine's {conftest.TMPFS} is smaller than the tests need")
    assert conftest._tmpfs_folder() == "/dev/shm"

    def small(_path: str) -> SimpleNamespace:  # a container's default: 64 MiB
        return SimpleNamespace(f_bavail=64 * 1024 * 1024 // 4096, f_frsize=4096)

    monkeypatch.setattr(conftest.os, "statvfs", small)
    assert conftest._tmpfs_folder() is None


def _explicit_basetemp(config: pytest.Config) -> bool:
    """Whether the run was given ``--basetemp`` (an xdist worker is always given one, made
    by the controller; what counts is the controller's command line)."""
    workerinput = getattr(config, "workerinput", None)
    argv = workerinput["mainargv"] if workerinput is not None else config.invocation_params.args
    return any(str(arg).startswith("--basetemp") for arg in (*argv, *config.getini("addopts")))


def test_this_sessions_folders_are_on_the_tmpfs_unless_told_otherwise(
    tmp_path: Path, pytestconfig: pytest.Config
) -> None:
    if os.environ.get("ICECOMMIT_TEST_TMPFS", "1") == "0" or _explicit_basetemp(pytestconfig):
        pytest.skip("this session was told where its folders go")
    if conftest._tmpfs_folder() is None:
        pytest.skip("this machine has no tmpfs with room at /dev/shm")
    root = os.environ.get("PYTEST_DEBUG_TEMPROOT")
    assert root is not None  # ours (/dev/shm), or the one the caller chose
    assert tmp_path.resolve().is_relative_to(Path(root).resolve())


def test_the_rewritten_test_modules_are_kept_for_the_next_run() -> None:
    """Bytecode (and pytest's rewritten test modules) is written whatever the environment
    said, in this process and in the ones it starts; this module's own rewrite is there."""
    import sys

    assert sys.dont_write_bytecode is False and "PYTHONDONTWRITEBYTECODE" not in os.environ
    cached = list((Path(__file__).parent / "__pycache__").glob("test_temporary_folders.*-pytest-*.pyc"))
    assert cached, "pytest did not keep its rewrite of this module"
