//! What an upsert did, returned to the caller.

use std::time::Duration;

/// Result of one upsert call.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UpsertStats {
    /// Table version the call committed (the current version when nothing changed).
    pub version: u64,
    /// Partitions the batch touched.
    pub partitions_touched: usize,
    /// Data files written.
    pub files_added: usize,
    /// Data files replaced by rewrites.
    pub files_removed: usize,
    /// Files of the touched partitions left as they were.
    pub files_carried_over: usize,
    /// Files whose key columns were read by the exact probe.
    pub files_probed: usize,
    /// Data pages of a key column the probe skipped by their page-index min/max.
    pub pages_skipped: usize,
    /// Source rows that matched a stored row and won (replacing it, or matching with no
    /// change for key-only `keep` batches).
    pub rows_updated: usize,
    /// Stored rows replaced: more than `rows_updated` when the table holds a key twice.
    pub rows_replaced: usize,
    /// Stored rows removed by delete-marked source rows (`delete_column`).
    pub rows_deleted: usize,
    /// Delete-marked source rows not dropped by the cursor: each removed its key's stored
    /// rows (`rows_deleted`) or found none.
    pub delete_markers: usize,
    /// Source rows inserted.
    pub rows_inserted: usize,
    /// Stored rows copied unchanged into rewritten files.
    pub rows_copied: usize,
    /// Rows in the caller's batch.
    pub source_rows: usize,
    /// Source rows with a NULL in a key column (always inserted).
    pub null_pk_rows: usize,
    /// Source rows dropped because a stored row had a newer-or-equal cursor.
    pub rows_dropped_by_cursor: usize,
    /// Source rows discarded as in-batch duplicates.
    pub duplicates_resolved: usize,
    /// Commit attempts that lost a race and were rebased or re-planned.
    pub commit_retries: usize,
    /// Times the whole upsert was re-planned against a newer snapshot.
    pub replans: usize,
    /// The call's app transaction was already recorded: nothing was written.
    pub already_applied: bool,
    /// Candidate files the probe decided from the process's probe cache, unread.
    pub files_probe_cached: usize,
    /// Stored files given a deletion vector for their replaced or deleted rows instead of
    /// being rewritten (each also counts as removed and added: the log says so).
    pub files_marked: usize,
    /// Non-nullable columns the call made nullable (in its commit): NULLs arrived for them,
    /// or stored files already hold NULLs there.
    pub columns_relaxed: usize,
    /// Wall time per phase.
    pub timings: PhaseTimings,
}

/// Wall time of each phase of the last (successful) attempt, plus the total.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PhaseTimings {
    /// The full log load of the handle's `open`, reported by its first upsert only
    /// (zero afterwards): the cost a long-lived handle pays once.
    pub initial_open: Duration,
    /// Deciding which non-nullable columns must become nullable.
    pub relax: Duration,
    /// Conforming, splitting, deduplicating and indexing the source.
    pub prepare: Duration,
    /// Statistics pruning and the exact probe.
    pub prune: Duration,
    /// Rewriting matched files and writing inserts.
    pub write: Duration,
    /// Committing (including rebases and reloads), without maintenance.
    pub commit: Duration,
    /// Loading newer log entries during the call: the commit's own, and the winners' of
    /// lost races (part of `commit`).
    pub reload: Duration,
    /// Writing the checkpoint after the commit (zero between checkpoints).
    pub maintenance: Duration,
    /// The whole call.
    pub total: Duration,
}
