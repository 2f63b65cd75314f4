//! `deltalite`: streaming, partition-level upsert into Delta Lake tables.
//!
//! delta-rs (`deltalake`) is the storage and protocol layer; this crate replaces how an
//! upsert is executed. Memory is bounded by the source batch and the knobs in
//! [`Knobs`], never by the table. Every call is one atomic Delta commit.
//!
//! Module map:
//! - [`table`]: the long-lived [`DeltaLiteTable`] handle (open, reload, files, history,
//!   vacuum of orphaned files).
//! - [`write`]: create, append, overwrite, append a Parquet file as it is.
//! - [`compact`]: bin-pack the small files of each partition (one `OPTIMIZE` commit).
//! - `retype`: change column types, re-encoding every file in the schema's commit.
//! - `rearrange`: the streaming file copier that compaction and `retype` share.
//! - `upsert`: one call end to end (plan → write → commit → re-plan on conflict).
//! - `source`: conform the batch, split by partition, dedup, key index.
//! - `target`: the snapshot's files and log-statistics pruning.
//! - `probe`: exact key probe with row-group statistics and bloom filters.
//! - `rewrite`: streaming rewrite of one file.
//! - `outcome`: the per-row match decision (cursor rule, omitted columns).
//! - `commit`: one commit, with the engine's own partition-level conflict rule.
//! - `budget`: per-call and process-global budgets.
//! - `upload`: the call's multipart threshold and part size applied under delta-rs's
//!   writer on object stores (a store wrapper that defers, re-chunks and orders parts).
//! - `conform`, `keys`, `partition`, `read`, `writer`, `features`, `metrics`: helpers.
//! - [`error`], [`options`], [`stats`]: the public types.
//! - [`alloc`]: malloc arena cap for the processes that embed the engine.

pub mod alloc;
pub mod budget;
mod commit;
pub mod compact;
mod conform;
pub mod error;
mod features;
mod footer_stats;
mod keys;
mod metrics;
pub mod options;
mod outcome;
mod partition;
mod probe;
mod read;
mod rearrange;
mod retype;
mod rewrite;
mod source;
pub mod stats;
pub mod table;
mod target;
mod upload;
mod upsert;
pub mod write;
mod writer;

pub use error::{DeltaLiteError, ErrorKind, Result};
pub use options::{
    AppTransaction, Knobs, OmittedColumns, OnDuplicate, PreCommitHook, PruneStrategy, UpsertOptions,
};
pub use stats::{PhaseTimings, UpsertStats};
pub use table::{ActiveFile, DeltaLiteTable};

/// Re-exports so that callers use the same Arrow and delta-rs versions as the engine.
pub use deltalake;
pub use deltalake::arrow;
pub use deltalake::parquet;
