//! Ingest: `/upload` (all modes), `/upsert`, `/append`. A body is spooled to a temporary
//! file as it arrives (never held whole in memory), decoded as Parquet, CSV or JSON, and
//! written through the engine in one Delta commit. A request that fails leaves no trace:
//! a table it created is removed again.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use arrow::record_batch::RecordBatch;
use axum::body::Body;
use deltalite::write::{WriteOptions, WriteStats};
use deltalite::{AppTransaction, DeltaLiteError, DeltaLiteTable, OmittedColumns, OnDuplicate};
use futures::StreamExt;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use sha2::{Digest, Sha256};
use tempfile::NamedTempFile;
use tokio::io::AsyncWriteExt;

use crate::catalog::{Storage, TableName};
use crate::error::{ApiError, ApiResult};

/// Prefix of every ingest error, as clients expect it.
pub const INGEST_ERR: &str = "Failed to execute ingest";

fn bad(msg: impl std::fmt::Display) -> ApiError {
    ApiError::BadRequest(format!("{INGEST_ERR}: {msg}"))
}

/// File formats the server reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Apache Parquet.
    Parquet,
    /// CSV with a header row.
    Csv,
    /// A JSON array of objects, or NDJSON.
    Json,
}

impl Format {
    fn from_hint(s: &str) -> Option<Self> {
        let s = s
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        match s.as_str() {
            "parquet"
            | "application/parquet"
            | "application/x-parquet"
            | "application/vnd.apache.parquet" => Some(Self::Parquet),
            "csv" | "text/csv" | "application/csv" => Some(Self::Csv),
            "json"
            | "jsonl"
            | "ndjson"
            | "application/json"
            | "application/x-ndjson"
            | "application/jsonl" => Some(Self::Json),
            other if other.ends_with("+json") => Some(Self::Json),
            _ => None,
        }
    }

    /// Content type first, then the legacy `format=` hint, then the bytes themselves.
    pub fn detect(
        content_type: Option<&str>,
        hint: Option<&str>,
        file: &mut File,
    ) -> ApiResult<Self> {
        if let Some(f) = content_type.and_then(Self::from_hint) {
            return Ok(f);
        }
        if let Some(f) = hint.and_then(Self::from_hint) {
            return Ok(f);
        }
        let mut head = [0u8; 512];
        file.seek(SeekFrom::Start(0)).map_err(io_err)?;
        let n = file.read(&mut head).map_err(io_err)?;
        file.seek(SeekFrom::Start(0)).map_err(io_err)?;
        if head[..n].starts_with(b"PAR1") {
            return Ok(Self::Parquet);
        }
        let first = head[..n]
            .iter()
            .copied()
            .find(|b| !(b.is_ascii_whitespace() || *b == 0xEF || *b == 0xBB || *b == 0xBF));
        Ok(match first {
            Some(b'{') | Some(b'[') => Self::Json,
            _ => Self::Csv,
        })
    }
}

fn io_err(e: std::io::Error) -> ApiError {
    ApiError::Internal(format!("spool I/O error: {e}"))
}

/// Stream a request body into a temporary file, enforcing the size limit as bytes arrive.
/// Bytes read and discarded after a 413, so that a client still sending gets the answer
/// instead of a connection reset; beyond this the connection is dropped.
const DRAIN_LIMIT: u64 = 16 * 1024 * 1024;

/// Read and discard what is left of a body, up to [`DRAIN_LIMIT`] bytes or five seconds.
pub async fn drain(mut stream: axum::body::BodyDataStream) {
    let work = async {
        let mut drained: u64 = 0;
        while let Some(Ok(chunk)) = stream.next().await {
            drained += chunk.len() as u64;
            if drained > DRAIN_LIMIT {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), work).await;
}

/// Whether a body of `len` bytes is small enough to drain before answering 413.
pub fn drainable(len: u64, limit: u64) -> bool {
    len <= limit.saturating_add(DRAIN_LIMIT)
}

pub async fn spool_body(body: Body, limit: u64, dir: Option<&Path>) -> ApiResult<NamedTempFile> {
    let spool = match dir {
        Some(d) => NamedTempFile::new_in(d),
        None => NamedTempFile::new(),
    }
    .map_err(io_err)?;
    let mut file = tokio::fs::File::from_std(spool.reopen().map_err(io_err)?);
    let mut stream = body.into_data_stream();
    let mut total: u64 = 0;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| {
            // A length-limit error from the body layer surfaces here as well.
            let msg = e.to_string();
            if msg.contains("length limit") {
                ApiError::TooLarge(limit)
            } else if msg.contains("timeout") {
                ApiError::BadRequest(format!(
                    "{INGEST_ERR}: the request body stopped arriving (idle timeout)"
                ))
            } else {
                ApiError::BadRequest(format!("{INGEST_ERR}: cannot read request body: {msg}"))
            }
        })?;
        total += chunk.len() as u64;
        if total > limit {
            drain(stream).await;
            return Err(ApiError::TooLarge(limit));
        }
        file.write_all(&chunk).await.map_err(io_err)?;
    }
    file.flush().await.map_err(io_err)?;
    file.sync_all().await.map_err(io_err)?;
    if total == 0 {
        return Err(bad("the request body is empty"));
    }
    Ok(spool)
}

/// Rewrite a JSON array of objects as NDJSON, streaming, so arrow-json can read it.
/// NDJSON input is copied as it is.
fn json_to_ndjson(src: &mut File, dir: Option<&Path>) -> ApiResult<NamedTempFile> {
    let out = match dir {
        Some(d) => NamedTempFile::new_in(d),
        None => NamedTempFile::new(),
    }
    .map_err(io_err)?;
    src.seek(SeekFrom::Start(0)).map_err(io_err)?;
    let mut reader = BufReader::new(&mut *src);
    let mut writer = BufWriter::new(out.reopen().map_err(io_err)?);
    let mut buf = [0u8; 64 * 1024];
    // State: before the first significant byte we decide array vs NDJSON.
    let mut mode: Option<bool> = None; // Some(true) = array
    let mut depth: usize = 0;
    let mut in_string = false;
    let mut escaped = false;
    let mut closed = false;
    loop {
        let n = reader.read(&mut buf).map_err(io_err)?;
        if n == 0 {
            break;
        }
        for &b in &buf[..n] {
            if mode.is_none() {
                if b.is_ascii_whitespace() || b == 0xEF || b == 0xBB || b == 0xBF {
                    continue;
                }
                if b == b'[' {
                    mode = Some(true);
                    depth = 1;
                    continue;
                }
                mode = Some(false);
            }
            if mode == Some(false) {
                writer.write_all(&[b]).map_err(io_err)?;
                continue;
            }
            if in_string {
                writer.write_all(&[b]).map_err(io_err)?;
                if escaped {
                    escaped = false;
                } else if b == b'\\' {
                    escaped = true;
                } else if b == b'"' {
                    in_string = false;
                }
                continue;
            }
            if closed {
                if !b.is_ascii_whitespace() {
                    return Err(bad("invalid JSON: data after the closing ']'"));
                }
                continue;
            }
            match (depth, b) {
                (1, b) if b.is_ascii_whitespace() || b == b',' => {}
                (1, b']') => {
                    closed = true;
                    depth = 0;
                }
                (1, b'{') => {
                    depth = 2;
                    writer.write_all(b"{").map_err(io_err)?;
                }
                (1, _) => return Err(bad("invalid JSON: array elements must be objects")),
                (_, b'"') => {
                    in_string = true;
                    writer.write_all(&[b]).map_err(io_err)?;
                }
                (_, b'{') | (_, b'[') => {
                    depth += 1;
                    writer.write_all(&[b]).map_err(io_err)?;
                }
                (_, b'}') | (_, b']') => {
                    depth -= 1;
                    writer.write_all(&[b]).map_err(io_err)?;
                    if depth == 1 {
                        writer.write_all(b"\n").map_err(io_err)?;
                    }
                }
                _ => writer.write_all(&[b]).map_err(io_err)?,
            }
        }
    }
    if mode == Some(true) && !closed {
        return Err(bad("invalid JSON: unterminated array"));
    }
    writer.flush().map_err(io_err)?;
    Ok(out)
}

/// Run a decoder step, turning a panic into an error message. The Arrow and Parquet
/// readers can panic on malformed input (a corrupt run length in a data page, found by
/// `tests/fuzz_readers.rs`); for a client's body that is a bad request, not a server fault.
fn guarded<T>(what: &str, f: impl FnOnce() -> T) -> Result<T, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|panic| {
        let detail = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown failure".into());
        tracing::warn!(%detail, "{what}: reader panicked on malformed input");
        format!("{what}: the reader failed on malformed data ({detail})")
    })
}

/// A batch iterator whose panics become one error item, after which it ends (the reader's
/// state is unknown after a panic).
fn guard_batches(
    what: &'static str,
    mut inner: impl Iterator<Item = deltalite::Result<RecordBatch>> + Send + 'static,
) -> Box<dyn Iterator<Item = deltalite::Result<RecordBatch>> + Send> {
    let mut failed = false;
    Box::new(std::iter::from_fn(move || {
        if failed {
            return None;
        }
        match guarded(what, || inner.next()) {
            Ok(item) => item,
            Err(msg) => {
                failed = true;
                Some(Err(DeltaLiteError::SchemaMismatch(msg)))
            }
        }
    }))
}

/// Decode a spooled Parquet body to the end (panic-guarded) without keeping anything: a
/// file the engine may store as it is must be readable, or every later read of the table
/// would fail on it. Row groups are decoded in parallel, one reader per core, on blocking
/// threads (not the async workers); memory is one decoded batch per thread.
pub async fn validate_parquet(path: &Path) -> ApiResult<()> {
    let path = path.to_path_buf();
    tokio::task::spawn_blocking(move || validate_parquet_file(&path))
        .await
        .map_err(|e| ApiError::Internal(format!("Parquet validation task failed: {e}")))?
}

fn validate_parquet_file(path: &Path) -> ApiResult<()> {
    const WHAT: &str = "not a readable Parquet file";
    let reader = |row_groups: Option<Vec<usize>>| -> ApiResult<_> {
        let file = File::open(path).map_err(io_err)?;
        guarded(WHAT, || {
            let mut builder = ParquetRecordBatchReaderBuilder::try_new(file)?.with_batch_size(8192);
            let row_group_count = builder.metadata().num_row_groups();
            if let Some(groups) = row_groups {
                builder = builder.with_row_groups(groups);
            }
            Ok::<_, parquet::errors::ParquetError>((row_group_count, builder.build()?))
        })
        .map_err(bad)?
        .map_err(|e| bad(format!("{WHAT}: {e}")))
    };
    let (row_groups, _) = reader(Some(Vec::new()))?;
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, row_groups.max(1));
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|worker| {
                scope.spawn(move || -> ApiResult<()> {
                    let groups: Vec<usize> = (worker..row_groups).step_by(threads).collect();
                    let (_, batches) = reader(Some(groups))?;
                    let batches = guard_batches(WHAT, batches.map(|b| b.map_err(Into::into)));
                    for batch in batches {
                        batch.map_err(|e| bad(format!("{WHAT}: {e}")))?;
                    }
                    Ok(())
                })
            })
            .collect();
        workers.into_iter().try_for_each(|worker| {
            worker
                .join()
                .map_err(|_| bad(format!("{WHAT}: the reader failed on malformed data")))?
        })
    })
}

/// A decoded source: schema plus a streaming batch iterator.
pub struct Source {
    /// Schema of the file.
    pub schema: SchemaRef,
    /// Batches, decoded lazily.
    pub batches: Box<dyn Iterator<Item = deltalite::Result<RecordBatch>> + Send>,
    /// Kept alive so a converted spool file outlives the reader.
    _spool: Option<NamedTempFile>,
}

/// Open a spooled body in the given format.
pub fn open_source(spool: &NamedTempFile, format: Format, dir: Option<&Path>) -> ApiResult<Source> {
    let file = spool.reopen().map_err(io_err)?;
    match format {
        Format::Parquet => {
            let (schema, reader) = guarded("not a readable Parquet file", || {
                let builder = ParquetRecordBatchReaderBuilder::try_new(file)?;
                let schema = Arc::clone(builder.schema());
                Ok::<_, parquet::errors::ParquetError>((
                    schema,
                    builder.with_batch_size(8192).build()?,
                ))
            })
            .map_err(bad)?
            .map_err(|e| bad(format!("not a readable Parquet file: {e}")))?;
            Ok(Source {
                schema,
                batches: guard_batches(
                    "invalid Parquet",
                    reader.map(|b| b.map_err(DeltaLiteError::from)),
                ),
                _spool: None,
            })
        }
        Format::Csv => {
            let mut file = file;
            let format = arrow_csv::reader::Format::default().with_header(true);
            let (schema, _) = format
                .infer_schema(BufReader::new(&mut file), None)
                .map_err(|e| bad(format!("invalid CSV: {e}")))?;
            if schema.fields().is_empty() {
                return Err(bad("invalid CSV: no header row"));
            }
            file.seek(SeekFrom::Start(0)).map_err(io_err)?;
            let schema = Arc::new(schema);
            let reader = arrow_csv::ReaderBuilder::new(Arc::clone(&schema))
                .with_header(true)
                .with_batch_size(8192)
                .build(BufReader::new(file))
                .map_err(|e| bad(format!("invalid CSV: {e}")))?;
            Ok(Source {
                schema,
                batches: guard_batches(
                    "invalid CSV",
                    reader.map(|b| {
                        b.map_err(|e| DeltaLiteError::SchemaMismatch(format!("invalid CSV: {e}")))
                    }),
                ),
                _spool: None,
            })
        }
        Format::Json => {
            let mut file = file;
            let nd = json_to_ndjson(&mut file, dir)?;
            let mut nd_file = nd.reopen().map_err(io_err)?;
            let (schema, _) = arrow_json::reader::infer_json_schema_from_seekable(
                BufReader::new(&mut nd_file),
                None,
            )
            .map_err(|e| bad(format!("invalid JSON: {e}")))?;
            if schema.fields().is_empty() {
                return Err(bad("invalid JSON: no objects with fields"));
            }
            nd_file.seek(SeekFrom::Start(0)).map_err(io_err)?;
            let schema = Arc::new(schema);
            let reader = arrow_json::ReaderBuilder::new(Arc::clone(&schema))
                .with_batch_size(8192)
                .build(BufReader::new(nd_file))
                .map_err(|e| bad(format!("invalid JSON: {e}")))?;
            Ok(Source {
                schema,
                batches: guard_batches(
                    "invalid JSON",
                    reader.map(|b| {
                        b.map_err(|e| DeltaLiteError::SchemaMismatch(format!("invalid JSON: {e}")))
                    }),
                ),
                _spool: Some(nd),
            })
        }
    }
}

/// The type a new table stores for a source type: Delta has no unsigned integers, no
/// nanosecond timestamps, no view types and no TIME, so those are mapped onto types that
/// hold every value.
pub fn storable_type(dt: &DataType) -> DataType {
    match dt {
        DataType::Null | DataType::Utf8View | DataType::LargeUtf8 => DataType::Utf8,
        DataType::BinaryView | DataType::LargeBinary | DataType::FixedSizeBinary(_) => {
            DataType::Binary
        }
        DataType::UInt8 => DataType::Int16,
        DataType::UInt16 => DataType::Int32,
        DataType::UInt32 => DataType::Int64,
        DataType::UInt64 => DataType::Decimal128(20, 0),
        DataType::Float16 => DataType::Float32,
        DataType::Date64 => DataType::Date32,
        DataType::Timestamp(_, tz) => {
            DataType::Timestamp(TimeUnit::Microsecond, tz.as_ref().map(|_| Arc::from("UTC")))
        }
        DataType::Time32(_) | DataType::Time64(_) => DataType::Utf8,
        DataType::Dictionary(_, value) => storable_type(value),
        DataType::List(f) | DataType::LargeList(f) | DataType::ListView(f) => {
            DataType::List(Arc::new(storable_field(f)))
        }
        DataType::Struct(fields) => {
            DataType::Struct(fields.iter().map(|f| storable_field(f)).collect())
        }
        other => other.clone(),
    }
}

fn storable_field(f: &Field) -> Field {
    let mut field = Field::new(f.name(), storable_type(f.data_type()), true);
    if matches!(f.data_type(), DataType::Time32(_) | DataType::Time64(_)) {
        field = field.with_metadata(HashMap::from([(
            crate::types::SQL_TYPE_KEY.to_string(),
            "TIME".to_string(),
        )]));
    }
    field
}

/// Schema of a table created from a file: storable types, every column nullable (later
/// files may omit columns).
pub fn storable_schema(schema: &Schema) -> Schema {
    Schema::new(
        schema
            .fields()
            .iter()
            .map(|f| storable_field(f))
            .collect::<Vec<_>>(),
    )
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
        .map_err(|e| ApiError::Unavailable(format!("{INGEST_ERR}: {e}")))?;
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
pub async fn upload(
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
pub async fn upsert(
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
    // The engine's memory bound is the source batch: decode it fully before creating
    // anything, so a malformed file fails before a table appears.
    let batches: Vec<RecordBatch> = source
        .batches
        .collect::<deltalite::Result<Vec<_>>>()
        .map_err(|e| ApiError::from_engine(INGEST_ERR, e))?;
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
pub async fn append_json(storage: &Storage, req: IngestRequest) -> ApiResult<IngestSummary> {
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
