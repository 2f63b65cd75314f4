//! Per-call knobs of an upsert, with the seed API's defaults, and the process-wide
//! defaults read from the environment.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use crate::error::{DeltaLiteError, Result};

/// What to do with two source rows that share a key (and no cursor decides).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnDuplicate {
    /// Refuse the batch (the seed's behaviour).
    #[default]
    Error,
    /// The last row in batch order wins.
    Last,
}

impl std::str::FromStr for OnDuplicate {
    type Err = DeltaLiteError;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "error" => Ok(Self::Error),
            "last" => Ok(Self::Last),
            other => Err(DeltaLiteError::invalid(format!(
                "on_duplicate must be \"error\" or \"last\", got {other:?}"
            ))),
        }
    }
}

/// How a winning match treats table columns the batch does not carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OmittedColumns {
    /// The stored row is replaced whole; omitted columns become NULL, or their default
    /// (Python default).
    #[default]
    Null,
    /// Omitted columns keep their stored values (HTTP `/upsert`).
    Keep,
}

impl std::str::FromStr for OmittedColumns {
    type Err = DeltaLiteError;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "null" => Ok(Self::Null),
            "keep" => Ok(Self::Keep),
            other => Err(DeltaLiteError::invalid(format!(
                "omitted_columns must be \"null\" or \"keep\", got {other:?}"
            ))),
        }
    }
}

/// What an upsert does when a non-nullable column must hold a NULL: the batch carries a
/// NULL there, lacks the column (its inserts get NULL), or stored files already hold NULLs
/// there (written under a schema that denies them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Nullability {
    /// Make the column nullable, in the upsert's own commit (the Python default, as
    /// PostHog's deltalite does: a refusal sent its callers to a MERGE that wrote the
    /// NULLs anyway, under a schema that denied them).
    #[default]
    Relax,
    /// Refuse the batch (the server: `NOT NULL` there is a constraint the user declared).
    Refuse,
}

/// Which target files are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PruneStrategy {
    /// Log statistics, then an exact key probe; files without a match are carried over.
    #[default]
    Probe,
    /// Log statistics only: files whose key bounds (or all-NULL key columns) rule out
    /// every source key are carried over unread; the others are rewritten, deciding each
    /// row as it streams. No extra reads, more rewriting than `Probe`.
    Stats,
    /// Every file of every touched partition is rewritten.
    None,
}

impl PruneStrategy {
    /// Label used in metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            PruneStrategy::Probe => "probe",
            PruneStrategy::Stats => "stats",
            PruneStrategy::None => "none",
        }
    }
}

impl std::str::FromStr for PruneStrategy {
    type Err = DeltaLiteError;
    /// Case-insensitive, as PostHog's deltalite 0.1.15 parses it.
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "probe" => Ok(Self::Probe),
            "stats" => Ok(Self::Stats),
            "none" => Ok(Self::None),
            _ => Err(DeltaLiteError::invalid(format!(
                "unknown prune_strategy '{s}' (expected 'none', 'stats' or 'probe')"
            ))),
        }
    }
}

/// One mebibyte: every byte-sized default and knob of the workspace counts in these.
pub const MIB: usize = 1024 * 1024;

/// How many times a commit that lost a race is rebased and tried again, unless a call
/// says otherwise (the seed API's `commit_max_retries`).
pub const DEFAULT_COMMIT_MAX_RETRIES: usize = 15;

/// A commit is followed by a checkpoint, besides every `delta.checkpointInterval`-th
/// version, once the JSON commits since the last checkpoint reach this many bytes per
/// live file of the table (about what one file's `add` takes in the log), and at least
/// [`CHECKPOINT_LOG_MIN_BYTES`]. Merge-on-read commits re-add every file they mark, so
/// the log of a table with deletion vectors grows by about its whole file list a commit,
/// and every reader replays it; the checkpoint this triggers costs about what was
/// committed since the last one.
pub const CHECKPOINT_LOG_BYTES_PER_FILE: u64 = 1024;
/// See [`CHECKPOINT_LOG_BYTES_PER_FILE`]: below this much JSON since the last checkpoint
/// (about 10 ms of replay), only the interval checkpoints.
pub const CHECKPOINT_LOG_MIN_BYTES: u64 = MIB as u64;

/// Output file size target of a table without `delta.targetFileSize` (Delta's default).
pub const DEFAULT_TARGET_FILE_SIZE: u64 = 100 * MIB as u64;

/// Leading columns with statistics in a table without `delta.dataSkippingNumIndexedCols`
/// (Delta's default).
pub const DEFAULT_NUM_INDEXED_COLS: u64 = 32;

/// Resource knobs of one call. Defaults are the seed API's.
#[derive(Debug, Clone)]
pub struct Knobs {
    /// Partitions merged concurrently.
    pub max_parallel_partitions: usize,
    /// Files read (probed or rewritten) concurrently within the call.
    pub max_parallel_files: usize,
    /// Bytes of row groups held in memory by readers and writers of this call.
    pub max_buffered_bytes: usize,
    /// How target files are selected.
    pub prune_strategy: PruneStrategy,
    /// Concurrent key probes.
    pub probe_concurrency: usize,
    /// Rows per decoded batch when streaming target files.
    pub read_batch_size: usize,
    /// Output file size target; `None` means the table's `delta.targetFileSize`, else 100 MiB.
    pub target_file_size: Option<u64>,
    /// Oversized-source guard in bytes; `0` disables.
    pub max_source_bytes: usize,
    /// Output files at least this large go up to an object store in parts, smaller ones
    /// in one PUT; `0` disables multipart (every file in one PUT). Files up to delta-rs's
    /// write buffer (`DELTARS_UPLOAD_PART_SIZE`, 5 MiB) always go up in one PUT. Local
    /// tables stream to disk and ignore it. The cost: an open output file is held in
    /// memory until it reaches the threshold, and each writer reserves that much of the
    /// byte budgets (`max_buffered_bytes` and the process budget, clamped to them).
    pub multipart_threshold: usize,
    /// Size of one multipart part; below S3's minimum (5 MiB) it is raised to it.
    pub multipart_part_size: usize,
    /// Commit attempts after the first before giving up with a conflict error.
    pub commit_max_retries: usize,
    /// Encoded bytes at which an output row group closes; `None` sizes row groups from
    /// `max_buffered_bytes` (a share per file task, at least 1 MiB). The check runs
    /// between written batches, so a group overshoots by up to one batch: `1` makes one
    /// row group per written batch.
    pub max_row_group_bytes: Option<usize>,
    /// Write the batch's rows (replacements and inserts) to their own files, apart from
    /// the stored rows a rewrite copies: at most one more file per touched partition, and
    /// rewritten files hold only rows that were there before.
    pub isolate_source_rows: bool,
    /// Decide candidate files from the process-wide probe cache (hashes of each file's
    /// keys, filled by earlier probes) when it knows them; a file whose cached hashes meet
    /// no source key is carried over unread. The answer never depends on it.
    pub use_probe_cache: bool,
    /// After the call, read in full (on a task of its own, never evicting) the keys of
    /// the files it probed without learning all of them, so that the next upsert into
    /// the table decides them from the probe cache; `None` follows the process's setting
    /// (`ProbeCache::set_background_fill`, `DELTALITE_PROBE_CACHE_FILL`; the server turns
    /// it on).
    pub fill_probe_cache: Option<bool>,
    /// On tables that write deletion vectors (`delta.enableDeletionVectors=true`): the
    /// largest share of a file's rows that may be deleted by vector (the ones it has and
    /// the ones this call replaces or deletes); a file past it is rewritten, and its
    /// vector dropped. `0` rewrites every file; `1` never rewrites one.
    pub deletion_vector_max_share: f64,
}

/// Past half of a file deleted, reading around the vector costs more than rewriting once.
pub const DEFAULT_DELETION_VECTOR_MAX_SHARE: f64 = 0.5;

impl Default for Knobs {
    fn default() -> Self {
        let env = EnvDefaults::get();
        Self {
            max_parallel_partitions: 2,
            max_parallel_files: 4,
            max_buffered_bytes: 64 * MIB,
            prune_strategy: PruneStrategy::Probe,
            probe_concurrency: 8,
            read_batch_size: 8192,
            target_file_size: None,
            max_source_bytes: env.max_source_bytes,
            multipart_threshold: env.multipart_threshold,
            multipart_part_size: env.multipart_part_size,
            commit_max_retries: DEFAULT_COMMIT_MAX_RETRIES,
            max_row_group_bytes: None,
            isolate_source_rows: false,
            use_probe_cache: true,
            fill_probe_cache: None,
            deletion_vector_max_share: DEFAULT_DELETION_VECTOR_MAX_SHARE,
        }
    }
}

impl Knobs {
    /// Reject values that would make the call hang or misbehave.
    pub fn validate(&self) -> Result<()> {
        let positive = [
            ("max_parallel_partitions", self.max_parallel_partitions),
            ("max_parallel_files", self.max_parallel_files),
            ("max_buffered_bytes", self.max_buffered_bytes),
            ("probe_concurrency", self.probe_concurrency),
            ("read_batch_size", self.read_batch_size),
            ("multipart_part_size", self.multipart_part_size),
        ];
        for (name, value) in positive {
            if value == 0 {
                return Err(DeltaLiteError::invalid(format!("{name} must be positive")));
            }
        }
        if !(0.0..=1.0).contains(&self.deletion_vector_max_share) {
            return Err(DeltaLiteError::invalid(format!(
                "deletion_vector_max_share must be between 0 and 1, got {}",
                self.deletion_vector_max_share
            )));
        }
        if self.target_file_size == Some(0) {
            return Err(DeltaLiteError::invalid("target_file_size must be positive"));
        }
        if self.max_row_group_bytes == Some(0) {
            return Err(DeltaLiteError::invalid(
                "max_row_group_bytes must be positive",
            ));
        }
        Ok(())
    }
}

/// A callback run after all files are written and before the commit. Returning an
/// error aborts the call: the written files are deleted and the table is untouched.
/// Used for fault injection in tests and for vetoes (e.g. a server shutting down).
pub type PreCommitHook = Arc<dyn Fn() -> Result<()> + Send + Sync>;

/// An application transaction (`txn` action) recorded in the same commit, used for
/// idempotent retries: a caller records `(app_id, version)` and can later ask whether it
/// has been committed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppTransaction {
    /// Application id, e.g. an idempotency key namespace.
    pub app_id: String,
    /// Monotonic version for that application.
    pub version: i64,
}

/// Everything an upsert needs besides the data.
#[derive(Clone, Default)]
pub struct UpsertOptions {
    /// Key columns; a row's identity is the key tuple within its partition.
    pub primary_keys: Vec<String>,
    /// Partition columns the caller expects; checked against the table when given.
    pub partition_key: Option<Vec<String>>,
    /// Cursor columns; empty means no cursor.
    pub cursor_fields: Vec<String>,
    /// Delete marker column: a row marked in it (a boolean `true`; for other types any
    /// non-NULL value, dlt's `hard_delete` rule) removes its key instead of writing it,
    /// under the same cursor rule as an update. The column is stored like any other for
    /// the rows that are written.
    pub delete_column: Option<String>,
    /// In-batch duplicate handling without a cursor.
    pub on_duplicate: OnDuplicate,
    /// Treatment of columns the batch does not carry.
    pub omitted_columns: OmittedColumns,
    /// Non-nullable columns that must hold a NULL: relaxed or refused.
    pub nullability: Nullability,
    /// Resource knobs.
    pub knobs: Knobs,
    /// Extra key/values recorded in the commit info.
    pub commit_metadata: HashMap<String, serde_json::Value>,
    /// Optional `txn` action recorded in the commit.
    pub app_transaction: Option<AppTransaction>,
    /// Runs between the writes and the commit.
    pub pre_commit_hook: Option<PreCommitHook>,
}

impl std::fmt::Debug for UpsertOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpsertOptions")
            .field("primary_keys", &self.primary_keys)
            .field("partition_key", &self.partition_key)
            .field("cursor_fields", &self.cursor_fields)
            .field("delete_column", &self.delete_column)
            .field("on_duplicate", &self.on_duplicate)
            .field("omitted_columns", &self.omitted_columns)
            .field("nullability", &self.nullability)
            .field("knobs", &self.knobs)
            .field("commit_metadata", &self.commit_metadata)
            .field("app_transaction", &self.app_transaction)
            .field("pre_commit_hook", &self.pre_commit_hook.is_some())
            .finish()
    }
}

impl UpsertOptions {
    /// Options with the given keys and every other setting at its default.
    pub fn new<S: Into<String>>(primary_keys: impl IntoIterator<Item = S>) -> Self {
        Self {
            primary_keys: primary_keys.into_iter().map(Into::into).collect(),
            ..Default::default()
        }
    }
}

/// Defaults and global limits read once from the environment.
#[derive(Debug, Clone)]
pub struct EnvDefaults {
    /// `DELTALITE_PROCESS_MAX_PARALLEL_PARTITIONS` (8).
    pub process_max_parallel_partitions: usize,
    /// `DELTALITE_PROCESS_MAX_PARALLEL_FILES` (16).
    pub process_max_parallel_files: usize,
    /// `DELTALITE_PROCESS_MAX_BUFFERED_BYTES` (256 MiB).
    pub process_max_buffered_bytes: usize,
    /// `DELTALITE_MAX_SOURCE_BYTES` (2 GiB): default of the per-call guard.
    pub max_source_bytes: usize,
    /// `DELTALITE_MULTIPART_THRESHOLD_BYTES` (64 MiB).
    pub multipart_threshold: usize,
    /// `DELTALITE_MULTIPART_PART_SIZE_BYTES` (16 MiB).
    pub multipart_part_size: usize,
    /// `DELTALITE_PROBE_CACHE_BYTES` (128 MiB): bound of the process's probe cache
    /// (`runtime/probe_cache.rs`); `0` turns it off.
    pub probe_cache_bytes: usize,
    /// `DELTALITE_PROBE_CACHE_FILL` (`0`): `1` fills the probe cache in the background
    /// after each upsert (`ProbeCache::set_background_fill`).
    pub probe_cache_fill: bool,
}

fn env_usize(name: &str, default: usize) -> usize {
    match std::env::var(name) {
        Ok(raw) => match raw.trim().parse::<usize>() {
            Ok(value) => value,
            Err(_) => {
                tracing::warn!(%name, %raw, "ignoring unparsable environment value");
                default
            }
        },
        Err(_) => default,
    }
}

impl EnvDefaults {
    /// The values in force for this process (read on first use).
    pub fn get() -> &'static EnvDefaults {
        static DEFAULTS: OnceLock<EnvDefaults> = OnceLock::new();
        DEFAULTS.get_or_init(|| EnvDefaults {
            process_max_parallel_partitions: env_usize(
                "DELTALITE_PROCESS_MAX_PARALLEL_PARTITIONS",
                8,
            )
            .max(1),
            process_max_parallel_files: env_usize("DELTALITE_PROCESS_MAX_PARALLEL_FILES", 16)
                .max(1),
            process_max_buffered_bytes: env_usize(
                "DELTALITE_PROCESS_MAX_BUFFERED_BYTES",
                256 * MIB,
            )
            // At least one of the KiB units the byte budget counts in.
            .max(1024),
            max_source_bytes: env_usize("DELTALITE_MAX_SOURCE_BYTES", 2048 * MIB),
            multipart_threshold: env_usize("DELTALITE_MULTIPART_THRESHOLD_BYTES", 64 * MIB),
            multipart_part_size: env_usize("DELTALITE_MULTIPART_PART_SIZE_BYTES", 16 * MIB)
                .max(5 * MIB),
            probe_cache_bytes: env_usize("DELTALITE_PROBE_CACHE_BYTES", 128 * MIB),
            probe_cache_fill: env_usize("DELTALITE_PROBE_CACHE_FILL", 0) != 0,
        })
    }
}
