"""Reconciliation's judgement as facts in, report out: no table, no database, no Spark.

Every count of every line, every problem with its kind, severity and the whole sentence a
person reads, the windows, the lag and the commit health, for each way a checkpoint's
rows can end: readable, lost, duplicated, removed on purpose, rolled back, abandoned,
pending or stuck, followed through rewrites, missing from storage."""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta, timezone
from fractions import Fraction
from typing import Any

from icecommit.core.lineage import Fate, path_key
from icecommit.metrics import Thresholds
from icecommit.metrics.judge import Facts, LiveDeleteFile, LiveFile, judge
from icecommit.metrics.report_model import CheckpointLine, CommitHealth, Lag, PartitionLine, Problem, WindowLine
from icecommit.state.checkpoints import CheckpointState, PublishCounters
from icecommit.state.partitions import PartitionStatus
from icecommit.state.samples import SOURCE, WRITTEN

T = datetime(2026, 5, 1, tzinfo=timezone.utc)
W0, W1 = T, T + timedelta(minutes=1)
NOW = T + timedelta(hours=4)
COMMITTED_AT = T + timedelta(minutes=10)


def state(checkpoint_id: int, status: str = "committed", **fields: Any) -> CheckpointState:
    values: dict[str, Any] = {
        "job_id": "j", "table_name": "ns.t", "checkpoint_id": checkpoint_id, "status": status,
        "manifest_path": None, "files_digest": "", "source_records": 0, "records": 0, "files": 1, "bytes": 1,
        "max_event_time_us": None, "snapshot_id": 100 + checkpoint_id if status == "committed" else None,
        "attempts": 1, "retries": 0, "counters": PublishCounters(), "prepared_at": T,
        "committed_at": COMMITTED_AT if status == "committed" else None,
    }  # fmt: skip
    values.update(fields)
    return CheckpointState(**values)


def facts(*checkpoints: CheckpointState, **fields: Any) -> Facts:
    values: dict[str, Any] = {
        "table": "ns.t", "job_id": None, "since": None, "until": NOW, "checkpoints": list(checkpoints),
        "task_counts": {}, "declared": {}, "committed": {}, "ignored": [], "live_files": [],
        "snapshot_checkpoints": {100 + s.checkpoint_id: (s.job_id, s.checkpoint_id) for s in checkpoints},
        "ancestry_counts": Counter(), "missing_paths": [], "now": NOW,
    }  # fmt: skip
    values.update(fields)
    return Facts(**values)


def counted(source: dict[Any, int], written: dict[Any, int]) -> dict[str, dict[Any, int]]:
    return {SOURCE: source, WRITTEN: written}


def test_a_clean_checkpoint_reconciles_window_by_window_with_its_lag_and_health() -> None:
    one = state(1, attempts=3, retries=2, unknown_outcomes=1, counters=PublishCounters(missing=0))
    key = ("j", 1)
    report = judge(
        facts(
            one,
            task_counts={key: counted({W0: 2, W1: 3}, {W0: 2, W1: 3})},
            committed={key: {W0: 2, W1: 3}},
            live_files=[LiveFile("/w/a.parquet", 5, 101)],
            deep_counts={key: {W0: 2, W1: 3}},
        ),
        Thresholds(),
    )
    assert report.ok and report.problems == () and report.pending == ()
    assert report.checkpoints == (
        CheckpointLine("j", 1, "committed", 101, COMMITTED_AT, 5, 5, 5, 5, 0.0, 0.0, True, ""),
    )
    assert report.windows == (
        WindowLine(W0, True, 2, 2, 2, 2, 0.0, 0.0, True),
        WindowLine(W1, True, 3, 3, 3, 3, 0.0, 0.0, True),
    )
    # waited 600 s for 2 rows and 540 s for 3: half the rows by 540 s, all by 600 s
    assert report.lag == Lag(540.0, 600.0)
    assert report.health == CommitHealth(1, 3, 2, 2, 1, 0)
    assert (report.table, report.deep, report.generated_at, report.until) == ("ns.t", True, NOW, NOW)


def test_loss_and_duplication_name_every_count_and_the_window_that_does_not_add_up() -> None:
    short, double = ("j", 2), ("j", 3)
    report = judge(
        facts(
            state(2),
            state(3, counters=PublishCounters(missing=2)),
            declared={short: {None: 10}},
            task_counts={short: counted({}, {None: 8}), double: counted({None: 4}, {None: 4})},
            committed={short: {None: 8}, double: {None: 4}},
            live_files=[
                LiveFile("/w/b.parquet", 8, 102),
                LiveFile("/w/c.parquet", 4, 103),
                LiveFile("/w/d.parquet", 2, 103),
            ],
        ),
        Thresholds(),
    )
    assert not report.ok
    assert report.checkpoints == (
        CheckpointLine("j", 2, "committed", 102, COMMITTED_AT, 10, 8, 8, 8, 20.0, 0.0, False, "written -2 vs source"),
        CheckpointLine("j", 3, "committed", 103, COMMITTED_AT, 4, 4, 4, 6, 0.0, 50.0, False,
                       "readable +2 vs committed"),
    )  # fmt: skip
    assert report.problems == (
        Problem("loss", "checkpoint 2 of job j: source 10, written 8, committed 8, readable 8; the counts part between "
                "source and written", "j", 2, stage="source-written"),
        Problem("duplication", "checkpoint 3 of job j: source 4, written 4, committed 4, readable 6; the counts part "
                "between committed and readable", "j", 3, stage="committed-readable"),
        Problem("window-mismatch", "window without event time: source 14, written 12, committed 12"),
    )  # fmt: skip
    assert report.windows == (WindowLine(None, True, 14, 12, 12, None, 100 * 2 / 14, 0.0, False),)
    assert report.health.files_missing == 2 and report.lag == Lag(None, None)


def test_tolerances_let_a_small_loss_or_duplication_pass() -> None:
    key = ("j", 1)
    shown = facts(
        state(1),
        task_counts={key: counted({None: 100}, {None: 99})},
        committed={key: {None: 99}},
        live_files=[LiveFile("/w/a.parquet", 99, 101)],
    )
    assert not judge(shown, Thresholds()).ok
    assert judge(shown, Thresholds(max_loss_pct=1.0)).ok
    assert not judge(shown, Thresholds(max_loss_pct=0.99)).ok
    doubled = facts(
        state(1),
        task_counts={key: counted({None: 100}, {None: 100})},
        committed={key: {None: 100}},
        live_files=[LiveFile("/w/a.parquet", 100, 101), LiveFile("/w/b.parquet", 1, 101)],
    )
    assert judge(doubled, Thresholds(max_duplication_pct=1.0)).ok
    # one row too many, readable only: the windows (written, committed) add up
    assert [p.kind for p in judge(doubled, Thresholds(max_duplication_pct=0.5)).problems] == ["duplication"]


def test_rows_removed_on_purpose_are_shown_and_never_counted_as_loss() -> None:
    report = judge(
        facts(
            state(1, "rolled-back", snapshot_id=101, records=5, source_records=5),
            state(
                2,
                "abandoned",
                records=7,
                abandon_reason="bad data",
                abandoned_by="ops",
                abandoned_at=T + timedelta(hours=1),
            ),
            state(
                3,
                "abandoned",
                records=4,
                abandon_reason="replayed elsewhere",
                acknowledged_by="lead",
                acknowledged_at=T + timedelta(hours=2),
            ),
            state(4, records=6),
            state(5, records=3),
            off_branch=frozenset({("j", 4)}),
            gone=frozenset({("j", 5)}),
        ),
        Thresholds(),
    )
    rollback = "removed by a rollback (information, not loss)"
    gone = ("no longer in the table: its snapshot was expired and none of its files are live, and no retained "
            "snapshot removed them (another tool's rollback, or a rewrite whose snapshot was expired too)")  # fmt: skip
    assert report.checkpoints == (
        CheckpointLine("j", 1, "rolled-back", 101, None, 5, 5, 0, 0, 0.0, 0.0, True, rollback),
        CheckpointLine("j", 2, "abandoned", None, None, 0, 7, 0, 0, 0.0, 0.0, True,
                       "abandoned by an operator (information, not loss)"),
        CheckpointLine("j", 3, "abandoned", None, None, 0, 4, 0, 0, 0.0, 0.0, True,
                       "abandoned by an operator (information, not loss)"),
        CheckpointLine("j", 4, "rolled-back", 104, COMMITTED_AT, 0, 6, 0, 0, 0.0, 0.0, True, rollback),
        CheckpointLine("j", 5, "rolled-back", 105, COMMITTED_AT, 0, 3, 0, 0, 0.0, 0.0, True,
                       f"{gone} (information, not loss)"),
    )  # fmt: skip
    assert report.problems == (
        Problem("rolled-back", "checkpoint 1 of job j: removed by a rollback; its 5 rows are not in the table",
                "j", 1, severity="info"),
        Problem("abandoned", "checkpoint 2 of job j: abandoned by ops at 2026-05-01T01:00:00+00:00 (bad data); its 7 "
                "rows are not in the table; acknowledge with: icecommit abandon ns.t --job j --checkpoint 2 --ack",
                "j", 2),
        Problem("abandoned", "checkpoint 3 of job j: abandoned (replayed elsewhere); its 4 rows are not in the "
                "table; acknowledged by lead", "j", 3, severity="info"),
        Problem("rolled-back", "checkpoint 4 of job j: removed by a rollback; its 6 rows are not in the table",
                "j", 4, severity="info"),
        Problem("rolled-back", f"checkpoint 5 of job j: {gone}; its 3 rows are not in the table", "j", 5,
                severity="info"),
    )  # fmt: skip
    assert not report.ok  # an abandon nobody acknowledged is an error
    assert report.windows == () and report.health.checkpoints == 5
    acknowledged = judge(facts(state(3, "abandoned", acknowledged_at=T, acknowledged_by="lead")), Thresholds())
    assert acknowledged.ok


def test_pending_checkpoints_wait_in_open_windows_until_they_are_stuck() -> None:
    fresh, due, stuck = ("j", 6), ("j", 7), ("j", 8)
    report = judge(
        facts(
            state(6, "prepared", prepared_at=NOW - timedelta(minutes=30)),
            state(7, "prepared", prepared_at=NOW - timedelta(hours=1)),  # exactly the limit: still pending
            state(8, "prepared", prepared_at=NOW - timedelta(hours=3)),
            task_counts={
                fresh: counted({W0: 5}, {W0: 4}),
                due: counted({W1: 1}, {W1: 1}),
                stuck: counted({W1: 2}, {W1: 2}),
            },
        ),
        Thresholds(),
    )
    pending = "prepared, not committed yet (pending, not loss)"
    assert report.checkpoints == ()
    assert report.pending == (
        CheckpointLine("j", 6, "pending", None, None, 5, 4, 0, 0, 0.0, 0.0, True, pending),
        CheckpointLine("j", 7, "pending", None, None, 1, 1, 0, 0, 0.0, 0.0, True, pending),
        CheckpointLine("j", 8, "stuck", None, None, 2, 2, 0, 0, 0.0, 0.0, False,
                       "prepared 3:00:00 ago and still not committed"),
    )  # fmt: skip
    assert report.problems == (
        Problem("stuck", "checkpoint 8 of job j has been prepared for 3:00:00 (more than 1:00:00) without a commit: "
                "run the job or its recover(), or give it up: icecommit abandon ns.t --job j --checkpoint 8 "
                "--reason TEXT", "j", 8),
    )  # fmt: skip
    # open windows are shown with what has arrived, and do not fail
    assert report.windows == (
        WindowLine(W0, False, 5, 4, 0, None, 100.0, 0.0, True),
        WindowLine(W1, False, 3, 3, 0, None, 100.0, 0.0, True),
    )
    assert not report.ok and judge(facts(state(6, "prepared", prepared_at=NOW)), Thresholds()).ok


def test_rows_are_followed_through_rewrites_deletes_and_row_level_deletes() -> None:
    key = ("j", 1)
    fate = Fate(readable=Fraction(6), removed={(201, "delete"): Fraction(3)}, untraceable=Fraction(1),
                compacted=Fraction(6), held={path_key("/w/compacted.parquet"): Fraction(6)})  # fmt: skip
    report = judge(
        facts(
            state(1, records=10),
            task_counts={key: counted({None: 10}, {None: 10})},
            committed={key: {None: 10}},
            fates={key: fate},
            row_deletes={key: {(202, "row-level delete"): 2}},
            live_files=[LiveFile("/w/compacted.parquet", 6, 300)],
        ),
        Thresholds(),
    )
    note = ("6 readable in files another snapshot rewrote; 3 removed by snapshot 201 (delete); 2 removed by snapshot "
            "202 (row-level delete); 1 untraceable")  # fmt: skip
    assert report.checkpoints == (CheckpointLine("j", 1, "committed", 101, COMMITTED_AT, 10, 10, 10, 4, 0.0, 0.0,
                                                 True, note, removed=5),)  # fmt: skip
    assert report.problems == (
        Problem("removed", "checkpoint 1 of job j: 3 of its rows were removed on purpose by snapshot 201 (a delete); "
                "information, not loss", "j", 1, severity="info"),
        Problem("removed", "checkpoint 1 of job j: 2 of its rows were removed on purpose by snapshot 202 (row-level "
                "deletes); information, not loss", "j", 1, severity="info"),
        Problem("untraceable", "checkpoint 1 of job j: 1 of its rows are no longer in its files, and the snapshot "
                "that removed or rewrote them has been expired, so reconciliation cannot tell whether they were "
                "compacted, deleted on purpose or lost; reconcile before expiring another engine's rewrites to keep "
                "the trail", "j", 1, severity="warning"),
    )  # fmt: skip
    assert report.ok  # removed on purpose and untraceable rows are accounted for, not lost


def test_the_operation_that_removed_rows_is_named_in_words() -> None:
    from icecommit.metrics.judge import _removal

    assert [_removal(op) for op in ("overwrite", "delete", "replace", "row-level delete")] == [
        "an overwrite", "a delete", "a replace", "row-level deletes"
    ]  # fmt: skip


def test_a_missing_file_names_the_rows_a_compaction_rewrote_into_it_but_not_its_own() -> None:
    rewritten, own = ("j", 1), ("j", 2)
    report = judge(
        facts(
            state(1, records=10),
            state(2, records=4),
            task_counts={rewritten: counted({None: 10}, {None: 10}), own: counted({None: 4}, {None: 4})},
            committed={rewritten: {None: 10}, own: {None: 4}},
            live_files=[LiveFile("/w/compacted.parquet", 10, 300), LiveFile("/w/own.parquet", 4, 102)],
            fates={
                rewritten: Fate(
                    readable=Fraction(10), compacted=Fraction(10), held={path_key("/w/compacted.parquet"): Fraction(10)}
                ),
                own: Fate(readable=Fraction(4), held={path_key("/w/own.parquet"): Fraction(4)}),
            },
            missing_paths=["/w/compacted.parquet", "file:///w/own.parquet"],
            deep_counts={rewritten: {}, own: {}},  # nothing of either could be read
        ),
        Thresholds(),
    )
    assert [(line.checkpoint_id, line.readable, line.ok) for line in report.checkpoints] == [
        (1, 0, False),
        (2, 0, False),
    ]
    assert [p for p in report.problems if p.kind == "missing-file"] == [
        Problem("missing-file", "data file referenced by the table is missing: /w/compacted.parquet; it holds 10 "
                "row(s) of checkpoint 1 of job j, rewritten into it by a compaction", path="/w/compacted.parquet"),
        Problem("missing-file", "data file referenced by the table is missing: file:///w/own.parquet",
                path="file:///w/own.parquet"),
    ]  # fmt: skip


def test_streaming_query_input_is_information_unless_every_row_must_land() -> None:
    keys = {c: ("j", c) for c in range(1, 6)}
    report = judge(
        facts(
            *(state(c, records=10, **({"query_id": "q"} if c == 5 else {})) for c in range(1, 6)),
            task_counts={k: counted({None: 10}, {None: 10}) for k in keys.values()},
            committed={k: {None: 10} for k in keys.values()},
            live_files=[LiveFile(f"/w/{c}.parquet", 10, 100 + c) for c in range(1, 6)],
            query_input={keys[1]: (12, False), keys[2]: (12, True)},
            routed_input={keys[3]: (10, True, {"ns.b": 3, "ns.a": 6}), keys[4]: (10, False, {"ns.a": 12})},
        ),
        Thresholds(),
    )
    assert [(line.checkpoint_id, line.source, line.ok, line.note) for line in report.checkpoints] == [
        (1, 10, True, "query input 12"),
        (2, 12, False, "written -2 vs source"),
        (3, 10, True, "routed: query input 10, written to all its tables 9"),
        (4, 10, True, "routed: query input 10, written to all its tables 12"),
        (5, 10, True, "source count not recorded"),
    ]
    assert [p for p in report.problems if p.kind != "window-mismatch"] == [
        Problem("query-input", "checkpoint 1 of job j: the streaming query's source reported 12 row(s) and it wrote "
                "10 (+2 the query itself did not write: a filter, an aggregation); information (declare "
                "streaming_sink(..., preserves_rows=True) to count them as loss)", "j", 1, severity="info"),
        Problem("loss", "checkpoint 2 of job j: source 12, written 10, committed 10, readable 10; the counts part "
                "between source and written", "j", 2, stage="source-written"),
        Problem("loss", "checkpoint 3 of job j: the streaming query's source reported 10 row(s) for the tables it "
                "routes to, and they got 9 (ns.a 6, ns.b 3); loss (the sink was declared preserves_rows=True)",
                "j", 3, stage="source-written"),
        Problem("query-input", "checkpoint 4 of job j: the streaming query's source reported 10 row(s) for the "
                "tables it routes to, and they got 12 (ns.a 12); information (declare streaming_sink(..., "
                "preserves_rows=True) to count a shortfall as loss)", "j", 4, severity="info"),
    ]  # fmt: skip


def test_what_else_the_table_and_the_state_show_is_named() -> None:
    first, second = ("j", 1), ("j", 2)
    marked = PartitionStatus(
        "ns.t",
        "ts_hour",
        0,
        "ts_hour=2026-05-01-00",
        T,
        T + timedelta(hours=1),
        T + timedelta(hours=1),
        timedelta(0),
        ("j",),
        5,
        7,
        T + timedelta(hours=2),
        "j",
        None,
    )
    report = judge(
        facts(
            state(1, records=5, future_records=3),
            state(2, records=5),
            state(9, "prepared", prepared_at=NOW, future_records=4),  # not in the table: its future rows not reported
            job_id="j",
            task_counts={first: counted({None: 5}, {None: 5}), second: counted({None: 5}, {None: 5})},
            committed={first: {None: 5}, second: {None: 5}},
            live_files=[
                LiveFile("/w/1.parquet", 5, 101),
                LiveFile("/w/2.parquet", 5, 102),
                LiveFile("/w/2.parquet", 5, 103),
            ],
            ancestry_counts=Counter({first: 2, second: 1, ("k", 1): 3}),
            ignored=[("j", 2, 0, 1, 1234)],
            landed_at={second: T + timedelta(minutes=1), first: T + timedelta(minutes=2)},
            equality_deletes=[
                LiveDeleteFile("/w/eq1.parquet", True, 2, 105, 5),
                LiveDeleteFile("/w/eq2.parquet", True, 3, 104, 4),
            ],
            partitions=[marked],
        ),
        Thresholds(),
    )
    assert report.problems == (
        Problem("double-commit", "checkpoint 1 of job j is in the ancestry 2 times", "j", 1),
        Problem("duplicate-file", "data file is live 2 times (snapshots 102, 103): /w/2.parquet", path="/w/2.parquet"),
        Problem("ignored-metrics", "checkpoint 2 of job j: metrics of task 0 attempt 1 (1,234 records) come from an "
                "attempt the checkpoint did not accept; they are left out of every count", "j", 2, severity="warning"),
        Problem("out-of-order", "checkpoint 1 of job j reached the table at 2026-05-01T00:02:00+00:00, after "
                "checkpoint 2 (at 2026-05-01T00:01:00+00:00); the job's checkpoints did not land in order", "j", 1,
                severity="warning"),
        Problem("future-records", "checkpoint 1 of job j: 3 row(s) had event times further ahead of the clock than "
                "the table's icecommit.max-future-skew when prepared; they are in the table but did not move the "
                "watermark (a wrong device clock or a parsing bug?)", "j", 1, severity="warning"),
        Problem("equality-deletes", "2 equality delete file(s) with 5 delete row(s) (snapshots 104, 105) remove rows "
                "by value on purpose; they cannot be told apart by checkpoint, so readable counts do not subtract "
                "them", severity="info"),
        Problem("late-records", "2 record(s) committed into ts_hour=2026-05-01-00 after it was published complete at "
                "2026-05-01T02:00:00+00:00 with 5 (they are in the table)", severity="info"),
    )  # fmt: skip
    assert report.partitions == (
        PartitionLine("ts_hour=2026-05-01-00", T + timedelta(hours=1), T + timedelta(hours=2), 5, 7, 2),
    )
    assert not report.ok  # the double commit; the rest are warnings and information
    in_order = facts(state(1), state(2), landed_at={("j", 1): T, ("j", 2): T, ("j", 3): T + timedelta(minutes=1)})
    assert not [p for p in judge(in_order, Thresholds()).problems if p.kind == "out-of-order"]


def test_the_weighted_percentile_is_the_first_value_whose_running_weight_reaches_the_share() -> None:
    from icecommit.metrics.judge import _weighted_percentile

    assert _weighted_percentile([], 0.5) is None
    assert _weighted_percentile([(20.0, 0), (10.0, 0)], 0.5) is None
    assert _weighted_percentile([(20.0, 1), (10.0, 1)], 0.5) == 10.0  # exactly half reached at 10
    assert _weighted_percentile([(10.0, 1), (20.0, 3)], 0.5) == 20.0  # 1 of 4 is not half
    assert _weighted_percentile([(10.0, 2), (20.0, 1), (30.0, 2)], 0.5) == 20.0  # 3 of 5 by 20
    assert _weighted_percentile([(10.0, 2), (20.0, 1), (30.0, 2)], 0.99) == 30.0


def test_a_checkpoint_without_metrics_counts_what_its_state_recorded() -> None:
    # committed before per-window metrics were kept (or with them lost): the state's counts
    landed, empty, emptied = state(1, records=5, source_records=5), state(2, records=0, snapshot_id=None), state(3)
    report = judge(facts(landed, empty, emptied, live_files=[LiveFile("/w/a.parquet", 5, 101)]), Thresholds())
    assert [(c.checkpoint_id, c.status, c.source, c.written, c.committed, c.readable, c.loss_pct) for c in
            report.checkpoints] == [(1, "committed", 5, 5, 5, 5, 0.0), (2, "empty", 0, 0, 0, 0, 0.0),
                                    (3, "committed", 0, 0, 0, 0, 0.0)]  # fmt: skip
    # a committed checkpoint none of whose files is live any more, and no rewrite explains it
    gone = judge(facts(state(4, records=5, source_records=5)), Thresholds())
    assert [(c.committed, c.readable, c.loss_pct, c.ok) for c in gone.checkpoints] == [(5, 0, 100.0, False)]


def test_a_pending_checkpoint_opens_every_window_it_read_or_wrote() -> None:
    key = ("j", 1)
    report = judge(facts(state(1, "prepared", prepared_at=NOW), task_counts={key: counted({W0: 2}, {W1: 2})}),
                   Thresholds())  # fmt: skip
    assert report.windows == (
        WindowLine(W0, False, 2, 0, 0, None, 100.0, 0.0, True),
        WindowLine(W1, False, 0, 2, 0, None, 0.0, 100.0, True),  # open: shown, not failed
    )


def test_every_window_a_checkpoint_touched_is_counted_at_every_stage() -> None:
    # rows read in W0 landed in W1 and W2 (an event time rewritten by the job), and a deep
    # read found one in W3: each window shows what each stage has of it
    first, second = ("j", 1), ("j", 2)
    w2, w3 = T + timedelta(minutes=2), T + timedelta(minutes=3)
    report = judge(
        facts(
            state(1, committed_at=T + timedelta(minutes=5)),
            state(2, committed_at=T + timedelta(minutes=5)),
            task_counts={first: counted({W0: 2}, {W0: 1, W1: 1}), second: counted({W0: 1}, {W0: 1})},
            committed={first: {W0: 1, w2: 1}, second: {W0: 1}},
            deep_counts={first: {W0: 1, w3: 1}, second: {W0: 1}},
            live_files=[LiveFile("/w/1.parquet", 2, 101), LiveFile("/w/2.parquet", 1, 102)],
        ),
        Thresholds(),
    )
    assert [(w.window_start, w.source, w.written, w.committed, w.readable) for w in report.windows] == [
        (W0, 3, 2, 2, 2), (W1, 0, 1, 0, 0), (w2, 0, 0, 1, 0), (w3, 0, 0, 0, 1)
    ]  # fmt: skip
    assert [p.message for p in report.problems if p.kind == "window-mismatch"] == [
        "window 2026-05-01T00:00:00+00:00: source 3, written 2, committed 2, readable 2",
        "window 2026-05-01T00:01:00+00:00: source 0, written 1, committed 0, readable 0",
        "window 2026-05-01T00:02:00+00:00: source 0, written 0, committed 1, readable 0",
        "window 2026-05-01T00:03:00+00:00: source 0, written 0, committed 0, readable 1",
    ]
    # the lag is weighted by committed rows: 3 rows of W0 (300 s) and 1 of W2 (180 s)
    assert report.lag == Lag(300.0, 300.0)


def test_rows_without_event_time_are_a_window_of_their_own_listed_first() -> None:
    key = ("j", 1)
    report = judge(
        facts(state(1), task_counts={key: counted({W1: 1, None: 1, W0: 1}, {W1: 1, None: 1, W0: 1})},
              committed={key: {W1: 1, None: 1, W0: 1}}, live_files=[LiveFile("/w/1.parquet", 3, 101)]),
        Thresholds(),
    )  # fmt: skip
    assert [w.window_start for w in report.windows] == [None, W0, W1]
    assert report.lag == Lag(540.0, 600.0)  # rows without event time have no lag


def test_with_rewritten_or_removed_rows_the_windows_take_the_committed_counts() -> None:
    key = ("j", 1)
    shared = {"task_counts": {key: counted({W0: 4}, {W0: 4})}, "committed": {key: {W0: 4}}}
    deep = judge(facts(state(1), **shared, deep_counts={key: {W0: 3}}), Thresholds())
    assert [(w.readable, w.ok) for w in deep.windows] == [(3, False)]  # its own files hold only 3 of 4
    rewritten = judge(
        facts(state(1), **shared, deep_counts={key: {W0: 1}},
              fates={key: Fate(readable=Fraction(4), compacted=Fraction(3))}),
        Thresholds(),
    )  # fmt: skip
    assert [(w.readable, w.ok) for w in rewritten.windows] == [(4, True)]  # 3 are in a compacted file


def test_row_level_deletes_add_to_a_removal_the_lineage_already_counted() -> None:
    key = ("j", 1)
    report = judge(
        facts(
            state(1),
            task_counts={key: counted({None: 6}, {None: 6})},
            committed={key: {None: 6}},
            live_files=[LiveFile("/w/1.parquet", 6, 101)],
            fates={key: Fate(readable=Fraction(6), removed={(202, "row-level delete"): Fraction(1)})},
            row_deletes={key: {(202, "row-level delete"): 2}},
        ),
        Thresholds(),
    )
    [line] = report.checkpoints
    assert (line.readable, line.ok) == (4, False)  # 6 - 2 readable, 3 removed: 7 accounted of 6
    assert "3 removed by snapshot 202 (row-level delete)" in line.note


def test_a_streaming_batch_that_wrote_what_its_query_read_has_nothing_to_report() -> None:
    key = ("j", 1)
    report = judge(
        facts(state(1, records=10, query_id="q"), task_counts={key: counted({None: 10}, {None: 10})},
              committed={key: {None: 10}}, live_files=[LiveFile("/w/1.parquet", 10, 101)],
              query_input={key: (10, False)}),
        Thresholds(),
    )  # fmt: skip
    assert report.ok and report.problems == () and report.checkpoints[0].note == ""


def test_a_routed_shortfall_is_information_unless_the_sink_preserves_rows() -> None:
    key = ("j", 1)

    def routed(kept: bool) -> Problem:
        report = judge(
            facts(state(1, records=9), task_counts={key: counted({None: 9}, {None: 9})}, committed={key: {None: 9}},
                  live_files=[LiveFile("/w/1.parquet", 9, 101)], routed_input={key: (10, kept, {"ns.a": 9})}),
            Thresholds(),
        )  # fmt: skip
        [problem] = report.problems
        return problem

    assert (routed(False).kind, routed(False).severity) == ("query-input", "info")
    assert routed(False).message.endswith("information (declare streaming_sink(..., preserves_rows=True) to count a "
                                          "shortfall as loss)")  # fmt: skip
    assert (routed(True).kind, routed(True).severity) == ("loss", "error")


def test_a_commit_that_differs_from_what_was_written_says_by_how_much() -> None:
    key = ("j", 1)
    report = judge(
        facts(state(1), task_counts={key: counted({None: 5}, {None: 5})}, committed={key: {None: 4}},
              live_files=[LiveFile("/w/1.parquet", 4, 101)]),
        Thresholds(),
    )  # fmt: skip
    assert report.checkpoints[0].note == "committed -1 vs written"


def test_a_missing_file_names_every_checkpoint_rewritten_into_it() -> None:
    one, two = ("j", 1), ("k", 2)
    path = "/w/compacted.parquet"
    report = judge(
        facts(state(1), state(2, job_id="k"), missing_paths=[path],
              fates={one: Fate(readable=Fraction(3), held={path_key(path): Fraction(3)}),
                     two: Fate(readable=Fraction(2), held={path_key(path): Fraction(2)})}),
        Thresholds(),
    )  # fmt: skip
    assert [p.message for p in report.problems if p.kind == "missing-file"] == [
        "data file referenced by the table is missing: /w/compacted.parquet; it holds 3 row(s) of checkpoint 1 of "
        "job j, rewritten into it by a compaction; it holds 2 row(s) of checkpoint 2 of job k, rewritten into it by "
        "a compaction"
    ]  # fmt: skip


def test_the_report_names_what_was_asked() -> None:
    since = T - timedelta(days=1)
    thresholds = Thresholds(max_loss_pct=0.5)
    report = judge(facts(job_id="j", since=since), thresholds)
    assert (report.job_id, report.since, report.until, report.thresholds, report.deep) == (
        "j", since, NOW, thresholds, False
    )  # fmt: skip


def test_rows_removed_by_many_snapshots_are_one_note_and_one_finding_naming_the_largest() -> None:
    key = ("j", 1)
    removals = {(200 + i, "row-level delete"): Fraction(1 + (i == 2) * 4) for i in range(6)}  # 10 rows by 6
    report = judge(
        facts(
            state(1, records=20),
            task_counts={key: counted({None: 20}, {None: 20})},
            committed={key: {None: 20}},
            live_files=[LiveFile("/w/1.parquet", 10, 101)],
            fates={key: Fate(readable=Fraction(10), removed=removals)},
        ),
        Thresholds(),
    )
    [line] = report.checkpoints
    assert line.ok and "10 removed by 6 snapshots (row-level deletes)" in line.note
    [finding] = [p for p in report.problems if p.kind == "removed"]
    assert finding.severity == "info" and "the most: snapshot 202 5, snapshot 200 1, snapshot 201 1" in finding.message


def test_the_advice_names_the_stage_where_the_counts_part() -> None:
    """An on-call engineer reads what to do for the stage that lost the rows: a source
    count the writers never saw, files written and not committed, or committed rows that
    are not readable (only the last one sends them to --deep)."""
    from icecommit.metrics import render

    by_source, by_commit, by_read = ("j", 1), ("j", 2), ("j", 3)
    report = judge(
        facts(
            state(1), state(2), state(3),
            declared={by_source: {None: 10}, by_commit: {None: 10}, by_read: {None: 10}},
            task_counts={by_source: counted({}, {None: 7}), by_commit: counted({}, {None: 10}),
                         by_read: counted({}, {None: 10})},
            committed={by_source: {None: 7}, by_commit: {None: 6}, by_read: {None: 10}},
            live_files=[LiveFile("/w/a.parquet", 7, 101), LiveFile("/w/b.parquet", 6, 102),
                        LiveFile("/w/c.parquet", 5, 103)],
        ),
        Thresholds(),
    )  # fmt: skip
    losses = [(p.checkpoint_id, p.stage) for p in report.problems if p.kind == "loss"]
    assert losses == [(1, "source-written"), (2, "written-committed"), (3, "committed-readable")]
    text = render.markdown(report)
    for stage in ("source-written", "written-committed", "committed-readable"):
        assert f"What to do: {render.STAGE_ADVICE[('loss', stage)]}." in text

    only_source = judge(
        facts(state(1), declared={by_source: {None: 10}}, task_counts={by_source: counted({}, {None: 7})},
              committed={by_source: {None: 7}}, live_files=[LiveFile("/w/a.parquet", 7, 101)]),
        Thresholds(),
    )  # fmt: skip
    text = render.markdown(only_source)
    assert "filtered them" in text and "preserves_rows" in text
    assert "--deep to read the files, look for" not in text  # not the readable stage's advice
    assert "filtered them" in render.html(only_source)


def test_an_upserts_source_rows_are_written_deleted_by_change_type_or_superseded_in_their_checkpoint() -> None:
    """A batch of 6 change rows of 4 keys (2 rows superseded by a later row of their key),
    1 key deleted by its change type, 3 rows written: the query's 6 are all accounted for;
    one row fewer written is a loss between source and written."""
    from icecommit.metrics.judge import Overwrite

    key = ("j", 1)

    def report(written: int, kept: bool) -> Any:
        return judge(
            facts(
                state(1),
                task_counts={key: counted({None: written}, {None: written})},
                committed={key: {None: written}},
                live_files=[LiveFile("/w/a.parquet", written, 101)],
                query_input={key: (6, kept)},
                overwrites={101: Overwrite(key, 0, 0, 1, mode="upsert", changes=(3, 0, 1), received=(6, 4, 1))},
            ),
            Thresholds(),
        )

    for kept in (True, False):
        ok = report(3, kept)
        assert ok.ok and not [p for p in ok.problems if p.kind in ("loss", "query-input")], ok.problems
        [line] = ok.checkpoints
        assert (line.source, line.written, line.consumed, line.loss_pct) == (6, 3, 3, 0.0)
        assert "received 6: 3 written, 1 deleted by their change type, 2 superseded in the checkpoint" in line.note
    short = report(2, True)
    assert [(p.kind, p.stage) for p in short.problems if p.severity == "error"] == [("loss", "source-written")]
    assert short.checkpoints[0].loss_pct == 100 / 3  # 1 of the 3 it should have written
    assert render_summary(short)["loss"] == 1


def render_summary(report: Any) -> dict[str, Any]:
    from icecommit.metrics import render

    return render.summary_counts(report)
