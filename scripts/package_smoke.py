"""Run by scripts/package_check.sh in a fresh virtual environment holding only the built
wheel (no pyspark, no psycopg, no test dependencies), outside the repository: a small
pipeline through the public API, exactly as a user's program would run it."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pyarrow as pa

import icecommit as ic
from icecommit.errors import MissingExtraError
from icecommit.writers import write_arrow

assert "site-packages" in ic.__file__, f"icecommit imported from {ic.__file__}, not the installed wheel"

home = Path(os.environ["ICECOMMIT_HOME"])
catalog = ic.connect(uri=f"sqlite:///{home / 'catalog.db'}", warehouse=str(home / "warehouse"), create=True)
schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("kind", pa.string())])
ic.create_table(catalog, "shop.orders", schema, partition_by=["kind"])
committer = ic.GlobalCommitter(catalog, "shop.orders", job_id="orders")
for checkpoint in range(3):
    rows = pa.table({"id": list(range(checkpoint * 10, checkpoint * 10 + 10)), "kind": ["a", "b"] * 5}, schema=schema)
    written = write_arrow(committer.load_table(), rows.to_batches(), job_id="orders", checkpoint_id=checkpoint,
                          task_id=0, attempt=0)  # fmt: skip
    committer.prepare(checkpoint, [written])
    assert committer.commit(checkpoint).committed
assert committer.commit(2).status == "already-committed"  # a replay lands nothing twice
assert catalog.load_table("shop.orders").scan().to_arrow().num_rows == 30
assert ic.reconcile(catalog, "shop.orders").ok
endpoint = os.environ.get("ICECOMMIT_SMOKE_S3_ENDPOINT")
if endpoint:  # the same on object storage, with the core install only
    s3 = ic.connect("lake", uri=f"sqlite:///{home / 'lake.db'}", warehouse="s3://lake/wh", **{
        "s3.endpoint": endpoint, "s3.access-key-id": "testing", "s3.secret-access-key": "testing",
        "s3.region": "us-east-1",
    })  # fmt: skip
    ic.create_table(s3, "shop.returns", schema)
    on_s3 = ic.GlobalCommitter(s3, "shop.returns", job_id="returns")
    rows = pa.table({"id": [1, 2, 3], "kind": ["a", "b", "a"]}, schema=schema)
    on_s3.prepare(0, [write_arrow(on_s3.load_table(), rows.to_batches(), job_id="returns", checkpoint_id=0)])
    assert on_s3.commit(0).committed
    table = s3.load_table("shop.returns")
    assert table.metadata.location.startswith("s3://lake/") and table.scan().to_arrow().num_rows == 3
    print("package smoke: a checkpoint committed to S3 with the core install")
assert "pyspark" not in sys.modules, "the pipeline without Spark loaded pyspark"
try:
    ic.write  # noqa: B018  (needs Spark: a clear error, not an ImportError)
except MissingExtraError as e:
    assert "pip install 'icecommit[spark]'" in str(e), str(e)
else:
    raise AssertionError("ic.write without pyspark did not say what to install")
print("package smoke: 3 checkpoints committed once, reconciled, without pyspark")
