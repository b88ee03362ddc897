"""What a checkpoint's checks cost ``ic.write``: none, the checks the files' statistics
answer, and ``unique`` on one column (it reads the checkpoint's rows).

Compared in the same run, on the same cached DataFrame (the demo clickstream), each variant
writing into a table of its own, the variants interleaved round by round (each first in
turn) so that the machine's noise hits them alike:

- ``none``: ``ic.write`` with no checks;
- ``statistics``: ``row_count(min=1)``, ``matches_source()``, ``not_null("event_id", "ts")``,
  ``in_range("price", min=0)`` and ``freshness("ts", max_lag="3650d")``: answered from the
  data files' statistics, no row read;
- ``unique``: ``unique("event_id")``, which reads the ``event_id`` column of every staged
  file, in the driver (the table's ``icecommit.checks.cluster-min-bytes`` set above the
  checkpoint);
- ``unique_tasks``: the same check read in Spark tasks (the property set to 0): each task
  reads its files' keys and sends each to the task its hash names;
- ``accepted_values``: ``accepted_values("device", [...])`` on a column whose files each hold
  several values (their bounds cannot decide: it reads the column).

Then publishing a held checkpoint (``publish="manual"``, the same rows) against the time
the ``none`` writes spent in ``GlobalCommitter.commit``: a fast-forward (main has not
moved since the checkpoint was held) and a re-commit (another job committed to main in
between, so the checkpoint's files are committed again onto main).

    .venv/bin/python -m bench.checks [--rows 20000000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import icecommit as ic
from icecommit import checks
from icecommit.committer.committer import GlobalCommitter
from icecommit.core.tableprops import CLUSTER_CHECKS_PROPERTY
from icecommit.demo.clickstream import DEVICES as CLICKSTREAM_DEVICES
from icecommit.demo.clickstream import PARTITION_BY, clickstream
from icecommit.writers import local_session

OUT = Path(__file__).resolve().parent / "out"
#: Where each variant's checks read rows (a table property): the driver, or Spark tasks.
READ_IN = {"unique": str(2**62), "unique_tasks": "0"}
DEVICES = list(CLICKSTREAM_DEVICES)
VARIANTS = {
    "none": [],
    "statistics": [
        checks.row_count(min=1),
        checks.matches_source(),
        checks.not_null("event_id", "ts"),
        checks.in_range("price", min=0),
        checks.freshness("ts", max_lag="3650d"),
    ],
    "unique": [checks.unique("event_id")],
    "unique_tasks": [checks.unique("event_id")],
    "accepted_values": [checks.accepted_values("device", DEVICES)],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=20_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    spark = local_session()
    df = clickstream(spark, 0, args.rows, partitions=2).cache()
    df.count()
    with tempfile.TemporaryDirectory() as home:
        catalog = ic.connect(uri=f"sqlite:///{home}/catalog.db", warehouse=f"file://{home}/warehouse")
        catalog.create_namespace("bench")
        warm = clickstream(spark, 0, 100_000)
        for variant, rules in VARIANTS.items():  # warms Spark's Python workers and each table's first commit
            properties = {CLUSTER_CHECKS_PROPERTY: READ_IN[variant]} if variant in READ_IN else {}
            ic.write(warm, f"bench.{variant}", catalog=catalog, job_id=variant, checkpoint_id=0, create=True,
                     partition_by=list(PARTITION_BY), checks=rules, table_properties=properties)  # fmt: skip
        seconds: dict[str, list[float]] = {v: [] for v in VARIANTS}
        commit_seconds: list[float] = []
        commit = GlobalCommitter.commit

        def timed_commit(self: GlobalCommitter, *args: object, **kwargs: object) -> object:
            started = time.perf_counter()
            try:
                return commit(self, *args, **kwargs)  # type: ignore[arg-type]
            finally:
                if self.job_id == "none":
                    commit_seconds.append(time.perf_counter() - started)

        GlobalCommitter.commit = timed_commit  # type: ignore[method-assign,assignment]
        for round_ in range(1, args.rounds + 1):
            names = list(VARIANTS)
            for variant in names[round_ % len(names) :] + names[: round_ % len(names)]:  # each goes first in turn
                rules = VARIANTS[variant]
                started = time.perf_counter()
                result = ic.write(df, f"bench.{variant}", catalog=catalog, job_id=variant, checkpoint_id=round_,
                                  checks=rules)  # fmt: skip
                seconds[variant].append(time.perf_counter() - started)
                assert result.status == "committed" and all(r.ok for r in result.checks), result
                print(f"round {round_}: {variant} {seconds[variant][-1]:.1f} s", flush=True)
        GlobalCommitter.commit = commit  # type: ignore[method-assign]
        publishing = _publish_times(catalog, spark, df, args.rounds)
    medians = {v: statistics.median(s) for v, s in seconds.items()}
    base = medians["none"]
    # each round's ratio to that round's none: the machine's drift over the run cancels
    paired = {v: statistics.median(a / b for a, b in zip(s, seconds["none"], strict=True)) for v, s in seconds.items()}
    print("\n| variant | median s | ratio to none | median of per-round ratios |\n|---|---:|---:|---:|")
    for variant, median in medians.items():
        print(f"| {variant} | {median:.1f} | {median / base:.2f}x | {paired[variant]:.3f}x |")
    one_commit = statistics.median(commit_seconds)
    print(f"\ncommit inside the none writes: median {one_commit:.2f} s over {len(commit_seconds)}")
    for kind, times in publishing.items():
        median = statistics.median(times)
        print(f"publish, {kind}: {', '.join(f'{t:.2f}' for t in times)} s; median {median:.2f} s, "
              f"{median / one_commit:.2f}x a commit")  # fmt: skip
    OUT.mkdir(exist_ok=True)
    document = {
        "rows": args.rows, "rounds": args.rounds, "seconds": seconds, "medians": medians, "paired_ratios": paired,
        "commit_seconds": commit_seconds, "publish_seconds": publishing,
        "machine": platform.platform(), "cpus": os.cpu_count(),
        "at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }  # fmt: skip
    (OUT / "checks.json").write_text(json.dumps(document, indent=2))
    print(f"written to {OUT / 'checks.json'}")


def _publish_times(catalog: Any, spark: Any, df: Any, rounds: int) -> dict[str, list[float]]:
    """Seconds of ``ic.publish`` for a checkpoint of ``df`` held by ``publish="manual"``:
    fast-forwarded (main has not moved) and committed again (another job moved main)."""
    found: dict[str, list[float]] = {"fast-forward": [], "re-commit": []}
    name = "bench.published"
    small = clickstream(spark, 0, 1000)
    ic.write(small, name, catalog=catalog, job_id="seed", checkpoint_id=0, create=True,
             partition_by=list(PARTITION_BY))  # fmt: skip
    checkpoint = 0
    for round_ in range(1, rounds + 1):
        for kind in found:
            checkpoint += 1
            held = ic.write(df, name, catalog=catalog, job_id="held", checkpoint_id=checkpoint, publish="manual")
            assert held.status == "held", held
            if kind == "re-commit":
                ic.write(small, name, catalog=catalog, job_id="seed", checkpoint_id=checkpoint)
            started = time.perf_counter()
            published = ic.publish(catalog, name, job_id="held", checkpoint_id=checkpoint)
            found[kind].append(time.perf_counter() - started)
            assert [r.status for r in published] == ["committed"], published
            fast = published[0].snapshot_id == held.snapshot_id
            assert fast is (kind == "fast-forward"), (kind, published)
            print(f"round {round_}: publish ({kind}) {found[kind][-1]:.2f} s", flush=True)
    return found


if __name__ == "__main__":
    main()
