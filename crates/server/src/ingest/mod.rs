//! Ingest: `/upload` (all modes), `/upsert`, `/append`. A body is spooled to a temporary
//! file as it arrives (never held whole in memory), decoded as Parquet, CSV or JSON, and
//! written through the engine in one Delta commit. A request that fails leaves no trace:
//! a table it created is removed again.

mod body;
mod decode;

pub use body::{drain, drainable, spool_body};
pub use decode::{Format, Source, open_source, validate_parquet};

use std::collections::HashMap;
use std::sync::Arc;

use arrow::datatypes::Schema;
use arrow::record_batch::RecordBatch;
use deltalite::write::{WriteOptions, WriteStats};
use deltalite::{
    AppTransaction, Created, DeltaLiteError, DeltaLiteTable, InitialData, Nullability,
    OmittedColumns, OnDuplicate, UpsertOptions,
};
use sha2::{Digest, Sha256};
use tempfile::NamedTempFile;

use crate::catalog::{Storage, TableName};
use crate::error::{ApiError, ApiResult};
use crate::types::storable_schema;

/// Prefix of every ingest error, as clients expect it.
pub const INGEST_ERR: &str = "Failed to execute ingest";

fn bad(msg: impl std::fmt::Display) -> ApiError {
    ApiError::BadRequest(format!("{INGEST_ERR}: {msg}"))
}

/// A spool file that could not be written (disk full, a file size limit): the server's
/// failure, whatever the protocol.
pub(crate) fn io_err(e: std::io::Error) -> ApiError {
    ApiError::Internal(format!("spool I/O error: {e}"))
}

/// What an ingest request does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IngestMode {
    /// `/upload` in one of its plain modes.
    Upload(UploadMode),
    /// `/upsert`, and `/upload?mode=upsert`.
    Upsert {
        /// Primary-key columns (at least one).
        keys: Vec<String>,
        /// Cursor columns (may be empty).
        cursor: Vec<String>,
        /// Delete marker column: its marked rows remove their key.
        delete_column: Option<String>,
    },
    /// `/append`: JSON objects; creates the table and adds new columns as needed.
    AppendJson,
}

/// How `/upload` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UploadMode {
    /// New table from the file; error if it exists.
    Create,
    /// Append to an existing table.
    Append,
    /// Create empty when missing, then append.
    CreateAppend,
    /// Replace the contents.
    Overwrite,
}

impl IngestMode {
    /// The `deltalite.operation` recorded in the commit info.
    fn operation(&self) -> &'static str {
        match self {
            IngestMode::Upload(_) => "upload",
            IngestMode::Upsert { .. } => "upsert",
            IngestMode::AppendJson => "append",
        }
    }
}

impl UploadMode {
    /// Parse the `mode` parameter (upsert is routed before this).
    pub fn parse(s: Option<&str>) -> ApiResult<Self> {
        match s.map(|m| m.trim().to_ascii_lowercase()).as_deref() {
            None | Some("") | Some("append") => Ok(Self::Append),
            Some("create") => Ok(Self::Create),
            Some("create_append") => Ok(Self::CreateAppend),
            Some("overwrite") | Some("replace") => Ok(Self::Overwrite),
            Some(other) => Err(ApiError::BadRequest(format!(
                "{INGEST_ERR}: unknown mode {other:?} (expected create, append, create_append, overwrite or upsert)"
            ))),
        }
    }
}

/// The `txn` application id of an idempotency key.
pub fn idempotency_app_id(key: &str) -> String {
    format!("idem-{}", hex::encode(Sha256::digest(key.as_bytes())))
}

/// Common inputs of a write request.
pub struct IngestRequest {
    /// Target table.
    pub name: TableName,
    /// The spooled body.
    pub spool: NamedTempFile,
    /// Detected format.
    pub format: Format,
    /// `Idempotency-Key` header.
    pub idempotency_key: Option<String>,
    /// Spool directory for conversions.
    pub spool_dir: Option<std::path::PathBuf>,
    /// Who wrote the spooled bytes.
    pub origin: SpoolOrigin,
}

/// Who wrote a spooled file. A client's Parquet body is decoded end to end before it may
/// be stored as it is (a corrupt page would break every later read of the table); a file
/// this server wrote itself from decoded Arrow data (Flight's bulk ingest) is not read
/// again for that.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpoolOrigin {
    /// A request body, as the client sent it.
    Client,
    /// Written by this server.
    Server,
}

/// What an ingest did, returned as the small JSON summary.
#[derive(Debug, Default, serde::Serialize)]
pub struct IngestSummary {
    /// Always true on 200.
    pub ok: bool,
    /// Delta version committed (absent when a replay wrote nothing).
    pub version: Option<u64>,
    /// Rows written (upsert: updated + inserted).
    pub rows: u64,
    /// Table created by this request.
    pub created: bool,
    /// The Idempotency-Key had already been committed; nothing was written.
    pub idempotent_replay: bool,
}

impl IngestSummary {
    /// What a non-upsert write did: committed, or a replay when its key was already in.
    fn written(stats: &WriteStats, created: bool) -> Self {
        if stats.already_applied {
            return replay();
        }
        Self::committed(stats.version, stats.rows_written, created)
    }

    /// A committed write of `rows` rows at `version`.
    fn committed(version: u64, rows: u64, created: bool) -> Self {
        Self {
            ok: true,
            version: Some(version),
            rows,
            created,
            idempotent_replay: false,
        }
    }
}

fn app_txn(key: &Option<String>) -> Option<AppTransaction> {
    key.as_ref().map(|k| AppTransaction {
        app_id: idempotency_app_id(k),
        version: 1,
    })
}

async fn already_committed(table: &DeltaLiteTable, key: &Option<String>) -> ApiResult<bool> {
    let Some(key) = key else { return Ok(false) };
    let version = table
        .app_transaction_version(&idempotency_app_id(key))
        .await
        .map_err(|e| ApiError::from_engine(INGEST_ERR, e))?;
    Ok(version.is_some())
}

fn replay() -> IngestSummary {
    IngestSummary {
        ok: true,
        idempotent_replay: true,
        ..Default::default()
    }
}

fn write_options(key: &Option<String>, op: &str) -> WriteOptions {
    WriteOptions {
        app_transaction: app_txn(key),
        commit_metadata: HashMap::from([(
            "deltalite.operation".to_string(),
            serde_json::Value::from(op),
        )]),
        ..Default::default()
    }
}

fn upsert_options(
    keys: Vec<String>,
    cursor: Vec<String>,
    delete_column: Option<String>,
    key: &Option<String>,
) -> UpsertOptions {
    let mut options = UpsertOptions::new(keys);
    options.cursor_fields = cursor;
    options.delete_column = delete_column;
    options.on_duplicate = OnDuplicate::Last;
    options.omitted_columns = OmittedColumns::Keep;
    // `NOT NULL` in the server's tables is a constraint the user declared in SQL.
    options.nullability = Nullability::Refuse;
    options.app_transaction = app_txn(key);
    options.commit_metadata.insert(
        "deltalite.operation".to_string(),
        serde_json::Value::from("upsert"),
    );
    options
}

fn engine(e: DeltaLiteError) -> ApiError {
    ApiError::from_engine(INGEST_ERR, e)
}

/// Run an ingest request: the one entry point of every write endpoint. Under the table's
/// writer lock: open the table, or, when there is none and the mode may create it,
/// create it with the request's rows in its first commit (one commit: a failure leaves
/// no table, and a crash no empty one); a request whose idempotency key is already
/// recorded writes nothing.
pub async fn write(
    storage: &Storage,
    req: IngestRequest,
    mode: IngestMode,
) -> ApiResult<IngestSummary> {
    let lock = storage.table_lock(&req.name);
    let _guard = lock.lock().await;
    let table = match storage.open_table(&req.name).await? {
        Some(table) => table,
        None => match mode {
            IngestMode::Upload(UploadMode::Append) => {
                return Err(bad(format!(
                    "Catalog Error: Table with name {} does not exist!",
                    req.name.table
                )));
            }
            _ => match create(storage, &req, &mode).await? {
                Some(summary) => return Ok(summary),
                // Another writer created it meanwhile: write into it like any table.
                None => storage.open_table(&req.name).await?.ok_or_else(|| {
                    ApiError::Unavailable(format!(
                        "{INGEST_ERR}: table {} was created and removed concurrently",
                        req.name
                    ))
                })?,
            },
        },
    };
    if already_committed(&table, &req.idempotency_key).await? {
        return Ok(replay());
    }
    into_existing(table, req, mode).await
}

/// Create the table with the request's rows; `None` when another writer created it first
/// (nothing was written). On failure, folders this request made are removed again.
async fn create(
    storage: &Storage,
    req: &IngestRequest,
    mode: &IngestMode,
) -> ApiResult<Option<IngestSummary>> {
    let source = open_source(req.spool.path(), req.format, req.spool_dir.as_deref())?;
    let spec = storage.table_spec(storable_schema(&source.schema), Vec::new(), HashMap::new());
    let schema_created = storage
        .create_schema(&req.name.catalog, &req.name.schema)
        .await?;
    let result = async {
        let location = storage.location(&req.name)?;
        let options = write_options(&req.idempotency_key, mode.operation());
        let created = match mode {
            IngestMode::Upsert {
                keys,
                cursor,
                delete_column,
            } => {
                let schema = Arc::clone(&source.schema);
                check_key_columns(&schema, keys, cursor, delete_column)?;
                let batches =
                    collect_source(source.batches, deltalite::Knobs::default().max_source_bytes)?;
                let upsert = upsert_options(
                    keys.clone(),
                    cursor.clone(),
                    delete_column.clone(),
                    &req.idempotency_key,
                );
                let data = InitialData::Upsert {
                    schema: &schema,
                    batches: &batches,
                    options: &upsert,
                };
                location.create(&spec, data, &options).await
            }
            _ if req.format == Format::Parquet => {
                // A file that may be stored as it is must be readable to the end first.
                if req.origin == SpoolOrigin::Client {
                    validate_parquet(req.spool.path()).await?;
                }
                let data = InitialData::ParquetFile {
                    path: req.spool.path(),
                    adopt: true,
                };
                location.create(&spec, data, &options).await
            }
            _ => {
                let data = InitialData::Rows(source.batches);
                location.create(&spec, data, &options).await
            }
        };
        Ok(match created.map_err(engine)? {
            Created::New(new) => Some(IngestSummary::committed(
                new.table.version(),
                new.stats.write.rows_written,
                true,
            )),
            Created::Exists => None,
        })
    }
    .await;
    if result.is_err() {
        undo_create(storage, &req.name, schema_created).await;
    }
    result
}

/// Write into a table that exists.
async fn into_existing(
    mut table: DeltaLiteTable,
    req: IngestRequest,
    mode: IngestMode,
) -> ApiResult<IngestSummary> {
    let opts = write_options(&req.idempotency_key, mode.operation());
    let stats = match mode {
        IngestMode::Upload(UploadMode::Create) => {
            return Err(bad(format!(
                "Table with name {} already exists!",
                req.name.table
            )));
        }
        IngestMode::Upload(UploadMode::Overwrite) => {
            let source = open_source(req.spool.path(), req.format, req.spool_dir.as_deref())?;
            let schema = storable_schema(&source.schema);
            table.overwrite(&schema, source.batches, &opts).await
        }
        // The spool is this request's own: hand it over (moved, not copied, when local).
        IngestMode::Upload(_) if req.format == Format::Parquet => {
            // The engine may store the file as it is, checking only its footer: decode it
            // once here, so a corrupt page is a 400 now instead of a stored file that
            // breaks every later read of the table.
            if req.origin == SpoolOrigin::Client {
                validate_parquet(req.spool.path()).await?;
            }
            table.adopt_parquet_file(req.spool.path(), &opts).await
        }
        IngestMode::Upload(_) => {
            let source = open_source(req.spool.path(), req.format, req.spool_dir.as_deref())?;
            table.append(source.batches, &opts).await
        }
        IngestMode::Upsert {
            keys,
            cursor,
            delete_column,
        } => {
            let source = open_source(req.spool.path(), req.format, req.spool_dir.as_deref())?;
            let schema = Arc::clone(&source.schema);
            check_key_columns(&schema, &keys, &cursor, &delete_column)?;
            // The engine's memory bound is the source batch: decode it batch by batch
            // under the engine's `max_source_bytes` guard, so an oversized or malformed
            // file fails early.
            let batches =
                collect_source(source.batches, deltalite::Knobs::default().max_source_bytes)?;
            let options = upsert_options(keys, cursor, delete_column, &req.idempotency_key);
            let stats = table
                .upsert(&schema, &batches, &options)
                .await
                .map_err(engine)?;
            if stats.already_applied {
                // Another server committed this key while this one waited for the table.
                return Ok(replay());
            }
            return Ok(IngestSummary::committed(
                stats.version,
                (stats.rows_updated + stats.rows_inserted + stats.rows_deleted) as u64,
                false,
            ));
        }
        IngestMode::AppendJson => {
            let source = open_source(req.spool.path(), Format::Json, req.spool_dir.as_deref())?;
            let table_schema = table.schema().map_err(engine)?;
            // New columns are committed with the rows, so a failed append leaves no trace.
            let mut opts = opts;
            opts.new_columns = storable_schema(&source.schema)
                .fields()
                .iter()
                .filter(|f| table_schema.index_of(f.name()).is_err())
                .map(|f| f.as_ref().clone())
                .collect();
            table.append(source.batches, &opts).await
        }
    }
    .map_err(engine)?;
    Ok(IngestSummary::written(&stats, false))
}

fn check_key_columns(
    schema: &Schema,
    keys: &[String],
    cursor: &[String],
    delete_column: &Option<String>,
) -> ApiResult<()> {
    for key in keys.iter().chain(cursor).chain(delete_column) {
        if schema.index_of(key).is_err() {
            return Err(bad(format!("column {key:?} is not in the uploaded file")));
        }
    }
    Ok(())
}

/// Remove what a failed create left: the table folder (no commit exists, or it is not
/// this request's to remove), and the schema when this request made it and it is empty.
async fn undo_create(storage: &Storage, name: &TableName, schema_created: bool) {
    if !storage.table_exists(name).await.unwrap_or(true)
        && let Err(e) = storage.drop_table(name).await
    {
        tracing::error!(table = %name, error = %e, "failed to remove a table folder left by a failed request");
    }
    if schema_created {
        let _ = storage.drop_empty_schema(&name.catalog, &name.schema).await;
    }
}

/// Decode a source into memory, failing as soon as it grows past `limit` bytes.
fn collect_source(
    batches: impl Iterator<Item = deltalite::Result<RecordBatch>>,
    limit: usize,
) -> ApiResult<Vec<RecordBatch>> {
    let mut out = Vec::new();
    let mut held = 0usize;
    for batch in batches {
        let batch = batch.map_err(|e| ApiError::from_engine(INGEST_ERR, e))?;
        held = held.saturating_add(deltalite::runtime::held::batch_bytes(&batch));
        if held > limit {
            let err = DeltaLiteError::SourceTooLarge {
                actual: held,
                limit,
            };
            return Err(ApiError::from_engine(INGEST_ERR, err));
        }
        out.push(batch);
    }
    Ok(out)
}
