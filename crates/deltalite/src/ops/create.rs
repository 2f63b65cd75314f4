//! Creating a table, with its first rows in the same commit.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::datatypes::{Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use delta_kernel::table_properties::DataSkippingNumIndexedCols;
use deltalake::kernel::engine::arrow_conversion::TryIntoKernel;
use deltalake::kernel::{Action, StructType};
use deltalake::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use crate::error::{DeltaLiteError, Result};
use crate::ops::upsert::write_initial;
use crate::ops::write::{
    WriteOptions, WriteStats, delta_arrow_schema, rows_writer, stage_parquet_file, stores_as_is,
    write_rows, write_stream,
};
use crate::options::{DEFAULT_NUM_INDEXED_COLS, DEFAULT_TARGET_FILE_SIZE, UpsertOptions};
use crate::stats::UpsertStats;
use crate::table::{DeltaLiteTable, TableLocation};
use crate::txn::CommitSpec;
use crate::txn::create::{self as first, Created as First};

/// What a new table is: its columns, partitioning and table properties.
#[derive(Debug, Clone)]
pub struct TableSpec {
    /// Columns (Delta's type mapping is applied to them).
    pub schema: Schema,
    /// Partition columns, in order; each must be in `schema`.
    pub partition_columns: Vec<String>,
    /// Table properties (`delta.*` and others).
    pub configuration: HashMap<String, String>,
}

/// What a new table's first commit holds.
pub enum InitialData<'a> {
    /// No rows.
    Empty,
    /// Rows to write (whole-table rows, partition columns included), read batch by batch.
    Rows(Box<dyn Iterator<Item = Result<RecordBatch>> + Send + 'a>),
    /// Like `Rows`, arriving as a stream (a query's result).
    Stream(futures::stream::BoxStream<'a, Result<RecordBatch>>),
    /// A local Parquet file: stored as it is when its schema is the table's exactly and the
    /// table is unpartitioned (moved instead of copied with `adopt`), else decoded.
    ParquetFile {
        /// The file.
        path: &'a std::path::Path,
        /// Whether the caller hands the file over (it may be moved into a local table).
        adopt: bool,
    },
    /// The rows of an upsert into an empty table: the source's winners by key (duplicates
    /// resolved as the options say), written as inserts.
    Upsert {
        /// The batches' schema.
        schema: &'a SchemaRef,
        /// The source.
        batches: &'a [RecordBatch],
        /// Keys, cursor, duplicate handling, knobs; the commit info and app transaction
        /// come from these too.
        options: &'a UpsertOptions,
    },
}

/// How a create ended.
#[derive(Debug)]
pub enum Created {
    /// The table exists now; version 0 holds the initial rows.
    New(Box<NewTable>),
    /// Another writer created the table first: nothing was written. Open it and write
    /// the rows the ordinary way.
    Exists,
}

/// A table just created, and what its first commit holds.
#[derive(Debug)]
pub struct NewTable {
    /// The table, loaded at version 0.
    pub table: DeltaLiteTable,
    /// What version 0 holds.
    pub stats: CreateStats,
}

/// What the first commit holds.
#[derive(Debug, Clone, Default)]
pub struct CreateStats {
    /// For rows and Parquet files.
    pub write: WriteStats,
    /// For [`InitialData::Upsert`].
    pub upsert: Option<UpsertStats>,
}

impl TableLocation {
    /// Create the table with `data` in its first commit (version 0): one commit, so a
    /// failure or a crash leaves either the table with its rows or no table at all.
    /// Commit info and application transaction come from `options` (or, for an upsert,
    /// from its own options).
    pub async fn create(
        self,
        spec: &TableSpec,
        data: InitialData<'_>,
        options: &WriteOptions,
    ) -> Result<Created> {
        for column in &spec.partition_columns {
            if spec.schema.index_of(column).is_err() {
                return Err(DeltaLiteError::schema(format!(
                    "partition column {column:?} is not in the schema"
                )));
            }
        }
        let kernel: StructType = (&spec.schema).try_into_kernel().map_err(|e| {
            DeltaLiteError::schema(format!("schema cannot be stored in a Delta table: {e}"))
        })?;
        let table_schema = delta_arrow_schema(&spec.schema)?;
        if self.url().scheme() == "file"
            && let Ok(path) = self.url().to_file_path()
        {
            std::fs::create_dir_all(&path).map_err(|e| DeltaLiteError::Other(e.to_string()))?;
        }
        let location = self.delta_table();
        let mut commit_spec = CommitSpec::new(&options.commit_metadata, &options.app_transaction);
        let mut stats = CreateStats::default();
        let adds: Vec<Action> = match data {
            InitialData::Empty => Vec::new(),
            InitialData::Rows(batches) => {
                let (adds, rows) = write_rows(
                    new_table_writer(location, &table_schema, spec, options),
                    &table_schema,
                    batches,
                )
                .await?;
                stats.write.files_added = adds.len();
                stats.write.rows_written = rows;
                adds.into_iter().map(Action::Add).collect()
            }
            InitialData::Stream(batches) => {
                let (adds, rows) = write_stream(
                    new_table_writer(location, &table_schema, spec, options),
                    &table_schema,
                    batches,
                )
                .await?;
                stats.write.files_added = adds.len();
                stats.write.rows_written = rows;
                adds.into_iter().map(Action::Add).collect()
            }
            InitialData::ParquetFile { path, adopt } => {
                let file = std::fs::File::open(path).map_err(|e| {
                    DeltaLiteError::Other(format!("cannot open {}: {e}", path.display()))
                })?;
                let builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| {
                    DeltaLiteError::schema(format!("not a readable Parquet file: {e}"))
                })?;
                let file_schema = Arc::clone(builder.schema());
                if spec.partition_columns.is_empty() && stores_as_is(&file_schema, &table_schema) {
                    drop(builder);
                    let (add, rows) = stage_parquet_file(
                        location,
                        path,
                        &file_schema,
                        DataSkippingNumIndexedCols::NumColumns(DEFAULT_NUM_INDEXED_COLS),
                        options.multipart_part_size,
                        adopt,
                    )
                    .await?;
                    stats.write = WriteStats {
                        files_added: 1,
                        rows_written: rows,
                        stored_as_is: true,
                        ..Default::default()
                    };
                    vec![Action::Add(add)]
                } else {
                    let reader = builder.build().map_err(|e| {
                        DeltaLiteError::schema(format!("unreadable Parquet file: {e}"))
                    })?;
                    let (adds, rows) = write_rows(
                        new_table_writer(location, &table_schema, spec, options),
                        &table_schema,
                        reader.map(|b| b.map_err(Into::into)),
                    )
                    .await?;
                    stats.write.files_added = adds.len();
                    stats.write.rows_written = rows;
                    adds.into_iter().map(Action::Add).collect()
                }
            }
            InitialData::Upsert {
                schema,
                batches,
                options: upsert,
            } => {
                commit_spec = CommitSpec::new(&upsert.commit_metadata, &upsert.app_transaction);
                let (adds, upsert_stats) = write_initial(
                    location,
                    Arc::clone(&table_schema),
                    spec.partition_columns.clone(),
                    schema,
                    batches,
                    upsert,
                )
                .await?;
                stats.write.files_added = adds.len();
                stats.write.rows_written = upsert_stats.rows_inserted as u64;
                stats.upsert = Some(upsert_stats);
                adds.into_iter().map(Action::Add).collect()
            }
        };
        // On failure `first::create` deletes the files when nothing was committed for sure.
        let created = first::create(
            location,
            &kernel,
            spec.partition_columns.clone(),
            spec.configuration.clone(),
            adds,
            &commit_spec,
        )
        .await?;
        match created {
            First::Table(table) => {
                let table = DeltaLiteTable::from_delta(self.uri(), table);
                stats.write.version = table.version();
                if let Some(upsert) = &mut stats.upsert {
                    upsert.version = table.version();
                }
                Ok(Created::New(Box::new(NewTable { table, stats })))
            }
            First::Exists => Ok(Created::Exists),
        }
    }
}

impl DeltaLiteTable {
    /// Create an empty table (error if one exists) from an Arrow schema.
    pub async fn create(
        uri: &str,
        storage_options: HashMap<String, String>,
        schema: &Schema,
        partition_columns: &[String],
        configuration: HashMap<String, String>,
    ) -> Result<Self> {
        let spec = TableSpec {
            schema: schema.clone(),
            partition_columns: partition_columns.to_vec(),
            configuration,
        };
        let location = TableLocation::new(uri, storage_options)?;
        match location
            .create(&spec, InitialData::Empty, &WriteOptions::default())
            .await?
        {
            Created::New(new) => Ok(new.table),
            Created::Exists => Err(DeltaLiteError::invalid(format!(
                "a table already exists at {uri}"
            ))),
        }
    }
}

/// A writer for a table that is not committed yet (Delta's default settings).
fn new_table_writer(
    location: &deltalake::DeltaTable,
    table_schema: &SchemaRef,
    spec: &TableSpec,
    options: &WriteOptions,
) -> deltalake::datafile::writer::DeltaWriter {
    rows_writer(
        location.object_store(),
        Arc::clone(table_schema),
        spec.partition_columns.clone(),
        options.target_file_size.unwrap_or(DEFAULT_TARGET_FILE_SIZE),
        DataSkippingNumIndexedCols::NumColumns(DEFAULT_NUM_INDEXED_COLS),
        None,
    )
}
