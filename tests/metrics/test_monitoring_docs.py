"""docs/monitoring.md stays true: every metric its tables and alert rules name is one that
``icecommit metrics`` exports (and every exported one is documented), every in-job
instrument it lists is one icecommit records, and its alert rules are valid YAML."""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from pyiceberg.catalog.sql import SqlCatalog

import icecommit as ic
from icecommit.core import telemetry
from icecommit.metrics.exporter import StateMetrics, exposition
from icecommit.state import state_engine, state_uri
from tests.fakes import small_checkpoints
from tests.helpers import EVENTS_SCHEMA
from tests.metrics.test_exporter import parsed

DOC = Path(__file__).resolve().parents[2] / "docs" / "operations" / "monitoring.md"


def _exported(catalog: SqlCatalog) -> set[str]:
    ic.create_table(catalog, "ns.docs", EVENTS_SCHEMA, partition_by=["event"])
    small_checkpoints(catalog, "ns.docs", 1)
    text = exposition(StateMetrics(state_engine(state_uri(catalog))))
    families = set(re.findall(r"^# TYPE (\w+) (\w+)", text, flags=re.M))
    # a family without samples is named by its TYPE line (a counter's with or without _total,
    # by prometheus-client's version)
    typed = {name if kind != "counter" or name.endswith("_total") else f"{name}_total" for name, kind in families}
    return typed | {n for n, _ in parsed(text)}


def test_the_documented_metrics_and_the_exported_ones_are_the_same(sqlite_catalog: SqlCatalog) -> None:
    doc = DOC.read_text()
    named = set(re.findall(r"icecommit_[a-z_]+[a-z]", doc))
    # a table cell may abbreviate a sibling as `_files_committed_total`
    named |= {"icecommit" + short for short in re.findall(r"`(_[a-z_]+_total)`", doc)}
    exported = _exported(sqlite_catalog)
    assert named - exported == set()
    assert {n for n in exported if not n.endswith("_created")} - named == set()


def test_the_alert_rules_parse_and_name_only_exported_metrics(sqlite_catalog: SqlCatalog) -> None:
    blocks = [yaml.safe_load(b) for b in re.findall(r"```yaml\n(.*?)```", DOC.read_text(), flags=re.S)]
    assert all(blocks)  # every YAML block parses
    rules = next(b for b in blocks if "groups" in b)["groups"][0]["rules"]
    assert {"IcecommitNoCommit", "IcecommitReconciliationFailed", "IcecommitUnknownOutcomes"} <= {
        r["alert"] for r in rules
    }
    exported = _exported(sqlite_catalog)
    for rule in rules:
        assert set(re.findall(r"icecommit_[a-z_]+", rule["expr"])) <= exported, rule["alert"]


def test_the_documented_instruments_are_the_ones_recorded() -> None:
    doc = DOC.read_text()
    named = set(re.findall(r"`(icecommit\.[a-z_.]+[a-z])`", doc))
    source = Path(telemetry.__file__).read_text()
    recorded = set(re.findall(r'"(icecommit\.[a-z_.]+)"', source))
    assert named == recorded
