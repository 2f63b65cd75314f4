//! Table writes besides upsert: create, append, overwrite, and appending a Parquet file
//! as it is. Each call is one atomic Delta commit.

use std::collections::{HashMap, HashSet};
use std::num::NonZeroU64;
use std::sync::Arc;

use arrow::datatypes::{Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use deltalake::datafile::writer::{DeltaWriter, WriterConfig};
use deltalake::kernel::engine::arrow_conversion::{TryIntoArrow, TryIntoKernel};
use deltalake::kernel::transaction::CommitProperties;
use deltalake::kernel::{Action, Add, MetadataExt, StructType, Transaction};
use deltalake::operations::create::CreateBuilder;
use deltalake::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use deltalake::parquet::file::metadata::ParquetMetaDataReader;
use deltalake::protocol::{DeltaOperation, SaveMode};
use deltalake::table::config::TablePropertiesExt;
use object_store::path::Path;
use object_store::{ObjectStoreExt, WriteMultipart};

use crate::commit::{Committed, ReadSet};
use crate::conform::conform_source;
use crate::error::{DeltaLiteError, Result};
use crate::options::AppTransaction;
use crate::table::{DeltaLiteTable, table_url};

/// What a write read, for the conflict rule: an append reads nothing (any concurrent
/// data commit can be rebased over), an overwrite reads every file it replaces.
#[derive(Clone, Copy)]
enum Reads {
    Nothing,
    Everything,
}

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
}

impl Default for WriteOptions {
    fn default() -> Self {
        Self {
            target_file_size: None,
            commit_max_retries: 15,
            commit_metadata: HashMap::new(),
            app_transaction: None,
            multipart_part_size: crate::budget::EnvDefaults::get().multipart_part_size,
            new_columns: Vec::new(),
        }
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

fn commit_properties(options: &WriteOptions) -> CommitProperties {
    let mut props = CommitProperties::default()
        .with_max_retries(options.commit_max_retries)
        .with_metadata(options.commit_metadata.clone());
    if let Some(txn) = &options.app_transaction {
        props = props.with_application_transaction(Transaction::new(&txn.app_id, txn.version));
    }
    props
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
    /// Create a table (error if one exists) from an Arrow schema.
    pub async fn create(
        uri: &str,
        storage_options: HashMap<String, String>,
        schema: &Schema,
        partition_columns: &[String],
        configuration: HashMap<String, String>,
    ) -> Result<Self> {
        let url = table_url(uri)?;
        for column in partition_columns {
            if schema.index_of(column).is_err() {
                return Err(DeltaLiteError::schema(format!(
                    "partition column {column:?} is not in the schema"
                )));
            }
        }
        let kernel: StructType = schema.try_into_kernel().map_err(|e| {
            DeltaLiteError::schema(format!("schema cannot be stored in a Delta table: {e}"))
        })?;
        if url.scheme() == "file"
            && let Ok(path) = url.to_file_path()
        {
            std::fs::create_dir_all(&path).map_err(|e| DeltaLiteError::Other(e.to_string()))?;
        }
        let table = CreateBuilder::new()
            .with_location(url.to_string())
            .with_storage_options(storage_options)
            .with_columns(kernel.fields().cloned())
            .with_partition_columns(partition_columns.to_vec())
            .with_configuration(configuration.into_iter().map(|(k, v)| (k, Some(v))))
            .with_save_mode(SaveMode::ErrorIfExists)
            .await?;
        Ok(Self::from_delta(uri, table))
    }

    fn writer(&self, table_schema: SchemaRef, options: &WriteOptions) -> Result<DeltaWriter> {
        let state = self.delta_table().snapshot()?;
        let config = state.table_config();
        let target = options
            .target_file_size
            .unwrap_or_else(|| config.target_file_size().get());
        Ok(DeltaWriter::new(
            self.delta_table().object_store(),
            WriterConfig::new(
                table_schema,
                state.metadata().partition_columns().to_vec(),
                None,
                NonZeroU64::new(target),
                None,
                config.num_indexed_cols(),
                config
                    .data_skipping_stats_columns
                    .as_ref()
                    .map(|cols| cols.iter().map(|c| c.to_string()).collect()),
            ),
        ))
    }

    /// Stream `batches` into new files laid out for `table_schema`.
    async fn write_files(
        &self,
        table_schema: &SchemaRef,
        batches: impl IntoIterator<Item = Result<RecordBatch>>,
        options: &WriteOptions,
    ) -> Result<(Vec<Add>, u64)> {
        let mut writer = self.writer(Arc::clone(table_schema), options)?;
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
                if let Err(abort) = writer.abort().await {
                    tracing::warn!(error = %abort, "failed to abort a partial upload");
                }
                return Err(e);
            }
        }
        Ok((writer.close().await?, rows))
    }

    /// One commit through the engine's commit loop (`commit.rs`): a commit whose response
    /// was lost is recognised as this call's own, never committed twice; a concurrent
    /// commit is rebased over unless it touched what this write `reads` (or changed the
    /// schema or protocol, or carries the same app transaction). When nothing was
    /// committed for certain, the files written are deleted again.
    async fn commit(
        &mut self,
        actions: Vec<Action>,
        operation: DeltaOperation,
        options: &WriteOptions,
        reads: Reads,
    ) -> Result<u64> {
        let read_set = ReadSet {
            partitions: match reads {
                Reads::Nothing => Some(HashSet::new()),
                Reads::Everything => None,
            },
            app_ids: options
                .app_transaction
                .iter()
                .map(|t| t.app_id.clone())
                .collect(),
        };
        let written: Vec<Path> = actions
            .iter()
            .filter_map(|a| match a {
                Action::Add(add) => Some(Path::from(add.path.as_str())),
                _ => None,
            })
            .collect();
        let mut retries_left = options.commit_max_retries;
        let mut retries_used = 0;
        let outcome = crate::commit::commit(
            self.delta_table_mut(),
            actions,
            operation,
            commit_properties(options),
            &read_set,
            &mut retries_left,
            &mut retries_used,
        )
        .await;
        let not_committed = match outcome {
            Ok(Committed::Version(version)) => return Ok(version),
            Ok(Committed::Replan) => DeltaLiteError::CommitConflict(
                "a concurrent commit changed the schema, the protocol or the files this write \
                 replaces (or applied the same app transaction); nothing was written"
                    .into(),
            ),
            Err(e @ DeltaLiteError::CommitConflict(_)) => e,
            // Unknown outcome: the files may be referenced; vacuum sorts out orphans.
            Err(e) => return Err(e),
        };
        let store = self.delta_table().object_store();
        for path in &written {
            if let Err(e) = store.delete(path).await {
                tracing::warn!(%path, error = %e, "failed to delete an uncommitted file");
            }
        }
        Err(not_committed)
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
        let version = self
            .commit(actions, operation, options, Reads::Nothing)
            .await?;
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
        let new_schema = delta_arrow_schema(schema)?;
        let partition_columns = self.partition_columns()?;
        for column in &partition_columns {
            if new_schema.index_of(column).is_err() {
                return Err(DeltaLiteError::schema(format!(
                    "overwrite must keep partition column {column:?}"
                )));
            }
        }
        let current = self.schema()?;
        let mut actions = Vec::new();
        if current.fields() != new_schema.fields() {
            actions.push(self.schema_action(&new_schema)?);
        }
        let (adds, rows) = self.write_files(&new_schema, batches, options).await?;
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
        let version = self
            .commit(actions, operation, options, Reads::Everything)
            .await?;
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
            && file_schema.fields().len() == table_schema.fields().len()
            && file_schema
                .fields()
                .iter()
                .zip(table_schema.fields())
                .all(|(f, t)| {
                    f.name() == t.name()
                        && f.data_type() == t.data_type()
                        && (t.is_nullable() || !f.is_nullable())
                });
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

    /// Rename a local file into this local table as `name`; `false` (nothing moved) when
    /// the table is not local or the file is on another filesystem.
    fn move_into_table(&self, path: &std::path::Path, name: &str) -> Result<bool> {
        let url = self.delta_table().table_url();
        let Ok(root) = url.to_file_path() else {
            return Ok(false);
        };
        if url.scheme() != "file" {
            return Ok(false);
        }
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

    async fn store_parquet_as_is(
        &mut self,
        path: &std::path::Path,
        file_schema: &Schema,
        options: &WriteOptions,
        adopt: bool,
    ) -> Result<WriteStats> {
        let mut file =
            std::fs::File::open(path).map_err(|e| DeltaLiteError::Other(e.to_string()))?;
        let metadata = ParquetMetaDataReader::new().parse_and_finish(&file)?;
        let size = file
            .metadata()
            .map_err(|e| DeltaLiteError::Other(e.to_string()))?
            .len();
        let max_columns = match self
            .delta_table()
            .snapshot()?
            .table_config()
            .num_indexed_cols()
        {
            delta_kernel::table_properties::DataSkippingNumIndexedCols::NumColumns(n) => n as usize,
            delta_kernel::table_properties::DataSkippingNumIndexedCols::AllColumns => usize::MAX,
        };
        let stats = crate::footer_stats::stats_json(&metadata, file_schema, max_columns)?;
        let name = format!("part-00000-{}-c000.snappy.parquet", uuid::Uuid::new_v4());
        let store = self.delta_table().object_store();
        let location = Path::from(name.as_str());
        let moved = adopt && self.move_into_table(path, &name)?;
        if !moved {
            upload(
                store.as_ref(),
                &location,
                &mut file,
                options.multipart_part_size,
            )
            .await?;
        }
        let add = Add {
            path: name.clone(),
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
        let operation = DeltaOperation::Write {
            mode: SaveMode::Append,
            partition_by: Some(vec![]),
            predicate: None,
        };
        let version = self
            .commit(vec![Action::Add(add)], operation, options, Reads::Nothing)
            .await?;
        Ok(WriteStats {
            version,
            files_added: 1,
            files_removed: 0,
            rows_written: metadata.file_metadata().num_rows() as u64,
            stored_as_is: true,
            already_applied: false,
        })
    }
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
    let part_size = crate::upload::effective_part_size(part_size);
    let upload = store.put_multipart(location).await?;
    let mut multipart = WriteMultipart::new_with_chunk_size(upload, part_size);
    let mut buffer = vec![0u8; part_size.min(8 * 1024 * 1024)];
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
