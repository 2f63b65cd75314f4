//! The snapshot's active files, with what pruning and rewriting need, and the check that
//! refuses files the engine cannot rewrite faithfully.

use delta_kernel::expressions::Scalar;
use deltalake::kernel::Remove;
use deltalake::table::state::DeltaTableState;
use object_store::path::Path;

use crate::error::{DeltaLiteError, Result};
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
    pub has_deletion_vector: bool,
    pub remove: Remove,
}

/// Every active file of the snapshot.
pub(crate) fn active_files(state: &DeltaTableState) -> Result<Vec<TargetFile>> {
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
                has_deletion_vector: view.deletion_vector_descriptor().is_some(),
                remove: view.remove_action(true),
            })
        })
        .collect()
}

/// Refuse files the engine cannot rewrite faithfully.
pub(crate) fn check_file_supported(file: &TargetFile) -> Result<()> {
    if file.has_deletion_vector {
        return Err(DeltaLiteError::UnsupportedTable(format!(
            "file {} has a deletion vector (deletionVectors)",
            file.path
        )));
    }
    Ok(())
}
