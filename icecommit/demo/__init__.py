"""The demo pipeline: a synthetic clickstream landed through Spark (``icecommit.demo.job``)."""

from icecommit.demo.report import DEMO_JOB, DEMO_TABLE, DemoReport

__all__ = ["DEMO_JOB", "DEMO_TABLE", "DemoReport"]
