"""The CLI as a person reads it: in a pseudo-terminal 80 and 200 columns wide, and under a
pipe. Every id it prints (snapshot ids, paths) is whole and no cell is cut (no ``…``), at
any width; on a narrow terminal a table that cannot fit with its ids whole becomes one
record per row."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import termios
from pathlib import Path

import pytest

import icecommit as ic
from icecommit.catalog.inspect import list_snapshots
from tests import processes
from tests.helpers import EVENTS_SCHEMA, events, write_arrow

TABLE = "ns.widths"
JOB = "a-rather-long-job-name-for-narrow-terminals"
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("widths") / "home"
    catalog = ic.connect(uri=f"sqlite:///{home / 'catalog.db'}", warehouse=str(home))
    table = ic.create_table(
        catalog,
        TABLE,
        EVENTS_SCHEMA,
        partition_by=["hour(ts)"],
        properties={"icecommit.event-time-column": "ts", "icecommit.partition-lateness": "5m"},
    )
    committer = ic.GlobalCommitter(catalog, table, job_id=JOB)
    for checkpoint_id in range(1, 4):
        rows = events(checkpoint_id * 1000, checkpoint_id * 1000 + 50, days=1)  # about 2 h of event time apart
        committer.prepare(checkpoint_id, [write_arrow(committer.load_table(), rows, job_id=JOB,
                                                      checkpoint_id=checkpoint_id)])  # fmt: skip
        committer.commit(checkpoint_id)
    catalog.engine.dispose()  # type: ignore[attr-defined]
    return home


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    return {**env, "ICECOMMIT_HOME": str(home), "TERM": "xterm-256color"}


def in_terminal(home: Path, columns: int, *args: str) -> str:
    """Run ``icecommit ARGS`` in a process with a pseudo-terminal of ``columns`` columns as
    its stdout and stderr; what it showed, without colour codes."""
    master, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    chunks = []
    try:
        with processes.Child(processes.cli, home, *args, env=_env(home), terminal=os.ttyname(follower)) as child:
            while True:
                ready, _, _ = select.select([master], [], [], 0.05)
                if ready:
                    chunks.append(os.read(master, 65536))
                elif child.poll() is not None:  # ended, and everything it wrote was read
                    break
            code = child.wait(120)
    finally:
        os.close(follower)
        os.close(master)
    assert code == 0, b"".join(chunks).decode(errors="replace")
    return _ANSI.sub("", b"".join(chunks).decode()).replace("\r\n", "\n")


def in_pipe(home: Path, *args: str) -> str:
    done = processes.run(processes.cli, home, *args, env=_env(home), timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


COMMANDS = [
    ("snapshots", TABLE),
    ("checkpoints", TABLE),
    ("partitions", TABLE),
    ("rollback", TABLE, "--to-checkpoint", "1", "--job", JOB, "--dry-run"),
]


@pytest.mark.parametrize("where", ["80 columns", "200 columns", "pipe"])
def test_every_id_is_whole_and_no_cell_is_cut(home: Path, where: str) -> None:
    catalog = ic.connect(uri=f"sqlite:///{home / 'catalog.db'}", warehouse=str(home))
    ids = [str(s.snapshot_id) for s in list_snapshots(catalog, TABLE)]
    catalog.engine.dispose()  # type: ignore[attr-defined]
    shown = {}
    for command in COMMANDS:
        text = in_pipe(home, *command) if where == "pipe" else in_terminal(home, int(where.split()[0]), *command)
        assert "…" not in text, (command, text)
        shown[command[0]] = text
    for snapshot_id in ids:
        assert snapshot_id in shown["snapshots"], (snapshot_id, shown["snapshots"])
        assert snapshot_id in shown["checkpoints"]
    assert ids[0] in shown["rollback"] and all(i in shown["rollback"] for i in ids[1:])  # target, then hidden
    assert JOB in shown["checkpoints"]
    assert "ts_hour=" in shown["partitions"]
    if where == "80 columns":
        # two snapshot ids and eight other columns cannot fit 80 columns whole: one record per row
        assert "  snapshot: " + ids[0] in shown["snapshots"]
        assert max(len(line) for line in shown["snapshots"].splitlines()) <= 80
    if where == "200 columns":
        assert "┃" in shown["snapshots"]  # a table on a wide terminal
    if where == "pipe":
        assert "━" not in shown["snapshots"]  # plain rows in a log
