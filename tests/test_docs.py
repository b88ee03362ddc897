"""Every Python block of the documentation (``docs/`` and the README) runs, on the embedded
catalog of a fresh ``$ICECOMMIT_HOME``: the blocks of a page in order, in one namespace,
after the page's set-up below (what the page's prose assumes: a DataFrame, a table). The
blocks that cannot run here are listed in :data:`NOT_RUN`, each with the reason and where
the same code is tested instead."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md"]

#: (page, block index): why it is not run here, and where its code is tested.
NOT_RUN = {
    ("README.md", 1): "starts a streaming query that runs until stopped; the sink runs in tests/test_streaming.py",
    ("docs/index.md", 1): "the README's streaming block again (tests/test_streaming.py)",
    ("docs/getting-started.md", 2): "starts a streaming query that runs until stopped (tests/test_streaming.py)",
    ("docs/concepts/reconciliation.md", 0): "an Airflow DAG's task: needs Airflow (the command runs in tests/cli)",
    ("docs/guide/completeness.md", 0): "its callback triggers an Airflow DAG (the policy: tests/test_streaming.py)",
    ("docs/guide/completeness.md", 1): "an Airflow DAG's task: needs Airflow (partitions --wait: tests/cli)",
}

#: What a page's prose assumes before its first block.
SET_UP = {
    "getting-started.md": """
import pyarrow as pa
from icecommit.writers import local_session
spark = local_session()
schema = pa.schema([("id", pa.int64()), ("ts", pa.timestamp("us", tz="UTC")), ("event", pa.string())])
df = spark.sql("select id, timestamp_micros(1767225600000000 + id * 60000000) as ts, "
               "case when id % 2 = 0 then 'click' else 'view' end as event from range(100)")
""",
    "writing.md": """
import pyarrow as pa
import icecommit as ic
from icecommit.writers import local_session
spark = local_session()
catalog = ic.connect()
for name in ("web.clicks", "web.views", "web.unrouted"):
    ic.create_table(catalog, name, pa.schema([("id", pa.int64()), ("event_type", pa.string())]))
df = spark.sql("select id, case id % 4 when 0 then 'click' when 1 then 'tap' when 2 then 'view' else 'scroll' end "
               "as event_type from range(40)")
""",
    "schema-evolution.md": """
import pyarrow as pa
import icecommit as ic
from icecommit.writers import local_session
spark = local_session()
catalog = ic.connect()
ic.create_table(catalog, "ns.events", pa.schema([("id", pa.int64()), ("ts", pa.timestamp("us", tz="UTC"))]))
df = spark.sql("select id, timestamp_micros(1767225600000000 + id) as ts, cast(id as string) as note, "
               "case when id % 2 = 0 then 'click' else 'view' end as kind from range(20)")
""",
    "row-level-writes.md": """
import time
import pyarrow as pa
import icecommit as ic
from icecommit.writers import local_session
spark = local_session()
catalog = ic.connect()
ic.create_table(catalog, "ns.daily", pa.schema([("ts", pa.timestamp("us", tz="UTC")), ("clicks", pa.int64())]),
                partition_by=["day(ts)"])
for name in ("ns.devices", "ns.users"):
    ic.create_table(catalog, name, pa.schema([pa.field("id", pa.int64(), nullable=False), ("state", pa.string())]),
                    identifier_fields=["id"])
df_for_day = spark.sql("select timestamp_micros(1767225600000000 + id * 3600000000) as ts, id as clicks from range(24)")
df_for_month = spark.sql("select timestamp_micros(1767225600000000 + id * 3600000000) as ts, id as clicks "
                         "from range(720)")
df = spark.sql("select id, 'on' as state from range(10)")
""",
    "completeness.md": """
import pyarrow as pa
import icecommit as ic
from icecommit.writers import local_session
spark = local_session()
catalog = ic.connect()
table = ic.create_table(catalog, "ns.events", pa.schema([("id", pa.int64()), ("ts", pa.timestamp("us", tz="UTC"))]),
                        partition_by=["hour(ts)"])
df = spark.sql("select id, timestamp_micros(1767225600000000 + id * 1000000) as ts from range(50)")
record_batches = pa.table({"id": [1, 2], "ts": pa.array([1767225600000000, 1767225601000000],
                          pa.timestamp("us", tz="UTC"))}).to_batches()
worker_number = 3
""",
    "maintenance.md": """
from datetime import timedelta
import pyarrow as pa
import icecommit as ic
from icecommit.committer import GlobalCommitter
from icecommit.writers import local_session, write_arrow
spark = local_session()
catalog = ic.connect()
ic.create_table(catalog, "web.clicks", pa.schema([("id", pa.int64()), ("event", pa.string())]), partition_by=["event"])
committer = GlobalCommitter(catalog, "web.clicks", job_id="clicks")
for n in range(6):  # six small commits: files to compact
    rows = pa.table({"id": list(range(n * 10, n * 10 + 10)), "event": ["click", "view"] * 5})
    committer.prepare(n, [write_arrow(committer.load_table(), rows.to_batches(), job_id="clicks", checkpoint_id=n)])
    committer.commit(n)
n = 6
df = spark.sql("select id + 100 as id, 'click' as event from range(10)")
""",
}


def _blocks() -> list[tuple[str, int, str]]:
    found = []
    for page in PAGES:
        for index, code in enumerate(re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.S)):
            found.append((str(page.relative_to(ROOT)), index, code))
    return found


BLOCKS = _blocks()
SPARKLESS = {"docs/operations/monitoring.md"}  # run in a process of their own (they set global state)


def _pages() -> list[object]:
    pages = sorted({page for page, _, _ in BLOCKS})
    return [pytest.param(page, marks=() if page in SPARKLESS else pytest.mark.spark) for page in pages]


def test_every_block_is_run_or_listed_with_a_reason() -> None:
    assert BLOCKS, "no Python block found"
    assert set(NOT_RUN) <= {(page, index) for page, index, _ in BLOCKS}, "a listed block no longer exists"


@pytest.mark.parametrize("page", _pages())
def test_the_pages_blocks_run(page: str) -> None:
    code = [block for name, index, block in BLOCKS if name == page and (name, index) not in NOT_RUN]
    if not code:
        pytest.skip(f"every block of {page} is listed in NOT_RUN")
    if page in SPARKLESS:
        done = subprocess.run([sys.executable, "-c", "\n".join(code)], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return
    namespace: dict[str, object] = {}
    exec(SET_UP.get(Path(page).name, ""), namespace)
    for block in code:
        exec(block, namespace)
