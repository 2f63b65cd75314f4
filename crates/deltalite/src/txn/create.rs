//! A table's first commit: protocol, metadata and the initial files together in version 0,
//! so that a crash or an error leaves either the table with its rows or no table at all
//! (never an empty table that a retry then trips over).

use std::collections::{HashMap, HashSet};

use delta_kernel::schema::StructType;
use deltalake::DeltaTable;
use deltalake::kernel::Action;
use deltalake::logstore::get_actions;
use deltalake::operations::create::CreateBuilder;
use deltalake::protocol::SaveMode;

use super::{CommitSpec, delete_added};
use crate::error::Result;

/// How a first commit ended.
pub(crate) enum Created {
    /// Version 0 holds this call's actions; the table is loaded at it.
    Table(DeltaTable),
    /// Another writer created the table first; this call's files were deleted again.
    Exists,
}

/// Commit version 0 of the table at `location` (built, not loaded) with `schema`,
/// `partition_columns`, `configuration` and `actions` (the initial files, already written).
pub(crate) async fn create(
    location: &DeltaTable,
    schema: &StructType,
    partition_columns: Vec<String>,
    configuration: HashMap<String, String>,
    actions: Vec<Action>,
    spec: &CommitSpec,
) -> Result<Created> {
    let log_store = location.log_store();
    let store = location.object_store();
    let own: HashSet<String> = actions
        .iter()
        .filter_map(|a| match a {
            Action::Add(add) => Some(add.path.clone()),
            _ => None,
        })
        .collect();
    // delta-rs refuses property keys it does not know. The engine's own `deltalite.*`
    // properties (layout hints) are not Delta's: when one is present, the check is off.
    let known_keys_only = !configuration.keys().any(|k| k.starts_with("deltalite."));
    let created = CreateBuilder::new()
        .with_log_store(log_store.clone())
        .with_columns(schema.fields().cloned())
        .with_partition_columns(partition_columns)
        .with_configuration(configuration.into_iter().map(|(k, v)| (k, Some(v))))
        .with_raise_if_key_not_exists(known_keys_only)
        .with_actions(actions.clone())
        .with_commit_properties(spec.properties())
        .with_save_mode(SaveMode::ErrorIfExists)
        .await;
    let err = match created {
        Ok(table) => {
            // A table whose checkpoint interval is 1 checkpoints its first commit too.
            super::maintain(&table, 0).await;
            return Ok(Created::Table(table));
        }
        Err(err) => err,
    };
    // Version 0 may exist: written by a concurrent creator, or by this call with the
    // response lost. Its Add paths (unique per call) tell which.
    match log_store.read_commit_entry(0).await {
        Ok(Some(bytes)) => {
            let ours = !own.is_empty()
                && get_actions(0, &bytes)?
                    .iter()
                    .any(|a| matches!(a, Action::Add(add) if own.contains(&add.path)));
            if ours {
                tracing::warn!(error = %err, "own first commit found after an error");
                let mut table = location.clone();
                table.load().await?;
                return Ok(Created::Table(table));
            }
            delete_added(&store, &actions).await;
            Ok(Created::Exists)
        }
        Ok(None) => {
            // Nothing was committed for certain.
            delete_added(&store, &actions).await;
            Err(err.into())
        }
        // Unknown outcome: the files may be referenced; vacuum sorts out orphans.
        Err(_) => Err(err.into()),
    }
}
