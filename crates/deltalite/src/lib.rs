//! `deltalite`: streaming, partition-level upsert into Delta Lake tables.
//!
//! delta-rs (`deltalake`) is the storage and protocol layer; this crate replaces how an
//! upsert is executed. Memory is bounded by the source batch and the knobs in
//! [`Knobs`], never by the table. Every call is one atomic Delta commit.
//!
//! Layers, bottom to top; a module imports only from its own layer or the ones below
//! (ARCHITECTURE.md has the map and the invariants):
//! - [`error`], [`options`], [`stats`]: the public types; [`options`] is the one source of
//!   defaults and validation.
//! - [`runtime`]: process-wide budgets and allocator settings; `metrics`.
//! - `schema`: conforming batches to a table, partition values, supported table features.
//! - [`table`]: the long-lived [`DeltaLiteTable`] handle and the snapshot's files.
//! - `io`: reading target files in windows, the Parquet writer, multipart uploads,
//!   statistics from footers.
//! - `txn`: the one transaction path: commit loop, conflict rule, own-commit check,
//!   cleanup of files an attempt wrote but did not commit, commit properties.
//! - [`ops`]: every operation, each an `impl DeltaLiteTable` method: upsert (its stages
//!   in `ops::upsert`), create/append/overwrite and Parquet-as-is (`write`), compaction,
//!   type changes, file replacement, restore, publishing a staged copy (`ops::publish`).

pub mod error;
mod io;
mod metrics;
pub mod ops;
pub mod options;
pub mod runtime;
mod schema;
pub mod stats;
pub mod table;
mod txn;

/// Module paths kept for callers: `deltalite::compact`, `deltalite::write`,
/// `deltalite::budget`, `deltalite::alloc`.
pub use ops::{compact, write};
pub use runtime::{alloc, budget};

pub use error::{DeltaLiteError, ErrorKind, Result};
pub use io::bloom::may_hold_any;
pub use io::dv::deleted_positions;
pub use io::writer::append_properties;
pub use ops::create::{CreateStats, Created, InitialData, NewTable, TableSpec};
pub use ops::metadata::{COLUMN_COMMENT_KEY, MetadataChange};
pub use ops::publish::{PublishPlan, Published};
pub use ops::replace::{
    MarkedRows, MarkingPolicy, ReplaceKind, ReplaceOptions, ReplacePlanner, ReplaceReads,
    ReplaceStats, Replacement, bytes_of,
};
pub use options::{
    AppTransaction, Knobs, MIB, Nullability, OmittedColumns, OnDuplicate, PreCommitHook,
    PruneStrategy, UpsertOptions,
};
pub use schema::conform::{COLUMN_DEFAULT_KEY, default_column};
pub use schema::features::DELETION_VECTORS_PROPERTY;
pub use stats::{PhaseTimings, UpsertStats};
pub use table::{ActiveFile, DeltaLiteTable, TableLocation, VacuumOptions, Vacuumed};

/// Re-exports so that callers use the same Arrow and delta-rs versions as the engine.
pub use deltalake;
pub use deltalake::arrow;
pub use deltalake::parquet;
