"""Environment failures: the catalog, the state database or storage; an operator acts."""

from __future__ import annotations

from icecommit.core.errors.base import EnvironmentFailureError


class DataFileMissingError(EnvironmentFailureError):
    """A data file of a checkpoint is absent from storage or not the size recorded for it
    (at prepare, or at commit: a staged file lost since). Nothing was committed.

    A staged file confirmed absent has two ways forward: replay the checkpoint from its
    source (written again under the same checkpoint id, it is prepared again from the new
    files and committed once), or abandon it. A later checkpoint of the job waits behind it
    (commits are in order), and its error names the lost one.

    Attributes:
        checkpoint_id: the checkpoint that holds the file.
        path: the first bad file; expected / actual: its recorded size and its size on
            storage (None when absent); bad / total: how many of the checkpoint's files.
        table / job_id: where known.
        staged: whether the checkpoint was prepared (the file was lost after staging).
        waiting_checkpoint_id: the later checkpoint that was asked for and waits behind
            this one (None when this one was asked for).
    """

    def __init__(
        self,
        path: str,
        *,
        checkpoint_id: int,
        expected: int | None,
        actual: int | None,
        bad: int,
        total: int,
        table: str | None = None,
        job_id: str | None = None,
        staged: bool = False,
        waiting: int | None = None,
    ) -> None:
        self.checkpoint_id = checkpoint_id
        self.path = path
        self.expected = expected
        self.actual = actual
        self.bad = bad
        self.total = total
        self.table = table
        self.job_id = job_id
        self.staged = staged
        self.waiting_checkpoint_id = waiting
        what = "is missing from storage" if actual is None else f"has {actual} bytes on storage, {expected} recorded"
        abandon = (
            f"give it up with GlobalCommitter(...).abandon({checkpoint_id}, reason=...) (icecommit abandon) and "
            "write its rows again under a new checkpoint id"
        )
        if staged and actual is None:
            forward = (
                f"nothing was committed. Replay checkpoint {checkpoint_id} from its source (write it again under "
                f"checkpoint id {checkpoint_id}: it is prepared again from the new files and committed once), "
                f"or {abandon}"
            )
        elif staged:
            forward = f"nothing was committed. If the file is damaged for good, {abandon}"
        else:
            forward = "nothing was staged: write the checkpoint again"
        behind = ""
        if waiting is not None:
            job = f" of job {job_id!r}" if job_id else ""
            behind = f"checkpoint {waiting} waits behind checkpoint {checkpoint_id}{job}, which cannot commit: "
        reason = f"{behind}data file {path} {what} ({bad} of {total} files bad); {forward}"
        super().__init__(f"checkpoint {checkpoint_id}: {reason}")

    def behind(self, waiting: int) -> DataFileMissingError:
        """The same error, raised for ``waiting``, a later checkpoint that cannot commit before it."""
        return DataFileMissingError(
            self.path,
            checkpoint_id=self.checkpoint_id,
            expected=self.expected,
            actual=self.actual,
            bad=self.bad,
            total=self.total,
            table=self.table,
            job_id=self.job_id,
            staged=self.staged,
            waiting=waiting,
        )


class PartitionSpecChangedError(EnvironmentFailureError):
    """A checkpoint prepared under a partition spec that the table no longer has (another
    engine's maintenance removed it as unused). Files of an older spec that the table still
    has commit under it; these cannot, because their partition values have no spec to be
    read with. Nothing was committed; abandon it and write its rows again.

    Attributes:
        job_id / checkpoint_id / table: the checkpoint.
        prepared_spec_id / current_spec_id: the spec its files were written for, and the table's.
    """

    def __init__(
        self, job_id: str, checkpoint_id: int, table: str, prepared_spec_id: int, current_spec_id: int
    ) -> None:
        self.job_id = job_id
        self.checkpoint_id = checkpoint_id
        self.table = table
        self.prepared_spec_id = prepared_spec_id
        self.current_spec_id = current_spec_id
        reason = (
            f"job {job_id} in table {table}: prepared under partition spec {prepared_spec_id}, which the table "
            f"no longer has (its spec is now {current_spec_id}); its files cannot be committed. Give it up with "
            f"GlobalCommitter(...).abandon({checkpoint_id}, reason=...) and write its rows again under a new "
            "checkpoint id"
        )
        super().__init__(f"checkpoint {checkpoint_id}: {reason}")


class SchemaChangedError(EnvironmentFailureError):
    """The table's schema changed after a checkpoint was prepared in a way its files cannot
    follow: a required column was added that they lack, so every read of them would fail.
    Nothing was committed; abandon the checkpoint and write its rows again.

    Attributes:
        job_id / checkpoint_id / table: the checkpoint; column: the required column.
    """

    def __init__(self, job_id: str, checkpoint_id: int, table: str, column: str) -> None:
        self.job_id = job_id
        self.checkpoint_id = checkpoint_id
        self.table = table
        self.column = column
        reason = (
            f"job {job_id} in table {table}: required column {column!r} was added after the checkpoint was prepared, "
            f"and its files do not have it (they would be unreadable). Give it up with "
            f"GlobalCommitter(...).abandon({checkpoint_id}, reason=...) and write its rows again under a new "
            "checkpoint id"
        )
        super().__init__(f"checkpoint {checkpoint_id}: {reason}")


class StagedManifestError(EnvironmentFailureError):
    """A prepared checkpoint's staged manifest cannot be read (missing or corrupt), so the
    checkpoint cannot commit; abandoning it lets the job go on.

    Attributes:
        job_id / checkpoint_id / table: the checkpoint; path: the staged manifest.
    """

    def __init__(self, job_id: str, checkpoint_id: int, table: str, path: str, problem: str) -> None:
        self.job_id = job_id
        self.checkpoint_id = checkpoint_id
        self.table = table
        self.path = path
        reason = (
            f"job {job_id} in table {table}: staged manifest {path} {problem}; the checkpoint cannot commit. "
            f"If its data is lost, give it up with GlobalCommitter(...).abandon({checkpoint_id}, reason=...) "
            "so the job can go on"
        )
        super().__init__(f"checkpoint {checkpoint_id}: {reason}")


class UnsafeLocationError(EnvironmentFailureError):
    """A deleting command (orphan sweep, expiry's cleanup) or a table definition would
    reach files that are not the table's own: a location that contains another table's,
    or files in another file system than the table's location. Nothing was deleted.

    Attributes:
        table: the table.
        location: the location or file at fault.
        reason: what is wrong with it.
    """

    def __init__(self, table: str, location: str, reason: str) -> None:
        self.table = table
        self.location = location
        self.reason = reason
        super().__init__(f"table {table}: {reason} ({location}); nothing was deleted")


class CatalogUnavailableError(EnvironmentFailureError):
    """The catalog cannot be opened, or does not exist where only an existing one will do;
    nothing was created.

    Attributes:
        uri: the catalog's database URL (password hidden) or ``catalog NAME``.
        reason: what is wrong.
    """

    def __init__(self, uri: str, reason: str) -> None:
        self.uri = uri
        self.reason = reason
        super().__init__(f"catalog {uri}: {reason}" if not uri.startswith("catalog ") else f"{uri}: {reason}")


class StagingError(EnvironmentFailureError):
    """Storage failed while a checkpoint's manifest was being staged (a full disk, a lost
    connection); nothing was recorded, so preparing again is safe. The original error is
    ``__cause__``.

    Attributes:
        checkpoint_id / path: the checkpoint and the staged manifest being written.
    """

    def __init__(self, checkpoint_id: int, path: str, cause: BaseException) -> None:
        self.checkpoint_id = checkpoint_id
        self.path = path
        super().__init__(
            f"checkpoint {checkpoint_id}: staging {path} failed ({type(cause).__name__}: {cause}); "
            "nothing was recorded: prepare it again once storage is back"
        )


class TableMetadataWriteError(EnvironmentFailureError):
    """Storage failed every time the table's new metadata file was written: a catalog that
    writes it itself (SQL, Glue, Hive) does so before its compare-and-swap, so nothing
    landed. The storage error is ``__cause__``.

    Attributes:
        table: the table; operation: what was being committed.
    """

    def __init__(self, table: str, operation: str, attempts: int, cause: BaseException) -> None:
        self.table = table
        self.operation = operation
        self.attempts = attempts
        super().__init__(
            f"{operation}: writing the table's new metadata file failed {attempts} time(s) "
            f"({type(cause).__name__}: {(str(cause).splitlines() or [''])[0]}); nothing of it landed: run it "
            "again once storage answers (a prepared checkpoint is committed by recover())"
        )


class StateDatabaseError(EnvironmentFailureError):
    """icecommit's state database cannot be used for what was asked; nothing was changed.

    Attributes:
        uri: the state database opened (password hidden).
        reason: what is wrong.
    """

    def __init__(self, uri: str, reason: str) -> None:
        self.uri = uri
        self.reason = reason
        super().__init__(f"state database {uri}: {reason}")


class StateDatabaseUnavailableError(StateDatabaseError):
    """The state database could not be reached or opened (the cause is ``__cause__``);
    the same call succeeds once it is back (a prepared checkpoint is committed by the next
    ``recover()``, never twice)."""

    def __init__(self, uri: str, reason: str) -> None:
        super().__init__(uri, reason)
        self.args = (f"{self.args[0]}; run it again once the database is reachable",)


class StateDatabaseNotConfiguredError(StateDatabaseError):
    """The catalog keeps no database icecommit could use for its state (a REST, Glue or
    Hive catalog) and none is configured: a local file would be a state no other process
    finds, so none is made. Nothing was changed.

    Attributes:
        catalog: the catalog's name.
    """

    def __init__(self, catalog: str, kind: str) -> None:
        self.catalog = catalog
        variable = "PYICEBERG_CATALOG__" + catalog.upper().replace("-", "_") + "__ICECOMMIT__STATE_URI"
        super().__init__(
            "(not configured)",
            f"catalog {catalog} is a {kind}, which keeps no database for icecommit's state, and no state "
            "database is configured; name one (PostgreSQL, e.g. postgresql+psycopg://user@host/db) with the "
            f"catalog property icecommit.state-uri where the catalog is configured (~/.pyiceberg.yaml, or {variable}), "
            "or with ICECOMMIT_STATE_URI (a table that already records a local state file, as its property "
            "icecommit.state.uri says, keeps it when that file's URL is named there)",
        )


class StateSchemaError(StateDatabaseError):
    """The state database was written by a newer icecommit than this one.

    Attributes:
        found / supported: its schema version and the newest this icecommit knows.
    """

    def __init__(self, uri: str, found: int, supported: int) -> None:
        self.found = found
        self.supported = supported
        super().__init__(
            uri,
            f"schema version {found} is newer than this icecommit supports ({supported}); "
            "upgrade icecommit (a database is never downgraded)",
        )


class StateDatabaseMismatchError(StateDatabaseError):
    """The table records another state database than the one opened: committing, expiring
    or sweeping with this one would not see the table's checkpoints.

    Attributes:
        table: the table.
        expected_id / expected_uri: the state database the table records.
        actual_id / uri: the one opened.
    """

    def __init__(self, table: str, *, expected_id: str, expected_uri: str, actual_id: str, uri: str) -> None:
        self.table = table
        self.expected_id = expected_id
        self.expected_uri = expected_uri
        self.actual_id = actual_id
        super().__init__(
            uri,
            f"table {table} keeps its checkpoints in state database {expected_id} ({expected_uri}), "
            f"not in this one ({actual_id}); name that database in the catalog's property icecommit.state-uri "
            "(or ICECOMMIT_STATE_URI, earlier ICECOMMIT_METRICS_URI). "
            f"If the state was moved there on purpose, set the table property icecommit.state.id to {actual_id}",
        )


class CheckpointFeatureError(EnvironmentFailureError):
    """A prepared checkpoint whose commit needs a feature this icecommit does not know (it
    was prepared by a newer version: a schema change, a row delta): committing it as a
    plain append would be wrong, so nothing was committed.

    Attributes:
        job_id / checkpoint_id / table: the checkpoint.
        features: the features it needs that this version does not know.
    """

    def __init__(self, job_id: str, checkpoint_id: int, table: str, features: list[str]) -> None:
        self.job_id = job_id
        self.checkpoint_id = checkpoint_id
        self.table = table
        self.features = features
        super().__init__(
            f"checkpoint {checkpoint_id} of job {job_id!r} in {table} was prepared by a newer icecommit: its commit "
            f"needs {', '.join(features)}, which this version does not know; nothing was committed. Commit it with "
            "the icecommit version that prepared it, or a newer one"
        )


class UnreadableTablesError(EnvironmentFailureError):
    """Other tables of the catalog cannot be read, so no file of this table can be proven
    unreferenced (one of them might share it): the deleting command deleted nothing.

    Attributes:
        table: the table being cleaned; action: what was refused.
        unreadable: each unreadable table and why it could not be read.
    """

    def __init__(self, table: str, action: str, unreadable: dict[str, str]) -> None:
        self.table = table
        self.action = action
        self.unreadable = dict(unreadable)
        shown = "; ".join(f"{name}: {why}" for name, why in sorted(unreadable.items()))
        super().__init__(
            f"table {table}: cannot {action}: {len(unreadable)} other table(s) of the catalog cannot be read, so no "
            f"file can be proven unreferenced ({shown}); nothing was deleted. Repair or drop their catalog entries, "
            "or name each one with --ignore-unreadable TABLE (ignore_unreadable=[...]) to go on without them"
        )


class OverwriteSpansFileError(EnvironmentFailureError):
    """A partition overwrite found a data file, written under another partition spec, whose
    rows may lie both inside a partition it replaces and outside (a ``month`` file when the
    spec is now ``day``): an overwrite replaces whole files, so it would either drop rows of
    partitions it does not touch or keep rows of one it replaces. Nothing was committed.

    A live file of the table: rewrite the table's files under its current spec (Spark's
    ``rewrite_data_files``; icecommit's compaction keeps each file's spec), then
    ``recover()``, or abandon the checkpoint. One of the checkpoint's own files (the spec
    changed after its writers ran): abandon it and write its rows again.

    Attributes:
        job_id / checkpoint_id / table: the checkpoint.
        path: the file; spec_id: its partition spec; partition: the partition replaced;
        own: the file is the checkpoint's own.
    """

    def __init__(
        self, job_id: str, checkpoint_id: int, table: str, *, path: str, spec_id: int, partition: str, own: bool
    ) -> None:
        self.job_id = job_id
        self.checkpoint_id = checkpoint_id
        self.table = table
        self.path = path
        self.spec_id = spec_id
        self.partition = partition
        self.own = own
        if own:
            what = (
                f"its data file {path} was written under partition spec {spec_id} and its rows span several "
                f"partitions of the table's spec now; nothing was committed. Abandon it "
                f"(GlobalCommitter(...).abandon({checkpoint_id}, reason=...)) and write its rows again"
            )
        else:
            what = (
                f"it overwrites partition {partition}, but data file {path} (written under partition spec {spec_id}) "
                "may hold rows inside it and outside it; an overwrite replaces whole files, so nothing was committed. "
                "Rewrite the table's files under its current spec (Spark's rewrite_data_files), then run recover(); "
                "or abandon the checkpoint"
            )
        super().__init__(f"checkpoint {checkpoint_id} of job {job_id!r} in {table}: {what}")


class EqualityDeletesError(EnvironmentFailureError):
    """An upsert into a table that holds equality delete files (another engine's, such as
    Flink's upsert sink): icecommit resolves keys to row positions and cannot tell which
    rows those deletes remove. Nothing was committed; compact the table with an engine that
    applies equality deletes (Spark's ``rewrite_data_files`` with delete-file thresholds).

    Attributes:
        table / checkpoint_id / job_id: the upsert; path: one equality delete file.
    """

    def __init__(self, job_id: str, checkpoint_id: int, table: str, path: str) -> None:
        self.job_id = job_id
        self.checkpoint_id = checkpoint_id
        self.table = table
        self.path = path
        super().__init__(
            f"checkpoint {checkpoint_id} of job {job_id!r} upserts into {table}, which holds equality delete files "
            f"(e.g. {path}): an upsert resolves keys to row positions and cannot apply them, so nothing was "
            "committed. Compact the table with an engine that applies equality deletes, then run recover(); or "
            "abandon the checkpoint"
        )


class MissingExtraError(EnvironmentFailureError):
    """A feature needs a package that is not installed (an optional extra of icecommit).

    Attributes:
        feature: what needs it; package: the package; extra: the extra that installs it.
    """

    def __init__(self, feature: str, package: str, extra: str) -> None:
        self.feature = feature
        self.package = package
        self.extra = extra
        super().__init__(
            f"{feature} needs {package}, which is not installed: pip install 'icecommit[{extra}]' "
            f"(or pip install {package})"
        )
