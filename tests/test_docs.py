"""Every code block of the documentation (``docs/`` and the README) is accounted for, on
the embedded catalog of a fresh ``$ICECOMMIT_HOME``:

- Python blocks run, a page's blocks in order in one namespace, after the page's set-up
  below (what the page's prose assumes: a DataFrame, a table); printed results that a
  block's comments promise are checked;
- shell blocks of ``icecommit`` commands on the embedded catalog run, line by line, after
  the page's set-up;
- YAML blocks parse;
- every other block is listed in :data:`NOT_RUN` with the reason, and where its code is
  tested instead (keyed by the block's first line, so that adding a block never skips
  another)."""

from __future__ import annotations

import io
import os
import re
import shlex
import subprocess
import sys
from contextlib import redirect_stdout
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
PAGES = [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md"]

_STREAM = "starts a streaming query that runs until stopped; the sink runs in tests/test_streaming.py"
_INSTALL = "installs packages; scripts/package_check.sh installs the built wheel in CI"
_CI = "the project's two commands; CI runs scripts/test.sh, and scripts/package_check.sh the demo's set-up"
_SYNOPSIS = "a synopsis of the commands, not commands; each runs in tests/cli"
_AIRFLOW = "an Airflow DAG's task: needs Airflow (the command itself runs in tests/cli)"
_CRON = "a crontab line: needs cron and mail (the command itself runs in tests/cli)"
_PROD = "names the catalog `prod` of a production configuration (tests/test_settings_precedence.py opens a named one)"

_PROD_SERVE = _PROD + "; metrics serve runs in tests/metrics"
_DAG = "its callback triggers an Airflow DAG (the policy: tests/test_streaming.py)"
_BENCH = "the benchmarks: minutes to hours each (bench/; a seeded slice of the soaks runs in the suite)"
_CLUSTER = "needs a Spark cluster (the standalone cluster's test runs a job on one: tests/objectstore/test_cluster.py)"

#: (page, the start of the block's first line): why it is not run here, and where its code is tested.
NOT_RUN = {
    ("README.md", "pip install '.[spark]'              # ic"): _INSTALL,
    ("docs/index.md", "pip install '.[spark]'              # ic"): _INSTALL,
    ("README.md", 'sink = ic.streaming_sink("shop.events", '): _STREAM,
    ("docs/index.md", 'sink = ic.streaming_sink("shop.events", '): _STREAM,
    ("docs/getting-started.md", "# Spark's rate source into ns.events, a"): _STREAM,
    ("README.md", "scripts/demo.sh     # set up (icecommit "): _CI,
    ("docs/getting-started.md", "scripts/demo.sh     # set up, then run t"): _CI,
    ("README.md", "icecommit tables [NAMESPACE]            "): _SYNOPSIS,
    ("docs/operations/cli.md", "icecommit --version"): _SYNOPSIS,
    ("docs/concepts/state.md", "prepare(n, results)"): "a diagram",
    ("docs/concepts/reconciliation.md", "# Airflow: a failed task (exit code 1) i"): _AIRFLOW,
    ("docs/concepts/reconciliation.md", "*/15 * * * * cd /srv/icecommit && .venv/"): _CRON,
    ("docs/guide/completeness.md", "policy = ic.PartitionCompleteness("): _DAG,
    ("docs/guide/completeness.md", "# Airflow: the daily rollup starts once "): _AIRFLOW,
    ("docs/guide/completeness.md", "# cron: at 01:10, wait up to 2 hours for"): _CRON,
    ("docs/benchmarks.md", ".venv/bin/python -m bench.write_throughp"): _BENCH,
    ("docs/operations/runbooks.md", "icecommit --catalog prod reconcile sales"): _PROD,
    ("docs/operations/monitoring.md", "icecommit --catalog prod metrics serve -"): _PROD_SERVE,
    ("docs/production.md", "python -m venv env && env/bin/pip instal"): _CLUSTER,
    ("docs/production.md", "spark-submit --master yarn --deploy-mode"): _CLUSTER,
    ("docs/production.md", "spark-submit --master k8s://https://kube"): _CLUSTER,
    ("docs/guide/checks-and-publishing.md", "icecommit held shop.events [--job events"): _SYNOPSIS
    + " (tests/cli/test_release_cli.py)",
}  # fmt: skip

#: What a page's prose assumes before its first block. getting-started.md has none: a user
#: copies its blocks as they are, so each defines what it uses.
SET_UP = {
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
    "runbooks.md": """
import pyarrow as pa
import icecommit as ic
from tests.fakes import small_checkpoints
from tests.helpers import EVENTS_SCHEMA
catalog = ic.connect()
ic.create_table(catalog, "sales.orders", EVENTS_SCHEMA, partition_by=["event"])
small_checkpoints(catalog, "sales.orders", 6, job="orders-ingest")
catalog.engine.dispose()
""",
}

#: What a block prints, where its comments promise it (page, the block's first line).
PRINTS = {
    ("README.md", "import pyarrow as pa"): ["committed 2", "True"],
    ("docs/index.md", "import pyarrow as pa"): ["committed 2", "True"],
    ("docs/getting-started.md", "import pyarrow as pa"): ["True 100", "50"],
    ("docs/guide/checks-and-publishing.md", "import icecommit as ic"): [
        "committed [True, True, True, True, True]",
        "held ['accepted_values(kind, [click, view])', 'in_range(amount, min=0)']",
        "6",
    ],
    ("docs/guide/several-tables.md", "import icecommit as ic"): ["2", "4"],
    ("docs/guide/several-tables.md",
     'orders = spark.createDataFrame([(1, "new"), (2, "new")], "id long, state string")'): [
        "[{'id': 1, 'state': 'paid'}, {'id': 2, 'state': 'new'}]"
    ],
    ("docs/guide/row-level-writes.md", "# a Debezium-like change feed into ns.users (id, state): op c/r/u/d "
     "says what a change is,"): [
        "[{'id': 1, 'state': 'paid'}, {'id': 2, 'state': 'new'}]",
        "True received 5: 2 written, 1 deleted by their change type, 2 superseded in the checkpoint by a later row of "
        "their key",
    ],
}
SHELL = {"bash", "sh"}


def _blocks() -> list[tuple[str, str, str, str]]:
    """Every fenced block: (page, language, first line, code)."""
    found = []
    for page in PAGES:
        for language, code in re.findall(r"```(\w*)\n(.*?)```", page.read_text(), flags=re.S):
            first = next((line.strip() for line in code.splitlines() if line.strip()), "")
            found.append((str(page.relative_to(ROOT)), language, first, code))
    return found


BLOCKS = _blocks()
SPARKLESS = {"docs/operations/monitoring.md", "docs/operations/runbooks.md"}  # no Spark, run apart


def _listed(page: str, first: str) -> bool:
    return any(page == listed and first.startswith(start) for listed, start in NOT_RUN)


def _runnable(page: str, language: str, first: str) -> bool:
    return not _listed(page, first) and (language == "python" or language in SHELL)


def _pages() -> list[object]:
    pages = sorted({page for page, language, first, _ in BLOCKS if _runnable(page, language, first)})
    return [pytest.param(page, marks=() if page in SPARKLESS else pytest.mark.spark) for page in pages]


def test_every_block_is_run_parsed_or_listed_with_a_reason() -> None:
    assert BLOCKS, "no code block found"
    stale = [key for key in NOT_RUN if not any(p == key[0] and f.startswith(key[1]) for p, _, f, _ in BLOCKS)]
    assert stale == [], "listed blocks that no longer exist"
    unaccounted = [
        (page, language, first)
        for page, language, first, _ in BLOCKS
        if language not in {"python", "yaml", *SHELL} and not _listed(page, first)
    ]
    assert unaccounted == []
    for page, language, first, code in BLOCKS:
        if language == "yaml":
            assert yaml.safe_load(code) is not None, (page, first)
        if language in SHELL and not _listed(page, first):
            lines = [line.split("#")[0].strip() for line in code.splitlines()]
            assert all(not line or line.startswith("icecommit ") for line in lines), (page, first)


def _extras_table(page: Path) -> str:
    text = page.read_text()
    start = text.index("| extra | adds | when |")
    return text[start : text.index("\n\n", start)]


def test_the_readme_and_the_docs_home_give_one_install_and_one_extras_table() -> None:
    readme, home = ROOT / "README.md", ROOT / "docs" / "index.md"
    assert _extras_table(readme) == _extras_table(home)
    for page in (readme, home):
        assert "pip install build" in page.read_text()  # before python -m build: where build comes from
    assert "getting-started.md" not in SET_UP  # its blocks run as a user copies them: no prelude


def _shell(code: str, home: Path) -> None:
    """Each ``icecommit`` line of a shell block, as a command on the embedded catalog of ``home``."""
    env = {**os.environ, "ICECOMMIT_HOME": str(home)}
    for line in code.splitlines():
        command = line.split("#")[0].strip()
        if not command:
            continue
        args = shlex.split(command)[1:]
        done = subprocess.run([sys.executable, "-m", "icecommit.cli", *args], env=env, capture_output=True,
                              text=True, timeout=300)  # fmt: skip
        assert done.returncode == 0, f"{command}: {done.stderr}"


@pytest.mark.parametrize("page", _pages())
def test_the_pages_blocks_run(page: str, tmp_path: Path) -> None:
    blocks = [
        (lang, first, code) for name, lang, first, code in BLOCKS if name == page and _runnable(name, lang, first)
    ]
    home = Path(os.environ["ICECOMMIT_HOME"])
    if page == "docs/operations/monitoring.md":  # it sets OpenTelemetry's global provider: a process of its own
        code = "\n".join(code for lang, _, code in blocks if lang == "python")
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return
    namespace: dict[str, object] = {}
    exec(SET_UP.get(Path(page).name, ""), namespace)
    for language, first, code in blocks:
        if language in SHELL:
            _shell(code, home)
            continue
        printed = io.StringIO()
        with redirect_stdout(printed):
            exec(code, namespace)
        expected = PRINTS.get((page, first))
        if expected is not None:
            assert printed.getvalue().splitlines() == expected
