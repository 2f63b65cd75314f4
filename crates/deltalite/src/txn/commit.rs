//! One atomic commit per call, with the engine's own conflict rule.
//!
//! delta-rs is asked to commit exactly against the snapshot the call read (no retries of
//! its own). When another writer got there first, the engine reads the winning commits
//! itself: if any of them touched a partition this call read (or changed the schema or
//! protocol, or any file of an unpartitioned table), or removed a file this call removes
//! (a compaction: no data change, but the rows this call rewrote now live in the compacted
//! file too), the call is re-planned from the new snapshot; otherwise the same actions are
//! committed on top (a rebase). The rule does not
//! depend on which delta-rs features are compiled in.
//!
//! A commit whose response was lost may still have landed: the store wrote the log entry
//! and then the caller saw an error, or a retry below delta-rs found the entry "already
//! existing". Before reporting a failure or treating a lost race as someone else's win,
//! the engine looks for its own commit (an Add of a file this attempt wrote, whose name is
//! unique, or of a deletion vector it wrote: a file given a vector keeps its name, which
//! another writer's commit may add too) among the new log entries; if it is there, the call succeeded at that version,
//! and its files are neither deleted nor committed a second time.

use std::collections::{HashMap, HashSet};

use deltalake::kernel::transaction::{CommitBuilder, CommitProperties, TransactionError};
use deltalake::kernel::{Action, Add, Transaction};
use deltalake::logstore::get_actions;
use deltalake::protocol::DeltaOperation;
use deltalake::{DeltaTable, DeltaTableError};

use crate::error::{DeltaLiteError, Result};
use crate::schema::partition::normalize_raw;

/// The partitions a call read, in canonical form.
pub(crate) struct ReadSet {
    /// `None`: the whole table was read (unpartitioned).
    pub partitions: Option<HashSet<Vec<Option<String>>>>,
    /// Application transaction ids whose commits must not be interleaved.
    pub app_ids: Vec<String>,
}

/// What the commit loop counts across a call's attempts.
#[derive(Default)]
pub(crate) struct Tally {
    /// Lost races still allowed.
    pub retries_left: usize,
    /// Lost races so far (rebased or re-planned).
    pub retries_used: usize,
    /// Time spent loading newer log entries.
    pub reload_time: std::time::Duration,
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
    tally: &mut Tally,
) -> Result<Committed> {
    let own_adds: HashSet<String> = actions
        .iter()
        .filter_map(|a| match a {
            Action::Add(add) => Some(identity(add)),
            _ => None,
        })
        .collect();
    let own_removes: HashSet<&str> = actions
        .iter()
        .filter_map(|a| match a {
            Action::Remove(remove) => Some(remove.path.as_str()),
            _ => None,
        })
        .collect();
    loop {
        let read_version = table.version().unwrap_or(0);
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
                // delta-rs's post-commit step already advanced a copy of the snapshot to
                // the new version (reading the commit back): the handle takes it, rather
                // than reading the log again (a second pass over every file's entry).
                let version = done.version;
                table.state = Some(done.snapshot);
                return Ok(Committed::Version(version));
            }
            Err(err) if lost_race(&err) => {
                let reload_started = std::time::Instant::now();
                let reloaded = table.update_incremental(None).await;
                tally.reload_time += reload_started.elapsed();
                reloaded?;
                let latest = table.version().unwrap_or(0);
                // The winner may be this very commit, retried below delta-rs after its
                // response was lost (e.g. S3 wrote it, answered 5xx, the retry got 412).
                if let Some(version) =
                    own_commit(table, read_version + 1, latest, &own_adds).await?
                {
                    tracing::warn!(version, "own commit found after a lost response");
                    return Ok(Committed::Version(version));
                }
                if tally.retries_left == 0 {
                    return Err(DeltaLiteError::CommitConflict(format!(
                        "concurrent commits kept winning; gave up after {} retries",
                        tally.retries_used
                    )));
                }
                tally.retries_left -= 1;
                tally.retries_used += 1;
                if touches_read_set(table, read_version + 1, latest, read_set, &own_removes).await?
                {
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
            Err(err) => {
                // Unknown outcome: the log entry may have been written with the response
                // lost. If the store answers now and shows this commit, the call succeeded.
                if table.update_incremental(None).await.is_ok() {
                    let latest = table.version().unwrap_or(0);
                    if let Ok(Some(version)) =
                        own_commit(table, read_version + 1, latest, &own_adds).await
                    {
                        tracing::warn!(version, error = %err, "own commit found after an error");
                        return Ok(Committed::Version(version));
                    }
                }
                return Err(err.into());
            }
        }
    }
}

/// What makes an Add this attempt's: the file's name, which is unique per attempt, or for
/// a stored file given a deletion vector (its name is not new) the vector's, also unique.
fn identity(add: &Add) -> String {
    match &add.deletion_vector {
        Some(dv) => format!("{}#{}{}", add.path, dv.storage_type, dv.path_or_inline_dv),
        None => add.path.clone(),
    }
}

/// The version in `from..=to` whose commit adds one of `own_adds` ([`identity`]: unique
/// per attempt, so such a commit can only be this attempt's).
async fn own_commit(
    table: &DeltaTable,
    from: u64,
    to: u64,
    own_adds: &HashSet<String>,
) -> Result<Option<u64>> {
    if own_adds.is_empty() {
        return Ok(None);
    }
    let log_store = table.log_store();
    for version in from..=to {
        let Some(bytes) = log_store.read_commit_entry(version).await? else {
            continue;
        };
        let ours = get_actions(version, &bytes)?
            .iter()
            .any(|a| matches!(a, Action::Add(add) if own_adds.contains(&identity(add))));
        if ours {
            return Ok(Some(version));
        }
    }
    Ok(None)
}

/// Whether a commit in `from..=to` touched what `read_set` read or removed a file of
/// `own_removes` (the conflict rule; also asked before a commit by
/// `ops::publish::PublishPlan::conflicts`).
pub(crate) async fn touches_read_set(
    table: &DeltaTable,
    from: u64,
    to: u64,
    read_set: &ReadSet,
    own_removes: &HashSet<&str>,
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
            // Checked before the data-change filter below: a compaction's removes carry
            // `dataChange: false`, yet committing this call's remove of the same file
            // would keep both the compacted copy and this call's rewrite of its rows.
            if let Action::Remove(remove) = &action
                && own_removes.contains(remove.path.as_str())
            {
                return Ok(true);
            }
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
