//! HTTP routes, query handling (logged and cancellable through [`crate::registry`]) and
//! result output formats.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use arrow::util::display::FormatOptions;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, MatchedPath, Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json};
use datafusion::execution::memory_pool::FairSpillPool;
use datafusion::execution::runtime_env::{RuntimeEnv, RuntimeEnvBuilder};
use futures::StreamExt;
use metrics_exporter_prometheus::PrometheusHandle;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::auth::{Authenticator, User};
use crate::catalog::{Storage, TableName};
use crate::config::{ServerConfig, split_list};
use crate::error::{ApiError, ApiResult};
use crate::ingest::{self, Format, IngestRequest, UploadMode};
use crate::ndjson::{RowWriter, json_line};
use crate::registry::{Cancel, QueryLog, QueryStart, TaskLog};
use crate::sql::{Output, SqlSession};
use crate::types::duckdb_field_type;

/// Shared server state.
pub struct AppState {
    config: ServerConfig,
    storage: Arc<Storage>,
    auth: Authenticator,
    prometheus: Option<PrometheusHandle>,
    /// One DataFusion runtime for every query: its memory pool bounds them together.
    query_runtime: Arc<RuntimeEnv>,
    /// Bounded (entries and bytes, `--query-log-entries`, `--query-log-mb`).
    queries: Mutex<QueryLog>,
    /// Bounded (`registry::MAX_TASKS`).
    tasks: Mutex<TaskLog>,
}

impl AppState {
    /// Build the state.
    pub fn new(
        config: ServerConfig,
        storage: Storage,
        prometheus: Option<PrometheusHandle>,
    ) -> Result<Arc<Self>, datafusion::error::DataFusionError> {
        let query_runtime = RuntimeEnvBuilder::new()
            .with_memory_pool(Arc::new(FairSpillPool::new(config.query_memory_bytes)))
            .with_metadata_cache_limit(config.query_footer_cache_bytes)
            .build_arc()?;
        let queries = QueryLog::new(config.query_log_entries, config.query_log_bytes);
        Ok(Arc::new(Self {
            auth: Authenticator::new(&config.users),
            query_runtime,
            config,
            storage: Arc::new(storage),
            prometheus,
            queries: Mutex::new(queries),
            tasks: Mutex::new(TaskLog::new(crate::registry::MAX_TASKS)),
        }))
    }

    // A panic while one of these was locked leaves consistent data (every update is a
    // few field writes), so a poisoned lock is used rather than failing every request.
    fn queries(&self) -> std::sync::MutexGuard<'_, QueryLog> {
        match self.queries.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    fn tasks(&self) -> std::sync::MutexGuard<'_, TaskLog> {
        match self.tasks.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// Sizes of the server's long-lived in-memory state, for `/metrics`.
    fn record_state_gauges(&self) {
        let (entries, bytes) = {
            let q = self.queries();
            (q.len(), q.bytes())
        };
        let tasks = self.tasks().len();
        crate::metrics::record_state(&crate::metrics::StateSizes {
            query_log_entries: entries,
            query_log_bytes: bytes,
            tasks,
            table_locks: self.storage.table_lock_count(),
            query_runtime: &self.query_runtime,
        });
    }
}

type S = Arc<AppState>;

/// The router with auth, limits and metrics.
pub fn router(state: S) -> Router {
    let json_limit = state.config.max_body_bytes.min(64 * 1024 * 1024) as usize;
    Router::new()
        .route("/upload", post(upload))
        .route("/upsert", post(upsert))
        .route("/append", post(append))
        .route("/query", post(query))
        .route("/query/{query_id}", get(query_log).delete(cancel_query))
        .route("/validate", post(validate))
        .route("/tasks/{task_id}", get(task))
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics_text))
        .layer(DefaultBodyLimit::max(json_limit))
        // A body that stops arriving (or drips slower than one piece per timeout) fails
        // the request instead of holding a connection and a spool file forever.
        .layer(tower_http::timeout::RequestBodyTimeoutLayer::new(
            state.config.body_idle_timeout,
        ))
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&state),
            authenticate,
        ))
        // A bug in one handler answers 500 instead of dropping the connection.
        .layer(tower_http::catch_panic::CatchPanicLayer::new())
        .layer(axum::middleware::from_fn(observe))
        .with_state(state)
}

async fn observe(request: Request, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "unmatched".into());
    let method = request.method().clone();
    let start = Instant::now();
    let response = next.run(request).await;
    let elapsed = start.elapsed();
    let status = response.status().as_u16();
    crate::metrics::record_request(&route, status, elapsed.as_secs_f64());
    tracing::info!(%method, %route, status, ms = elapsed.as_millis() as u64, "request");
    response
}

async fn authenticate(State(state): State<S>, mut request: Request, next: Next) -> Response {
    match state.auth.authenticate(request.headers()) {
        Ok(user) => {
            request.extensions_mut().insert(user);
            next.run(request).await
        }
        Err(e) => e.into_response(),
    }
}

async fn healthz() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

async fn metrics_text(State(state): State<S>) -> Response {
    state.record_state_gauges();
    let body = state
        .prometheus
        .as_ref()
        .map(|h| h.render())
        .unwrap_or_default();
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], body).into_response()
}

#[derive(Debug, Deserialize)]
struct IngestParams {
    catalog: Option<String>,
    schema: Option<String>,
    table: Option<String>,
    mode: Option<String>,
    format: Option<String>,
    primary_key: Option<String>,
    cursor_field: Option<String>,
}

fn target(user: &User, p: &IngestParams) -> ApiResult<TableName> {
    let get = |v: &Option<String>, n: &str| {
        v.clone().filter(|s| !s.is_empty()).ok_or_else(|| {
            ApiError::BadRequest(format!(
                "{}: missing query parameter {n}",
                ingest::INGEST_ERR
            ))
        })
    };
    let name = TableName::new(
        &get(&p.catalog, "catalog")?,
        &get(&p.schema, "schema")?,
        &get(&p.table, "table")?,
    )?;
    if !user.can_see(&name.catalog) {
        return Err(ApiError::NotFound(format!(
            "Catalog Error: Catalog with name {} does not exist!",
            name.catalog
        )));
    }
    Ok(name)
}

fn header_str(headers: &HeaderMap, name: header::HeaderName) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(String::from)
}

fn idempotency_key(headers: &HeaderMap) -> Option<String> {
    headers
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

async fn spool(
    state: &AppState,
    headers: &HeaderMap,
    body: Body,
) -> ApiResult<tempfile::NamedTempFile> {
    let limit = state.config.max_body_bytes;
    if let Some(len) =
        header_str(headers, header::CONTENT_LENGTH).and_then(|l| l.parse::<u64>().ok())
        && len > limit
    {
        if ingest::drainable(len, limit) {
            ingest::drain(body.into_data_stream()).await;
        }
        return Err(ApiError::TooLarge(limit));
    }
    ingest::spool_body(body, limit, state.config.spool_dir.as_deref()).await
}

fn detect(
    headers: &HeaderMap,
    hint: Option<&str>,
    spool: &tempfile::NamedTempFile,
) -> ApiResult<Format> {
    let mut file = spool
        .reopen()
        .map_err(|e| ApiError::Internal(format!("spool: {e}")))?;
    let ct = header_str(headers, header::CONTENT_TYPE);
    // Generic content types say nothing about the file: sniff instead.
    let ct = ct.filter(|c| {
        let c = c.to_ascii_lowercase();
        !(c.starts_with("application/octet-stream")
            || c.starts_with("text/plain")
            || c.starts_with("application/x-www-form-urlencoded"))
    });
    Format::detect(ct.as_deref(), hint, &mut file)
}

/// Run a write in its own task: once the body is spooled, a client that disconnects does
/// not abort the write half-way (the undo of a created table must run, and a commit that
/// is about to happen should complete, as clients expect from a one-hour upload timeout).
/// The task lives on the blocking pool because decoding CSV/JSON/Parquet is synchronous
/// CPU work; the async workers stay free for queries and health checks.
async fn detached<T: Send + 'static>(
    work: impl std::future::Future<Output = ApiResult<T>> + Send + 'static,
) -> ApiResult<T> {
    let handle = tokio::runtime::Handle::current();
    tokio::task::spawn_blocking(move || handle.block_on(work))
        .await
        .map_err(|e| ApiError::Internal(format!("ingest task failed: {e}")))?
}

fn summary_response(summary: ingest::IngestSummary) -> Response {
    (StatusCode::OK, Json(summary)).into_response()
}

async fn upload(
    State(state): State<S>,
    Extension(user): Extension<User>,
    Query(params): Query<IngestParams>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let name = target(&user, &params)?;
    let is_upsert = params
        .mode
        .as_deref()
        .is_some_and(|m| m.trim().eq_ignore_ascii_case("upsert"));
    let mode = if is_upsert {
        None
    } else {
        Some(UploadMode::parse(params.mode.as_deref())?)
    };
    let spool = spool(&state, &headers, body).await?;
    let format = detect(&headers, params.format.as_deref(), &spool)?;
    let req = IngestRequest {
        name,
        spool,
        format,
        idempotency_key: idempotency_key(&headers),
        spool_dir: state.config.spool_dir.clone(),
    };
    let storage = Arc::clone(&state.storage);
    let keys = split_list(params.primary_key.as_deref().unwrap_or(""));
    let cursor = split_list(params.cursor_field.as_deref().unwrap_or(""));
    let summary = detached(async move {
        match mode {
            Some(mode) => ingest::upload(&storage, req, mode).await,
            None => ingest::upsert(&storage, req, keys, cursor).await,
        }
    })
    .await?;
    Ok(summary_response(summary))
}

async fn upsert(
    State(state): State<S>,
    Extension(user): Extension<User>,
    Query(params): Query<IngestParams>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let name = target(&user, &params)?;
    let keys = split_list(params.primary_key.as_deref().unwrap_or(""));
    if keys.is_empty() {
        return Err(ApiError::BadRequest(format!(
            "{}: primary_key must name at least one column",
            ingest::INGEST_ERR
        )));
    }
    let cursor = split_list(params.cursor_field.as_deref().unwrap_or(""));
    let spool = spool(&state, &headers, body).await?;
    let format = detect(&headers, params.format.as_deref(), &spool)?;
    let req = IngestRequest {
        name,
        spool,
        format,
        idempotency_key: idempotency_key(&headers),
        spool_dir: state.config.spool_dir.clone(),
    };
    Ok(summary_response(
        ingest::upsert(&state.storage, req, keys, cursor).await?,
    ))
}

async fn append(
    State(state): State<S>,
    Extension(user): Extension<User>,
    Query(params): Query<IngestParams>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let result: ApiResult<ingest::IngestSummary> = async {
        let name = target(&user, &params)?;
        let spool = spool(&state, &headers, body).await?;
        let req = IngestRequest {
            name,
            spool,
            format: Format::Json,
            idempotency_key: idempotency_key(&headers),
            spool_dir: state.config.spool_dir.clone(),
        };
        let storage = Arc::clone(&state.storage);
        detached(async move { ingest::append_json(&storage, req).await }).await
    }
    .await;
    match result {
        Ok(_) => {
            let task_id = uuid::Uuid::new_v4().to_string();
            state.tasks().insert(task_id.clone(), user.name.clone());
            Json(json!({"ok": true, "error_code": null, "error_message": null, "task_id": task_id}))
                .into_response()
        }
        Err(ApiError::BadRequest(msg)) => {
            let code = if msg.contains("invalid JSON") || msg.contains("body is empty") {
                "invalid-data"
            } else {
                "incompatible-schema"
            };
            (
                StatusCode::BAD_REQUEST,
                Json(
                    json!({"ok": false, "error_code": code, "error_message": msg, "task_id": null}),
                ),
            )
                .into_response()
        }
        Err(e) => e.into_response(),
    }
}

async fn task(
    State(state): State<S>,
    Extension(user): Extension<User>,
    Path(task_id): Path<String>,
) -> ApiResult<Json<Value>> {
    let known = state.tasks().owned_by(&task_id, &user.name);
    if !known {
        return Err(ApiError::NotFound(format!("Task {task_id} not found")));
    }
    Ok(Json(json!({"task_id": task_id, "status": "completed"})))
}

/// The `/query` body. Optional fields are read leniently (a number sent as a string, a
/// `null`): clients in the wild differ, and only `statement` is required.
#[derive(Debug, Deserialize)]
struct QueryRequest {
    statement: Option<String>,
    catalog: Option<String>,
    schema: Option<String>,
    #[serde(default, deserialize_with = "lenient_string")]
    session_id: Option<String>,
    #[serde(default, deserialize_with = "lenient_string")]
    query_id: Option<String>,
    #[serde(default, deserialize_with = "lenient_u64")]
    limit: Option<u64>,
    #[serde(default, deserialize_with = "lenient_u64")]
    offset: Option<u64>,
    format: Option<String>,
    #[serde(default)]
    visible: Option<Value>,
    #[serde(default)]
    requested_by: Option<Value>,
}

fn lenient_u64<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::Number(n) => n.as_u64().or_else(|| n.as_f64().map(|f| f.max(0.0) as u64)),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    })
}

fn lenient_string<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::String(s) => Some(s),
        Value::Null => None,
        other => Some(other.to_string()),
    })
}

fn parse_query_body(body: &Bytes) -> ApiResult<(QueryRequest, String)> {
    let req: QueryRequest = serde_json::from_slice(body)
        .map_err(|e| ApiError::BadRequest(format!("Invalid JSON body: {e}")))?;
    let statement = req
        .statement
        .clone()
        .filter(|s| !s.trim().is_empty())
        .ok_or_else(|| ApiError::BadRequest("missing field `statement`".into()))?;
    Ok((req, statement))
}

async fn validate(
    State(state): State<S>,
    Extension(user): Extension<User>,
    body: Bytes,
) -> ApiResult<Json<Value>> {
    let (req, statement) = parse_query_body(&body)?;
    let result = async {
        let mut session = SqlSession::new(
            Arc::clone(&state.storage),
            Arc::clone(&state.query_runtime),
            user,
            req.catalog.as_deref(),
            req.schema.as_deref(),
        )?;
        session.validate(&statement).await
    }
    .await;
    Ok(Json(match result {
        Ok(()) => json!({"valid": true, "statement": statement, "connections_errors": {}}),
        Err(e) => {
            json!({"valid": false, "statement": statement, "connections_errors": {}, "error": e.to_string()})
        }
    }))
}

async fn query_log(
    State(state): State<S>,
    Extension(user): Extension<User>,
    Path(query_id): Path<String>,
) -> ApiResult<Json<Value>> {
    let log = state.queries().get(&query_id, &user.name);
    log.map(Json)
        .ok_or_else(|| ApiError::NotFound(format!("Query {query_id} not found")))
}

#[derive(Debug, Deserialize)]
struct CancelParams {
    session_id: Option<String>,
}

async fn cancel_query(
    State(state): State<S>,
    Extension(user): Extension<User>,
    Path(query_id): Path<String>,
    Query(params): Query<CancelParams>,
) -> Json<Value> {
    let outcome = state
        .queries()
        .cancel(&query_id, &user.name, params.session_id.as_deref());
    let (cancelled, message) = match outcome {
        Cancel::Cancelled => (true, "Query cancelled".to_string()),
        Cancel::AlreadyFinished => (false, "Query already finished".to_string()),
        Cancel::NotFound => (false, format!("Query {query_id} not found")),
    };
    Json(json!({"cancelled": cancelled, "message": message}))
}

fn now_iso() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, false)
}

/// Finish a query's log entry.
fn finish_log(state: &AppState, query_id: &str, start: Instant, rows: u64, error: Option<String>) {
    let (end, ms) = (now_iso(), start.elapsed().as_millis() as u64);
    state.queries().finish(query_id, end, ms, rows, error);
}

enum OutFormat {
    Default,
    Csv,
    Jsonl,
    Parquet,
}

/// What stops a query early.
async fn stopped(token: &CancellationToken, deadline: tokio::time::Instant) -> String {
    tokio::select! {
        _ = token.cancelled() => "INTERRUPT Error: Query cancelled".to_string(),
        _ = tokio::time::sleep_until(deadline) => "INTERRUPT Error: Query timed out".to_string(),
    }
}

async fn query(
    State(state): State<S>,
    Extension(user): Extension<User>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult<Response> {
    let (req, statement) = parse_query_body(&body)?;
    let format = match req
        .format
        .as_deref()
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        None | Some("") | Some("default") | Some("json") => OutFormat::Default,
        Some("csv") => OutFormat::Csv,
        Some("jsonl") | Some("ndjson") => OutFormat::Jsonl,
        Some("parquet") => OutFormat::Parquet,
        Some(other) => return Err(ApiError::BadRequest(format!("unknown format {other:?}"))),
    };
    let query_id = req
        .query_id
        .clone()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    let session_id = req
        .session_id
        .clone()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    let token = CancellationToken::new();
    let start = Instant::now();
    state
        .queries()
        .start(
            QueryStart {
                query_id: query_id.clone(),
                user: user.name.clone(),
                session_id: session_id.clone(),
                statement: statement.clone(),
                start_time: now_iso(),
                visible: req
                    .visible
                    .as_ref()
                    .and_then(Value::as_bool)
                    .unwrap_or(true),
                requested_by: req.requested_by.clone(),
                user_agent: header_str(&headers, header::USER_AGENT),
            },
            token.clone(),
        )
        .map_err(|taken| ApiError::BadRequest(taken.to_string()))?;
    let deadline = tokio::time::Instant::now() + state.config.query_timeout;
    // A failure before any result: logged, then an in-stream `{"error"}` for NDJSON
    // (still 200, as the protocol says) or an HTTP error for the other formats.
    let fail = |e: ApiError| {
        finish_log(&state, &query_id, start, 0, Some(e.to_string()));
        match format {
            OutFormat::Default => Ok(error_stream(
                &req,
                &statement,
                &query_id,
                &session_id,
                start,
                e.to_string(),
            )),
            _ => Err(e),
        }
    };
    let mut session = match SqlSession::new(
        Arc::clone(&state.storage),
        Arc::clone(&state.query_runtime),
        user,
        req.catalog.as_deref(),
        req.schema.as_deref(),
    ) {
        Ok(s) => s,
        Err(e) => return fail(e),
    };
    // Planning (and DDL/DML execution) runs here, racing cancellation and the timeout.
    let planned = tokio::select! {
        r = session.run(&statement) => r,
        msg = stopped(&token, deadline) => Err(if msg.contains("timed out") { ApiError::Timeout(msg) } else { ApiError::BadRequest(msg) }),
    };
    let output = match planned {
        Ok(o) => o,
        Err(e) => return fail(e),
    };
    let limit = req.limit;
    let offset = req.offset.unwrap_or(0);
    match format {
        OutFormat::Default | OutFormat::Jsonl | OutFormat::Csv => {
            let (tx, rx) = mpsc::channel::<Bytes>(8);
            let metadata = json!({
                "statement": statement,
                "rows_limit": limit,
                "rows_offset": offset,
                "init_time_ms": start.elapsed().as_millis() as u64,
                "connections_errors": {},
                "session_id": session_id,
                "query_id": query_id,
                "worker_slug": "deltalite",
            });
            let kind = match format {
                OutFormat::Default => 0,
                OutFormat::Jsonl => 1,
                _ => 2,
            };
            let st = Arc::clone(&state);
            tokio::spawn(async move {
                let schema = output.schema();
                if kind == 0 {
                    let _ = tx.send(Bytes::from(json_line(&metadata))).await;
                    let _ = tx
                        .send(Bytes::from(json_line(&columns_json(&schema))))
                        .await;
                }
                let result = stream_rows(output, &tx, kind, limit, offset, &token, deadline).await;
                let (rows, error) = match result {
                    Ok(rows) => (rows, None),
                    Err((rows, msg)) => {
                        if kind != 2 {
                            let _ = tx
                                .send(Bytes::from(json_line(&json!({"error": msg}))))
                                .await;
                        }
                        (rows, Some(msg))
                    }
                };
                finish_log(&st, &query_id, start, rows, error);
            });
            let stream = futures::stream::unfold(rx, |mut rx| async move {
                rx.recv().await.map(|b| (Ok::<_, Infallible>(b), rx))
            });
            let content_type = if kind == 2 {
                "text/csv; charset=utf-8"
            } else {
                "application/x-ndjson"
            };
            Ok((
                [(header::CONTENT_TYPE, HeaderValue::from_static(content_type))],
                Body::from_stream(stream),
            )
                .into_response())
        }
        OutFormat::Parquet => {
            let spool = match &state.config.spool_dir {
                Some(d) => tempfile::NamedTempFile::new_in(d),
                None => tempfile::NamedTempFile::new(),
            }
            .map_err(|e| ApiError::Internal(format!("spool: {e}")))?;
            let result = write_parquet(output, &spool, limit, offset, &token, deadline).await;
            let rows = match result {
                Ok(rows) => rows,
                Err((rows, msg)) => {
                    finish_log(&state, &query_id, start, rows, Some(msg.clone()));
                    return Err(if msg.contains("timed out") {
                        ApiError::Timeout(msg)
                    } else {
                        ApiError::BadRequest(msg)
                    });
                }
            };
            finish_log(&state, &query_id, start, rows, None);
            let file = tokio::fs::File::open(spool.path())
                .await
                .map_err(|e| ApiError::Internal(format!("spool: {e}")))?;
            // The open handle keeps the data readable after the temp file is unlinked.
            drop(spool);
            let stream = tokio_util::io::ReaderStream::new(file);
            Ok((
                [(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/parquet"),
                )],
                Body::from_stream(stream),
            )
                .into_response())
        }
    }
}

fn error_stream(
    req: &QueryRequest,
    statement: &str,
    query_id: &str,
    session_id: &str,
    start: Instant,
    msg: String,
) -> Response {
    let metadata = json!({
        "statement": statement,
        "rows_limit": req.limit,
        "rows_offset": req.offset.unwrap_or(0),
        "init_time_ms": start.elapsed().as_millis() as u64,
        "connections_errors": {},
        "session_id": session_id,
        "query_id": query_id,
        "worker_slug": "deltalite",
    });
    let mut body = json_line(&metadata);
    body.push_str(&json_line(&json!({"error": msg})));
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/x-ndjson"),
        )],
        body,
    )
        .into_response()
}

fn columns_json(schema: &Schema) -> Value {
    Value::Array(
        schema
            .fields()
            .iter()
            .map(|f| json!({"name": f.name(), "type": duckdb_field_type(f)}))
            .collect(),
    )
}

/// Slice a batch by the request's offset/limit bookkeeping.
fn window(
    batch: RecordBatch,
    skipped: &mut u64,
    offset: u64,
    emitted: u64,
    limit: Option<u64>,
) -> Option<RecordBatch> {
    let mut batch = batch;
    if *skipped < offset {
        let skip = (offset - *skipped).min(batch.num_rows() as u64);
        *skipped += skip;
        batch = batch.slice(skip as usize, batch.num_rows() - skip as usize);
    }
    if let Some(limit) = limit {
        let left = limit.saturating_sub(emitted);
        if (batch.num_rows() as u64) > left {
            batch = batch.slice(0, left as usize);
        }
    }
    (batch.num_rows() > 0).then_some(batch)
}

/// Stream result rows as NDJSON arrays (kind 0), objects (1) or CSV (2).
async fn stream_rows(
    output: Output,
    tx: &mpsc::Sender<Bytes>,
    kind: u8,
    limit: Option<u64>,
    offset: u64,
    token: &CancellationToken,
    deadline: tokio::time::Instant,
) -> Result<u64, (u64, String)> {
    let schema = output.schema();
    let names: Vec<String> = schema.fields().iter().map(|f| f.name().clone()).collect();
    let mut stream: futures::stream::BoxStream<'static, Result<RecordBatch, String>> = match output
    {
        Output::Stream(s) => s.map(|r| r.map_err(|e| e.to_string())).boxed(),
        Output::Batches(_, b) => futures::stream::iter(b.into_iter().map(Ok)).boxed(),
    };
    let options = FormatOptions::default().with_display_error(true);
    let (mut emitted, mut skipped) = (0u64, 0u64);
    let mut header_done = false;
    loop {
        if limit.is_some_and(|l| emitted >= l) {
            break;
        }
        let next = tokio::select! {
            n = stream.next() => n,
            msg = stopped(token, deadline) => return Err((emitted, msg)),
        };
        let Some(batch) = next else { break };
        let batch = batch.map_err(|e| (emitted, e))?;
        let Some(batch) = window(batch, &mut skipped, offset, emitted, limit) else {
            continue;
        };
        let mut out = String::new();
        match kind {
            2 => {
                let mut buf = Vec::new();
                {
                    let mut w = arrow_csv::WriterBuilder::new()
                        .with_header(!header_done)
                        .build(&mut buf);
                    w.write(&plain_batch(&batch))
                        .map_err(|e| (emitted, e.to_string()))?;
                }
                header_done = true;
                out = String::from_utf8_lossy(&buf).into_owned();
            }
            _ => {
                let writer = RowWriter::new(&batch, &options);
                for row in 0..batch.num_rows() {
                    if kind == 0 {
                        writer.push_array_row(&mut out, row);
                    } else {
                        writer.push_object_row(&mut out, &names, row);
                    }
                }
            }
        }
        emitted += batch.num_rows() as u64;
        if tx.send(Bytes::from(out)).await.is_err() {
            // The client went away: dropping the stream cancels the execution.
            return Ok(emitted);
        }
    }
    if kind == 2 && !header_done {
        let header = names
            .iter()
            .map(|n| csv_field(n))
            .collect::<Vec<_>>()
            .join(",");
        let _ = tx.send(Bytes::from(header + "\n")).await;
    }
    Ok(emitted)
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// View types to their plain equivalents, so outputs carry the types clients expect.
fn plain_type(dt: &DataType) -> DataType {
    match dt {
        DataType::Utf8View => DataType::Utf8,
        DataType::BinaryView => DataType::Binary,
        other => other.clone(),
    }
}

fn plain_schema(schema: &Schema) -> SchemaRef {
    Arc::new(Schema::new(
        schema
            .fields()
            .iter()
            .map(|f| {
                Field::new(f.name(), plain_type(f.data_type()), f.is_nullable())
                    .with_metadata(f.metadata().clone())
            })
            .collect::<Vec<_>>(),
    ))
}

fn plain_batch(batch: &RecordBatch) -> RecordBatch {
    let schema = plain_schema(&batch.schema());
    let columns: Result<Vec<_>, _> = batch
        .columns()
        .iter()
        .zip(schema.fields())
        .map(|(c, f)| arrow::compute::cast(c, f.data_type()))
        .collect();
    columns
        .and_then(|c| RecordBatch::try_new(schema, c))
        .unwrap_or_else(|_| batch.clone())
}

async fn write_parquet(
    output: Output,
    spool: &tempfile::NamedTempFile,
    limit: Option<u64>,
    offset: u64,
    token: &CancellationToken,
    deadline: tokio::time::Instant,
) -> Result<u64, (u64, String)> {
    let schema = plain_schema(&output.schema());
    let file = spool.reopen().map_err(|e| (0, e.to_string()))?;
    let mut writer = parquet::arrow::ArrowWriter::try_new(file, Arc::clone(&schema), None)
        .map_err(|e| (0, e.to_string()))?;
    let mut stream: futures::stream::BoxStream<'static, Result<RecordBatch, String>> = match output
    {
        Output::Stream(s) => s.map(|r| r.map_err(|e| e.to_string())).boxed(),
        Output::Batches(_, b) => futures::stream::iter(b.into_iter().map(Ok)).boxed(),
    };
    let (mut emitted, mut skipped) = (0u64, 0u64);
    loop {
        if limit.is_some_and(|l| emitted >= l) {
            break;
        }
        let next = tokio::select! {
            n = stream.next() => n,
            msg = stopped(token, deadline) => return Err((emitted, msg)),
        };
        let Some(batch) = next else { break };
        let batch = batch.map_err(|e| (emitted, e))?;
        let Some(batch) = window(batch, &mut skipped, offset, emitted, limit) else {
            continue;
        };
        emitted += batch.num_rows() as u64;
        writer
            .write(&plain_batch(&batch))
            .map_err(|e| (emitted, e.to_string()))?;
    }
    writer.close().map_err(|e| (emitted, e.to_string()))?;
    Ok(emitted)
}
