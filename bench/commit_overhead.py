"""What a change costs a commit: the same small commit loop on this tree and on an earlier
revision, alternating, in one run.

    python -m bench.commit_overhead --base 5430f69 [--rounds 3] [--checkpoints 40]

Each round runs, in a fresh process per tree, one job committing ``--checkpoints``
checkpoints of one 20-row file each on an embedded SQLite catalog; only ``commit()`` is
timed. Prints the medians of commits 6-15 and of the last 10, per tree, over the rounds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

LOOP = r"""
import json, sys, tempfile, time
from pathlib import Path
from pyiceberg.catalog.sql import SqlCatalog
import icecommit as ic
from tests.helpers import EVENTS_SCHEMA, events, write_arrow
work = Path(tempfile.mkdtemp())
(work / "wh").mkdir()
catalog = SqlCatalog("bench", uri=f"sqlite:///{work}/catalog.db", warehouse=(work / "wh").as_uri())
ic.create_table(catalog, "ns.t", EVENTS_SCHEMA, partition_by=["event"])
committer = ic.GlobalCommitter(catalog, "ns.t", job_id="bench")
latencies = []
for checkpoint_id in range(1, int(sys.argv[1]) + 1):
    table = committer.load_table()
    rows = events(checkpoint_id * 100, checkpoint_id * 100 + 20)
    committer.prepare(checkpoint_id, [write_arrow(table, rows, job_id="bench", checkpoint_id=checkpoint_id)])
    began = time.perf_counter()
    committer.commit(checkpoint_id)
    latencies.append(time.perf_counter() - began)
print(json.dumps(latencies))
"""


def _tree_of(revision: str, into: Path) -> Path:
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", revision], capture_output=True, check=True).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into


def _loop(tree: Path, checkpoints: int) -> list[float]:
    done = subprocess.run(
        [sys.executable, "-c", LOOP, str(checkpoints)], cwd=tree,
        env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"}, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return [float(x) for x in json.loads(done.stdout.strip().splitlines()[-1])]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", required=True, help="the earlier revision (a commit id or ref)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--checkpoints", type=int, default=40)
    args = parser.parse_args()
    base = _tree_of(args.base, Path(tempfile.mkdtemp(prefix="icecommit-base-")))
    trees = {args.base: base, "this tree": ROOT}
    early: dict[str, list[float]] = {name: [] for name in trees}
    late: dict[str, list[float]] = {name: [] for name in trees}
    for _ in range(args.rounds):
        for name, tree in trees.items():
            latencies = _loop(tree, args.checkpoints)
            early[name].append(statistics.median(latencies[5:15]))
            late[name].append(statistics.median(latencies[-10:]))
    print(f"| tree | commits 6-15, median ms | last 10 of {args.checkpoints}, median ms |")
    print("|---|---:|---:|")
    for name in trees:
        print(f"| {name} | {statistics.median(early[name]) * 1000:.1f} | {statistics.median(late[name]) * 1000:.1f} |")
    ratio_early = statistics.median(early["this tree"]) / statistics.median(early[args.base])
    ratio_late = statistics.median(late["this tree"]) / statistics.median(late[args.base])
    print(f"ratio (this tree / {args.base}): {ratio_early:.2f}x and {ratio_late:.2f}x")


if __name__ == "__main__":
    main()
