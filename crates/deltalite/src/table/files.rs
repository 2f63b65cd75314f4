//! The snapshot's active files, with what pruning, rewriting and deletion vectors need.

use delta_kernel::expressions::Scalar;
use deltalake::kernel::{Add, DeletionVectorDescriptor, Remove};
use deltalake::table::state::DeltaTableState;
use object_store::path::Path;

use crate::error::Result;
use crate::schema::partition::normalize_raw;

/// An active file of the snapshot, with what pruning needs.
#[derive(Debug, Clone)]
pub(crate) struct TargetFile {
    pub path: Path,
    pub size: u64,
    /// Canonical partition values, in table partition-column order.
    pub partition: Vec<Option<String>>,
    pub num_records: Option<usize>,
    pub min_values: Option<Scalar>,
    pub max_values: Option<Scalar>,
    pub null_counts: Option<Scalar>,
    /// The file's deletion vector: its rows at these positions are not in the table.
    pub deletion_vector: Option<DeletionVectorDescriptor>,
    pub remove: Remove,
    /// The Add action's `modificationTime`.
    pub modification_time: i64,
    /// The Add action's statistics, kept only when asked for ([`active_files_with_stats`]):
    /// a file given a deletion vector is added again with them.
    pub stats: Option<String>,
}

/// The value `stats` (a log statistics struct) holds for column `name`.
pub(crate) fn field_of<'a>(stats: &'a Option<Scalar>, name: &str) -> Option<&'a Scalar> {
    match stats {
        Some(Scalar::Struct(data)) => data
            .fields()
            .iter()
            .position(|f| f.name() == name)
            .map(|i| &data.values()[i]),
        _ => None,
    }
}

impl TargetFile {
    /// This file added again with a new deletion vector: same data file, statistics kept
    /// but no longer tight (they also describe the rows the vector removes).
    pub(crate) fn add_with(&self, dv: DeletionVectorDescriptor) -> Add {
        let stats = self.stats.as_deref().and_then(|json| {
            let mut value: serde_json::Value = serde_json::from_str(json).ok()?;
            value
                .as_object_mut()?
                .insert("tightBounds".into(), serde_json::Value::Bool(false));
            Some(value.to_string())
        });
        Add {
            path: self.remove.path.clone(),
            partition_values: self.remove.partition_values.clone().unwrap_or_default(),
            size: self.size as i64,
            modification_time: self.modification_time,
            data_change: true,
            stats,
            tags: None,
            deletion_vector: Some(dv),
            base_row_id: None,
            default_row_commit_version: None,
            clustering_provider: None,
        }
    }
}

/// Every active file of the snapshot.
pub(crate) fn active_files(state: &DeltaTableState) -> Result<Vec<TargetFile>> {
    files(state, false)
}

/// Every active file of the snapshot, with its statistics.
pub(crate) fn active_files_with_stats(state: &DeltaTableState) -> Result<Vec<TargetFile>> {
    files(state, true)
}

fn files(state: &DeltaTableState, with_stats: bool) -> Result<Vec<TargetFile>> {
    let partition_columns = state.metadata().partition_columns().to_vec();
    let schema = state.schema();
    state
        .log_data()
        .iter()
        .map(|view| {
            Ok(TargetFile {
                path: view.object_store_path(),
                size: view.size().max(0) as u64,
                partition: normalize_raw(
                    &view.partition_values_map(),
                    &partition_columns,
                    schema.as_ref(),
                )?,
                num_records: view.num_records(),
                min_values: view.min_values(),
                max_values: view.max_values(),
                null_counts: view.null_counts(),
                deletion_vector: view.deletion_vector_descriptor(),
                remove: view.remove_action(true),
                modification_time: view.modification_time(),
                stats: if with_stats { view.stats() } else { None },
            })
        })
        .collect()
}
