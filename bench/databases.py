"""The databases the benchmarks run against: SQLite always, PostgreSQL when it answers."""

from __future__ import annotations

import os

from sqlalchemy import create_engine, text

PG_URI = os.environ.get("ICECOMMIT_TEST_PG_URI", "postgresql+psycopg://postgres@127.0.0.1:5432/test")


def postgres_available() -> bool:
    """True when the PostgreSQL server at PG_URI accepts a query."""
    engine = create_engine(PG_URI)
    try:
        with engine.connect() as conn:
            conn.execute(text("select 1"))
        return True
    except Exception:
        return False
    finally:
        engine.dispose()
