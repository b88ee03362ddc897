"""What a checkpoint's checks cost ``ic.write``: none, the checks the files' statistics
answer, and ``unique`` on one column (it reads the checkpoint's rows).

Compared in the same run, on the same cached DataFrame (the demo clickstream), each variant
writing into a table of its own, the variants interleaved round by round (each first in
turn) so that the machine's noise hits them alike:

- ``none``: ``ic.write`` with no checks;
- ``statistics``: ``row_count(min=1)``, ``matches_source()``, ``not_null("event_id", "ts")``,
  ``in_range("price", min=0)`` and ``freshness("ts", max_lag="3650d")``: answered from the
  data files' statistics, no row read;
- ``unique``: ``unique("event_id")``, which reads the checkpoint's rows (the ``event_id``
  column of every staged file) in the driver;
- ``accepted_values``: ``accepted_values("device", [...])`` on a column whose files each hold
  several values (their bounds cannot decide: it reads the column).

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

import icecommit as ic
from icecommit import checks
from icecommit.demo.clickstream import DEVICES as CLICKSTREAM_DEVICES
from icecommit.demo.clickstream import PARTITION_BY, clickstream
from icecommit.writers import local_session

OUT = Path(__file__).resolve().parent / "out"
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
            ic.write(warm, f"bench.{variant}", catalog=catalog, job_id=variant, checkpoint_id=0, create=True,
                     partition_by=list(PARTITION_BY), checks=rules)  # fmt: skip
        seconds: dict[str, list[float]] = {v: [] for v in VARIANTS}
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
    medians = {v: statistics.median(s) for v, s in seconds.items()}
    base = medians["none"]
    print("\n| variant | median s | ratio to none |\n|---|---:|---:|")
    for variant, median in medians.items():
        print(f"| {variant} | {median:.1f} | {median / base:.2f}x |")
    OUT.mkdir(exist_ok=True)
    document = {
        "rows": args.rows, "rounds": args.rounds, "seconds": seconds, "medians": medians,
        "machine": platform.platform(), "cpus": os.cpu_count(),
        "at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }  # fmt: skip
    (OUT / "checks.json").write_text(json.dumps(document, indent=2))
    print(f"written to {OUT / 'checks.json'}")


if __name__ == "__main__":
    main()
