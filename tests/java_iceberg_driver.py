"""Apache Iceberg's Java implementation (Spark 3.5 + iceberg-spark-runtime 1.10, or Spark 4.1 +
1.12) at work on a table icecommit wrote: run by ``tests.java_iceberg`` with the interpreter of
the environment ``scripts/java_iceberg/setup.sh`` builds (pyspark 3.5 or 4.1 and the jars, no
icecommit, no pyiceberg), so this file imports nothing but the standard library and pyspark.

    python tests/java_iceberg_driver.py --jars A.jar,B.jar read METADATA_JSON OUT_DIR \
        [--where SQL ...] [--as-of SNAPSHOT_ID] [--incremental-from SNAPSHOT_ID]
    python tests/java_iceberg_driver.py --jars A.jar,B.jar read NS.TABLE OUT_DIR --rest-uri URL
    python tests/java_iceberg_driver.py --jars A.jar,B.jar --sqlite-jdbc JAR rewrite \
        --catalog-name C --catalog-db PATH --warehouse URI --table NS.T --target-file-size BYTES

``read`` loads the table from its metadata file (Iceberg's static table: no catalog) and
writes OUT_DIR/rows.parquet (every row of the current snapshot) and OUT_DIR/report.json:
Java's ``files``, ``entries``, ``partitions``, ``snapshots`` and ``refs`` metadata tables, and the ids
each ``--where`` filter, the ``--as-of`` snapshot, the incremental append read from
``--incremental-from`` to the current snapshot and the head of ``--branch`` return.

With ``--rest-uri``, ``read`` takes a table name and reads it through Iceberg's REST
catalog client (a Spark catalog of ``type=rest`` at that URL) instead of its metadata file.

``alter`` runs one ``ALTER TABLE`` (``--sql``, ``{table}`` standing for the table) through
the same JDBC catalog as ``rewrite``.

``rewrite`` points Java's JdbcCatalog at the SQLite database of pyiceberg's SqlCatalog
(same catalog name, same warehouse) and runs ``CALL system.rewrite_data_files`` on the table;
it prints one JSON line: the procedure's result and its wall time.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession

#: The Spark catalog name of the REST catalog ``read --rest-uri`` reads through.
REST_CATALOG = "rest"
ENTRY_COLUMNS = (
    "status", "snapshot_id", "sequence_number", "file_sequence_number",
    "data_file.file_path AS file_path", "data_file.record_count AS record_count",
)  # fmt: skip
SNAPSHOT_COLUMNS = (
    "unix_millis(committed_at) AS committed_at_ms", "snapshot_id", "parent_id", "operation", "manifest_list", "summary",
)  # fmt: skip


def session(
    jars: str, *, sqlite_jdbc: str | None, driver_memory: str, catalog_name: str = "", catalog: dict[str, str]
) -> SparkSession:
    builder = (
        SparkSession.builder.master("local[2]")
        .appName("icecommit-java-iceberg")
        .config("spark.jars", jars)
        .config("spark.sql.extensions", "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", driver_memory)
        .config("spark.sql.shuffle.partitions", "4")
    )
    if sqlite_jdbc:  # Maven's sqlite-jdbc carries its native library inside the jar
        builder = builder.config("spark.driver.extraClassPath", sqlite_jdbc)
    if catalog_name:
        builder = builder.config(f"spark.sql.catalog.{catalog_name}", "org.apache.iceberg.spark.SparkCatalog")
        for key, value in catalog.items():
            builder = builder.config(f"spark.sql.catalog.{catalog_name}.{key}", value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, bytes | bytearray):
        return bytes(value).hex()
    if isinstance(value, dt.date | dt.datetime):
        return value.isoformat()
    return value


def _rows(frame: DataFrame) -> list[dict[str, Any]]:
    return [_jsonable(row.asDict(recursive=True)) for row in frame.collect()]


def _ids(frame: DataFrame) -> list[int]:
    return sorted(row[0] for row in frame.select("id").collect())


def read(spark: SparkSession, metadata: str, out: Path, args: argparse.Namespace) -> None:
    def load(**options: object) -> DataFrame:
        if args.rest_uri:  # a table of the REST catalog, by name
            return spark.read.options(**options).table(f"{REST_CATALOG}.{metadata}")
        return spark.read.format("iceberg").options(**options).load(metadata)

    table = load()
    table.coalesce(1).write.mode("overwrite").parquet(str(out / "rows"))
    (parquet,) = (out / "rows").glob("part-*.parquet")
    parquet.rename(out / "rows.parquet")

    def metadata_table(name: str) -> DataFrame:
        if args.rest_uri:
            return spark.table(f"{REST_CATALOG}.{metadata}.{name}")
        return spark.read.format("iceberg").load(f"{metadata}#{name}")

    report: dict[str, Any] = {
        "spark": spark.version,
        "files": _rows(metadata_table("files").drop("readable_metrics")),
        "entries": _rows(metadata_table("entries").selectExpr(*ENTRY_COLUMNS)),
        "partitions": _rows(metadata_table("partitions").drop("last_updated_at")),
        "snapshots": _rows(metadata_table("snapshots").selectExpr(*SNAPSHOT_COLUMNS)),
        "refs": _rows(metadata_table("refs").select("name", "type", "snapshot_id")),
        "where": {where: _ids(table.where(where)) for where in args.where},
    }
    if args.as_of is not None:
        # Iceberg 1.12's runtime for Spark 4.1 refuses its "snapshot-id" read option for Spark's
        # own versionAsOf, which Spark 3.5 ignores where a table is read by name
        as_of = "versionAsOf" if int(spark.version.split(".")[0]) >= 4 else "snapshot-id"
        report["as_of"] = _ids(load(**{as_of: args.as_of}))
    if args.incremental_from is not None:
        incremental = load(**{"start-snapshot-id": args.incremental_from})
        report["incremental"] = _ids(incremental)
    if args.branch is not None:  # Iceberg's branch read option
        report["branch"] = _ids(load(branch=args.branch))
    (out / "report.json").write_text(json.dumps(report))


def rewrite(spark: SparkSession, args: argparse.Namespace) -> None:
    options = {"target-file-size-bytes": str(args.target_file_size), **dict(args.option)}
    entries = ", ".join(f"'{k}', '{v}'" for k, v in options.items())
    began = time.perf_counter()
    # the table fully qualified: a namespace named like the catalog would be taken for it
    table = f"{args.catalog_name}.{args.table}"
    (result,) = spark.sql(
        f"CALL {args.catalog_name}.system.rewrite_data_files(table => '{table}', options => map({entries}))"
    ).collect()
    seconds = time.perf_counter() - began
    print(json.dumps({"seconds": seconds, "spark": spark.version, **result.asDict()}))


def alter(spark: SparkSession, args: argparse.Namespace) -> None:
    """Run one SQL statement (``args.sql``, with ``{table}`` for the table: an ``ALTER TABLE``,
    a ``MERGE INTO``) through the JDBC catalog on pyiceberg's SQLite catalog database."""
    began = time.perf_counter()
    spark.sql(args.sql.format(table=f"{args.catalog_name}.{args.table}"))
    print(json.dumps({"spark": spark.version, "seconds": time.perf_counter() - began}))


def heads(spark: SparkSession, args: argparse.Namespace) -> None:
    """Each table's main head and rows as Java's catalog (JDBC or REST) has them, read one
    after another: one line of JSON, by table."""
    found: dict[str, Any] = {}
    for table in args.table:
        name = f"{args.catalog_name}.{table}"
        (head,) = spark.sql(f"SELECT snapshot_id FROM {name}.refs WHERE name = 'main'").collect()
        found[table] = {"snapshot_id": head["snapshot_id"], "ids": _ids(spark.table(name))}
    print(json.dumps(found))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jars", required=True, help="comma-separated: Iceberg's Spark runtime jar(s)")
    parser.add_argument("--sqlite-jdbc", help="the SQLite JDBC driver's jar (for rewrite)")
    parser.add_argument("--driver-memory", default="2g")
    commands = parser.add_subparsers(dest="command", required=True)
    reader = commands.add_parser("read")
    reader.add_argument("metadata")
    reader.add_argument("out", type=Path)
    reader.add_argument("--where", action="append", default=[])
    reader.add_argument("--as-of", type=int)
    reader.add_argument("--incremental-from", type=int)
    reader.add_argument("--branch", help="also read this branch's head (report's branch)")
    reader.add_argument("--rest-uri", help="read the table NS.TABLE through this REST catalog")
    rewriter = commands.add_parser("rewrite")
    rewriter.add_argument("--catalog-name", required=True)
    rewriter.add_argument("--catalog-db", required=True)
    rewriter.add_argument("--warehouse", required=True)
    rewriter.add_argument("--table", required=True)
    rewriter.add_argument("--target-file-size", type=int, required=True)
    rewriter.add_argument("--option", nargs=2, action="append", default=[], metavar=("KEY", "VALUE"))
    altering = commands.add_parser("alter")
    for name in ("--catalog-name", "--catalog-db", "--warehouse", "--table", "--sql"):
        altering.add_argument(name, required=True)
    heading = commands.add_parser("heads")
    heading.add_argument("--catalog-name", required=True)
    heading.add_argument("--catalog-db", help="pyiceberg's SQLite catalog database (Java's JdbcCatalog on it)")
    heading.add_argument("--warehouse", default="")
    heading.add_argument("--rest-uri", help="or a REST catalog")
    heading.add_argument("--table", action="append", required=True)
    args = parser.parse_args(argv)

    catalog: dict[str, str] = {}
    catalog_name = getattr(args, "catalog_name", "")
    if args.command == "read" and args.rest_uri:
        catalog_name, catalog = REST_CATALOG, {"type": "rest", "uri": args.rest_uri, "cache-enabled": "false"}
    if args.command == "heads" and args.rest_uri:
        catalog = {"type": "rest", "uri": args.rest_uri, "cache-enabled": "false"}
    if args.command in ("rewrite", "alter") or (args.command == "heads" and not args.rest_uri):
        if not args.sqlite_jdbc:
            parser.error(f"{args.command} needs --sqlite-jdbc")
        # Java's JdbcCatalog keys its rows by catalog name, like pyiceberg's SqlCatalog, so the
        # Spark catalog takes the pyiceberg catalog's name; on SQLite, init-catalog-tables=false
        # keeps Iceberg 1.10 from holding a shared lock for the JVM's life
        catalog = {
            "type": "jdbc", "uri": f"jdbc:sqlite:{args.catalog_db}", "warehouse": args.warehouse,
            "cache-enabled": "false", "jdbc.init-catalog-tables": "false",
        }  # fmt: skip
    spark = session(
        args.jars, sqlite_jdbc=args.sqlite_jdbc, driver_memory=args.driver_memory,
        catalog_name=catalog_name, catalog=catalog,
    )  # fmt: skip
    try:
        if args.command == "read":
            args.out.mkdir(parents=True, exist_ok=True)
            read(spark, args.metadata, args.out, args)
        elif args.command == "alter":
            alter(spark, args)
        elif args.command == "heads":
            heads(spark, args)
        else:
            rewrite(spark, args)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
