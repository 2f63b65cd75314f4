//! `/upload`, `/upsert`, `/append`, `/tasks/{id}`: request parsing around `crate::ingest`.

use std::sync::Arc;

use axum::Json;
use axum::body::Body;
use axum::extract::{Extension, Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::auth::User;
use crate::catalog::TableName;
use crate::config::split_list;
use crate::error::{ApiError, ApiResult};
use crate::ingest::{self, Format, IngestMode, IngestRequest, SpoolOrigin, UploadMode};

use super::{AppState, S, header_str};

#[derive(Debug, Deserialize)]
pub(super) struct IngestParams {
    catalog: Option<String>,
    schema: Option<String>,
    table: Option<String>,
    mode: Option<String>,
    format: Option<String>,
    primary_key: Option<String>,
    cursor_field: Option<String>,
    delete_column: Option<String>,
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

/// `POST /upload`: every mode, `mode=upsert` (the legacy shape) included.
pub(super) async fn upload(
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
        upsert_mode(&params)?
    } else {
        IngestMode::Upload(UploadMode::parse(params.mode.as_deref())?)
    };
    write(&state, name, &params, headers, body, mode).await
}

/// `POST /upsert`.
pub(super) async fn upsert(
    State(state): State<S>,
    Extension(user): Extension<User>,
    Query(params): Query<IngestParams>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let name = target(&user, &params)?;
    let mode = upsert_mode(&params)?;
    write(&state, name, &params, headers, body, mode).await
}

fn upsert_mode(params: &IngestParams) -> ApiResult<IngestMode> {
    let keys = split_list(params.primary_key.as_deref().unwrap_or(""));
    if keys.is_empty() {
        return Err(ApiError::BadRequest(format!(
            "{}: primary_key must name at least one column",
            ingest::INGEST_ERR
        )));
    }
    Ok(IngestMode::Upsert {
        keys,
        cursor: split_list(params.cursor_field.as_deref().unwrap_or("")),
        delete_column: params
            .delete_column
            .as_deref()
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .map(str::to_string),
    })
}

/// Spool the body, then write it detached from the connection.
async fn write(
    state: &AppState,
    name: TableName,
    params: &IngestParams,
    headers: HeaderMap,
    body: Body,
    mode: IngestMode,
) -> ApiResult<Response> {
    let spool = spool(state, &headers, body).await?;
    let format = detect(&headers, params.format.as_deref(), &spool)?;
    let req = IngestRequest {
        name,
        spool,
        format,
        idempotency_key: idempotency_key(&headers),
        spool_dir: state.config.spool_dir.clone(),
        origin: SpoolOrigin::Client,
    };
    let storage = Arc::clone(&state.storage);
    let summary = detached(async move { ingest::write(&storage, req, mode).await }).await?;
    Ok(summary_response(summary))
}

pub(super) async fn append(
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
            origin: SpoolOrigin::Client,
        };
        let storage = Arc::clone(&state.storage);
        detached(async move { ingest::write(&storage, req, IngestMode::AppendJson).await }).await
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

pub(super) async fn task(
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
