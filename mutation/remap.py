"""Keep the equivalent mutants' reasons across a move. An entry of ``equivalent.toml`` whose
mutant is gone (or is now another mutant) is looked for among the mutants of its own
function (renumbered by an edit) and of the functions its code moved to (``MOVED``), by
its changed lines, and renamed when exactly one matches. Entries that match nothing are
listed: their code changed, so the mutation run judges them again and the report lists
any survivor among them as a gap to explain.

    .venv/bin/python -m mutation.remap          # after a run (its mutants/ holds every mutant)
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable

from mutation.run import ROOT, changed_lines, load_equivalent, write_equivalent

#: function (mutmut's mangled name) -> the functions its code went to
MOVED: dict[str, tuple[str, ...]] = {
    "icecommit.committer.committer.x__files_decide": ("icecommit.committer.planning.x__files_decide",),
    "icecommit.committer.committer.x__all_live": ("icecommit.committer.planning.x_all_live",),
    "icecommit.committer.committer.x__field_ids": ("icecommit.committer.checkpoint_commit.x__field_ids",),
    "icecommit.committer.committer.xǁGlobalCommitterǁ_record_landed_recommit": (
        "icecommit.committer.recording.xǁCheckpointRecorderǁlanded_recommit",
    ),
    "icecommit.committer.committer.xǁGlobalCommitterǁ_staged_paths": ("icecommit.committer.staging.x_staged_paths",),
    "icecommit.committer.committer.xǁGlobalCommitterǁ_snapshot_that_added": (
        "icecommit.committer.validators.x_snapshot_that_added",
    ),
    "icecommit.committer.committer.xǁGlobalCommitterǁ_decide": (
        "icecommit.committer.planning.x_plan_checkpoint",
        "icecommit.committer.committer.xǁGlobalCommitterǁ_plan_on",
    ),
    "icecommit.committer.committer.xǁGlobalCommitterǁabandon": ("icecommit.committer.fate.x_abandon",),
    "icecommit.committer.committer.xǁGlobalCommitterǁ_claim": (
        "icecommit.committer.committer.xǁGlobalCommitterǁ_claim",
        "icecommit.committer.checkpoint_commit.x_claim_table",
    ),
    "icecommit.committer.committer.xǁGlobalCommitterǁ_properties_with": (
        "icecommit.committer.checkpoint_commit.xǁCommitCheckpointǁ_properties_with",
    ),
    "icecommit.committer.committer.xǁGlobalCommitterǁ_commit_prepared": (
        "icecommit.committer.committer.xǁGlobalCommitterǁ_commit_prepared",
        "icecommit.committer.committer.xǁGlobalCommitterǁ_append",
        "icecommit.committer.recording.xǁCheckpointRecorderǁoutcome",
        "icecommit.committer.protocol.x_run",
        "icecommit.committer.protocol.x__resolve_unknown",
    ),
    "icecommit.state.checkpoints.xǁCheckpointStoreǁ_add_metrics": (
        "icecommit.state.samples.xǁMetricSampleStoreǁ_add_metrics",
    ),
    "icecommit.core.lineage.x_removals_of": ("icecommit.catalog.removals.x_removals_of",),
    "icecommit.state.checkpoints.x__sqlite_rows": ("icecommit.state.samples.x__sqlite_rows",),
    "icecommit.state.checkpoints.x__copy_rows": ("icecommit.state.samples.x__copy_rows",),
    # append.py became checkpoint_commit.py (CommitCheckpoint replaced AppendCheckpoint);
    # snapshot_that_added went to the shared validators
    "icecommit.committer.append.x__field_ids": ("icecommit.committer.checkpoint_commit.x__field_ids",),
    "icecommit.committer.append.x_snapshot_that_added": (
        "icecommit.committer.validators.x_snapshot_that_added",
        "icecommit.committer.validators.x_live_files",
    ),
    # the manifest walks became the shared validators' live_files
    "icecommit.committer.planning.x_all_live": ("icecommit.committer.validators.x_live_files",),
    "icecommit.committer.append.xǁAppendCheckpointǁ_landed_since_plan": (
        "icecommit.committer.checkpoint_commit.xǁCommitCheckpointǁ_landed_since_plan",
    ),
    "icecommit.committer.append.xǁAppendCheckpointǁ_properties_with": (
        "icecommit.committer.checkpoint_commit.xǁCommitCheckpointǁ_properties_with",
    ),
    "icecommit.committer.append.xǁClaimTableǁcheck": ("icecommit.committer.checkpoint_commit.xǁClaimTableǁcheck",),
    "icecommit.committer.append.xǁClaimTableǁfind": ("icecommit.committer.checkpoint_commit.xǁClaimTableǁfind",),
    "icecommit.committer.committer.xǁGlobalCommitterǁprepare": (
        "icecommit.committer.committer.xǁGlobalCommitterǁprepare_planned",
        "icecommit.committer.staging.x_stage_checkpoint",
        "icecommit.committer.staging.x_same_files_or_error",
    ),
}


def function_of(mutant: str) -> str:
    return mutant.rsplit("__mutmut_", 1)[0]


@functools.cache
def source_of_mutants() -> dict[str, str]:
    """Every mutant in the last run's mutants/ (mutmut's .meta files), with its source file."""
    mutants = ROOT / "mutants"
    return {
        name: meta.relative_to(mutants).as_posix().removesuffix(".meta")
        for meta in sorted(mutants.rglob("*.meta"))
        for name in json.loads(meta.read_text()).get("exit_code_by_key", {})
    }


def mutants_of(functions: Iterable[str]) -> list[str]:
    """Every mutant of ``functions`` in the last run's mutants/."""
    wanted = set(functions)
    return [name for name in source_of_mutants() if function_of(name) in wanted]


def main() -> None:
    from mutmut.mutation.diff_apply import get_diff_for_mutant

    @functools.cache
    def change_of(name: str) -> str | None:
        path = source_of_mutants().get(name)
        if path is None:  # gone from the code
            return None
        try:
            return changed_lines(get_diff_for_mutant(name, path=path))
        except Exception:  # gone from the code
            return None

    entries = load_equivalent()
    kept: dict[str, dict[str, str]] = {}
    renamed, unmatched = [], []
    waiting = []
    for name, entry in entries.items():  # those still where they were keep their name
        if change_of(name) == entry.get("change"):
            kept[name] = entry
        else:
            waiting.append((name, entry))
    for name, entry in waiting:
        # its own function, renumbered by an edit, or the functions its code moved to
        targets = (function_of(name), *MOVED.get(function_of(name), ()))
        matches = [m for m in mutants_of(targets) if m not in kept and change_of(m) == entry.get("change")]
        if len(matches) == 1:
            kept[matches[0]] = entry
            renamed.append(f"{name} -> {matches[0]}")
        else:
            unmatched.append(f"{name} ({len(matches)} candidates)")
            if name not in kept:
                kept[name] = entry
    write_equivalent(kept)
    print(f"renamed {len(renamed)}, unmatched {len(unmatched)} of {len(entries)}")
    for line in renamed:
        print("  renamed", line)
    for line in unmatched:
        print("  unmatched", line)


if __name__ == "__main__":
    main()
