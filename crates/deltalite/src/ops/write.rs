//! Table writes besides upsert: create, append, overwrite, and appending a Parquet file
//! as it is. Each call is one atomic Delta commit.

use std::collections::HashMap;
use std::num::NonZeroU64;
use std::sync::Arc;

use arrow::datatypes::{Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use deltalake::datafile::writer::{DeltaWriter, WriterConfig};
use deltalake::kernel::engine::arrow_conversion::{TryIntoArrow, TryIntoKernel};
use deltalake::kernel::{Action, Add, MetadataExt, StructType};
use deltalake::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use deltalake::parquet::file::metadata::ParquetMetaDataReader;
use deltalake::protocol::{DeltaOperation, SaveMode};
use deltalake::table::config::TablePropertiesExt;
use object_store::path::Path;
use object_store::{ObjectStoreExt, WriteMultipart};

use crate::error::{DeltaLiteError, Result};
use crate::io::writer::abort_delta_writer;
use crate::options::AppTransaction;
use crate::schema::conform::conform_source;
use crate::table::DeltaLiteTable;
use crate::txn::{self, CommitSpec, Done, ReadSet, Staged};

/// Options of a non-upsert write.
#[derive(Debug, Clone)]
pub struct WriteOptions {
    /// Output file size target; `None` means the table's setting.
    pub target_file_size: Option<u64>,
    /// Attempts delta-rs may rebase a commit over concurrent ones.
    pub commit_max_retries: usize,
    /// Extra key/values recorded in the commit info.
    pub commit_metadata: HashMap<String, serde_json::Value>,
    /// Optional `txn` action recorded in the same commit (idempotent retries).
    pub app_transaction: Option<AppTransaction>,
    /// Multipart part size for files stored as they are.
    pub multipart_part_size: usize,
    /// Columns [`DeltaLiteTable::append`] adds to the table (as nullable, after the
    /// existing ones) in the same commit as the rows, so a failed append leaves no trace.
    pub new_columns: Vec<Field>,
    /// Overwrite only: lay the table out by these partition columns from this commit on
    /// (`ALTER TABLE … SET PARTITIONED BY`); `None` keeps the current ones.
    pub partition_by: Option<Vec<String>>,
}

impl Default for WriteOptions {
    fn default() -> Self {
        Self {
            target_file_size: None,
            commit_max_retries: crate::options::DEFAULT_COMMIT_MAX_RETRIES,
            commit_metadata: HashMap::new(),
            app_transaction: None,
            multipart_part_size: crate::options::EnvDefaults::get().multipart_part_size,
            new_columns: Vec::new(),
            partition_by: None,
        }
    }
}

impl WriteOptions {
    /// Reject values that cannot work.
    pub fn validate(&self) -> Result<()> {
        if self.target_file_size == Some(0) {
            return Err(DeltaLiteError::invalid("target_file_size must be positive"));
        }
        Ok(())
    }
}

/// What a write did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteStats {
    /// Version committed.
    pub version: u64,
    /// Data files added.
    pub files_added: usize,
    /// Data files removed (overwrite).
    pub files_removed: usize,
    /// Rows written.
    pub rows_written: u64,
    /// The Parquet file was stored byte for byte (no decode, no re-encode).
    pub stored_as_is: bool,
    /// The call's app transaction was already applied: nothing was written.
    pub already_applied: bool,
}

/// The Arrow schema a Delta table with `schema`'s columns stores (Delta's type mapping).
pub fn delta_arrow_schema(schema: &Schema) -> Result<SchemaRef> {
    let kernel: StructType = schema.try_into_kernel().map_err(|e| {
        DeltaLiteError::schema(format!("schema cannot be stored in a Delta table: {e}"))
    })?;
    let arrow: Schema = (&kernel).try_into_arrow()?;
    Ok(Arc::new(arrow))
}

impl DeltaLiteTable {
    fn writer(&self, table_schema: SchemaRef, options: &WriteOptions) -> Result<DeltaWriter> {
        let state = self.delta_table().snapshot()?;
        let config = state.table_config();
        let partition_columns = match &options.partition_by {
            Some(columns) => columns.clone(),
            None => state.metadata().partition_columns().to_vec(),
        };
        Ok(rows_writer(
            self.delta_table().object_store(),
            table_schema,
            partition_columns,
            options
                .target_file_size
                .unwrap_or_else(|| config.target_file_size().get()),
            config.num_indexed_cols(),
            config
                .data_skipping_stats_columns
                .as_ref()
                .map(|cols| cols.iter().map(|c| c.to_string()).collect()),
        ))
    }

    /// Stream `batches` into new files laid out for `table_schema`.
    async fn write_files(
        &self,
        table_schema: &SchemaRef,
        batches: impl IntoIterator<Item = Result<RecordBatch>>,
        options: &WriteOptions,
    ) -> Result<(Vec<Add>, u64)> {
        let writer = self.writer(Arc::clone(table_schema), options)?;
        write_rows(writer, table_schema, batches).await
    }

    /// One commit through the transaction path (`txn`): a commit whose response was lost
    /// is recognised as this call's own; a concurrent commit is rebased over unless it
    /// touched what this write `reads` (or changed the schema or protocol, or carries the
    /// same app transaction), and then the files written are deleted and the call fails
    /// with a conflict. A call whose app transaction is already recorded writes nothing.
    async fn commit(
        &mut self,
        actions: Vec<Action>,
        operation: DeltaOperation,
        options: &WriteOptions,
        reads: ReadSet,
    ) -> Result<Option<u64>> {
        let spec = CommitSpec::new(&options.commit_metadata, &options.app_transaction);
        let staged = Staged::new(actions, operation, reads);
        let done = txn::commit_prepared(
            self.delta_table_mut(),
            &spec,
            options.commit_max_retries,
            staged,
        )
        .await?;
        Ok(match done {
            Done::Committed { version, .. } | Done::Unchanged { version, .. } => Some(version),
            Done::AlreadyApplied { .. } => None,
        })
    }

    /// Appends add files to the current layout; only an overwrite may change it.
    fn refuse_layout_change(&self, options: &WriteOptions) -> Result<()> {
        match &options.partition_by {
            Some(columns) if *columns != self.partition_columns()? => Err(DeltaLiteError::invalid(
                "only an overwrite can change the partition columns",
            )),
            _ => Ok(()),
        }
    }

    /// The result of a call whose app transaction another writer recorded first.
    fn applied_stats(&self) -> WriteStats {
        WriteStats {
            version: self.version(),
            already_applied: true,
            ..Default::default()
        }
    }

    /// `Some` (a no-op result) when the call's app transaction is already recorded at its
    /// version or later: a retried call after a lost response writes nothing twice.
    async fn already_applied(&self, options: &WriteOptions) -> Result<Option<WriteStats>> {
        let Some(txn) = &options.app_transaction else {
            return Ok(None);
        };
        let applied = self.app_transaction_version(&txn.app_id).await?;
        Ok(applied
            .is_some_and(|v| v >= txn.version)
            .then(|| WriteStats {
                version: self.version(),
                already_applied: true,
                ..Default::default()
            }))
    }

    /// The table schema with `columns` added (nullable, after the existing ones), and the
    /// metadata action that commits it; the current schema and no action when empty.
    fn with_new_columns(&self, columns: &[Field]) -> Result<(SchemaRef, Option<Action>)> {
        let current = self.schema()?;
        if columns.is_empty() {
            return Ok((current, None));
        }
        let mut fields: Vec<Field> = current
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .collect();
        for column in columns {
            if current.index_of(column.name()).is_ok() {
                return Err(DeltaLiteError::schema(format!(
                    "column {:?} is already in the table",
                    column.name()
                )));
            }
            fields.push(column.clone().with_nullable(true));
        }
        let schema = delta_arrow_schema(&Schema::new(fields))?;
        let action = self.schema_action(&schema)?;
        Ok((schema, Some(action)))
    }

    /// The metadata action that makes `schema` the table's schema.
    fn schema_action(&self, schema: &Schema) -> Result<Action> {
        let kernel: StructType = schema.try_into_kernel()?;
        let metadata = self
            .delta_table()
            .snapshot()?
            .metadata()
            .clone()
            .with_schema(&kernel)
            .map_err(|e| DeltaLiteError::schema(e.to_string()))?;
        Ok(Action::Metadata(metadata))
    }

    /// Append batches by column name: table columns the batches lack are NULL, a column
    /// the table lacks is a schema mismatch unless `options.new_columns` adds it, types
    /// are cast without loss.
    pub async fn append(
        &mut self,
        batches: impl IntoIterator<Item = Result<RecordBatch>>,
        options: &WriteOptions,
    ) -> Result<WriteStats> {
        if let Some(done) = self.already_applied(options).await? {
            return Ok(done);
        }
        self.refuse_layout_change(options)?;
        let (schema, schema_change) = self.with_new_columns(&options.new_columns)?;
        let (adds, rows) = self.write_files(&schema, batches, options).await?;
        let files_added = adds.len();
        let operation = DeltaOperation::Write {
            mode: SaveMode::Append,
            partition_by: Some(self.partition_columns()?),
            predicate: None,
        };
        let actions = schema_change
            .into_iter()
            .chain(adds.into_iter().map(Action::Add))
            .collect();
        let Some(version) = self
            .commit(actions, operation, options, ReadSet::nothing())
            .await?
        else {
            return Ok(self.applied_stats());
        };
        Ok(WriteStats {
            version,
            files_added,
            rows_written: rows,
            ..Default::default()
        })
    }

    /// Like [`Self::append`], for rows that arrive as a stream (a query's result).
    pub async fn append_stream(
        &mut self,
        batches: futures::stream::BoxStream<'_, Result<RecordBatch>>,
        options: &WriteOptions,
    ) -> Result<WriteStats> {
        if let Some(done) = self.already_applied(options).await? {
            return Ok(done);
        }
        self.refuse_layout_change(options)?;
        let schema = self.schema()?;
        let writer = self.writer(Arc::clone(&schema), options)?;
        let (adds, rows) = write_stream(writer, &schema, batches).await?;
        let files_added = adds.len();
        let operation = DeltaOperation::Write {
            mode: SaveMode::Append,
            partition_by: Some(self.partition_columns()?),
            predicate: None,
        };
        let actions = adds.into_iter().map(Action::Add).collect();
        let Some(version) = self
            .commit(actions, operation, options, ReadSet::nothing())
            .await?
        else {
            return Ok(self.applied_stats());
        };
        Ok(WriteStats {
            version,
            files_added,
            rows_written: rows,
            ..Default::default()
        })
    }

    /// Replace the table's contents (and its schema, when `schema` differs), keeping its
    /// id, partitioning and history.
    pub async fn overwrite(
        &mut self,
        schema: &Schema,
        batches: impl IntoIterator<Item = Result<RecordBatch>>,
        options: &WriteOptions,
    ) -> Result<WriteStats> {
        if let Some(done) = self.already_applied(options).await? {
            return Ok(done);
        }
        let new_schema = self.overwrite_schema(schema, options)?;
        let (adds, rows) = self.write_files(&new_schema, batches, options).await?;
        self.commit_overwrite(&new_schema, adds, rows, options)
            .await
    }

    /// Like [`Self::overwrite`], for rows that arrive as a stream (a query's result).
    pub async fn overwrite_stream(
        &mut self,
        schema: &Schema,
        batches: futures::stream::BoxStream<'_, Result<RecordBatch>>,
        options: &WriteOptions,
    ) -> Result<WriteStats> {
        if let Some(done) = self.already_applied(options).await? {
            return Ok(done);
        }
        let new_schema = self.overwrite_schema(schema, options)?;
        let writer = self.writer(Arc::clone(&new_schema), options)?;
        let (adds, rows) = write_stream(writer, &new_schema, batches).await?;
        self.commit_overwrite(&new_schema, adds, rows, options)
            .await
    }

    /// The stored schema an overwrite with `schema` leaves; the partition columns it
    /// keeps (or the new ones of `options.partition_by`) must be among its columns.
    fn overwrite_schema(&self, schema: &Schema, options: &WriteOptions) -> Result<SchemaRef> {
        let new_schema = delta_arrow_schema(schema)?;
        let partition_columns = match &options.partition_by {
            Some(columns) => columns.clone(),
            None => self.partition_columns()?,
        };
        for column in &partition_columns {
            let Ok(field) = new_schema.field_with_name(column) else {
                return Err(DeltaLiteError::schema(format!(
                    "overwrite must keep partition column {column:?}"
                )));
            };
            if field.data_type().is_nested() {
                return Err(DeltaLiteError::schema(format!(
                    "column {column:?} of type {} cannot be a partition column",
                    field.data_type()
                )));
            }
        }
        Ok(new_schema)
    }

    /// The metadata action that makes `schema` the table's schema and `partition_columns`
    /// its partitioning (the table's id, name, description and properties kept).
    fn layout_action(&self, schema: &Schema, partition_columns: &[String]) -> Result<Action> {
        let Action::Metadata(metadata) = self.schema_action(schema)? else {
            return Err(DeltaLiteError::Other("expected a metadata action".into()));
        };
        // The kernel has no setter for partition columns; its serde form does.
        let mut json = serde_json::to_value(&metadata)
            .map_err(|e| DeltaLiteError::Other(format!("metadata: {e}")))?;
        json["partitionColumns"] = serde_json::Value::from(partition_columns.to_vec());
        let metadata = serde_json::from_value(json)
            .map_err(|e| DeltaLiteError::Other(format!("metadata: {e}")))?;
        Ok(Action::Metadata(metadata))
    }

    /// One commit: the new schema (when it differs), every current file removed, `adds`.
    async fn commit_overwrite(
        &mut self,
        new_schema: &SchemaRef,
        adds: Vec<Add>,
        rows: u64,
        options: &WriteOptions,
    ) -> Result<WriteStats> {
        let current_partitions = self.partition_columns()?;
        let partition_columns = options
            .partition_by
            .clone()
            .unwrap_or_else(|| current_partitions.clone());
        let current = self.schema()?;
        let mut actions = Vec::new();
        if partition_columns != current_partitions {
            actions.push(self.layout_action(new_schema, &partition_columns)?);
        } else if current.fields() != new_schema.fields() {
            actions.push(self.schema_action(new_schema)?);
        }
        let files_added = adds.len();
        let state = self.delta_table().snapshot()?;
        let removes: Vec<Action> = state
            .log_data()
            .iter()
            .map(|f| Action::Remove(f.remove_action(true)))
            .collect();
        let files_removed = removes.len();
        actions.extend(removes);
        actions.extend(adds.into_iter().map(Action::Add));
        let operation = DeltaOperation::Write {
            mode: SaveMode::Overwrite,
            partition_by: Some(partition_columns),
            predicate: None,
        };
        let Some(version) = self
            .commit(actions, operation, options, ReadSet::everything())
            .await?
        else {
            return Ok(self.applied_stats());
        };
        Ok(WriteStats {
            version,
            files_added,
            files_removed,
            rows_written: rows,
            ..Default::default()
        })
    }

    /// Append a local Parquet file. When its schema is exactly the table's and the table
    /// is unpartitioned, the file is stored as it is (statistics from its footer);
    /// otherwise it is decoded and written like [`Self::append`].
    pub async fn append_parquet_file(
        &mut self,
        path: &std::path::Path,
        options: &WriteOptions,
    ) -> Result<WriteStats> {
        self.append_parquet(path, options, false).await
    }

    /// Like [`Self::append_parquet_file`], but a file stored as it is may be moved into a
    /// local table (a rename when both are on one filesystem) instead of copied: the
    /// caller hands the file over and must not use `path` afterwards. The server spools
    /// upload bodies next to its tables for this.
    pub async fn adopt_parquet_file(
        &mut self,
        path: &std::path::Path,
        options: &WriteOptions,
    ) -> Result<WriteStats> {
        self.append_parquet(path, options, true).await
    }

    async fn append_parquet(
        &mut self,
        path: &std::path::Path,
        options: &WriteOptions,
        adopt: bool,
    ) -> Result<WriteStats> {
        if let Some(done) = self.already_applied(options).await? {
            return Ok(done);
        }
        let file = std::fs::File::open(path)
            .map_err(|e| DeltaLiteError::Other(format!("cannot open {}: {e}", path.display())))?;
        let builder = ParquetRecordBatchReaderBuilder::try_new(file)
            .map_err(|e| DeltaLiteError::schema(format!("not a readable Parquet file: {e}")))?;
        let file_schema = Arc::clone(builder.schema());
        let table_schema = self.schema()?;
        let matches = options.new_columns.is_empty()
            && self.partition_columns()?.is_empty()
            && stores_as_is(&file_schema, &table_schema);
        if !matches {
            let reader = builder
                .build()
                .map_err(|e| DeltaLiteError::schema(format!("unreadable Parquet file: {e}")))?;
            return self
                .append(reader.map(|b| b.map_err(Into::into)), options)
                .await;
        }
        drop(builder);
        self.store_parquet_as_is(path, &file_schema, options, adopt)
            .await
    }

    async fn store_parquet_as_is(
        &mut self,
        path: &std::path::Path,
        file_schema: &Schema,
        options: &WriteOptions,
        adopt: bool,
    ) -> Result<WriteStats> {
        let num_indexed_cols = self
            .delta_table()
            .snapshot()?
            .table_config()
            .num_indexed_cols();
        let (add, rows) = stage_parquet_file(
            self.delta_table(),
            path,
            file_schema,
            num_indexed_cols,
            options.multipart_part_size,
            adopt,
        )
        .await?;
        let operation = DeltaOperation::Write {
            mode: SaveMode::Append,
            partition_by: Some(vec![]),
            predicate: None,
        };
        let Some(version) = self
            .commit(
                vec![Action::Add(add)],
                operation,
                options,
                ReadSet::nothing(),
            )
            .await?
        else {
            return Ok(self.applied_stats());
        };
        Ok(WriteStats {
            version,
            files_added: 1,
            files_removed: 0,
            rows_written: rows,
            stored_as_is: true,
            already_applied: false,
        })
    }
}

/// Whether a Parquet file with `file_schema` can be stored as it is in an unpartitioned
/// table with `table_schema`: same columns, same types, no NULLs where the table has none.
pub(crate) fn stores_as_is(file_schema: &Schema, table_schema: &Schema) -> bool {
    file_schema.fields().len() == table_schema.fields().len()
        && file_schema
            .fields()
            .iter()
            .zip(table_schema.fields())
            .all(|(f, t)| {
                f.name() == t.name()
                    && f.data_type() == t.data_type()
                    && (t.is_nullable() || !f.is_nullable())
            })
}

/// Put a local Parquet file into the table at `table` (loaded or not) as it is, and build
/// its Add action with statistics from its footer. With `adopt`, a file on the local
/// table's filesystem is moved instead of copied. Returns the action and the row count.
pub(crate) async fn stage_parquet_file(
    table: &deltalake::DeltaTable,
    path: &std::path::Path,
    file_schema: &Schema,
    num_indexed_cols: delta_kernel::table_properties::DataSkippingNumIndexedCols,
    part_size: usize,
    adopt: bool,
) -> Result<(Add, u64)> {
    let mut file = std::fs::File::open(path).map_err(|e| DeltaLiteError::Other(e.to_string()))?;
    let metadata = ParquetMetaDataReader::new().parse_and_finish(&file)?;
    let size = file
        .metadata()
        .map_err(|e| DeltaLiteError::Other(e.to_string()))?
        .len();
    let max_columns = match num_indexed_cols {
        delta_kernel::table_properties::DataSkippingNumIndexedCols::NumColumns(n) => n as usize,
        delta_kernel::table_properties::DataSkippingNumIndexedCols::AllColumns => usize::MAX,
    };
    let stats = crate::io::footer_stats::stats_json(&metadata, file_schema, max_columns)?;
    let name = format!("part-00000-{}-c000.snappy.parquet", uuid::Uuid::new_v4());
    let store = table.object_store();
    let location = Path::from(name.as_str());
    let moved = adopt && move_into_table(table.table_url(), path, &name)?;
    if !moved {
        upload(store.as_ref(), &location, &mut file, part_size).await?;
    }
    let add = Add {
        path: name,
        partition_values: HashMap::new(),
        size: size as i64,
        modification_time: chrono::Utc::now().timestamp_millis(),
        data_change: true,
        stats: Some(stats),
        tags: None,
        deletion_vector: None,
        base_row_id: None,
        default_row_commit_version: None,
        clustering_provider: None,
    };
    Ok((add, metadata.file_metadata().num_rows() as u64))
}

/// Rename a local file into the local table at `url` as `name`; `false` (nothing moved)
/// when the table is not local or the file is on another filesystem.
fn move_into_table(url: &url::Url, path: &std::path::Path, name: &str) -> Result<bool> {
    if url.scheme() != "file" {
        return Ok(false);
    }
    let Ok(root) = url.to_file_path() else {
        return Ok(false);
    };
    let target = root.join(name);
    match std::fs::rename(path, &target) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::CrossesDevices => return Ok(false),
        Err(e) => {
            return Err(DeltaLiteError::Other(format!(
                "cannot move {}: {e}",
                path.display()
            )));
        }
    }
    // Spool files are private (0600); a data file is readable like the ones
    // object_store writes.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o644))
            .map_err(|e| DeltaLiteError::Other(e.to_string()))?;
    }
    Ok(true)
}

/// Stream a local file up as `location` in parts; memory is one part per in-flight upload.
async fn upload(
    store: &dyn object_store::ObjectStore,
    location: &Path,
    file: &mut std::fs::File,
    part_size: usize,
) -> Result<()> {
    use std::io::{Read, Seek};
    // S3 refuses parts under 5 MiB (but the last), so a smaller request is raised.
    let part_size = crate::io::upload::effective_part_size(part_size);
    let upload = store.put_multipart(location).await?;
    let mut multipart = WriteMultipart::new_with_chunk_size(upload, part_size);
    let mut buffer = vec![0u8; part_size.min(8 * crate::options::MIB)];
    let copied: Result<()> = async {
        file.seek(std::io::SeekFrom::Start(0))
            .map_err(|e| DeltaLiteError::Other(e.to_string()))?;
        loop {
            let n = file
                .read(&mut buffer)
                .map_err(|e| DeltaLiteError::Other(e.to_string()))?;
            if n == 0 {
                break;
            }
            multipart.wait_for_capacity(4).await?;
            multipart.write(&buffer[..n]);
        }
        Ok(())
    }
    .await;
    if let Err(e) = copied {
        let _ = multipart.abort().await;
        return Err(e);
    }
    multipart.finish().await?;
    Ok(())
}

/// A writer of whole-table rows (partition columns included) into new files.
pub(crate) fn rows_writer(
    store: deltalake::logstore::ObjectStoreRef,
    table_schema: SchemaRef,
    partition_columns: Vec<String>,
    target_file_size: u64,
    num_indexed_cols: delta_kernel::table_properties::DataSkippingNumIndexedCols,
    stats_columns: Option<Vec<String>>,
) -> DeltaWriter {
    DeltaWriter::new(
        store,
        WriterConfig::new(
            table_schema,
            partition_columns,
            Some(crate::io::writer::append_properties()),
            NonZeroU64::new(target_file_size),
            None,
            num_indexed_cols,
            stats_columns,
        ),
    )
}

/// Conform `batches` to `table_schema` and stream them through `writer`; on any failure
/// the partial uploads are aborted. Returns the Add actions and the rows written.
pub(crate) async fn write_rows(
    mut writer: DeltaWriter,
    table_schema: &SchemaRef,
    batches: impl IntoIterator<Item = Result<RecordBatch>>,
) -> Result<(Vec<Add>, u64)> {
    let mut rows = 0u64;
    for batch in batches {
        let written = match batch {
            Ok(batch) => match conform_source(&batch, table_schema) {
                Ok(conformed) => {
                    rows += conformed.batch.num_rows() as u64;
                    writer.write(&conformed.batch).await.map_err(Into::into)
                }
                Err(e) => Err(e),
            },
            Err(e) => Err(e),
        };
        if let Err(e) = written {
            abort_delta_writer(writer).await;
            return Err(e);
        }
    }
    Ok((writer.close().await?, rows))
}

/// Conform and write a stream of whole-table rows; on failure the partial uploads are
/// aborted and the files already closed are deleted.
pub(crate) async fn write_stream(
    mut writer: DeltaWriter,
    table_schema: &SchemaRef,
    mut rows: futures::stream::BoxStream<'_, Result<RecordBatch>>,
) -> Result<(Vec<Add>, u64)> {
    let mut written = 0u64;
    while let Some(batch) = futures::StreamExt::next(&mut rows).await {
        let step = match batch.and_then(|b| conform_source(&b, table_schema)) {
            Ok(conformed) => {
                written += conformed.batch.num_rows() as u64;
                writer.write(&conformed.batch).await.map_err(Into::into)
            }
            Err(e) => Err(e),
        };
        if let Err(e) = step {
            abort_delta_writer(writer).await;
            return Err(e);
        }
    }
    Ok((writer.close().await?, written))
}
