"""Properties, not examples, for the pure parts: the checkpoint decision over any history of
commits, crashes, rollbacks, expiries, re-commits and abandons; path normalisation; duration
and instant parsing; time-partition bounds and labels. Hypothesis, with its database off and
a fixed derandomized seed in CI (``--hypothesis-seed`` or ``HYPOTHESIS_PROFILE=soak`` to explore)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from icecommit.core.ancestry import job_checkpoint_property, recorded_highest_checkpoints
from icecommit.core.completeness import TimePartition, from_micros, marker_path, micros, partition_value
from icecommit.core.decision import Action, StateView, TableView, decide
from icecommit.core.lineage import Removal, trace_fates
from icecommit.core.paths import StorageKey, UnsupportedPathError, storage_key
from icecommit.core.timeparse import format_duration, parse_duration, parse_instant

settings.register_profile("ci", derandomize=True, database=None, max_examples=150, deadline=None)
settings.register_profile(
    "soak", max_examples=5000, database=None, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


# -- the decision over a history -----------------------------------------------------------


@dataclass
class World:
    """One job's checkpoints in a table, as a committer acting on ``decide`` would leave them.

    ``branch`` is the full ancestry of the current snapshot (oldest first), expired snapshots
    included (their data files stay live); ``retained`` the snapshots still in the metadata.
    """

    branch: list[int] = field(default_factory=list)
    retained: set[int] = field(default_factory=set)
    checkpoint_of: dict[int, int] = field(default_factory=dict)
    state: dict[int, tuple[str, int | None]] = field(default_factory=dict)  # checkpoint -> (status, snapshot)
    highest: int | None = None  # the job's high-water mark property: never lowered
    removed_by_rollback: set[int] = field(default_factory=set)  # not re-committed by the user since
    manifest_lost: set[int] = field(default_factory=set)  # staged manifests deleted (a storage incident)
    next_snapshot: int = 1

    def in_table(self, checkpoint_id: int) -> int:
        return sum(1 for s in self.branch if self.checkpoint_of[s] == checkpoint_id)

    def view(self, checkpoint_id: int) -> TableView:
        """What ``ancestry.table_view`` reads: the ancestry walk stops at the first expired
        snapshot; an off-branch snapshot is one still retained; files are compared live."""
        walk = []
        for s in reversed(self.branch):
            if s not in self.retained:
                break
            walk.append(s)
        landed = next((s for s in walk if self.checkpoint_of[s] == checkpoint_id), None)
        off = next(
            (s for s in sorted(self.retained) if s not in self.branch and self.checkpoint_of[s] == checkpoint_id), None
        )
        complete = all(s in self.retained for s in self.branch)
        view = TableView(landed, off, self.highest, complete)
        # the committer looks at the files only where the rest cannot tell (committer._files_decide),
        # and cannot when the staged manifest is gone
        status = self.state.get(checkpoint_id, (None, None))[0]
        at_or_below = self.highest is not None and checkpoint_id <= self.highest
        looks = (
            landed is None
            and off is None
            and checkpoint_id not in self.manifest_lost
            and (status in ("committed", "rolled-back") or (status == "prepared" and at_or_below))
        )
        if looks:
            view = TableView(landed, off, self.highest, complete, files_live=self.in_table(checkpoint_id) > 0)
        return view

    def append(self, checkpoint_id: int, *, record: bool = True) -> None:
        snapshot = self.next_snapshot
        self.next_snapshot += 1
        self.branch.append(snapshot)
        self.retained.add(snapshot)
        self.checkpoint_of[snapshot] = checkpoint_id
        self.highest = max(self.highest or 0, checkpoint_id)
        if record:
            self.state[checkpoint_id] = ("committed", snapshot)

    def act(self, checkpoint_id: int, *, recommit: bool = False, crash_after_commit: bool = False) -> Action:
        """A committer replays ``checkpoint_id`` (its data as prepared before, if it was)."""
        status, snapshot = self.state.get(checkpoint_id, (None, None))
        decision = decide(checkpoint_id, StateView(status, snapshot), self.view(checkpoint_id), recommit=recommit)  # type: ignore[arg-type]
        action = decision.action
        if action in (Action.WRITE, Action.COMMIT, Action.RECOMMIT):
            if action is Action.WRITE:
                self.state[checkpoint_id] = ("prepared", None)
            self.removed_by_rollback.discard(checkpoint_id)
            self.append(checkpoint_id, record=not crash_after_commit)
        elif action is Action.ALREADY_IN and status != "committed":
            self.state[checkpoint_id] = ("committed", decision.snapshot_id or snapshot)
        elif action is Action.ROLLED_BACK and status in ("committed", "prepared"):
            self.state[checkpoint_id] = ("rolled-back", snapshot)
        return action

    def rollback(self, keep: int, *, recorded: bool) -> None:
        """Make the ``keep``-th snapshot of the branch current (a rollback by any tool)."""
        removed = self.branch[keep + 1 :]
        del self.branch[keep + 1 :]
        for s in removed:
            checkpoint_id = self.checkpoint_of[s]
            self.removed_by_rollback.add(checkpoint_id)
            if recorded and self.state.get(checkpoint_id, ("", None))[0] in ("committed", "prepared"):
                self.state[checkpoint_id] = ("rolled-back", self.state[checkpoint_id][1])

    def expire(self, doomed: list[int], *, recorded: bool) -> None:
        head = self.branch[-1] if self.branch else None
        for s in doomed:
            if s == head or s not in self.retained:
                continue
            checkpoint_id = self.checkpoint_of[s]
            if (
                recorded
                and s not in self.branch
                and self.state.get(checkpoint_id, ("", None))[0]
                in (
                    "committed",
                    "prepared",
                )
            ):
                self.state[checkpoint_id] = ("rolled-back", self.state[checkpoint_id][1])  # what expire records
            self.retained.discard(s)


ids = st.integers(1, 5)  # few checkpoints and snapshots: histories that collide are what matter
steps = st.lists(
    st.one_of(
        st.tuples(st.just("new"), st.booleans()),  # a new checkpoint; crash after its commit?
        st.tuples(st.just("replay"), ids),
        st.tuples(st.just("recommit"), ids),
        st.tuples(st.just("abandon"), ids),
        st.tuples(st.just("lose-manifest"), ids),
        st.tuples(st.just("rollback"), st.integers(0, 4), st.booleans()),
        st.tuples(st.just("expire"), st.lists(st.integers(1, 8), max_size=4), st.booleans()),
    ),
    max_size=24,
)


@settings(max_examples=600)
@given(steps)
# another tool rolls back and expires, breaking the ancestry walk: only the files can tell
@example([("new", False)] * 3 + [("rollback", 1, False), ("expire", [1, 3], False), ("replay", 3)])
# a checkpoint that landed as its job died; its snapshot expired; its files say it is in
@example([("new", True), ("new", False), ("expire", [1], False), ("replay", 1)])
# recorded rollback, then recorded expiry; a replay is refused, a re-commit lands it once
@example([("new", False)] * 3 + [("rollback", 0, True), ("expire", [2, 3], True), ("replay", 3), ("recommit", 3)])
def test_no_history_puts_a_checkpoint_in_the_table_twice_or_brings_back_a_rollback(history: list[tuple]) -> None:
    world = World()
    next_id = 1
    for step in history:
        kind = step[0]
        if kind == "new":
            world.act(next_id, crash_after_commit=step[1])
            next_id += 1
        elif kind in ("replay", "recommit") and step[1] < next_id:
            before = world.in_table(step[1])
            was_removed = step[1] in world.removed_by_rollback
            action = world.act(step[1], recommit=kind == "recommit")
            # a rollback sticks: only an explicit re-commit brings a removed checkpoint back
            if was_removed and kind == "replay":
                assert action not in (Action.COMMIT, Action.RECOMMIT, Action.WRITE), (step, action)
            if before:
                assert action not in (Action.COMMIT, Action.RECOMMIT, Action.WRITE), (step, action)
            # "already in" only for what is in the table (the README's known gap aside: another
            # tool's rollback and expiry of a checkpoint whose staged manifest is also gone)
            if action is Action.ALREADY_IN and step[1] not in world.manifest_lost:
                assert before, (step, history)
        elif kind == "abandon" and step[1] < next_id:
            status, snapshot = world.state.get(step[1], (None, None))
            if status in ("prepared", "rolled-back") and not world.in_table(step[1]):
                world.state[step[1]] = ("abandoned", snapshot)
        elif kind == "lose-manifest":
            world.manifest_lost.add(step[1])
        elif kind == "rollback" and world.branch:
            world.rollback(step[1] % len(world.branch), recorded=step[2])
        elif kind == "expire":
            world.expire(step[1], recorded=step[2])
        for checkpoint_id in range(1, next_id):
            assert world.in_table(checkpoint_id) <= 1, (checkpoint_id, history)
        # a replay of anything already in the table never writes it again, nor refuses it
        for checkpoint_id in range(1, next_id):
            if world.in_table(checkpoint_id):
                status, snapshot = world.state.get(checkpoint_id, (None, None))
                view = world.view(checkpoint_id)
                got = decide(checkpoint_id, StateView(status, snapshot), view).action  # type: ignore[arg-type]
                assert got in (Action.ALREADY_IN, Action.ABANDONED, Action.EMPTY), (checkpoint_id, got, history)


@given(
    st.integers(0, 50),
    st.sampled_from([None, "prepared", "committed", "rolled-back", "abandoned"]),
    st.one_of(st.none(), st.integers(1, 10**6)),
    st.builds(
        TableView,
        st.one_of(st.none(), st.integers(1, 10**6)),
        st.one_of(st.none(), st.integers(1, 10**6)),
        st.one_of(st.none(), st.integers(0, 50)),
        st.booleans(),
        st.one_of(st.none(), st.booleans()),
    ),
    st.booleans(),
)
def test_the_decision_is_safe_for_any_facts(
    checkpoint_id: int, status: str | None, snapshot: int | None, view: TableView, recommit: bool
) -> None:
    action = decide(checkpoint_id, StateView(status, snapshot), view, recommit=recommit).action  # type: ignore[arg-type]
    writes = action in (Action.WRITE, Action.COMMIT, Action.RECOMMIT)
    if view.landed_snapshot_id is not None:
        assert action is Action.ALREADY_IN  # in the ancestry: nothing else matters
    if status == "abandoned":
        assert not writes
    if action is Action.RECOMMIT:
        assert recommit and status is not None  # only on request, only for what was prepared here
    if status in ("committed", "rolled-back") and view.files_live:
        assert not writes  # its rows are in the table
    if status == "rolled-back" and not recommit:
        assert not writes
    if action is Action.WRITE:
        assert status is None and (view.highest_committed is None or checkpoint_id > view.highest_committed)


# -- paths -----------------------------------------------------------------------------------

segment = st.text(
    alphabet=st.characters(blacklist_characters="/\x00", blacklist_categories=("Cs",)), min_size=1, max_size=8
).filter(lambda s: s not in (".", ".."))
absolute = st.lists(segment, min_size=1, max_size=5).map(lambda parts: "/" + "/".join(parts))


@given(absolute)
def test_every_local_spelling_of_one_file_is_one_key(path: str) -> None:
    spellings = [path, f"file:{path}", f"file://{path}", f"file://localhost{path}", f"FILE://{path}", "/" + path]
    keys = {storage_key(s) for s in spellings}
    assert keys == {StorageKey("file", "", path)}


@given(absolute, st.sampled_from(["%2e%2e", "%2E%2e", "%2F", "a%20b", "%25"]))
def test_percent_escapes_are_never_decoded(path: str, escaped: str) -> None:
    key = storage_key(f"file://{path}/{escaped}/x")
    assert escaped in key.path.split("/") and key.is_under(storage_key(f"file://{path}"))


@given(st.sampled_from(["s3", "s3a", "s3n"]), st.from_regex(r"[a-z0-9][a-z0-9.-]{1,20}", fullmatch=True), absolute)
def test_s3_spellings_are_one_store(scheme: str, bucket: str, key_path: str) -> None:
    key = storage_key(f"{scheme}://{bucket}{key_path}")
    assert key == StorageKey("s3", bucket, key_path) and key.same_store(storage_key(f"s3://{bucket}/other"))


@given(absolute, absolute)
def test_is_under_means_a_strict_folder_prefix(root: str, rest: str) -> None:
    base = storage_key(root)
    inside = storage_key(root + rest)
    assert inside.is_under(base) and not base.is_under(base) and not base.is_under(inside)
    assert not storage_key(root + "x" + rest).is_under(base) or root.endswith("/")


@given(st.text(max_size=20).filter(lambda s: not s.startswith("/") and ":" not in s))
def test_relative_paths_are_refused(path: str) -> None:
    with pytest.raises(UnsupportedPathError):
        storage_key(path)


# -- durations and instants --------------------------------------------------------------------


@given(st.integers(0, 10**6), st.sampled_from([("s", 1), ("m", 60), ("h", 3600), ("d", 86400), ("w", 604800)]))
def test_every_duration_parses_to_its_seconds(amount: int, unit: tuple[str, int]) -> None:
    for text in (f"{amount}{unit[0]}", f" {amount}{unit[0].upper()} "):
        assert parse_duration(text) == timedelta(seconds=amount * unit[1])


@given(st.integers(0, 10**9))
def test_a_formatted_duration_parses_back_to_itself_in_its_largest_whole_unit(seconds: int) -> None:
    text = format_duration(timedelta(seconds=seconds, microseconds=999))  # sub-second parts dropped
    assert parse_duration(text) == timedelta(seconds=seconds)
    if seconds:
        sizes = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
        amount, unit = int(text[:-1]), text[-1]
        assert amount * sizes[unit] == seconds
        assert all(seconds % size for size in sizes.values() if size > sizes[unit])


def test_durations_format_as_people_write_them() -> None:
    seconds = (0, 1, 59, 60, 90, 120, 3600, 5400, 86400, 604800, 1209600)
    expected = ["0", "1s", "59s", "1m", "90s", "2m", "1h", "90m", "1d", "1w", "2w"]
    assert [format_duration(timedelta(seconds=s)) for s in seconds] == expected
    with pytest.raises(ValueError, match="-1 day"):
        format_duration(timedelta(seconds=-1))


@given(st.text(max_size=6))
def test_anything_else_is_a_value_error_naming_it(text: str) -> None:
    try:
        parse_duration(text)
    except ValueError as e:
        assert repr(text) in str(e)


@given(st.datetimes(timezones=st.sampled_from([timezone.utc, timezone(timedelta(hours=-7))])))
def test_an_instant_round_trips_and_a_naive_one_is_utc(moment: datetime) -> None:
    assert parse_instant(moment.isoformat()) == moment
    naive = moment.replace(tzinfo=None)
    assert parse_instant(naive.isoformat()) == naive.replace(tzinfo=timezone.utc)


# -- time partitions ---------------------------------------------------------------------------

moments = st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(2200, 1, 1), timezones=st.just(timezone.utc))


@given(moments, st.sampled_from(["hour", "day", "month", "year"]))
def test_partition_bounds_contain_their_instants_and_tile_time(moment: datetime, granularity: str) -> None:
    field_ = TimePartition(f"ts_{granularity}", 0, granularity, "ts")
    us = micros(moment)
    start = moment
    value = {
        "hour": us // 3_600_000_000,
        "day": us // 86_400_000_000,
        "month": (start.year - 1970) * 12 + start.month - 1,
        "year": start.year - 1970,
    }[granularity]
    assert field_.value_of(us) == value
    low, high = field_.bounds(value)
    assert low <= us < high
    assert field_.value_of(low) == value and field_.value_of(high) == value + 1 and field_.value_of(high - 1) == value
    assert field_.bounds(value + 1)[0] == high  # no gap, no overlap
    assert from_micros(low) <= moment < from_micros(high)
    label = field_.label(value)
    shown = {"hour": "%Y-%m-%d-%H", "day": "%Y-%m-%d", "month": "%Y-%m", "year": "%Y"}[granularity]
    assert label == f"ts_{granularity}={from_micros(low).strftime(shown)}"
    read_back = partition_value(field_, label)  # a label read back is its partition, as an int
    assert read_back == value and type(read_back) is int
    assume(value > 0)
    assert field_.label(value - 1) != label


@pytest.mark.parametrize("granularity", ["hour", "day", "month", "year"])
@pytest.mark.parametrize("label", ["", "ts_x=2026-01-01", "=2026", "ts_GRAN", "ts_GRAN=soon", "ts_GRAN=2026-13-45-99"])
def test_a_label_of_another_field_or_form_is_refused_naming_the_expected_form(granularity: str, label: str) -> None:
    field_ = TimePartition(f"ts_{granularity}", 0, granularity, "ts")
    with pytest.raises(ValueError, match=rf"expected ts_{granularity}=<.+>, e\.g\. ts_{granularity}=YYYY") as raised:
        partition_value(field_, label.replace("GRAN", granularity))
    assert repr(label.replace("GRAN", granularity)) in str(raised.value)


def test_a_field_whose_name_holds_an_equals_sign_reads_its_own_labels() -> None:
    field_ = TimePartition("ts=day", 0, "day", "ts")
    assert field_.label(5) == "ts=day=1970-01-06"
    assert partition_value(field_, "ts=day=1970-01-06") == 5
    for label in ("ts=1970-01-06", "ts=day=x=1970-01-06", "ts=day1970-01-06"):
        with pytest.raises(ValueError) as raised:
            partition_value(field_, label)
        assert str(raised.value) == (
            f"partition label {label!r} is not one of this table's: expected ts=day=<%Y-%m-%d>, e.g. ts=day=YYYY-01-01"
        )


@pytest.mark.parametrize(
    ("properties", "expected"),
    [
        ({}, "s3://b/t/data/ts_day=2026-01-01/_SUCCESS"),
        ({"write.data.path": "s3://other/place/"}, "s3://other/place/ts_day=2026-01-01/_SUCCESS"),
        ({"write.data.path": ""}, "s3://b/t/data/ts_day=2026-01-01/_SUCCESS"),
        ({"write.data.path": "s3://b/BOX//"}, "s3://b/BOX/ts_day=2026-01-01/_SUCCESS"),  # only slashes trimmed
    ],
)
def test_a_partitions_marker_lives_under_the_tables_data_path(properties: dict[str, str], expected: str) -> None:
    @dataclass
    class Metadata:
        location: str
        properties: dict[str, str]

    assert marker_path(Metadata("s3://b/t/", properties), "ts_day=2026-01-01") == expected  # type: ignore[arg-type]
    assert (
        marker_path(Metadata("s3://b/TX/", {}), "ts_day=2026-01-01")  # type: ignore[arg-type]
        == "s3://b/TX/data/ts_day=2026-01-01/_SUCCESS"
    )


@pytest.mark.parametrize(
    "text", ["12x", "x", "1.5h", "-3m", "\u0661\u0662h", "1\u0662h", "12\u0662h", "12", "h", "3 d", "0s0"]
)
def test_what_is_not_a_duration_is_a_value_error(text: str) -> None:
    with pytest.raises(ValueError, match="is not a duration like 90s"):
        parse_duration(text)


def test_an_instant_that_is_not_one_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match=r"^'soon' is not an ISO 8601 time$"):
        parse_instant(" soon".strip())


def test_the_recorded_high_water_marks_are_read_from_exactly_their_properties() -> None:
    properties = {
        job_checkpoint_property("a"): "7",
        job_checkpoint_property("b.c"): "-1",
        job_checkpoint_property(""): "3",  # no job name
        job_checkpoint_property("d"): "x",  # not a number
        "icecommit.job.e": "4",  # no suffix
        "icecommit.job.a-much-longer-job-name": "4",  # no suffix, long enough to slice a name out of
        "e.checkpoint": "5",  # no prefix
        "some-other-tool.settings.checkpoint": "5",  # no prefix, long enough to slice a name out of
        job_checkpoint_property("f"): "X5",  # not a number either
        "other": "6",
    }
    assert recorded_highest_checkpoints(properties) == {"a": 7, "b.c": -1}


# -- per-minute window counts ------------------------------------------------------------

_MICROS = st.one_of(st.none(), st.integers(min_value=-(2**62), max_value=2**62))


@given(st.lists(_MICROS, max_size=300), st.booleans())
@example([-1, 0, -60_000_000, -60_000_001, 59_999_999, 60_000_000, None], False)
def test_minute_counts_floor_every_instant_into_its_minute(values: list[int | None], as_timestamps: bool) -> None:
    """Rows per minute match floor division, before 1970 too; nulls count in the None window."""
    import pyarrow as pa

    from icecommit.writers.windows import WINDOW_US, minute_counts

    array = pa.array(values, pa.int64())
    if as_timestamps:
        array = array.cast(pa.timestamp("us", tz="UTC"))
    expected: dict[int | None, int] = {}
    for value in values:
        window = None if value is None else value // WINDOW_US * WINDOW_US
        expected[window] = expected.get(window, 0) + 1
    assert dict(minute_counts(array, len(values))) == expected


# -- boundaries of the pure functions (each kills a mutant that survived the examples) ------

HOUR = 3_600_000_000


def test_a_writer_holds_partitions_back_until_it_has_committed_both_a_watermark_and_a_time() -> None:
    from icecommit.core.completeness import WriterMark, closing

    field_ = TimePartition("ts_hour", 0, "hour", "ts")
    for marks in ({"a": WriterMark(None, 5 * HOUR)}, {"a": WriterMark(5 * HOUR, None)}, {}):
        assert closing(field_, marks, now_us=100 * HOUR, lateness_us=0, idle_us=HOUR).watermark_us is None
    # idle exactly at the timeout: still counts (idle means longer than the timeout)
    live = {"a": WriterMark(10 * HOUR, 10 * HOUR), "b": WriterMark(20 * HOUR, 20 * HOUR)}
    assert closing(field_, live, now_us=11 * HOUR, lateness_us=0, idle_us=HOUR).watermark_us == 10 * HOUR
    # a hair past it: a stops holding back, b (which committed later) still counts
    assert closing(field_, live, now_us=11 * HOUR + 1, lateness_us=0, idle_us=HOUR).watermark_us == 20 * HOUR
    # live means its watermark was within timeout + lateness of its last commit, inclusive
    edge = {"a": WriterMark(7 * HOUR, 10 * HOUR), "b": WriterMark(20 * HOUR, 20 * HOUR)}
    assert closing(field_, edge, now_us=12 * HOUR, lateness_us=2 * HOUR, idle_us=HOUR).watermark_us == 20 * HOUR
    behind = {"a": WriterMark(7 * HOUR - 1, 10 * HOUR), "b": WriterMark(20 * HOUR, 20 * HOUR)}
    assert closing(field_, behind, now_us=12 * HOUR, lateness_us=2 * HOUR, idle_us=HOUR).watermark_us == 7 * HOUR - 1
    # a small clock far past a large last commit: now - last, not now + last
    assert closing(field_, live, now_us=10 * HOUR, lateness_us=0, idle_us=HOUR).watermark_us == 10 * HOUR


def test_records_per_partition_adds_up_per_value_and_leaves_out_null_ones() -> None:
    from icecommit.core.completeness import records_per_partition

    field_ = TimePartition("ts_hour", 1, "hour", "ts")
    files = [(("a", 5), 10), (("b", 5), 3), (("a", 6), 7), (("a", None), 100), (("b", 6), 1)]
    assert records_per_partition(files, field_) == {5: 13, 6: 8}


def test_rows_of_two_inputs_in_one_output_are_shared_by_the_rows_each_put_there() -> None:
    lineage = {"a": [("o", 30)], "b": [("o", 10)]}
    a = trace_fates([("a", 30)], {"o": 40}, [], lineage)
    assert (a.readable, a.held) == (30, {"o": 30})
    # an output later deleted: each input's rows are removed by that snapshot, in proportion
    deleted = [Removal(5, "delete", removed=(("o", 40),), added=())]
    b = trace_fates([("b", 10)], {}, deleted, lineage)
    assert (b.readable, b.removed) == ((0), {(5, "delete"): 10})
    # a removal whose added rows equal its removed ones but is no replace removes nothing
    same = [Removal(6, "overwrite", removed=(("x", 10),), added=(("y", 10),))]
    assert trace_fates([("x", 10)], {"y": 10}, same).removed == {}


def test_a_file_is_under_a_folder_of_its_own_store_only() -> None:
    root = storage_key("s3://bucket/warehouse/t")
    assert storage_key("s3://bucket/warehouse/t/data/f.parquet").is_under(root)
    assert not storage_key("s3://other/warehouse/t/data/f.parquet").is_under(root)
    assert not storage_key("s3a://bucket2/warehouse/t/data/f.parquet").is_under(root)
    assert not storage_key("file:///warehouse/t/data/f.parquet").is_under(root)


def test_a_cycle_in_the_compaction_lineage_ends_as_untraceable() -> None:
    lineage = {"a": [("b", 10)], "b": [("a", 10)]}
    assert trace_fates([("a", 10)], {}, [], lineage).untraceable == 10


@pytest.mark.parametrize(
    ("location", "why"),
    [
        ("", "not an absolute path or URI"),
        ("relative/x", "not an absolute path or URI"),
        (":x", "not an absolute path or URI"),
        ("a/b:c", "not an absolute path or URI"),  # a slash before the colon: a relative path
        ("file://host/x", "a file URI with a host is not a local path"),
        ("file:x", "a relative file URI"),
        ("s3:bucket/x", "a URI without an authority"),
    ],
)
def test_a_path_that_cannot_be_compared_is_refused_naming_why(location: str, why: str) -> None:
    with pytest.raises(UnsupportedPathError) as raised:
        storage_key(location)
    assert str(raised.value) == f"{why}: {location!r}"


def test_the_root_of_a_file_uri_is_the_root() -> None:
    assert (
        storage_key("file://")
        == storage_key("file:///")
        == storage_key("file://localhost")
        == StorageKey("file", "", "/")
    )
    assert storage_key("file://localhost/a//b/../c") == StorageKey("file", "", "/a/c")


def test_a_retry_policy_refuses_what_cannot_retry_naming_the_argument() -> None:
    from icecommit.committer import RetryPolicy
    from icecommit.errors import InvalidArgumentError

    assert RetryPolicy(max_attempts=1, max_seconds=0.001, min_wait_s=0, max_wait_s=0).max_attempts == 1
    with pytest.raises(InvalidArgumentError) as raised:
        RetryPolicy(max_attempts=0)
    assert (raised.value.argument, raised.value.value, raised.value.accepted) == (
        "max_attempts", 0, "a whole number of at least 1")  # fmt: skip
    for bad in ({"max_seconds": 0}, {"min_wait_s": -0.001}, {"min_wait_s": 2.0, "max_wait_s": 1.0}):
        with pytest.raises(InvalidArgumentError) as raised:
            RetryPolicy(**bad)  # type: ignore[arg-type]
        policy = {"max_seconds": 1800.0, "min_wait_s": 0.1, "max_wait_s": 60.0, **bad}
        assert raised.value.argument == "max_seconds/min_wait_s/max_wait_s"
        assert raised.value.value == (policy["max_seconds"], policy["min_wait_s"], policy["max_wait_s"])
        assert raised.value.accepted == "max_seconds > 0, min_wait_s >= 0 and max_wait_s >= min_wait_s"
    assert RetryPolicy(min_wait_s=1.0, max_wait_s=1.0).max_wait_s == 1.0  # equal waits are allowed


def test_a_retry_policy_from_table_properties_follows_icebergs_defaults_and_units() -> None:
    from icecommit.committer import RetryPolicy

    assert RetryPolicy.from_properties({}) == RetryPolicy(
        max_attempts=5, max_seconds=1800.0, min_wait_s=0.1, max_wait_s=60.0
    )
    set_ = {
        "commit.retry.num-retries": "2", "commit.retry.total-timeout-ms": "2500",
        "commit.retry.min-wait-ms": "30", "commit.retry.max-wait-ms": "70",
    }  # fmt: skip
    assert RetryPolicy.from_properties(set_) == RetryPolicy(
        max_attempts=3, max_seconds=2.5, min_wait_s=0.03, max_wait_s=0.07
    )
    # a maximum wait below the minimum is raised to it; a zero total timeout to a millisecond
    odd = {"commit.retry.min-wait-ms": "500", "commit.retry.max-wait-ms": "20", "commit.retry.total-timeout-ms": "0"}
    assert RetryPolicy.from_properties(odd) == RetryPolicy(
        max_attempts=5, max_seconds=0.001, min_wait_s=0.5, max_wait_s=0.5
    )
