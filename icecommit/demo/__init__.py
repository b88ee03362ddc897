"""The demo pipeline (synthetic clickstream into a partitioned table)."""

from icecommit.demo.clickstream import clickstream
from icecommit.demo.pipeline import DEMO_JOB, DEMO_TABLE, DemoReport, run_demo

__all__ = ["DEMO_JOB", "DEMO_TABLE", "DemoReport", "clickstream", "run_demo"]
