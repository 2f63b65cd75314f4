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
use deltalite::{AppTransaction, DeltaLiteError, DeltaLiteTable, OmittedColumns, OnDuplicate};
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

fn io_err(e: std::io::Error) -> ApiError {
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
    },
    /// `/append`: JSON objects; creates the table and adds new columns as needed.
    AppendJson,
}

/// Run an ingest request: the one entry point of every write endpoint.
pub async fn write(
    storage: &Storage,
    req: IngestRequest,
    mode: IngestMode,
) -> ApiResult<IngestSummary> {
    match mode {
        IngestMode::Upload(mode) => upload(storage, req, mode).await,
        IngestMode::Upsert { keys, cursor } => upsert(storage, req, keys, cursor).await,
        IngestMode::AppendJson => append_json(storage, req).await,
    }
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

async fn create_table(
    storage: &Storage,
    name: &TableName,
    schema: &Schema,
) -> ApiResult<(DeltaLiteTable, Option<bool>)> {
    let schema_created = storage.create_schema(&name.catalog, &name.schema).await?;
    let created = DeltaLiteTable::create(
        &storage.table_uri(name),
        storage.options.clone(),
        &storable_schema(schema),
        &[],
        HashMap::new(),
    )
    .await;
    match created {
        Ok(t) => Ok((t, Some(schema_created))),
        Err(e) => {
            // The engine makes the folder before the first commit: remove it again.
            undo_create(storage, name, schema_created).await;
            Err(ApiError::from_engine(INGEST_ERR, e))
        }
    }
}

/// When this request created the table (`created` is `Some(schema_created)`) and the
/// work failed, the table folder (and a schema folder made for it) is removed so that the
/// failed request leaves no trace.
async fn undo_create_on_error<T>(
    storage: &Storage,
    name: &TableName,
    created: Option<bool>,
    result: ApiResult<T>,
) -> ApiResult<T> {
    if result.is_err()
        && let Some(schema_created) = created
    {
        undo_create(storage, name, schema_created).await;
    }
    result
}

/// Remove a table this request created, and its schema when that is left empty (schemas
/// are created on demand by the same request).
async fn undo_create(storage: &Storage, name: &TableName, schema_created: bool) {
    if let Err(e) = storage.drop_table(name).await {
        tracing::error!(table = %name, error = %e, "failed to remove a table created by a failed request");
    }
    if schema_created
        && let Ok(tables) = storage.list_tables(&name.catalog, &name.schema).await
        && tables.is_empty()
        && let Ok(children) = storage
            .list_schema_children(&name.catalog, &name.schema)
            .await
        && children.is_empty()
    {
        let _ = storage.drop_schema(&name.catalog, &name.schema).await;
    }
}

/// `/upload` in every mode but upsert.
async fn upload(
    storage: &Storage,
    req: IngestRequest,
    mode: UploadMode,
) -> ApiResult<IngestSummary> {
    let lock = storage.table_lock(&req.name);
    let _guard = lock.lock().await;
    let existing = storage.open_table(&req.name).await?;
    if let Some(table) = &existing
        && already_committed(table, &req.idempotency_key).await?
    {
        return Ok(replay());
    }
    let opts = write_options(&req.idempotency_key, "upload");
    let (mut table, created) = match (mode, existing) {
        (UploadMode::Create, Some(_)) => {
            return Err(bad(format!(
                "Table with name {} already exists!",
                req.name.table
            )));
        }
        (UploadMode::Append, None) => {
            return Err(bad(format!(
                "Catalog Error: Table with name {} does not exist!",
                req.name.table
            )));
        }
        (_, Some(t)) => (t, None),
        (_, None) => {
            // Decode the header only: the table is created from the file's schema.
            let source = open_source(&req.spool, req.format, req.spool_dir.as_deref())?;
            create_table(storage, &req.name, &source.schema).await?
        }
    };
    let result = async {
        let stats = match (mode, req.format) {
            (UploadMode::Overwrite, _) => {
                let source = open_source(&req.spool, req.format, req.spool_dir.as_deref())?;
                let schema = storable_schema(&source.schema);
                table.overwrite(&schema, source.batches, &opts).await
            }
            // The spool is this request's own: hand it over (moved, not copied, when local).
            (_, Format::Parquet) => {
                // The engine may store the file as it is, checking only its footer: decode
                // it once here, so a corrupt page is a 400 now instead of a stored file
                // that breaks every later read of the table.
                validate_parquet(req.spool.path()).await?;
                table.adopt_parquet_file(req.spool.path(), &opts).await
            }
            _ => {
                let source = open_source(&req.spool, req.format, req.spool_dir.as_deref())?;
                table.append(source.batches, &opts).await
            }
        }
        .map_err(|e| ApiError::from_engine(INGEST_ERR, e))?;
        Ok(IngestSummary::written(&stats, created.is_some()))
    }
    .await;
    undo_create_on_error(storage, &req.name, created, result).await
}

/// `/upsert` (and legacy `/upload?mode=upsert`).
async fn upsert(
    storage: &Storage,
    req: IngestRequest,
    primary_keys: Vec<String>,
    cursor_fields: Vec<String>,
) -> ApiResult<IngestSummary> {
    if primary_keys.is_empty() {
        return Err(bad("primary_key must name at least one column"));
    }
    let lock = storage.table_lock(&req.name);
    let _guard = lock.lock().await;
    let existing = storage.open_table(&req.name).await?;
    if let Some(table) = &existing
        && already_committed(table, &req.idempotency_key).await?
    {
        return Ok(replay());
    }
    let source = open_source(&req.spool, req.format, req.spool_dir.as_deref())?;
    let schema = Arc::clone(&source.schema);
    for key in primary_keys.iter().chain(&cursor_fields) {
        if schema.index_of(key).is_err() {
            return Err(bad(format!("column {key:?} is not in the uploaded file")));
        }
    }
    // The engine's memory bound is the source batch: decode it batch by batch under the
    // engine's `max_source_bytes` guard before creating anything, so an oversized or
    // malformed file fails early and before a table appears.
    let batches = collect_source(source.batches, deltalite::Knobs::default().max_source_bytes)?;
    let (mut table, created) = match existing {
        Some(t) => (t, None),
        None => create_table(storage, &req.name, &schema).await?,
    };
    let result = async {
        let mut options = deltalite::UpsertOptions::new(primary_keys);
        options.cursor_fields = cursor_fields;
        options.on_duplicate = OnDuplicate::Last;
        options.omitted_columns = OmittedColumns::Keep;
        options.app_transaction = app_txn(&req.idempotency_key);
        options.commit_metadata.insert(
            "deltalite.operation".to_string(),
            serde_json::Value::from("upsert"),
        );
        let stats = table
            .upsert(&schema, &batches, &options)
            .await
            .map_err(|e| ApiError::from_engine(INGEST_ERR, e))?;
        if stats.already_applied {
            // Another server committed this key while this one waited for the table.
            return Ok(replay());
        }
        Ok(IngestSummary::committed(
            stats.version,
            (stats.rows_updated + stats.rows_inserted) as u64,
            created.is_some(),
        ))
    }
    .await;
    undo_create_on_error(storage, &req.name, created, result).await
}

/// `/append`: JSON object(s); creates the table and adds new columns as needed.
async fn append_json(storage: &Storage, req: IngestRequest) -> ApiResult<IngestSummary> {
    let lock = storage.table_lock(&req.name);
    let _guard = lock.lock().await;
    let existing = storage.open_table(&req.name).await?;
    if let Some(table) = &existing
        && already_committed(table, &req.idempotency_key).await?
    {
        return Ok(replay());
    }
    let source = open_source(&req.spool, Format::Json, req.spool_dir.as_deref())?;
    let mut opts = write_options(&req.idempotency_key, "append");
    let (mut table, created) = match existing {
        Some(t) => (t, None),
        None => create_table(storage, &req.name, &source.schema).await?,
    };
    let result = async {
        let table_schema = table
            .schema()
            .map_err(|e| ApiError::from_engine(INGEST_ERR, e))?;
        // New columns are committed with the rows, so a failed append leaves no trace.
        opts.new_columns = storable_schema(&source.schema)
            .fields()
            .iter()
            .filter(|f| table_schema.index_of(f.name()).is_err())
            .map(|f| f.as_ref().clone())
            .collect();
        let stats = table
            .append(source.batches, &opts)
            .await
            .map_err(|e| ApiError::from_engine(INGEST_ERR, e))?;
        Ok(IngestSummary::written(&stats, created.is_some()))
    }
    .await;
    undo_create_on_error(storage, &req.name, created, result).await
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
        held = held.saturating_add(batch.get_array_memory_size());
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
