//! Compaction: bin-pack the small files of each partition into target-size files, in one
//! commit. Files are streamed a slice at a time through delta-rs's `PartitionWriter`, so
//! memory is one decoded slice plus one open row group, whatever the table size.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use arrow::datatypes::Schema;
use delta_kernel::expressions::Scalar;
use delta_kernel::schema::DataType as KernelType;
use deltalake::kernel::Action;
use deltalake::kernel::transaction::{CommitBuilder, CommitProperties};
use deltalake::protocol::DeltaOperation;
use deltalake::table::config::TablePropertiesExt;
use futures::TryStreamExt;
use indexmap::IndexMap;
use object_store::ObjectStoreExt;

use crate::error::{DeltaLiteError, Result};
use crate::partition::PartitionKey;
use crate::read::{open, stream_projected};
use crate::table::DeltaLiteTable;
use crate::target::{TargetFile, active_files, check_file_supported};
use crate::writer::{WriterFactory, WriterSettings};

/// Options of a compaction.
#[derive(Debug, Clone)]
pub struct CompactOptions {
    /// Output file size target, and the size under which a file counts as small; `None`
    /// means the table's `delta.targetFileSize` (else 100 MiB).
    pub target_file_size: Option<u64>,
    /// Rows per decoded slice when streaming input files.
    pub read_batch_size: usize,
    /// Bytes the open output row group may hold.
    pub max_buffered_bytes: usize,
    /// Columns to write bloom filters for (the upsert keys, so later probes stay cheap).
    pub bloom_filter_columns: Vec<String>,
    /// Attempts delta-rs may rebase the commit over concurrent ones.
    pub commit_max_retries: usize,
    /// Extra key/values recorded in the commit info.
    pub commit_metadata: HashMap<String, serde_json::Value>,
}

impl Default for CompactOptions {
    fn default() -> Self {
        Self {
            target_file_size: None,
            read_batch_size: 8192,
            max_buffered_bytes: 64 * 1024 * 1024,
            bloom_filter_columns: Vec::new(),
            commit_max_retries: 15,
            commit_metadata: HashMap::new(),
        }
    }
}

/// What a compaction did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompactStats {
    /// Version committed (the current version when there was nothing to do).
    pub version: u64,
    /// Partitions that had files merged.
    pub partitions_compacted: usize,
    /// Small files replaced.
    pub files_removed: usize,
    /// Files written.
    pub files_added: usize,
    /// Rows streamed from the removed files into the new ones.
    pub rows_rewritten: u64,
}

/// Greedy bin-packing of one partition's small files (sorted by size): a bin closes when
/// the next file would push it past the target. Bins of one file are left alone.
fn bins(mut small: Vec<TargetFile>, target: u64) -> Vec<Vec<TargetFile>> {
    small.sort_by_key(|f| f.size);
    let mut out: Vec<Vec<TargetFile>> = Vec::new();
    let mut current: Vec<TargetFile> = Vec::new();
    let mut size = 0u64;
    for file in small {
        if !current.is_empty() && size + file.size > target {
            out.push(std::mem::take(&mut current));
            size = 0;
        }
        size += file.size;
        current.push(file);
    }
    out.push(current);
    out.retain(|bin| bin.len() > 1);
    out
}

impl DeltaLiteTable {
    /// Merge the small files of every partition into files of about the target size.
    /// One commit (`OPTIMIZE`, `dataChange = false`); the logical contents do not change.
    pub async fn compact(&mut self, options: &CompactOptions) -> Result<CompactStats> {
        if options.read_batch_size == 0 || options.target_file_size == Some(0) {
            return Err(DeltaLiteError::invalid(
                "read_batch_size and target_file_size must be positive",
            ));
        }
        let table = self.delta_table();
        let state = table.snapshot()?;
        crate::features::check_supported(state)?;
        let config = state.table_config();
        let target = options
            .target_file_size
            .unwrap_or_else(|| config.target_file_size().get());
        let partition_columns = state.metadata().partition_columns().to_vec();
        let kernel_schema = state.schema();
        let table_schema = state.snapshot().arrow_schema();
        let data_schema = Arc::new(Schema::new(
            table_schema
                .fields()
                .iter()
                .filter(|f| !partition_columns.contains(f.name()))
                .cloned()
                .collect::<Vec<_>>(),
        ));
        for name in &options.bloom_filter_columns {
            if data_schema.index_of(name).is_err() && !partition_columns.contains(name) {
                return Err(DeltaLiteError::schema(format!(
                    "bloom filter column {name:?} is not in the table"
                )));
            }
        }
        let writers = WriterFactory::new(
            table.object_store(),
            WriterSettings {
                data_schema: Arc::clone(&data_schema),
                bloom_columns: options
                    .bloom_filter_columns
                    .iter()
                    .filter(|c| !partition_columns.contains(c))
                    .cloned()
                    .collect(),
                target_file_size: target,
                row_group_bytes: options.max_buffered_bytes,
                write_batch_size: options.read_batch_size,
                upload_concurrency: 2,
                num_indexed_cols: config.num_indexed_cols(),
                stats_columns: config
                    .data_skipping_stats_columns
                    .as_ref()
                    .map(|cols| cols.iter().map(|c| c.to_string()).collect()),
            },
        );

        // Small files grouped by partition, in a stable order.
        let mut by_partition: BTreeMap<Vec<Option<String>>, Vec<TargetFile>> = BTreeMap::new();
        for file in active_files(state)? {
            check_file_supported(&file)?;
            if file.size < target {
                by_partition
                    .entry(file.partition.clone())
                    .or_default()
                    .push(file);
            }
        }

        let store = table.object_store();
        let mut stats = CompactStats::default();
        let mut actions: Vec<Action> = Vec::new();
        let mut written: Vec<String> = Vec::new();
        let result: Result<()> = async {
            for (serialized, files) in by_partition {
                let groups = bins(files, target);
                if groups.is_empty() {
                    continue;
                }
                let key = partition_key(&partition_columns, &serialized, kernel_schema.as_ref())?;
                stats.partitions_compacted += 1;
                for group in groups {
                    let mut writer = writers.partition_writer(&key)?;
                    let copied: Result<u64> = async {
                        let mut rows = 0u64;
                        for file in &group {
                            let builder = open(Arc::clone(&store), file).await?;
                            let roots: Vec<usize> = (0..builder.schema().fields().len()).collect();
                            let row_groups = (0..builder.metadata().num_row_groups()).collect();
                            let mut stream = stream_projected(
                                builder,
                                &roots,
                                row_groups,
                                options.read_batch_size,
                            )?;
                            while let Some(batch) = stream.try_next().await? {
                                // Older files may predate schema changes: cast to now.
                                let batch = crate::conform::conform_stored(&batch, &data_schema)?;
                                rows += batch.num_rows() as u64;
                                writer.write(&batch).await?;
                            }
                        }
                        Ok(rows)
                    }
                    .await;
                    let rows = match copied {
                        Ok(rows) => rows,
                        Err(e) => {
                            crate::rewrite::abort(writer).await;
                            return Err(e);
                        }
                    };
                    for mut add in writer.close().await? {
                        // Rearranging data is not a change of data (readers of the change
                        // stream and streaming sources skip it).
                        add.data_change = false;
                        written.push(add.path.clone());
                        stats.files_added += 1;
                        actions.push(Action::Add(add));
                    }
                    stats.rows_rewritten += rows;
                    for file in group {
                        let mut remove = file.remove;
                        remove.data_change = false;
                        stats.files_removed += 1;
                        actions.push(Action::Remove(remove));
                    }
                }
            }
            Ok(())
        }
        .await;
        if let Err(e) = result {
            delete_files(self, &written).await;
            return Err(e);
        }
        if actions.is_empty() {
            stats.version = self.version();
            return Ok(stats);
        }
        let properties = CommitProperties::default()
            .with_max_retries(options.commit_max_retries)
            .with_metadata(options.commit_metadata.clone());
        let operation = DeltaOperation::Optimize {
            predicate: None,
            target_size: target as i64,
        };
        let table = self.delta_table_mut();
        let committed = CommitBuilder::from(properties)
            .with_actions(actions)
            .build(Some(table.snapshot()?), table.log_store(), operation)
            .await;
        match committed {
            Ok(done) => {
                let version = done.version();
                table.update_incremental(Some(version)).await?;
                stats.version = version;
                Ok(stats)
            }
            Err(e) => {
                // A concurrent writer removed files this compaction read: nothing was
                // committed, so the new files are garbage.
                let conflict = matches!(
                    &e,
                    deltalake::DeltaTableError::Transaction { .. }
                        | deltalake::DeltaTableError::VersionAlreadyExists(_)
                );
                if conflict {
                    delete_files(self, &written).await;
                    return Err(DeltaLiteError::CommitConflict(format!(
                        "compaction lost to a concurrent commit: {e}"
                    )));
                }
                Err(e.into())
            }
        }
    }
}

/// Typed partition values for the writer from the canonical serialization.
fn partition_key(
    columns: &[String],
    serialized: &[Option<String>],
    schema: &delta_kernel::schema::StructType,
) -> Result<PartitionKey> {
    let mut values = IndexMap::new();
    for (name, value) in columns.iter().zip(serialized) {
        let field = schema.field(name).ok_or_else(|| {
            DeltaLiteError::Other(format!("partition column {name} missing from schema"))
        })?;
        let KernelType::Primitive(primitive) = field.data_type() else {
            return Err(DeltaLiteError::UnsupportedTable(format!(
                "partition column {name} is not of a primitive type"
            )));
        };
        let scalar = match value {
            Some(raw) => primitive.parse_scalar(raw).map_err(|e| {
                DeltaLiteError::Other(format!("bad partition value {raw:?} of {name}: {e}"))
            })?,
            None => Scalar::Null(field.data_type().clone()),
        };
        values.insert(name.clone(), scalar);
    }
    Ok(PartitionKey::new(values))
}

async fn delete_files(table: &DeltaLiteTable, paths: &[String]) {
    let store = table.delta_table().object_store();
    for path in paths {
        if let Err(e) = store
            .delete(&object_store::path::Path::from(path.as_str()))
            .await
        {
            tracing::warn!(%path, error = %e, "failed to delete an uncommitted file");
        }
    }
}
