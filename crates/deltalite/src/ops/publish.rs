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

use delta_kernel::schema::StructType;
use deltalake::DeltaTable;
use deltalake::kernel::Action;
use deltalake::logstore::get_actions;
use deltalake::protocol::{DeltaOperation, SaveMode};
use object_store::ObjectStoreExt;

use super::restore::{file_keys, removal};
use crate::error::{DeltaLiteError, Result};
use crate::table::{DeltaLiteTable, TableLocation};
use crate::txn::commit::touches_read_set;
use crate::txn::{self, CommitSpec, Done, ReadSet, Staged};
use indexmap::IndexMap;

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

/// A publish, planned against the table at the staged copy's base and not committed
/// yet: [`PublishPlan::conflicts`] asks the engine's conflict rule about what others
/// committed since, [`PublishPlan::commit`] commits. A caller publishing several tables
/// checks them all before committing any.
pub struct PublishPlan {
    /// The table here: loaded at the base, or (for a new table) not loaded.
    table: DeltaTable,
    uri: String,
    kind: Plan,
    files_added: usize,
    files_removed: usize,
}

enum Plan {
    /// Nothing changed since the base.
    Unchanged { base: u64 },
    /// The difference to commit on top of `base`.
    Existing {
        base: u64,
        staged: Box<Staged>,
        blind_append: bool,
    },
    /// A table to create with these files.
    New {
        schema: Box<StructType>,
        partition_columns: Vec<String>,
        configuration: HashMap<String, String>,
        actions: Vec<Action>,
    },
}

impl TableLocation {
    /// Commit what `staged` changed since `base` (the version it branched from; `None`:
    /// there was no table) to the table here, in one commit: [`Self::plan_publish`],
    /// then [`PublishPlan::commit`].
    pub async fn publish(
        self,
        base: Option<u64>,
        staged: &DeltaLiteTable,
        commit_metadata: &HashMap<String, serde_json::Value>,
        commit_max_retries: usize,
    ) -> Result<Published> {
        self.plan_publish(base, staged)
            .await?
            .commit(commit_metadata, commit_max_retries)
            .await
    }

    /// The commit that would make the table here have what `staged` changed since
    /// `base` (see the module documentation).
    pub async fn plan_publish(
        self,
        base: Option<u64>,
        staged: &DeltaLiteTable,
    ) -> Result<PublishPlan> {
        let uri = self.uri().to_string();
        let now = staged.delta_table().snapshot()?;
        let Some(base) = base else {
            let metadata = now.metadata();
            let actions: Vec<Action> = file_keys(now)
                .into_values()
                .map(|(mut add, _)| {
                    add.data_change = true;
                    Action::Add(add)
                })
                .collect();
            return Ok(PublishPlan {
                table: self.delta_table().clone(),
                uri,
                files_added: actions.len(),
                files_removed: 0,
                kind: Plan::New {
                    schema: Box::new(now.schema().as_ref().clone()),
                    partition_columns: metadata.partition_columns().to_vec(),
                    configuration: metadata.configuration().clone(),
                    actions,
                },
            });
        };
        let mut table = self.delta_table().clone();
        table.load_version(base).await?;
        if staged.version() == base {
            return Ok(PublishPlan {
                table,
                uri,
                files_added: 0,
                files_removed: 0,
                kind: Plan::Unchanged { base },
            });
        }
        let then = table.snapshot()?;
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
            actions.push(Action::Remove(removal(add, remove)));
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
        Ok(PublishPlan {
            table,
            uri,
            files_added,
            files_removed,
            kind: Plan::Existing {
                base,
                staged: Box::new(staged_commit),
                blind_append,
            },
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
            None => IndexMap::new(),
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
}

impl PublishPlan {
    /// Whether committing now would be a conflict: someone created the table meanwhile
    /// (a new table), or a commit since the base touched what the difference read (the
    /// engine's rule, as the commit itself applies it).
    pub async fn conflicts(&self) -> Result<bool> {
        match &self.kind {
            Plan::Unchanged { .. } => Ok(false),
            Plan::New { .. } => Ok(self.table.log_store().is_delta_table_location().await?),
            Plan::Existing { base, staged, .. } => {
                let mut latest = self.table.clone();
                latest.update_incremental(None).await?;
                let now = latest.version().unwrap_or(*base);
                if now == *base {
                    return Ok(false);
                }
                let own_removes: HashSet<&str> = staged
                    .actions
                    .iter()
                    .filter_map(|a| match a {
                        Action::Remove(remove) => Some(remove.path.as_str()),
                        _ => None,
                    })
                    .collect();
                touches_read_set(&self.table, base + 1, now, &staged.read_set, &own_removes).await
            }
        }
    }

    /// Commit the plan: one commit through the transaction path, or a
    /// [`DeltaLiteError::CommitConflict`] with nothing committed (the plan's new files
    /// are then deleted).
    pub async fn commit(
        self,
        commit_metadata: &HashMap<String, serde_json::Value>,
        commit_max_retries: usize,
    ) -> Result<Published> {
        let spec = CommitSpec::new(commit_metadata, &None);
        let (files_added, files_removed) = (self.files_added, self.files_removed);
        let mut table = self.table;
        match self.kind {
            Plan::Unchanged { base } => Ok(Published {
                version: base,
                blind_append: true,
                ..Default::default()
            }),
            Plan::Existing {
                staged,
                blind_append,
                ..
            } => {
                let version =
                    match txn::commit_prepared(&mut table, &spec, commit_max_retries, *staged)
                        .await?
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
            Plan::New {
                schema,
                partition_columns,
                configuration,
                actions,
            } => match txn::create::create(
                &table,
                &schema,
                partition_columns,
                configuration,
                actions,
                &spec,
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
                    self.uri
                ))),
            },
        }
    }
}
