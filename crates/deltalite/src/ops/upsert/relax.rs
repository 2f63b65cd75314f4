//! Non-nullable columns that cannot stay so: with `Nullability::Relax` (the Python
//! default, as PostHog's deltalite does) the upsert makes them nullable in its own commit,
//! instead of failing. A column must be relaxed when
//! - the batch has rows and does not carry it (the rows it inserts get NULL there), or
//! - the batch carries a NULL in it, or
//! - a live file's log statistics count a NULL in it: older writers wrote NULLs under a
//!   schema that denies them, and every read of such a file would fail ("poisoned" tables;
//!   only positive evidence counts, files without statistics are not suspected).
//!
//! The new schema is a `metaData` action in the upsert's commit: the schema change and the
//! rows that need it land together or not at all.

use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::{Schema, SchemaRef};
use delta_kernel::expressions::Scalar;
use delta_kernel::schema::StructType;
use deltalake::kernel::engine::arrow_conversion::TryIntoArrow;
use deltalake::kernel::{Action, MetadataExt};
use deltalake::table::state::DeltaTableState;

use crate::error::{DeltaLiteError, Result};
use crate::ops::upsert::target::field_of;
use crate::options::Nullability;
use crate::table::files::TargetFile;

/// The relaxed table schema and the action that records it.
pub(crate) struct Relaxed {
    /// The table's Arrow schema with the relaxed columns nullable.
    pub schema: SchemaRef,
    /// `metaData` with the new schema, for the upsert's commit.
    pub action: Action,
    /// How many columns were relaxed.
    pub columns: usize,
}

/// The columns of `state`'s schema that must become nullable for this upsert, sorted;
/// empty when nothing needs to change (or `mode` refuses).
pub(crate) fn columns_to_relax(
    state: &DeltaTableState,
    source: &Schema,
    batches: &[RecordBatch],
    files: &[TargetFile],
    mode: Nullability,
) -> Vec<String> {
    if mode == Nullability::Refuse {
        return Vec::new();
    }
    let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
    let mut out: Vec<String> = state
        .schema()
        .fields()
        .filter(|f| !f.nullable)
        .filter(|f| {
            let name = f.name.as_str();
            let nulls_in_batch = match source.index_of(name) {
                Ok(i) => batches.iter().any(|b| b.column(i).null_count() > 0),
                Err(_) => rows > 0,
            };
            nulls_in_batch
                || files.iter().any(|file| {
                    matches!(field_of(&file.null_counts, name), Some(Scalar::Long(n)) if *n > 0)
                })
        })
        .map(|f| f.name.clone())
        .collect();
    out.sort();
    out
}

/// `state`'s schema with `columns` nullable, and its `metaData` action.
pub(crate) fn relax(state: &DeltaTableState, columns: &[String]) -> Result<Relaxed> {
    let kernel = StructType::try_new(state.schema().fields().map(|f| {
        let mut f = f.clone();
        if columns.contains(&f.name) {
            f.nullable = true;
        }
        f
    }))
    .map_err(|e| DeltaLiteError::Other(format!("cannot relax the schema: {e}")))?;
    let arrow: Schema = (&kernel).try_into_arrow()?;
    let metadata = state
        .metadata()
        .clone()
        .with_schema(&kernel)
        .map_err(|e| DeltaLiteError::schema(e.to_string()))?;
    Ok(Relaxed {
        schema: Arc::new(arrow),
        action: Action::Metadata(metadata),
        columns: columns.len(),
    })
}
