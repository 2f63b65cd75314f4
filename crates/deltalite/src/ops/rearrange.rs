//! Rewriting whole files without changing what they mean: the shared machinery of
//! compaction (bin-packing) and column type changes (re-encoding with the new types).
//! Input files stream a slice at a time through delta-rs's `PartitionWriter`, so memory is
//! one decoded slice plus one open row group, whatever the table size; everything goes into
//! one commit, and the new files are deleted again when that commit does not happen.

use std::sync::Arc;

use arrow::datatypes::{Schema, SchemaRef};
use delta_kernel::expressions::Scalar;
use delta_kernel::schema::{DataType as KernelType, StructType};
use deltalake::kernel::engine::arrow_conversion::TryIntoKernel;
use deltalake::kernel::{Action, Add, Remove};
use deltalake::logstore::ObjectStoreRef;
use deltalake::protocol::DeltaOperation;
use deltalake::table::config::TablePropertiesExt;
use deltalake::table::state::DeltaTableState;
use futures::TryStreamExt;
use indexmap::IndexMap;
use object_store::ObjectStoreExt;

use crate::error::{DeltaLiteError, Result};
use crate::io::dv::Deleted;
use crate::io::read::{open, stream_projected};
use crate::io::upload::MultipartPolicy;
use crate::io::writer::{WriterFactory, WriterSettings};
use crate::schema::partition::PartitionKey;
use crate::table::DeltaLiteTable;
use crate::table::files::TargetFile;
use crate::txn::{self, CommitSpec, Done, ReadSet, Staged};

/// How the new files are written.
pub(crate) struct RearrangeSettings {
    /// The table schema the new files follow (the current one, or the one about to be
    /// committed).
    pub table_schema: SchemaRef,
    pub target_file_size: u64,
    pub read_batch_size: usize,
    pub max_buffered_bytes: usize,
    pub bloom_filter_columns: Vec<String>,
    /// Whether `bloom_filter_columns` is a unique key (see `WriterSettings::unique_key`).
    pub unique_key: bool,
    /// How the new files go up (`None`: a local table's store as it is).
    pub multipart: Option<MultipartPolicy>,
    /// Page compression of the new files.
    pub compression: deltalake::parquet::basic::Compression,
}

/// What rewriting one group of files wrote and read.
#[derive(Debug, Default)]
pub(crate) struct GroupRewrite {
    pub adds: Vec<Add>,
    pub removes: Vec<Remove>,
    /// Rows copied.
    pub rows: u64,
    /// Batches read.
    pub batches: u64,
}

/// Copies groups of files into new files and collects the actions of one commit.
pub(crate) struct Rearrangement {
    store: ObjectStoreRef,
    table_url: url::Url,
    writers: WriterFactory,
    data_schema: SchemaRef,
    partition_columns: Vec<String>,
    kernel_schema: Arc<StructType>,
    read_batch_size: usize,
    actions: Vec<Action>,
    written: Vec<String>,
}

impl Rearrangement {
    pub(crate) fn new(
        store: ObjectStoreRef,
        table_url: url::Url,
        state: &DeltaTableState,
        settings: RearrangeSettings,
    ) -> Result<Self> {
        let partition_columns = state.metadata().partition_columns().to_vec();
        let data_schema = Arc::new(Schema::new(
            settings
                .table_schema
                .fields()
                .iter()
                .filter(|f| !partition_columns.contains(f.name()))
                .cloned()
                .collect::<Vec<_>>(),
        ));
        for name in &settings.bloom_filter_columns {
            if data_schema.index_of(name).is_err() && !partition_columns.contains(name) {
                return Err(DeltaLiteError::schema(format!(
                    "bloom filter column {name:?} is not in the table"
                )));
            }
        }
        let config = state.table_config();
        let writers = WriterFactory::new(
            Arc::clone(&store),
            WriterSettings {
                data_schema: Arc::clone(&data_schema),
                bloom_columns: settings
                    .bloom_filter_columns
                    .iter()
                    .filter(|c| !partition_columns.contains(c))
                    .cloned()
                    .collect(),
                unique_key: settings.unique_key,
                target_file_size: settings.target_file_size,
                row_group_bytes: settings.max_buffered_bytes.max(crate::options::MIB),
                compression: settings.compression,
                write_batch_size: settings.read_batch_size,
                upload_concurrency: 2,
                num_indexed_cols: config.num_indexed_cols(),
                stats_columns: config
                    .data_skipping_stats_columns
                    .as_ref()
                    .map(|cols| cols.iter().map(|c| c.to_string()).collect()),
                multipart: settings.multipart,
            },
        );
        let kernel_schema: StructType =
            settings
                .table_schema
                .as_ref()
                .try_into_kernel()
                .map_err(|e| {
                    DeltaLiteError::schema(format!("schema cannot be stored in a Delta table: {e}"))
                })?;
        Ok(Self {
            store,
            table_url,
            writers,
            data_schema,
            partition_columns,
            kernel_schema: Arc::new(kernel_schema),
            read_batch_size: settings.read_batch_size,
            actions: Vec::new(),
            written: Vec::new(),
        })
    }

    /// Stream `group` (files of one partition) into new files; their rows are cast to the
    /// new layout with checked casts, and rows a deletion vector removed stay behind (the
    /// new files have none). Groups may be rewritten concurrently; the result is
    /// [`Self::record`]ed for the commit, or its files deleted ([`Self::discard`]).
    pub(crate) async fn rewrite_group(&self, group: Vec<TargetFile>) -> Result<GroupRewrite> {
        let Some(first) = group.first() else {
            return Ok(GroupRewrite::default());
        };
        let key = partition_key(
            &self.partition_columns,
            &first.partition,
            &self.kernel_schema,
        )?;
        let mut writer = self.writers.partition_writer(&key)?;
        let copied: Result<(u64, u64)> = async {
            let (mut rows, mut batches) = (0u64, 0u64);
            for file in &group {
                let deleted = Deleted::of(&self.store, &self.table_url, file).await?;
                let builder = open(Arc::clone(&self.store), file).await?;
                let roots: Vec<usize> = (0..builder.schema().fields().len()).collect();
                let row_groups = (0..builder.metadata().num_row_groups()).collect();
                let mut stream =
                    stream_projected(builder, &roots, row_groups, self.read_batch_size)?;
                // Every row group in file order: a running count is each row's position.
                let mut position = 0u64;
                while let Some(batch) = stream.try_next().await? {
                    let start = position;
                    position += batch.num_rows() as u64;
                    let batch = match deleted
                        .as_ref()
                        .and_then(|d| d.keep(start, batch.num_rows()))
                    {
                        Some(keep) => arrow::compute::filter_record_batch(&batch, &keep)?,
                        None => batch,
                    };
                    // Older files may predate schema changes: cast to the new layout.
                    let batch = crate::schema::conform::conform_stored(&batch, &self.data_schema)?;
                    rows += batch.num_rows() as u64;
                    batches += 1;
                    writer.write(&batch).await?;
                }
            }
            Ok((rows, batches))
        }
        .await;
        let (rows, batches) = match copied {
            Ok(counts) => counts,
            Err(e) => {
                crate::io::writer::abort(writer).await;
                return Err(e);
            }
        };
        let adds = writer
            .close()
            .await?
            .into_iter()
            .map(|mut add| {
                // Rearranging data is not a change of data (readers of the change stream
                // and streaming sources skip it).
                add.data_change = false;
                add
            })
            .collect();
        let removes = group
            .into_iter()
            .map(|file| {
                let mut remove = file.remove;
                remove.data_change = false;
                remove
            })
            .collect();
        Ok(GroupRewrite {
            adds,
            removes,
            rows,
            batches,
        })
    }

    /// Keep a group's rewrite for the commit.
    pub(crate) fn record(&mut self, rewrite: GroupRewrite) {
        for add in rewrite.adds {
            self.written.push(add.path.clone());
            self.actions.push(Action::Add(add));
        }
        self.actions
            .extend(rewrite.removes.into_iter().map(Action::Remove));
    }

    /// Delete the files of a group's rewrite that will not be committed.
    pub(crate) async fn discard(&self, rewrite: &GroupRewrite) {
        let paths: Vec<String> = rewrite.adds.iter().map(|a| a.path.clone()).collect();
        delete_files(&self.store, &paths).await;
    }

    /// Files written so far.
    pub(crate) fn files_added(&self) -> usize {
        self.written.len()
    }

    /// Forget the work: delete the files written.
    pub(crate) async fn abandon(self) {
        delete_files(&self.store, &self.written).await;
    }

    /// One commit of `leading` actions (e.g. a new schema) and every rewrite. Returns
    /// `None` when there was nothing to commit.
    /// Commit the rewritten files (after `leading`, e.g. a schema change) through the
    /// transaction path; `None` when there was nothing to commit. A race with a commit
    /// that touched what this rearrangement `reads` (or removed one of its input files)
    /// deletes the new files and fails with a conflict.
    pub(crate) async fn commit(
        mut self,
        table: &mut DeltaLiteTable,
        leading: Vec<Action>,
        operation: DeltaOperation,
        spec: &CommitSpec,
        max_retries: usize,
        reads: ReadSet,
    ) -> Result<Option<u64>> {
        if self.actions.is_empty() && leading.is_empty() {
            return Ok(None);
        }
        let mut actions = leading;
        actions.append(&mut self.actions);
        let staged = Staged::new(actions, operation, reads);
        let done = txn::commit_prepared(table.delta_table_mut(), spec, max_retries, staged).await?;
        Ok(Some(match done {
            Done::Committed { version, .. }
            | Done::Unchanged { version, .. }
            | Done::AlreadyApplied { version } => version,
        }))
    }
}

/// Typed partition values for the writer from the canonical serialization.
fn partition_key(
    columns: &[String],
    serialized: &[Option<String>],
    schema: &StructType,
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

async fn delete_files(store: &ObjectStoreRef, paths: &[String]) {
    for path in paths {
        if let Err(e) = store
            .delete(&object_store::path::Path::from(path.as_str()))
            .await
        {
            tracing::warn!(%path, error = %e, "failed to delete an uncommitted file");
        }
    }
}
