//! Restore: make the table's files and metadata those of an earlier version, in one
//! `RESTORE` commit through the transaction path. No data file is written: files live at
//! the target version but not now are added back (they must still exist: a vacuum may have
//! deleted them), files live now but not then are removed. The plan is a diff against the
//! current snapshot, so a conflicting race re-plans against the newer one.

use std::collections::{HashMap, HashSet};

use deltalake::DeltaTable;
use deltalake::kernel::{Action, Add, Remove};
use deltalake::protocol::DeltaOperation;
use deltalake::table::state::DeltaTableState;
use futures::future::BoxFuture;
use indexmap::IndexMap;
use object_store::ObjectStoreExt;
use object_store::path::Path;

use crate::error::{DeltaLiteError, Result};
use crate::table::DeltaLiteTable;
use crate::txn::{self, CommitSpec, Done, Policy, ReadSet, Staged};

/// What a restore did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RestoreStats {
    /// The version committed (the current version when it already matched the target).
    pub version: u64,
    /// Files live now and not at the target version, removed.
    pub files_removed: usize,
    /// Files live at the target version and not now, added back.
    pub files_restored: usize,
}

/// A file's identity across versions: its path and its deletion vector, if any (a file
/// whose deletion vector changed is a different file, as delta-rs's restore keys them).
type FileKey = (Path, Option<String>);

/// The live files of `state` in the order delta-rs lists them, newest commit first: a
/// commit made of them lists them so too, and a reader that reverses the listing (the
/// server's scans, `sql/scan.rs`) reads them in the order they were written.
pub(crate) fn file_keys(state: &DeltaTableState) -> IndexMap<FileKey, (Add, Remove)> {
    state
        .log_data()
        .iter()
        .map(|view| {
            let dv = view.deletion_vector_descriptor().map(|dv| {
                format!(
                    "{}{}@{:?}",
                    dv.storage_type, dv.path_or_inline_dv, dv.offset
                )
            });
            #[allow(deprecated)]
            let add = view.add_action();
            (
                (view.object_store_path(), dv),
                (add, view.remove_action(true)),
            )
        })
        .collect()
}

/// The Remove of a live file, carrying its Add's tags and row-tracking fields (a file's
/// `remove_action` leaves them out).
pub(crate) fn removal(add: &Add, remove: &Remove) -> Remove {
    let mut remove = remove.clone();
    remove.tags = add.tags.clone();
    remove.base_row_id = add.base_row_id;
    remove.default_row_commit_version = add.default_row_commit_version;
    remove
}

/// A restore to `target` (the loaded snapshot of the version to restore), for [`txn::run`].
struct RestoreAttempt {
    target: DeltaTableState,
    version: u64,
}

impl txn::Attempt for RestoreAttempt {
    type Output = (usize, usize);

    fn stage<'a>(
        &'a mut self,
        table: &'a DeltaTable,
    ) -> BoxFuture<'a, Result<(Staged, (usize, usize))>> {
        Box::pin(async move {
            let current = table.snapshot()?;
            if self.version >= current.version() {
                return Err(DeltaLiteError::invalid(format!(
                    "cannot restore version {}: it is not older than the current version {}",
                    self.version,
                    current.version()
                )));
            }
            let then = file_keys(&self.target);
            let now = file_keys(current);
            let store = table.object_store();
            let mut actions = Vec::new();
            let mut restored = 0;
            for (key, (add, _)) in &then {
                if now.contains_key(key) {
                    continue;
                }
                // A file a vacuum deleted cannot come back: refuse before committing a
                // table that points at it.
                match store.head(&key.0).await {
                    Ok(_) => {}
                    Err(object_store::Error::NotFound { .. }) => {
                        return Err(DeltaLiteError::Other(format!(
                            "cannot restore version {}: its file {} no longer exists (vacuumed?)",
                            self.version, key.0
                        )));
                    }
                    Err(e) => return Err(e.into()),
                }
                let mut add = add.clone();
                add.data_change = true;
                actions.push(Action::Add(add));
                restored += 1;
            }
            let kept: HashSet<&FileKey> = then.keys().collect();
            let mut removed = 0;
            for (key, (add, remove)) in &now {
                if kept.contains(key) {
                    continue;
                }
                actions.push(Action::Remove(removal(add, remove)));
                removed += 1;
            }
            // The target's metadata (schema, properties) comes back with its files. The
            // protocol stays: it never goes down.
            let metadata = self.target.metadata().clone();
            if serde_json::to_value(&metadata).ok() != serde_json::to_value(current.metadata()).ok()
            {
                actions.push(Action::Metadata(metadata));
            }
            let mut staged = Staged::new(
                actions,
                DeltaOperation::Restore {
                    version: Some(self.version),
                    datetime: None,
                },
                ReadSet::everything(),
            );
            staged.commit_info = HashMap::from([
                (
                    "readVersion".to_string(),
                    serde_json::Value::from(current.version()),
                ),
                (
                    "operationMetrics".to_string(),
                    serde_json::json!({
                        "numRemovedFile": removed,
                        "numRestoredFile": restored,
                    }),
                ),
            ]);
            Ok((staged, (removed, restored)))
        })
    }
}

impl DeltaLiteTable {
    /// Make the table what it was at `version`: one `RESTORE` commit adding back the files
    /// of that version and removing the others (delta-rs's restore, through the engine's
    /// transaction path). Fails without committing if a file of `version` is gone. The
    /// handle moves to the new version.
    pub async fn restore(
        &mut self,
        version: u64,
        commit_metadata: &HashMap<String, serde_json::Value>,
        commit_max_retries: usize,
    ) -> Result<RestoreStats> {
        let mut target = self.delta_table().clone();
        target.load_version(version).await?;
        let mut attempt = RestoreAttempt {
            target: target.snapshot()?.clone(),
            version,
        };
        let spec = CommitSpec::new(commit_metadata, &None);
        let policy = Policy {
            max_retries: commit_max_retries,
            replan: true,
            hook: None,
        };
        Ok(
            match txn::run(self.delta_table_mut(), &spec, &policy, &mut attempt).await? {
                Done::Committed {
                    version,
                    output: (files_removed, files_restored),
                    ..
                } => RestoreStats {
                    version,
                    files_removed,
                    files_restored,
                },
                Done::Unchanged { version, .. } | Done::AlreadyApplied { version } => {
                    RestoreStats {
                        version,
                        ..Default::default()
                    }
                }
            },
        )
    }
}
