import os
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Literal, Protocol

class _ArrowStream(Protocol):
    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object: ...

class _ArrowSchema(Protocol):
    def __arrow_c_schema__(self) -> object: ...

__version__: str

def knob_defaults() -> dict[str, int | bool | str | None]:
    """The engine's default upsert knobs (the ones `DeltaLiteTable.upsert` shows)."""

def probe_cache_stats() -> dict[str, int]:
    """The process's probe cache now: `entries`, `bytes`, `max_bytes`, `hits`, `misses`,
    `inserts`, `evictions`.

    The cache keeps, per data file, the hashes of its keys (files never change once
    written): a later upsert rules out unread a file whose hashes meet none of its keys.
    Filled by probes that read every key of a file and by the writer of an upsert's own
    rows. Never changes an answer."""

def set_probe_cache_max_bytes(max_bytes: int) -> None:
    """Bound the process's probe cache (default `DELTALITE_PROBE_CACHE_BYTES`, 128 MiB),
    evicting least recently used entries at once; `0` empties it and turns it off."""

def clear_probe_cache() -> None:
    """Forget every entry of the process's probe cache (its counters stay)."""

class DeltaLiteError(Exception): ...

class DeltaLiteInvalidArgumentError(DeltaLiteError, ValueError):
    """An argument that cannot work: an unknown option value (`prune_strategy="join"`), a
    knob out of range, duplicate keys in a batch, a partition key the table does not have.
    Both a `DeltaLiteError` (as PostHog's deltalite raises) and a `ValueError`."""

class DeltaLiteTransientError(DeltaLiteError): ...
class DeltaLiteCommitConflictError(DeltaLiteTransientError): ...
class DeltaLiteSchemaMismatchError(DeltaLiteError): ...
class DeltaLiteTableNotFoundError(DeltaLiteError): ...
class DeltaLiteUnsupportedTableError(DeltaLiteError): ...
class DeltaLiteSourceTooLargeError(DeltaLiteError): ...

class UpsertStats:
    @property
    def version(self) -> int: ...
    @property
    def partitions_touched(self) -> int: ...
    @property
    def files_added(self) -> int: ...
    @property
    def files_removed(self) -> int: ...
    @property
    def files_carried_over(self) -> int: ...
    @property
    def files_probed(self) -> int: ...
    @property
    def pages_skipped(self) -> int:
        """Key-column pages the probe skipped by their page-index min/max."""
    @property
    def rows_updated(self) -> int:
        """Source rows that matched a stored row and won."""
    @property
    def rows_replaced(self) -> int:
        """Stored rows replaced: more than `rows_updated` when the table holds a key twice."""
    @property
    def rows_deleted(self) -> int:
        """Stored rows removed by delete-marked rows (`delete_column`)."""
    @property
    def delete_markers(self) -> int:
        """Delete-marked source rows not dropped by the cursor (each removed its key's
        stored rows or found none)."""
    @property
    def rows_inserted(self) -> int: ...
    @property
    def rows_copied(self) -> int: ...
    @property
    def source_rows(self) -> int: ...
    @property
    def null_pk_rows(self) -> int: ...
    @property
    def rows_dropped_by_cursor(self) -> int: ...
    @property
    def duplicates_resolved(self) -> int: ...
    @property
    def commit_retries(self) -> int: ...
    @property
    def replans(self) -> int: ...
    @property
    def files_probe_cached(self) -> int:
        """Candidate files ruled out from the probe cache, unread."""
    @property
    def files_marked(self) -> int:
        """Files given a deletion vector for their replaced or deleted rows instead of
        being rewritten (tables with ``delta.enableDeletionVectors=true``); each also
        counts in ``files_removed`` and ``files_added``."""
    @property
    def columns_relaxed(self) -> int:
        """Non-nullable columns the upsert made nullable, in its own commit: the batch
        carried NULLs for them (or lacked them), or stored files already held NULLs."""
    @property
    def initial_open_ms(self) -> int:
        """The time `open` spent loading the log: on the handle's first upsert, 0 after."""
    @property
    def ingest_ms(self) -> int:
        """Reading the caller's data (the Arrow C stream)."""
    @property
    def open_ms(self) -> int:
        """Loading newer log entries during the call (after the commit, after lost races)."""
    @property
    def relax_ms(self) -> int:
        """Deciding which non-nullable columns must become nullable."""
    @property
    def plan_ms(self) -> int:
        """Conforming, splitting, deduplicating and indexing the batch."""
    @property
    def probe_ms(self) -> int:
        """Log-statistics pruning and the exact probe (part of `rewrite_ms`)."""
    @property
    def rewrite_ms(self) -> int:
        """Probing, rewriting matched files and writing inserts."""
    @property
    def commit_ms(self) -> int:
        """Committing, rebases included, without `open_ms` and `maintenance_ms`."""
    @property
    def maintenance_ms(self) -> int:
        """Writing the checkpoint after the commit (0 between checkpoints)."""
    @property
    def timings(self) -> dict[str, float]:
        """Seconds per phase: prepare, prune, write, commit, total."""
    def to_dict(self) -> dict[str, Any]: ...

class WriteStats:
    @property
    def version(self) -> int: ...
    @property
    def files_added(self) -> int: ...
    @property
    def files_removed(self) -> int: ...
    @property
    def rows_written(self) -> int: ...

class CompactStats(Mapping[str, int | bool]):
    """What a compaction did (or would do, with `dry_run`). Attributes, and a read-only
    mapping of the same keys plus delta-rs's `optimize` names (`numFilesAdded`,
    `numFilesRemoved`, `partitionsOptimized`, `numBatches`, `totalConsideredFiles`,
    `totalFilesSkipped`)."""

    @property
    def version(self) -> int:
        """Version committed last (the current version when nothing was committed)."""
    @property
    def files_considered(self) -> int: ...
    @property
    def files_skipped(self) -> int:
        """Left alone: larger than the target, alone in their bin, or in a partition below
        `min_partition_removable_files`."""
    @property
    def partitions_compacted(self) -> int: ...
    @property
    def bins(self) -> int: ...
    @property
    def files_removed(self) -> int: ...
    @property
    def files_added(self) -> int: ...
    @property
    def bytes_removed(self) -> int: ...
    @property
    def bytes_added(self) -> int: ...
    @property
    def rows_rewritten(self) -> int: ...
    @property
    def batches_read(self) -> int: ...
    @property
    def parallel_bins(self) -> int: ...
    @property
    def commits(self) -> int: ...
    @property
    def largest_bin_files(self) -> int: ...
    @property
    def plan_ms(self) -> int: ...
    @property
    def rewrite_ms(self) -> int: ...
    @property
    def commit_ms(self) -> int: ...
    @property
    def dry_run(self) -> bool: ...
    def __getitem__(self, key: str) -> int | bool: ...
    def __iter__(self) -> Iterator[str]: ...
    def __len__(self) -> int: ...
    def to_dict(self) -> dict[str, int | bool]: ...

class DeltaLiteTable:
    @classmethod
    def open(
        cls,
        uri: str | os.PathLike[str],
        storage_options: Mapping[str, str] | None = None,
        *,
        version: int | None = None,
    ) -> DeltaLiteTable:
        """Open an existing Delta table (a path, `pathlib.Path` or object-store URI);
        `version` loads that version instead of the latest (reads see it; a write through
        the handle still commits on top of the latest). A missing table raises
        `TableNotFoundError`, a version newer than the latest `ValueError`."""
    @classmethod
    def is_deltatable(
        cls, uri: str | os.PathLike[str], storage_options: Mapping[str, str] | None = None
    ) -> bool:
        """Whether a Delta table is at `uri` and loads; a storage failure raises."""
    @classmethod
    def table_exists(
        cls, uri: str | os.PathLike[str], storage_options: Mapping[str, str] | None = None
    ) -> bool:
        """Whether `uri` holds a Delta log, without loading it (`deltalake`'s
        `DeltaTable.is_deltatable`): a table whose log cannot be read still exists. A
        storage failure raises a `DeltaLiteError` rather than answering False."""
    @classmethod
    def create(
        cls,
        uri: str | os.PathLike[str],
        schema: _ArrowSchema,
        partition_by: str | Sequence[str] | None = None,
        storage_options: Mapping[str, str] | None = None,
        configuration: Mapping[str, str] | None = None,
    ) -> DeltaLiteTable:
        """Create an empty table with `schema` (a pyarrow schema or anything exporting
        `__arrow_c_schema__`), partitioned by `partition_by`, with table properties
        `configuration`; an existing table at `uri` raises."""
    @property
    def uri(self) -> str:
        """The URI the table was opened with (a path given as `pathlib.Path`, as text)."""
    def upsert(
        self,
        data: _ArrowStream,
        primary_keys: str | Sequence[str],
        partition_key: str | Sequence[str] | None = None,
        *,
        cursor_field: str | Sequence[str] | None = None,
        delete_column: str | None = None,
        on_duplicate: Literal["error", "last"] = "error",
        omitted_columns: Literal["null", "keep"] = "null",
        max_parallel_partitions: int | None = None,
        max_parallel_files: int | None = None,
        max_buffered_bytes: int | None = None,
        prune_strategy: Literal["probe", "stats", "none"] | None = None,
        skip_unmatched_files: bool | None = None,
        probe_concurrency: int | None = None,
        read_batch_size: int | None = None,
        target_file_size: int | None = None,
        max_source_bytes: int | None = None,
        multipart_threshold: int | None = None,
        multipart_part_size: int | None = None,
        commit_max_retries: int | None = None,
        commit_metadata: Mapping[str, Any] | None = None,
        max_row_group_bytes: int | None = None,
        isolate_source_rows: bool | None = None,
        use_probe_cache: bool | None = None,
        deletion_vector_max_share: float | None = None,
    ) -> UpsertStats:
        """Insert-or-replace `data` by key in one atomic commit.

        A knob left at `None` takes the engine's default, which `knob_defaults()` lists
        (`max_parallel_partitions` 2, `max_parallel_files` 4, `max_buffered_bytes` 64 MiB,
        `prune_strategy` "probe", `probe_concurrency` 8, `read_batch_size` 8192,
        `commit_max_retries` 15, `use_probe_cache` True, `deletion_vector_max_share`
        0.5; byte guards from the process
        environment). `skip_unmatched_files=False` is `prune_strategy="none"`.
        `prune_strategy`: "probe" (log statistics, then an exact read of the key
        columns), "stats" (log statistics only; surviving files are rewritten) or "none"
        (every file of a touched partition is rewritten). `max_row_group_bytes` closes
        output row groups at that many encoded bytes (`None`: sized from
        `max_buffered_bytes`). `isolate_source_rows` writes the batch's rows to their own
        file, apart from copied rows. `use_probe_cache` lets the process's probe cache rule
        files out unread. On tables with ``delta.enableDeletionVectors=true`` a file
        whose replaced or deleted rows (with the ones its vector has) stay within
        `deletion_vector_max_share` of its rows gets a deletion vector instead of a
        rewrite (`UpsertStats.files_marked`). An empty batch still commits (no actions,
        its metadata).
        `delete_column`: a row marked there (boolean `True`, other types any non-null
        value) removes its key instead of being written, under the cursor rule.
        Non-nullable columns that must hold a NULL are made nullable in the same commit."""
    def append(
        self,
        data: _ArrowStream,
        *,
        target_file_size: int | None = None,
        commit_max_retries: int | None = None,  # None: the engine default (15)
        commit_metadata: Mapping[str, Any] | None = None,
    ) -> WriteStats:
        """Add `data`'s rows to the table in one commit (`WRITE` in append mode); columns
        conform to the table's schema as in `upsert`."""
    def overwrite(
        self,
        data: _ArrowStream,
        *,
        target_file_size: int | None = None,
        commit_max_retries: int | None = None,  # None: the engine default (15)
        commit_metadata: Mapping[str, Any] | None = None,
    ) -> WriteStats:
        """Replace every row of the table with `data`'s, in one commit (the old files are
        removed, not deleted: older versions still read them until a vacuum)."""
    def compact(
        self,
        target_file_size: int | None = None,
        *,
        primary_keys: str | Sequence[str] | None = None,
        partitions: Sequence[str | None] | None = None,
        min_partition_removable_files: int | None = None,  # None: the engine default (1)
        max_bins_per_commit: int | None = None,  # None: one commit
        max_parallel_bins: int | None = None,  # None: the engine default (2)
        dry_run: bool = False,
        read_batch_size: int | None = None,  # None: the engine default (8192)
        max_buffered_bytes: int | None = None,  # None: the engine default (64 MiB)
        multipart_threshold: int | None = None,
        multipart_part_size: int | None = None,
        commit_max_retries: int | None = None,  # None: the engine default (15)
        commit_metadata: Mapping[str, Any] | None = None,
    ) -> CompactStats:
        """Bin-pack each partition's small files as delta-rs's `optimize.compact()` does
        (same bins, ZSTD output, an `OPTIMIZE` commit with its metrics). `partitions`
        limits the work to those values of the partition column;
        `min_partition_removable_files` leaves a partition alone unless that many files go
        net; `max_bins_per_commit` commits in rounds; `dry_run` plans only."""
    def restore(
        self,
        version: int,
        *,
        commit_metadata: Mapping[str, Any] | None = None,
        commit_max_retries: int | None = None,  # None: the engine default (15)
    ) -> dict[str, int]:
        """Make the table what it was at `version` in one `RESTORE` commit (its files added
        back, the others removed; nothing rewritten). Fails without committing if a file of
        that version is gone. Returns `numRemovedFile`, `numRestoredFile` and `version`;
        the handle moves to that version."""
    def vacuum(
        self,
        retention_hours: float | None = None,
        dry_run: bool = True,
        enforce_retention_duration: bool = True,
    ) -> list[str]:
        """Delete the files no version within the retention reads: files removed from
        the table longer ago than `retention_hours`, and leftovers of writes that never
        committed. `retention_hours` defaults to the table's
        `delta.deletedFileRetentionDuration` (7 days unless set); a shorter one raises
        `ValueError` unless `enforce_retention_duration=False`. With `dry_run` (the
        default, as in deltalake) nothing is deleted. Returns the paths, relative to the
        table root, sorted."""
    def version(self) -> int:
        """Version of the loaded snapshot."""
    def reload(self) -> None:
        """Load the latest version (commits other writers made since)."""
    def schema_arrow(self) -> Any:
        """The table's schema as a `pyarrow.Schema`."""
    def partition_columns(self) -> list[str]:
        """Partition column names, in table order."""
    def file_uris(self) -> list[str]:
        """Full URIs of the active data files of the loaded version."""
    def files(self) -> list[dict[str, Any]]:
        """Active files of the loaded version: `path` (relative to the table root), `size`
        (bytes), `modification_time` (epoch ms), `partition_values` (`{}` unpartitioned)."""
    def num_files(self) -> int:
        """Number of active files of the loaded version."""
    def table_id(self) -> str:
        """The table's id (`metaData.id`)."""
    def configuration(self) -> dict[str, str]:
        """The table's properties (`metaData.configuration`)."""
    def schema_json(self) -> str:
        """The Delta schema as JSON text, as the log stores it."""
    def history(self, limit: int | None = None) -> list[dict[str, Any]]:
        """The latest `limit` commits (all when None), newest first: commit-info keys flat
        (custom metadata included), plus `info`, the non-typed keys as JSON text."""
