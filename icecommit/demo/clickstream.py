"""A realistic synthetic clickstream, generated inside Spark (no Python row loop)."""

from __future__ import annotations

from datetime import date, datetime, timezone

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

EVENTS = ("pv", "show", "click", "cart", "buy")
#: Cumulative weights: most events are page views and impressions, few are purchases.
_EVENT_CUMULATIVE = (0.40, 0.75, 0.93, 0.98, 1.0)
CATEGORIES = ("books", "electronics", "home", "fashion", "toys", "grocery", "sports", "beauty")
DEVICES = ("android", "ios", "web", "tablet")

SCHEMA = pa.schema(
    [
        pa.field("event_id", pa.int64(), nullable=False),
        pa.field("ts", pa.timestamp("us", tz="UTC"), nullable=False),
        pa.field("event", pa.string(), nullable=False),
        pa.field("user_id", pa.int64(), nullable=False),
        pa.field("session_id", pa.string()),
        pa.field("product_id", pa.int64()),
        pa.field("category", pa.string()),
        pa.field("price", pa.float64()),
        pa.field("device", pa.string()),
        pa.field("page", pa.string()),
    ]
)
PARTITION_BY = ("day(ts)", "event")
#: The demo table's layout: hourly partitions, so that an hour of the demo's stretch of
#: event time can be complete (published) while later ones are still arriving.
DEMO_PARTITION_BY = ("hour(ts)", "event")


def _pick(values: tuple[str, ...], index: Column) -> Column:
    return F.element_at(F.array(*[F.lit(v) for v in values]), (index + 1).cast("int"))


def clickstream(
    spark: SparkSession,
    start: int,
    end: int,
    *,
    day: date = date(2026, 11, 20),
    users: int = 50_000,
    products: int = 5_000,
    seed: int = 7,
    partitions: int = 2,
    hours: tuple[float, float] | None = None,
    late: tuple[float, float] | None = None,
    late_fraction: float = 0.0,
) -> DataFrame:
    """Rows ``start`` to ``end`` (exclusive) of a deterministic clickstream for one day.

    Event ids are the row numbers, so any slice can be regenerated identically. By default
    the events spread over the whole day, peaking in the evening; ``hours`` (from, to)
    confines them to that stretch of the day instead, and ``late_fraction`` of them then
    fall in the earlier stretch ``late`` (rows that arrive after their time: late records).
    """
    day_start = int(datetime(day.year, day.month, day.day, tzinfo=timezone.utc).timestamp())
    ids = spark.range(start, end, numPartitions=partitions).withColumnRenamed("id", "event_id")
    u = F.rand(seed)
    r2 = F.rand(seed + 1)
    event = F.when(u < _EVENT_CUMULATIVE[0], EVENTS[0])
    for threshold, name in zip(_EVENT_CUMULATIVE[1:], EVENTS[1:], strict=True):
        event = event.when(u < threshold, name)
    # Traffic peaks in the evening: skew seconds-of-day towards the later hours.
    seconds = (F.pow(r2, F.lit(0.7)) * 86_399_999_999).cast("long")
    if hours is not None:
        seconds = (F.lit(hours[0] * 3_600_000_000) + r2 * ((hours[1] - hours[0]) * 3_600_000_000 - 1)).cast("long")
        if late is not None and late_fraction > 0:
            earlier = F.lit(late[0] * 3_600_000_000) + F.rand(seed + 3) * ((late[1] - late[0]) * 3_600_000_000 - 1)
            seconds = F.when(F.rand(seed + 4) < late_fraction, earlier.cast("long")).otherwise(seconds)
    user = (F.abs(F.xxhash64(F.col("event_id"), F.lit(seed))) % users).cast("long")
    product = (F.abs(F.xxhash64(F.col("event_id"), F.lit(seed + 2))) % products).cast("long")
    return ids.select(
        F.col("event_id"),
        F.timestamp_micros(F.lit(day_start * 1_000_000) + seconds).alias("ts"),
        event.alias("event"),
        user.alias("user_id"),
        F.concat(F.lit("s-"), F.hex(user), F.lit("-"), F.hex((seconds / 1_800_000_000).cast("long"))).alias(
            "session_id"
        ),
        F.when(event != "pv", product).alias("product_id"),
        _pick(CATEGORIES, product % len(CATEGORIES)).alias("category"),
        F.when(event.isin("cart", "buy"), F.round((product % 500) + 0.99, 2)).alias("price"),
        _pick(DEVICES, user % len(DEVICES)).alias("device"),
        F.concat(F.lit("/p/"), product.cast("string")).alias("page"),
    )
