//! Publish: commit to a table, in one commit, what a staged copy of it changed.
//!
//! A staged copy is the same table read through a private log: its files live in the
//! table's folder, its commits after the version it branched from (`base`) are written
//! somewhere only its owner reads (the server's Flight SQL transactions). Publishing
//! diffs the staged snapshot against the table at `base` (files by path and deletion
//! vector, as restore keys them; metadata; protocol) and commits that difference through
//! the transaction path with `base` as the read version. So the engine's conflict rule
//! decides what a commit by someone else since `base` means: a difference that only adds
//! files is rebased over it (unless it changed the schema or protocol); one that removes
//! files or changes metadata read the whole table, and any concurrent data change makes
//! it a conflict, with nothing committed. A staged copy of a table that did not exist
//! (`base` `None`) becomes the table's version 0, or a conflict when someone created the
//! table meanwhile.

use std::collections::{HashMap, HashSet};

use deltalake::kernel::Action;
use deltalake::logstore::get_actions;
use deltalake::protocol::{DeltaOperation, SaveMode};
use object_store::ObjectStoreExt;

use super::restore::file_keys;
use crate::error::{DeltaLiteError, Result};
use crate::table::{DeltaLiteTable, TableLocation};
use crate::txn::{self, CommitSpec, Done, ReadSet, Staged};

/// What a publish committed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Published {
    /// The table's version holding the staged changes (unchanged when there were none).
    pub version: u64,
    /// Files (or deletion vectors of stored files) added.
    pub files_added: usize,
    /// Files removed (or replaced by a version with a deletion vector).
    pub files_removed: usize,
    /// Whether the changes only added files (then concurrent appends were rebased over).
    pub blind_append: bool,
}

impl TableLocation {
    /// Commit what `staged` changed since `base` (the version it branched from; `None`:
    /// there was no table) to the table here, in one commit (see the module
    /// documentation). A conflict is [`DeltaLiteError::CommitConflict`], with nothing
    /// committed; the staged files are then the caller's to delete.
    pub async fn publish(
        self,
        base: Option<u64>,
        staged: &DeltaLiteTable,
        commit_metadata: &HashMap<String, serde_json::Value>,
        commit_max_retries: usize,
    ) -> Result<Published> {
        let spec = CommitSpec::new(commit_metadata, &None);
        let Some(base) = base else {
            return self.publish_new(staged, &spec).await;
        };
        let mut table = self.delta_table().clone();
        table.load_version(base).await?;
        let then = table.snapshot()?;
        let now = staged.delta_table().snapshot()?;
        let before = file_keys(then);
        let after = file_keys(now);
        let mut actions = Vec::new();
        let mut files_added = 0;
        for (key, (add, _)) in &after {
            if !before.contains_key(key) {
                let mut add = add.clone();
                add.data_change = true;
                actions.push(Action::Add(add));
                files_added += 1;
            }
        }
        let kept: HashSet<_> = after.keys().collect();
        let mut files_removed = 0;
        for (key, (add, remove)) in &before {
            if kept.contains(key) {
                continue;
            }
            let mut remove = remove.clone();
            remove.tags = add.tags.clone();
            remove.base_row_id = add.base_row_id;
            remove.default_row_commit_version = add.default_row_commit_version;
            actions.push(Action::Remove(remove));
            files_removed += 1;
        }
        let mut changed_table = false;
        if serde_json::to_value(now.protocol()).ok() != serde_json::to_value(then.protocol()).ok() {
            actions.push(Action::Protocol(now.protocol().clone()));
            changed_table = true;
        }
        if serde_json::to_value(now.metadata()).ok() != serde_json::to_value(then.metadata()).ok() {
            actions.push(Action::Metadata(now.metadata().clone()));
            changed_table = true;
        }
        let blind_append = files_removed == 0 && !changed_table;
        let (operation, read_set) = if blind_append {
            let op = DeltaOperation::Write {
                mode: SaveMode::Append,
                partition_by: None,
                predicate: None,
            };
            (op, ReadSet::nothing())
        } else {
            (
                DeltaOperation::Update { predicate: None },
                ReadSet::everything(),
            )
        };
        let mut staged_commit = Staged::new(actions, operation, read_set);
        staged_commit.commit_info = HashMap::from([
            ("readVersion".to_string(), serde_json::Value::from(base)),
            (
                "isBlindAppend".to_string(),
                serde_json::Value::from(blind_append),
            ),
            (
                "operationMetrics".to_string(),
                serde_json::json!({
                    "numAddedFiles": files_added,
                    "numRemovedFiles": files_removed,
                }),
            ),
        ]);
        let version =
            match txn::commit_prepared(&mut table, &spec, commit_max_retries, staged_commit).await?
            {
                Done::Committed { version, .. }
                | Done::Unchanged { version, .. }
                | Done::AlreadyApplied { version } => version,
            };
        Ok(Published {
            version,
            files_added,
            files_removed,
            blind_append,
        })
    }

    /// Delete what `staged` wrote that the table at `base` does not reference: the data
    /// files and deletion vectors every staged commit added, including those a later
    /// staged commit removed again. Returns how many files were deleted; failures are
    /// logged, not returned: an orphan is only wasted space.
    pub async fn discard_staged(self, base: Option<u64>, staged: &DeltaLiteTable) -> Result<usize> {
        let before = match base {
            Some(v) => {
                let mut table = self.delta_table().clone();
                table.load_version(v).await?;
                file_keys(table.snapshot()?)
            }
            None => HashMap::new(),
        };
        let stored: HashSet<&object_store::path::Path> = before.keys().map(|(p, _)| p).collect();
        let mut doomed = std::collections::BTreeSet::new();
        let log_store = staged.delta_table().log_store();
        let first = base.map_or(0, |b| b + 1);
        for version in first..=staged.version() {
            let Some(bytes) = log_store.read_commit_entry(version).await? else {
                continue;
            };
            for action in get_actions(version, &bytes)? {
                let Action::Add(add) = action else {
                    continue;
                };
                // The log percent-encodes paths; the store names files decoded.
                let path = object_store::path::Path::from_url_path(&add.path)
                    .unwrap_or_else(|_| object_store::path::Path::from(add.path.as_str()));
                if !stored.contains(&path) {
                    doomed.insert(path);
                }
                if let Some(dv) = &add.deletion_vector {
                    doomed.extend(crate::io::dv::own_file(dv));
                }
            }
        }
        let store = staged.delta_table().object_store();
        let mut deleted = 0;
        for path in doomed {
            match store.delete(&path).await {
                Ok(()) => deleted += 1,
                // Deleted already (a conflicting publish deletes what it staged).
                Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => tracing::warn!(%path, error = %e, "could not delete a staged file"),
            }
        }
        Ok(deleted)
    }

    /// A staged copy of a table that did not exist: its schema, partitioning, properties
    /// and files become version 0.
    async fn publish_new(self, staged: &DeltaLiteTable, spec: &CommitSpec) -> Result<Published> {
        let state = staged.delta_table().snapshot()?;
        let metadata = state.metadata();
        let schema = state.schema();
        let partition_columns = metadata.partition_columns().to_vec();
        let configuration = metadata.configuration().clone();
        let actions: Vec<Action> = file_keys(state)
            .into_values()
            .map(|(mut add, _)| {
                add.data_change = true;
                Action::Add(add)
            })
            .collect();
        let files_added = actions.len();
        match txn::create::create(
            self.delta_table(),
            schema.as_ref(),
            partition_columns,
            configuration,
            actions,
            spec,
        )
        .await?
        {
            txn::create::Created::Table(_) => Ok(Published {
                version: 0,
                files_added,
                files_removed: 0,
                blind_append: true,
            }),
            txn::create::Created::Exists => Err(DeltaLiteError::CommitConflict(format!(
                "another writer created {} first; nothing was written",
                self.uri()
            ))),
        }
    }
}
