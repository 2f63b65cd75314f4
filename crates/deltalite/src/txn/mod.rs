//! The one transaction path: every operation that commits goes through [`run`] (or, for a
//! table's first commit, [`create::create`]).
//!
//! An operation is an [`Attempt`]: given the table's current snapshot it plans, writes its
//! new files and stages the actions of one commit together with what it read. [`run`]
//! then, in one place for every operation:
//! - skips the call when its application transaction is already recorded (an idempotent
//!   retry after a lost response writes nothing twice);
//! - builds the commit properties (commit info, the `txn` action) from [`CommitSpec`];
//! - runs the pre-commit hook;
//! - commits through `commit::commit`, the engine's conflict rule with the own-commit
//!   check for lost responses;
//! - on a conflicting race, deletes the attempt's files and stages again against the new
//!   snapshot (when the operation can re-plan) or reports a conflict (when it cannot);
//! - deletes the files of an attempt that certainly did not commit, and leaves them for
//!   vacuum when the outcome is unknown (they may be referenced);
//! - after a commit, writes the checkpoint the table's interval asks for ([`maintain`]),
//!   best effort: the commit is durable whatever happens to its checkpoint.

pub(crate) mod commit;
pub(crate) mod create;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use deltalake::DeltaTable;
use deltalake::kernel::transaction::CommitProperties;
use deltalake::kernel::{Action, Add, Transaction};
use deltalake::protocol::DeltaOperation;
use deltalake::table::config::TablePropertiesExt;
use futures::future::BoxFuture;
use object_store::{ObjectStore, ObjectStoreExt};

use crate::error::{DeltaLiteError, Result};
use crate::options::{
    AppTransaction, CHECKPOINT_LOG_BYTES_PER_FILE, CHECKPOINT_LOG_MIN_BYTES, PreCommitHook,
};
pub(crate) use commit::ReadSet;
use commit::{Committed, Tally};

/// How a commit is recorded: its commit-info entries and its application transaction.
/// The one place commit properties are built.
#[derive(Clone, Default)]
pub(crate) struct CommitSpec {
    /// Extra key/values of the commit info.
    pub metadata: HashMap<String, serde_json::Value>,
    /// The `txn` action recorded in the same commit.
    pub app_transaction: Option<AppTransaction>,
}

impl CommitSpec {
    pub(crate) fn new(
        metadata: &HashMap<String, serde_json::Value>,
        app_transaction: &Option<AppTransaction>,
    ) -> Self {
        Self {
            metadata: metadata.clone(),
            app_transaction: app_transaction.clone(),
        }
    }

    /// delta-rs commit properties; delta-rs itself never retries (the engine's rule does)
    /// and runs no post-commit maintenance ([`maintain`] does, after the commit).
    pub(crate) fn properties(&self) -> CommitProperties {
        self.properties_with(&HashMap::new())
    }

    /// [`Self::properties`] with an attempt's own commit-info entries (operation metrics);
    /// the caller's metadata wins over them on a shared key.
    pub(crate) fn properties_with(
        &self,
        attempt: &HashMap<String, serde_json::Value>,
    ) -> CommitProperties {
        let mut metadata = attempt.clone();
        metadata.extend(self.metadata.clone());
        let mut props = CommitProperties::default()
            .with_max_retries(0)
            .with_create_checkpoint(false)
            .with_cleanup_expired_logs(Some(false))
            .with_metadata(metadata);
        if let Some(txn) = &self.app_transaction {
            // `lastUpdated` lets the table's delta.setTransactionRetentionDuration expire the
            // record: without it a txn is kept, and recognised, forever.
            props = props.with_application_transaction(Transaction::new_with_last_update(
                &txn.app_id,
                txn.version,
                Some(chrono::Utc::now().timestamp_millis()),
            ));
        }
        props
    }

    /// Application ids whose concurrent commits this call must not interleave with.
    fn app_ids(&self) -> Vec<String> {
        self.app_transaction
            .iter()
            .map(|t| t.app_id.clone())
            .collect()
    }
}

/// How [`run`] treats races and the pre-commit hook.
#[derive(Clone, Default)]
pub(crate) struct Policy {
    /// Commit attempts after the first (rebases and re-plans together).
    pub max_retries: usize,
    /// Whether the operation may stage again after a conflicting race; when not, such a
    /// race ends the call with a conflict error (nothing written).
    pub replan: bool,
    /// Runs after the files are written and before the commit; an error aborts the call.
    pub hook: Option<PreCommitHook>,
}

/// What one attempt staged for its commit.
pub(crate) struct Staged {
    /// Removes, adds, metadata: everything of the commit except commit info and `txn`.
    pub actions: Vec<Action>,
    pub operation: DeltaOperation,
    /// What the plan read, for the conflict rule (the app ids are filled in by [`run`]).
    pub read_set: ReadSet,
    /// Commit-info entries of this attempt (operation metrics, `isBlindAppend`), beside
    /// the caller's metadata.
    pub commit_info: HashMap<String, serde_json::Value>,
    /// Commit even without actions: the commit itself records the call (an upsert of an
    /// empty batch still leaves its commit metadata, so redelivery checks find it).
    pub commit_when_empty: bool,
}

impl Staged {
    /// A commit of `actions` with no commit-info entries of its own.
    pub(crate) fn new(actions: Vec<Action>, operation: DeltaOperation, read_set: ReadSet) -> Self {
        Self {
            actions,
            operation,
            read_set,
            commit_info: HashMap::new(),
            commit_when_empty: false,
        }
    }
}

/// One operation, planned and written against a snapshot; it may be asked again after a
/// conflicting race (then against the newer snapshot).
pub(crate) trait Attempt: Send {
    /// What the operation reports besides the commit.
    type Output: Send;

    /// Plan against `table`'s snapshot, write the new files, stage the commit.
    fn stage<'a>(
        &'a mut self,
        table: &'a DeltaTable,
    ) -> BoxFuture<'a, Result<(Staged, Self::Output)>>;
}

/// How [`run`] ended.
pub(crate) enum Done<T> {
    /// Durable at `version`.
    Committed {
        version: u64,
        output: T,
        /// Lost races rebased over or re-planned after.
        retries: usize,
        /// Times the operation staged again.
        replans: usize,
        /// Time spent in the final commit (and its rebases), without maintenance.
        commit_time: Duration,
        /// Time spent loading newer log entries: the commit's own, and the winners' of
        /// lost races.
        reload_time: Duration,
        /// Time spent writing the checkpoint after the commit (zero between checkpoints).
        maintenance_time: Duration,
    },
    /// The operation changed nothing; no commit was made.
    Unchanged { version: u64, output: T },
    /// The call's application transaction was already recorded: nothing was done.
    AlreadyApplied { version: u64 },
}

/// Run `attempt` to one commit (see the module documentation).
pub(crate) async fn run<A: Attempt>(
    table: &mut DeltaTable,
    spec: &CommitSpec,
    policy: &Policy,
    attempt: &mut A,
) -> Result<Done<A::Output>> {
    let mut tally = Tally {
        retries_left: policy.max_retries,
        ..Default::default()
    };
    let mut replans = 0;
    loop {
        if let Some(version) = already_applied(table, spec).await? {
            return Ok(Done::AlreadyApplied { version });
        }
        let (mut staged, output) = attempt.stage(table).await?;
        if staged.actions.is_empty() && spec.app_transaction.is_none() && !staged.commit_when_empty
        {
            return Ok(Done::Unchanged {
                version: table.version().unwrap_or(0),
                output,
            });
        }
        if let Some(hook) = &policy.hook
            && let Err(e) = hook()
        {
            delete_added(&table.object_store(), &staged.actions).await;
            return Err(e);
        }
        staged.read_set.app_ids = spec.app_ids();
        let commit_started = Instant::now();
        tally.reload_time = Duration::ZERO;
        let outcome = commit::commit(
            table,
            staged.actions.clone(),
            staged.operation,
            spec.properties_with(&staged.commit_info),
            &staged.read_set,
            &mut tally,
        )
        .await;
        match outcome {
            Ok(Committed::Version(version)) => {
                let commit_time = commit_started.elapsed();
                let maintenance_time = maintain(table, version).await;
                return Ok(Done::Committed {
                    version,
                    output,
                    retries: tally.retries_used,
                    replans,
                    commit_time,
                    reload_time: tally.reload_time,
                    maintenance_time,
                });
            }
            Ok(Committed::Replan) => {
                delete_added(&table.object_store(), &staged.actions).await;
                if !policy.replan {
                    return Err(DeltaLiteError::CommitConflict(
                        "a concurrent commit changed the schema, the protocol or the files \
                         this call replaces (or applied the same app transaction); nothing \
                         was written"
                            .into(),
                    ));
                }
                replans += 1;
            }
            Err(e @ DeltaLiteError::CommitConflict(_)) => {
                delete_added(&table.object_store(), &staged.actions).await;
                return Err(e);
            }
            // Unknown outcome (the store failed mid-commit): the files may be referenced,
            // so they are left for vacuum.
            Err(e) => return Err(e),
        }
    }
}

/// Post-commit maintenance, best effort: a checkpoint at `version` when the table's
/// `delta.checkpointInterval` asks for one (every `interval`-th commit) or the log has
/// outgrown its last checkpoint ([`log_outgrew_checkpoint`]), then, when
/// `delta.enableExpiredLogCleanup` is on, the log entries the new checkpoint made
/// expendable past `delta.logRetentionDuration`. delta-rs would run this inside the
/// commit and report its failure as the commit's, though the commit is durable (and an
/// empty commit could not be recognised afterwards): here a failure is only logged, and
/// a later commit checkpoints again. Returns the time spent.
pub(crate) async fn maintain(table: &DeltaTable, version: u64) -> Duration {
    let started = Instant::now();
    let Ok(state) = table.snapshot() else {
        return Duration::ZERO;
    };
    // The handle is at `version` unless reloading after the commit failed (then a later
    // commit checkpoints).
    if table.version() != Some(version) {
        return Duration::ZERO;
    }
    let interval = state.table_config().checkpoint_interval().get();
    let due = (version + 1).is_multiple_of(interval)
        || log_outgrew_checkpoint(table, version, interval, state.log_data().num_files()).await;
    if !due {
        return started.elapsed();
    }
    let cleanup = state.table_config().enable_expired_log_cleanup();
    match deltalake::checkpoints::create_checkpoint(table, None).await {
        Ok(()) => {
            if cleanup && let Err(e) = deltalake::checkpoints::cleanup_metadata(table, None).await {
                tracing::warn!(version, error = %e, "cleaning up expired log entries failed");
            }
        }
        Err(e) => tracing::warn!(version, error = %e, "writing the checkpoint failed"),
    }
    started.elapsed()
}

/// Whether the JSON commits after the last checkpoint, up to `version`, reach
/// [`CHECKPOINT_LOG_BYTES_PER_FILE`] per live file (`files`) and at least
/// [`CHECKPOINT_LOG_MIN_BYTES`]: a reader would then replay more than a checkpoint of the
/// whole table holds. One listing of the log from `interval` versions back (the last
/// checkpoint is within them unless one failed; without one there, the commits listed
/// are counted). A listing that fails counts as not due.
async fn log_outgrew_checkpoint(
    table: &DeltaTable,
    version: u64,
    interval: u64,
    files: usize,
) -> bool {
    use futures::TryStreamExt;
    let threshold = (files as u64)
        .saturating_mul(CHECKPOINT_LOG_BYTES_PER_FILE)
        .max(CHECKPOINT_LOG_MIN_BYTES);
    let log_store = table.log_store();
    let store = log_store.object_store(None);
    let log = log_store.log_path();
    let offset = log
        .clone()
        .join(format!("{:020}", version.saturating_sub(interval)));
    let listed: Vec<object_store::ObjectMeta> = match store
        .list_with_offset(Some(log), &offset)
        .try_collect()
        .await
    {
        Ok(listed) => listed,
        Err(e) => {
            tracing::debug!(version, error = %e, "listing the log after a commit failed");
            return false;
        }
    };
    json_since_checkpoint(&listed, version) >= threshold
}

/// Bytes of the commit files (`<version>.json`) in `listed` after the newest checkpoint
/// among them (classic, multi-part or V2), up to `version`.
fn json_since_checkpoint(listed: &[object_store::ObjectMeta], version: u64) -> u64 {
    let parsed = listed.iter().filter_map(|meta| {
        let name = meta.location.filename()?;
        let (digits, rest) = name.split_at_checked(20)?;
        let v: u64 = digits.parse().ok()?;
        Some((v, rest, meta.size))
    });
    let mut commits: Vec<(u64, u64)> = Vec::new();
    let mut checkpoint = None;
    for (v, rest, size) in parsed {
        if v > version {
            continue;
        }
        if rest == ".json" {
            commits.push((v, size));
        } else if rest.starts_with(".checkpoint.")
            && (rest.ends_with(".parquet") || rest.ends_with(".json"))
        {
            checkpoint = checkpoint.max(Some(v));
        }
    }
    commits
        .into_iter()
        .filter(|(v, _)| checkpoint.is_none_or(|c| *v > c))
        .map(|(_, size)| size)
        .sum()
}

/// The version the call's application transaction was recorded at, if it was.
async fn already_applied(table: &DeltaTable, spec: &CommitSpec) -> Result<Option<u64>> {
    let Some(txn) = &spec.app_transaction else {
        return Ok(None);
    };
    let state = table.snapshot()?;
    let applied = state
        .transaction_version(table.log_store().as_ref(), &txn.app_id)
        .await?;
    Ok(applied
        .is_some_and(|v| v >= txn.version)
        .then(|| state.version()))
}

/// An attempt whose files are already written: staged once, never re-planned.
pub(crate) struct Prepared {
    staged: Option<Staged>,
}

impl Prepared {
    pub(crate) fn new(staged: Staged) -> Self {
        Self {
            staged: Some(staged),
        }
    }
}

impl Attempt for Prepared {
    type Output = ();

    fn stage<'a>(&'a mut self, _table: &'a DeltaTable) -> BoxFuture<'a, Result<(Staged, ())>> {
        // `commit_prepared` never re-plans, so this runs once.
        let staged = self
            .staged
            .take()
            .map(|s| (s, ()))
            .ok_or_else(|| DeltaLiteError::Other("a prepared commit was staged twice".into()));
        Box::pin(futures::future::ready(staged))
    }
}

/// Commit actions whose files are already written, once: the path of the operations
/// that cannot re-plan (append, overwrite, compaction, type changes). A conflicting race
/// deletes the files and reports a conflict.
pub(crate) async fn commit_prepared(
    table: &mut DeltaTable,
    spec: &CommitSpec,
    max_retries: usize,
    staged: Staged,
) -> Result<Done<()>> {
    let policy = Policy {
        max_retries,
        replan: false,
        hook: None,
    };
    let mut prepared = Prepared::new(staged);
    let done = run(table, spec, &policy, &mut prepared).await;
    // Recorded by someone else meanwhile: this call's files will never be committed.
    if let (Ok(Done::AlreadyApplied { .. }), Some(staged)) = (&done, prepared.staged.take()) {
        delete_added(&table.object_store(), &staged.actions).await;
    }
    done
}

/// Best-effort removal of the files an attempt added but did not commit.
pub(crate) async fn delete_added(store: &Arc<dyn ObjectStore>, actions: &[Action]) {
    delete_adds(
        store,
        actions.iter().filter_map(|a| match a {
            Action::Add(add) => Some(add),
            _ => None,
        }),
    )
    .await;
}

/// Best-effort removal of written files that will not be committed. An Add with a
/// deletion vector names a file already in the table (the engine only gives vectors to
/// stored files): only its vector file was written, and only that goes (once: vectors
/// written together share one file).
pub(crate) async fn delete_adds<'a>(
    store: &Arc<dyn ObjectStore>,
    adds: impl Iterator<Item = &'a Add>,
) {
    let mut paths = std::collections::BTreeSet::new();
    for add in adds {
        match &add.deletion_vector {
            Some(dv) => paths.extend(crate::io::dv::own_file(dv)),
            None => {
                paths.insert(object_store::path::Path::from(add.path.as_str()));
            }
        }
    }
    for path in paths {
        if let Err(e) = store.delete(&path).await {
            tracing::warn!(%path, error = %e, "could not delete an uncommitted file");
        }
    }
}

/// What a plan read, for [`ReadSet`]: nothing (appends), some partitions, everything.
impl ReadSet {
    /// Reads no partition: any concurrent data commit can be rebased over (appends and
    /// compactions; a concurrent remove of a file this call removes still conflicts).
    pub(crate) fn nothing() -> Self {
        Self {
            partitions: Some(HashSet::new()),
            app_ids: Vec::new(),
        }
    }

    /// Reads the whole table: any concurrent data change conflicts.
    pub(crate) fn everything() -> Self {
        Self {
            partitions: None,
            app_ids: Vec::new(),
        }
    }

    /// Reads these partitions (canonical serialization); unpartitioned tables read all.
    pub(crate) fn partitions(partitioned: bool, partitions: HashSet<Vec<Option<String>>>) -> Self {
        Self {
            partitions: partitioned.then_some(partitions),
            app_ids: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(name: &str, size: u64) -> object_store::ObjectMeta {
        object_store::ObjectMeta {
            location: object_store::path::Path::from(format!("_delta_log/{name}")),
            last_modified: chrono::DateTime::default(),
            size,
            e_tag: None,
            version: None,
        }
    }

    #[test]
    fn only_commits_after_the_newest_checkpoint_count() {
        let listed = [
            meta("00000000000000000009.checkpoint.parquet", 5_000),
            meta("00000000000000000009.json", 100),
            meta("00000000000000000010.json", 200),
            meta(
                "00000000000000000011.checkpoint.0000000001.0000000002.parquet",
                7,
            ),
            meta(
                "00000000000000000011.checkpoint.0000000002.0000000002.parquet",
                7,
            ),
            meta("00000000000000000011.json", 300),
            meta("00000000000000000012.json", 400),
            meta(
                "00000000000000000012.00000000000000000013.compacted.json",
                9_000,
            ),
            meta("00000000000000000012.crc", 50),
            meta("00000000000000000013.json", 500),
            // A commit after the version maintained (a later writer's) is not this one's.
            meta("00000000000000000014.json", 600),
            meta("_last_checkpoint", 10),
        ];
        assert_eq!(json_since_checkpoint(&listed, 13), 400 + 500);
        assert_eq!(json_since_checkpoint(&listed, 10), 200);
    }

    #[test]
    fn v2_checkpoints_count_and_without_one_every_commit_does() {
        let listed = [
            meta("00000000000000000003.json", 10),
            meta(
                "00000000000000000003.checkpoint.80a083e8-7026-4e79-81be-64bd76c43a11.json",
                1,
            ),
            meta("00000000000000000004.json", 20),
        ];
        assert_eq!(json_since_checkpoint(&listed, 4), 20);
        assert_eq!(json_since_checkpoint(&listed[2..], 4), 20);
        assert_eq!(json_since_checkpoint(&[], 4), 0);
        let none = [
            meta("00000000000000000001.json", 30),
            meta("00000000000000000002.json", 40),
        ];
        assert_eq!(json_since_checkpoint(&none, 2), 70);
    }
}
