//! Changing column types (e.g. `ALTER COLUMN … TYPE BIGINT`). Without the `typeWidening`
//! table feature a Delta table's files must store the types its schema says, or other
//! readers misread them; so every data file is re-encoded with the new types, and the new
//! schema, the removes and the adds go into one commit. Values are cast with checked casts:
//! one that would not survive the new type fails the call, and nothing is committed.

use deltalake::kernel::engine::arrow_conversion::TryIntoKernel;
use deltalake::kernel::{Action, MetadataExt, StructType};
use deltalake::protocol::{DeltaOperation, SaveMode};
use deltalake::table::config::TablePropertiesExt;

use arrow::datatypes::{Field, Schema};
use std::sync::Arc;

use crate::error::{DeltaLiteError, Result};
use crate::io::upload::MultipartPolicy;
use crate::ops::compact::{CompactOptions, CompactStats};
use crate::ops::rearrange::{RearrangeSettings, Rearrangement};
use crate::options::EnvDefaults;
use crate::table::DeltaLiteTable;
use crate::table::files::active_files;
use crate::txn::{CommitSpec, ReadSet};

impl DeltaLiteTable {
    /// Give the named columns new types (each `Field` names an existing, non-partition
    /// column and its new type; nullability and field metadata stay as they are).
    /// Every data file is rewritten with the new types in the same commit as the new
    /// schema. Concurrent commits are not rebased over (`commit_max_retries` is ignored):
    /// a file appended meanwhile would still hold the old types.
    pub async fn change_column_types(
        &mut self,
        changes: &[Field],
        options: &CompactOptions,
    ) -> Result<CompactStats> {
        if options.read_batch_size == 0 {
            return Err(DeltaLiteError::invalid("read_batch_size must be positive"));
        }
        let partition_columns = self.partition_columns()?;
        let current = self.schema()?;
        let mut fields: Vec<Field> = current
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .collect();
        for change in changes {
            let idx = current.index_of(change.name()).map_err(|_| {
                DeltaLiteError::schema(format!("column {:?} is not in the table", change.name()))
            })?;
            if partition_columns.contains(change.name()) {
                return Err(DeltaLiteError::schema(format!(
                    "cannot change the type of partition column {:?}",
                    change.name()
                )));
            }
            fields[idx] = fields[idx]
                .clone()
                .with_data_type(change.data_type().clone());
        }
        let kernel: StructType = (&Schema::new(fields.clone()))
            .try_into_kernel()
            .map_err(|e| {
                DeltaLiteError::schema(format!("schema cannot be stored in a Delta table: {e}"))
            })?;
        // The Arrow layout Delta stores for the new schema (its own type mapping).
        let new_schema = crate::ops::write::delta_arrow_schema(&Schema::new(fields))?;

        let table = self.delta_table();
        let state = table.snapshot()?;
        crate::schema::features::check_supported(state)?;
        let metadata = state
            .metadata()
            .clone()
            .with_schema(&kernel)
            .map_err(|e| DeltaLiteError::schema(e.to_string()))?;
        let mut rearrangement = Rearrangement::new(
            table.object_store(),
            table.table_url().clone(),
            state,
            RearrangeSettings {
                table_schema: Arc::clone(&new_schema),
                target_file_size: options
                    .target_file_size
                    .unwrap_or_else(|| state.table_config().target_file_size().get()),
                read_batch_size: options.read_batch_size,
                max_buffered_bytes: options.max_buffered_bytes,
                bloom_filter_columns: options.bloom_filter_columns.clone(),
                unique_key: false,
                // `CompactOptions` has no multipart knobs: the process defaults apply.
                compression: crate::io::writer::WRITE_COMPRESSION,
                multipart: MultipartPolicy::for_table(
                    table.table_url(),
                    EnvDefaults::get().multipart_threshold,
                    EnvDefaults::get().multipart_part_size,
                ),
            },
        )?;
        let mut stats = CompactStats::default();
        for file in active_files(state)? {
            stats.files_removed += 1;
            match rearrangement.rewrite_group(vec![file]).await {
                Ok(rewrite) => {
                    stats.rows_rewritten += rewrite.rows;
                    rearrangement.record(rewrite);
                }
                Err(e) => {
                    rearrangement.abandon().await;
                    return Err(e);
                }
            }
        }
        stats.files_added = rearrangement.files_added();
        let operation = DeltaOperation::Write {
            mode: SaveMode::Overwrite,
            partition_by: Some(partition_columns),
            predicate: None,
        };
        let spec = CommitSpec::new(&options.commit_metadata, &None);
        stats.version = rearrangement
            .commit(
                self,
                vec![Action::Metadata(metadata)],
                operation,
                &spec,
                options.commit_max_retries,
                ReadSet::everything(),
            )
            .await?
            .unwrap_or_else(|| self.version());
        Ok(stats)
    }
}
