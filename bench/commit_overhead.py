"""What a change costs a commit: the same small commit loop on this tree and on an earlier
revision, interleaved, in one run.

    python -m bench.commit_overhead --against 821a8b8 [--rounds 5] [--checkpoints 40]
    python -m bench.commit_overhead --against 821a8b8 --tree HEAD   # HEAD's commit, not the files on disk

``--against REV`` is checked out with ``git worktree add --detach`` into a temporary folder
(removed at the end, also after an error or Ctrl-C); ``--tree`` is the other side: the
working tree as it is on disk by default, or a revision checked out the same way. Each side
runs in its own Python process with its tree first on ``PYTHONPATH`` (and as the working
directory), so ``icecommit`` and ``tests.helpers`` come from that tree; the harness checks
where they were imported from. Each side runs one untimed warm-up loop, then the rounds
alternate A B A B ... so that the machine's noise hits both alike.

A loop: one job commits ``--checkpoints`` checkpoints of one 20-row file each on an
embedded SQLite catalog (and its SQLite state database) in a fresh folder; only
``GlobalCommitter.commit()`` is timed. The loop uses only what both revisions have
(``ic.create_table``, ``ic.GlobalCommitter(catalog, name, job_id=)``, ``load_table``,
``prepare(checkpoint_id, [WriteResult])``, ``commit(checkpoint_id)`` and
``tests.helpers``' ``EVENTS_SCHEMA``/``events``/``write_arrow``).

Printed and written to ``--out`` (JSON, default ``bench/out/commit_overhead.json``): per
side, the median over the rounds of each round's median of commits 6-15 and of the last 10;
the ratio (tree / against) of those medians; and the median and range of the per-round
ratios (each round's pair ran back to back).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from datetime import datetime, timezone
from pathlib import Path
from types import FrameType

ROOT = Path(__file__).resolve().parent.parent

LOOP = r"""
import json, shutil, sys, tempfile, time
from pathlib import Path
from pyiceberg.catalog.sql import SqlCatalog
import icecommit as ic
import tests.helpers
from tests.helpers import EVENTS_SCHEMA, events, write_arrow
work = Path(tempfile.mkdtemp(prefix="icecommit-overhead-"))
try:
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
    rows = committer.load_table().scan().to_arrow().num_rows
    assert rows == 20 * len(latencies), f"{rows} rows after {len(latencies)} checkpoints of 20"
finally:
    shutil.rmtree(work, ignore_errors=True)
print(json.dumps({"latencies": latencies, "icecommit": ic.__file__, "helpers": tests.helpers.__file__}))
"""

WORKING_TREE = "working tree"


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True).stdout.strip()


@contextmanager
def _worktree(revision: str, folder: Path) -> Iterator[Path]:
    """``revision`` checked out (detached) in ``folder``; the worktree is removed afterwards."""
    path = folder / f"tree-{revision.replace('/', '_')}"
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", "--quiet", str(path), revision],
        check=True, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        yield path
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(path)], check=False)
        shutil.rmtree(path, ignore_errors=True)
        subprocess.run(["git", "-C", str(ROOT), "worktree", "prune"], check=False)


def _loop(tree: Path, checkpoints: int, imported: dict[str, str] | None = None) -> list[float]:
    """One commit loop in a fresh process whose ``icecommit`` and ``tests`` are ``tree``'s."""
    done = subprocess.run(
        [sys.executable, "-c", LOOP, str(checkpoints)], cwd=tree,
        env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"}, capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-25:])
        raise SystemExit(f"the commit loop failed on {tree} (exit {done.returncode}):\n{tail}")
    out = json.loads(done.stdout.strip().splitlines()[-1])
    for name in ("icecommit", "helpers"):  # the editable install of /work/main must not win over PYTHONPATH
        if not Path(out[name]).resolve().is_relative_to(tree.resolve()):
            raise SystemExit(f"the loop on {tree} imported {name} from {out[name]}, not from that tree")
        if imported is not None:
            imported[name] = out[name]
    return [float(x) for x in out["latencies"]]


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--against", "--base", dest="against", required=True,
        help="the earlier revision (a commit id or ref), checked out in a temporary git worktree",
    )  # fmt: skip
    parser.add_argument(
        "--tree", default=None,
        help="the other side: a revision, checked out the same way (default: the working tree on disk, as it is)",
    )  # fmt: skip
    parser.add_argument("--rounds", type=int, default=5, help="A B pairs after the warm-up (default 5)")
    parser.add_argument("--checkpoints", type=int, default=40, help="commits per loop, at least 15 (default 40)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "commit_overhead.json")
    args = parser.parse_args()
    if args.checkpoints < 15:
        parser.error("--checkpoints must be at least 15 (commits 6-15 are measured)")
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")

    def stop(signum: int, _frame: FrameType | None) -> None:
        raise SystemExit(128 + signum)  # so that the worktrees are removed on a kill too

    signal.signal(signal.SIGTERM, stop)
    started = time.monotonic()
    against_sha = _git("rev-parse", "--verify", f"{args.against}^{{commit}}")
    tree_sha = _git("rev-parse", "--verify", f"{args.tree or 'HEAD'}^{{commit}}")
    dirty = _git("status", "--porcelain", "--untracked-files=no") if args.tree is None else ""
    tree_name = WORKING_TREE if args.tree is None else args.tree
    if tree_name == args.against:
        parser.error("--tree and --against name the same revision")
    names = (tree_name, args.against)
    with ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="icecommit-bench-")))
        trees = {
            tree_name: ROOT if args.tree is None else stack.enter_context(_worktree(args.tree, folder)),
            args.against: stack.enter_context(_worktree(args.against, folder)),
        }
        imported: dict[str, dict[str, str]] = {name: {} for name in names}
        for name in names:  # compiles each tree's bytecode and warms the caches; not counted
            _loop(trees[name], 15, imported[name])
        rounds: list[dict[str, dict[str, float]]] = []
        for number in range(1, args.rounds + 1):
            pair = {}
            for name in names:  # A B A B ...
                latencies = _loop(trees[name], args.checkpoints)
                pair[name] = {
                    "early": statistics.median(latencies[5:15]),
                    "late": statistics.median(latencies[-10:]),
                    "all": statistics.median(latencies),
                }
            rounds.append(pair)
            print(
                f"round {number}/{args.rounds}: "
                + "; ".join(f"{n} {_ms(pair[n]['early'])} / {_ms(pair[n]['late'])} ms" for n in names),
                flush=True,
            )
    elapsed = time.monotonic() - started

    summary: dict[str, dict[str, float]] = {
        name: {part: statistics.median(r[name][part] for r in rounds) for part in ("early", "late", "all")}
        for name in names
    }
    ratio = {part: summary[tree_name][part] / summary[args.against][part] for part in ("early", "late", "all")}
    paired = {part: [r[tree_name][part] / r[args.against][part] for r in rounds] for part in ("early", "late", "all")}

    print()
    print(f"| tree | commits 6-15, median ms | last 10 of {args.checkpoints}, median ms | all, median ms |")
    print("|---|---:|---:|---:|")
    for name in names:
        sha = (tree_sha if name == tree_name else against_sha)[:7]
        label = name if name.startswith(sha) else f"{name} ({sha})"
        if name == WORKING_TREE and dirty:
            label = f"working tree (HEAD {tree_sha[:7]} + {len(dirty.splitlines())} changed files)"
        print(f"| {label} | " + " | ".join(_ms(summary[name][part]) for part in ("early", "late", "all")) + " |")
    print(f"| ratio of the medians | {ratio['early']:.2f}x | {ratio['late']:.2f}x | {ratio['all']:.2f}x |")
    print(
        "| per-round ratios: median (min-max) | "
        + " | ".join(f"{statistics.median(p):.2f}x ({min(p):.2f}-{max(p):.2f})" for p in paired.values())
        + " |"
    )
    print(f"\n{args.rounds} rounds of {args.checkpoints} commits per side, A B interleaved, in {elapsed:.0f} s")

    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "when": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
                "tree": {
                    "name": tree_name,
                    "commit": tree_sha,
                    "changed_files": dirty.splitlines(),
                    "imported_from": imported[tree_name],
                },
                "against": {"name": args.against, "commit": against_sha, "imported_from": imported[args.against]},
                "rounds": args.rounds,
                "checkpoints": args.checkpoints,
                "seconds": round(elapsed, 1),
                "medians_ms": {n: {p: v * 1000 for p, v in s.items()} for n, s in summary.items()},
                "ratio": ratio,
                "per_round_ratios": paired,
                "per_round_ms": [{n: {p: v * 1000 for p, v in r[n].items()} for n in names} for r in rounds],
            },
            indent=2,
        )
        + "\n"
    )
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
