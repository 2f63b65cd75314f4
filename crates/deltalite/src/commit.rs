//! One atomic commit per call, with the engine's own conflict rule.
//!
//! delta-rs is asked to commit exactly against the snapshot the call read (no retries of
//! its own). When another writer got there first, the engine reads the winning commits
//! itself: if any of them touched a partition this call read (or changed the schema or
//! protocol, or any file of an unpartitioned table), the call is re-planned from the new
//! snapshot; otherwise the same actions are committed on top (a rebase). The rule does not
//! depend on which delta-rs features are compiled in.

use std::collections::{HashMap, HashSet};

use deltalake::kernel::transaction::{CommitBuilder, CommitProperties, TransactionError};
use deltalake::kernel::{Action, Transaction};
use deltalake::logstore::get_actions;
use deltalake::protocol::DeltaOperation;
use deltalake::{DeltaTable, DeltaTableError};

use crate::error::{DeltaLiteError, Result};
use crate::partition::normalize_raw;

/// The partitions a call read, in canonical form.
pub(crate) struct ReadSet {
    /// `None`: the whole table was read (unpartitioned).
    pub partitions: Option<HashSet<Vec<Option<String>>>>,
    /// Application transaction ids whose commits must not be interleaved.
    pub app_ids: Vec<String>,
}

/// How a commit attempt ended.
pub(crate) enum Committed {
    /// Durable at this version.
    Version(u64),
    /// A concurrent commit touched what this call read: plan again.
    Replan,
}

fn lost_race(err: &DeltaTableError) -> bool {
    matches!(
        err,
        DeltaTableError::VersionAlreadyExists(_)
            | DeltaTableError::Transaction {
                source: TransactionError::MaxCommitAttempts(_)
                    | TransactionError::VersionAlreadyExists(_)
            }
    )
}

/// Commit `actions`, rebasing over unrelated concurrent commits.
pub(crate) async fn commit(
    table: &mut DeltaTable,
    actions: Vec<Action>,
    operation: DeltaOperation,
    properties: CommitProperties,
    read_set: &ReadSet,
    retries_left: &mut usize,
    retries_used: &mut usize,
) -> Result<Committed> {
    loop {
        let attempt = {
            let state = table.snapshot()?;
            CommitBuilder::from(properties.clone())
                .with_actions(actions.clone())
                .with_max_retries(0)
                .build(Some(state), table.log_store(), operation.clone())
                .await
        };
        match attempt {
            Ok(done) => {
                let version = done.version();
                table.update_incremental(Some(version)).await?;
                return Ok(Committed::Version(version));
            }
            Err(err) if lost_race(&err) => {
                if *retries_left == 0 {
                    return Err(DeltaLiteError::CommitConflict(format!(
                        "concurrent commits kept winning; gave up after {retries_used} retries"
                    )));
                }
                *retries_left -= 1;
                *retries_used += 1;
                let read_version = table.version().unwrap_or(0);
                table.update_incremental(None).await?;
                let latest = table.version().unwrap_or(0);
                if touches_read_set(table, read_version + 1, latest, read_set).await? {
                    tracing::info!(
                        read_version,
                        latest,
                        "concurrent commit touched read partitions; re-planning"
                    );
                    return Ok(Committed::Replan);
                }
                tracing::debug!(
                    read_version,
                    latest,
                    "concurrent commit is disjoint; rebasing"
                );
            }
            Err(err) => return Err(err.into()),
        }
    }
}

async fn touches_read_set(
    table: &DeltaTable,
    from: u64,
    to: u64,
    read_set: &ReadSet,
) -> Result<bool> {
    let state = table.snapshot()?;
    let partition_columns = state.metadata().partition_columns().to_vec();
    let schema = state.schema();
    let log_store = table.log_store();
    for version in from..=to {
        let Some(bytes) = log_store.read_commit_entry(version).await? else {
            // Cleaned up already: be safe.
            return Ok(true);
        };
        for action in get_actions(version, &bytes)? {
            let partition_values: Option<&HashMap<String, Option<String>>> = match &action {
                Action::Metadata(_) | Action::Protocol(_) => return Ok(true),
                Action::Txn(Transaction { app_id, .. }) if read_set.app_ids.contains(app_id) => {
                    return Ok(true);
                }
                Action::Add(add) if add.data_change => Some(&add.partition_values),
                Action::Remove(remove) if remove.data_change => {
                    match &remove.partition_values {
                        Some(values) => Some(values),
                        // A remove without partition values could be anywhere.
                        None => return Ok(true),
                    }
                }
                _ => None,
            };
            let Some(values) = partition_values else {
                continue;
            };
            match &read_set.partitions {
                None => return Ok(true),
                Some(read) => {
                    let canonical = normalize_raw(values, &partition_columns, schema.as_ref())?;
                    if read.contains(&canonical) {
                        return Ok(true);
                    }
                }
            }
        }
    }
    Ok(false)
}
