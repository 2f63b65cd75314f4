//! The console's routes: sign-in (`/console/login`, `/console/session`,
//! `/console/logout`, outside the API's authentication), and behind it the caller's query
//! history, a table's log summary, and statements run into a spooled result that the page
//! reads page by page (`/console/run`, `/console/results/{id}`) and downloads through a
//! one-time ticket. `crate::console` holds the state and the embedded page.

use std::sync::Arc;
use std::time::Instant;

use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::{Extension, Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use super::query::{Begin, Ids, Run, begin, columns_json, finish_log};
use super::{AppState, S, header_str};
use crate::auth::User;
use crate::catalog::TableName;
use crate::console::results::{MAX_PAGE_ROWS, Spooler};
use crate::console::sessions;
use crate::error::{ApiError, ApiResult};
use crate::output::ndjson::RowWriter;
use crate::output::{Encoder, OutFormat, ResultStream};
use crate::spool::spool_file;
use crate::sql::plain::{plain_batch, plain_schema};
use crate::types::duckdb_field_type;

/// Entries the history answers at most.
pub const MAX_HISTORY: usize = 200;

/// A console request that is not signed in: 401 without a `WWW-Authenticate` challenge
/// (which would make the browser open its own password dialog over the page).
pub(super) fn unauthorized() -> Response {
    (
        StatusCode::UNAUTHORIZED,
        Json(json!({"error": "Not signed in, or the session has expired"})),
    )
        .into_response()
}

/// The user of a console request: the session cookie with its CSRF header. `None` when
/// the request is not a console request (no CSRF header); `Some(Err)` when it is one
/// that is not signed in.
pub(super) fn session_user(
    state: &AppState,
    headers: &HeaderMap,
) -> Option<Result<User, Response>> {
    let csrf = headers.get(sessions::CSRF_HEADER)?.to_str().unwrap_or("");
    let user =
        session_token(headers).and_then(|token| state.console.sessions.authorise(token, csrf));
    Some(user.ok_or_else(unauthorized))
}

fn session_token(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|h| sessions::cookie(h, sessions::COOKIE))
}

#[derive(Deserialize)]
pub(crate) struct Login {
    user: String,
    password: String,
}

fn set_cookie(state: &AppState, value: &str, max_age: u64) -> HeaderValue {
    // `Secure` when this server terminates TLS; behind a TLS proxy the browser still
    // sends the cookie only to this origin (`SameSite=Strict`).
    let secure = if state.config.tls.is_some() {
        "; Secure"
    } else {
        ""
    };
    let cookie = format!(
        "{}={value}; Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age}{secure}",
        sessions::COOKIE
    );
    HeaderValue::from_str(&cookie).unwrap_or_else(|_| HeaderValue::from_static(""))
}

fn signed_in(user: &User, csrf: &str) -> Value {
    json!({"user": user.name, "catalogs": *user.catalogs, "csrf": csrf})
}

/// `POST /console/login` `{"user", "password"}`: the same credentials as the API.
pub(crate) async fn login(State(state): State<S>, body: Bytes) -> Response {
    let Ok(login) = serde_json::from_slice::<Login>(&body) else {
        return (
            StatusCode::BAD_REQUEST,
            Json(json!({"error": "Expected {\"user\": …, \"password\": …}"})),
        )
            .into_response();
    };
    // argon2 verification is slow by design: off the async workers.
    let st = Arc::clone(&state);
    let checked = tokio::task::spawn_blocking(move || {
        st.auth.authenticate_password(&login.user, &login.password)
    })
    .await;
    let Ok(Ok(user)) = checked else {
        tracing::info!("console sign-in refused");
        return (
            StatusCode::UNAUTHORIZED,
            Json(json!({"error": "Wrong user name or password"})),
        )
            .into_response();
    };
    let issued = state.console.sessions.issue(user.clone());
    tracing::info!(user = %user.name, "console sign-in");
    let mut response = Json(signed_in(&user, &issued.csrf)).into_response();
    response.headers_mut().insert(
        header::SET_COOKIE,
        set_cookie(&state, &issued.token, sessions::SESSION_TTL.as_secs()),
    );
    response
}

/// `GET /console/session`: who is signed in (and the session's CSRF token; `user` is
/// null when nobody is), so a reload
/// keeps the page signed in. Another origin cannot read the answer, and the cookie is
/// not sent with requests other sites start.
pub(crate) async fn session(State(state): State<S>, headers: HeaderMap) -> Response {
    match session_token(&headers).and_then(|t| state.console.sessions.get(t)) {
        Some((user, csrf)) => Json(signed_in(&user, &csrf)).into_response(),
        // 200 rather than 401: not being signed in is the page's normal first state.
        None => Json(json!({"user": null})).into_response(),
    }
}

/// `POST /console/logout`: ends the session (needs its CSRF header) and clears the cookie.
pub(crate) async fn logout(State(state): State<S>, headers: HeaderMap) -> Response {
    if let (Some(token), Some(Ok(_))) = (session_token(&headers), session_user(&state, &headers)) {
        state.console.sessions.end(token);
    }
    let mut response = StatusCode::NO_CONTENT.into_response();
    response
        .headers_mut()
        .insert(header::SET_COOKIE, set_cookie(&state, "", 0));
    response
}

#[derive(Deserialize)]
pub(crate) struct HistoryParams {
    limit: Option<usize>,
}

/// `GET /console/history`: the caller's newest queries from the query log (behind the
/// API's authentication).
pub(crate) async fn history(
    State(state): State<S>,
    Extension(user): Extension<User>,
    Query(params): Query<HistoryParams>,
) -> Json<Value> {
    let limit = params.limit.unwrap_or(50).min(MAX_HISTORY);
    Json(Value::Array(state.queries().recent(&user.name, limit)))
}

#[derive(Deserialize)]
pub(crate) struct TableParams {
    catalog: String,
    schema: String,
    table: String,
}

/// `GET /console/table?catalog&schema&table`: what the log says of a table (version,
/// files, bytes, partition columns, properties, columns, the last commits). Another
/// user's catalog is answered as a missing table. Row counts are a query (`count(*)`:
/// the log's counts do not subtract deletion vectors).
pub(crate) async fn table(
    State(state): State<S>,
    Extension(user): Extension<User>,
    Query(p): Query<TableParams>,
) -> ApiResult<Json<Value>> {
    let missing = || {
        ApiError::NotFound(format!(
            "Table {}.{}.{} not found",
            p.catalog, p.schema, p.table
        ))
    };
    if !user.can_see(&p.catalog) {
        return Err(missing());
    }
    let name = TableName::new(&p.catalog, &p.schema, &p.table)?;
    let table = state.storage.open_table(&name).await?.ok_or_else(missing)?;
    let failed = |e: deltalite::DeltaLiteError| ApiError::from_engine("cannot read the table", e);
    let files = table.files().map_err(failed)?;
    let schema = table.schema().map_err(failed)?;
    let columns: Vec<Value> = schema
        .fields()
        .iter()
        .map(|f| {
            json!({
                "name": f.name(),
                "type": duckdb_field_type(f),
                "nullable": f.is_nullable(),
                "comment": f.metadata().get(deltalite::COLUMN_COMMENT_KEY),
            })
        })
        .collect();
    let history: Vec<Value> = table
        .history(Some(20))
        .await
        .map_err(failed)?
        .into_iter()
        .map(|c| {
            json!({
                "version": c.get("version"),
                "timestamp": c.get("timestamp"),
                "operation": c.get("operation"),
                "metrics": c.get("operationMetrics"),
            })
        })
        .collect();
    Ok(Json(json!({
        "catalog": p.catalog,
        "schema": p.schema,
        "table": p.table,
        "version": table.version(),
        "files": files.len(),
        "bytes": files.iter().map(|f| f.size).sum::<u64>(),
        "partition_columns": table.partition_columns().map_err(failed)?,
        "properties": table.configuration().map_err(failed)?,
        "columns": columns,
        "history": history,
    })))
}

#[derive(Deserialize)]
pub(crate) struct RunRequest {
    statement: String,
    catalog: Option<String>,
    schema: Option<String>,
    query_id: Option<String>,
}

/// `POST /console/run` `{"statement", "catalog", "schema", "query_id"}`: run the
/// statement once, as `/query` runs it (logged, cancellable by its query id, under the
/// timeout), into a spooled result; answers its id, columns and row count.
pub(crate) async fn run(
    State(state): State<S>,
    Extension(user): Extension<User>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult<Json<Value>> {
    let req: RunRequest = serde_json::from_slice(&body)
        .map_err(|e| ApiError::BadRequest(format!("Invalid JSON body: {e}")))?;
    if req.statement.trim().is_empty() {
        return Err(ApiError::BadRequest("missing field `statement`".into()));
    }
    let ids = Ids {
        query_id: req
            .query_id
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string()),
        session_id: uuid::Uuid::new_v4().to_string(),
    };
    let start = Instant::now();
    let name = user.name.clone();
    let run = Run {
        statement: &req.statement,
        catalog: req.catalog.as_deref(),
        schema: req.schema.as_deref(),
        ids: &ids,
        visible: true,
        requested_by: None,
        user_agent: header_str(&headers, header::USER_AGENT),
    };
    let fail = |e: ApiError| {
        finish_log(&state, &ids.query_id, start, 0, Some(e.to_string()));
        e
    };
    let (output, limits) = match begin(&state, user, run).await {
        Ok(started) => started,
        Err(Begin::Refused(e)) => return Err(e),
        Err(Begin::Failed(e)) => return Err(fail(e)),
    };
    let mut result = ResultStream::new(output, limits, 0, None);
    let schema = plain_schema(&result.schema());
    let mut spool =
        Spooler::new(state.config.spool_dir.as_deref(), Arc::clone(&schema)).map_err(fail)?;
    while let Some(batch) = result.next().await {
        let batch = batch.map_err(|stop| fail(stop.into_error()))?;
        // A full spool ends the result there (dropping the stream stops the execution).
        if !spool.push(&plain_batch(&batch)).map_err(fail)? {
            break;
        }
    }
    let spooled = spool.finish(&name).map_err(fail)?;
    let (rows, truncated) = (spooled.rows(), spooled.truncated());
    finish_log(&state, &ids.query_id, start, rows, None);
    let id = state.console.results.insert(spooled);
    Ok(Json(json!({
        "result_id": id,
        "query_id": ids.query_id,
        "columns": columns_json(&schema),
        "rows": rows,
        "truncated": truncated,
        "ms": start.elapsed().as_millis() as u64,
    })))
}

#[derive(Deserialize)]
pub(crate) struct PageParams {
    offset: Option<u64>,
    limit: Option<usize>,
}

/// `GET /console/results/{id}?offset&limit`: rows of a spooled result, as the NDJSON
/// protocol renders them (`{"offset", "rows": [[…], …]}`).
pub(crate) async fn page(
    State(state): State<S>,
    Extension(user): Extension<User>,
    Path(id): Path<String>,
    Query(p): Query<PageParams>,
) -> ApiResult<Response> {
    let result = state
        .console
        .results
        .get(&id, &user.name)
        .ok_or_else(|| ApiError::NotFound(format!("Result {id} not found (results expire)")))?;
    let offset = p.offset.unwrap_or(0);
    let limit = p.limit.unwrap_or(500).min(MAX_PAGE_ROWS);
    let batches = tokio::task::spawn_blocking(move || result.read(offset, limit))
        .await
        .map_err(|e| ApiError::Internal(e.to_string()))??;
    let options = arrow::util::display::FormatOptions::default().with_display_error(true);
    let mut out = format!("{{\"offset\":{offset},\"rows\":[");
    let mut first = true;
    for batch in &batches {
        let writer = RowWriter::new(batch, &options);
        for row in 0..batch.num_rows() {
            if !first {
                out.push(',');
            }
            first = false;
            writer.push_array_row(&mut out, row);
            out.pop(); // the row's newline
        }
    }
    out.push_str("]}");
    Ok((
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        out,
    )
        .into_response())
}

/// `POST /console/results/{id}/ticket`: a one-time ticket to download the result.
pub(crate) async fn ticket(
    State(state): State<S>,
    Extension(user): Extension<User>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    state
        .console
        .results
        .get(&id, &user.name)
        .ok_or_else(|| ApiError::NotFound(format!("Result {id} not found (results expire)")))?;
    Ok(Json(
        json!({"ticket": state.console.tickets.issue(&user.name, &id)}),
    ))
}

#[derive(Deserialize)]
pub(crate) struct DownloadParams {
    ticket: String,
    format: Option<String>,
}

/// `GET /console/download?ticket&format=csv|parquet`: a spooled result as a file. Wants
/// the session cookie and a ticket of the same user (a navigation carries no CSRF
/// header; the ticket, asked for with it, stands in).
pub(crate) async fn download(
    State(state): State<S>,
    headers: HeaderMap,
    Query(p): Query<DownloadParams>,
) -> ApiResult<Response> {
    let Some((user, _)) = session_token(&headers).and_then(|t| state.console.sessions.get(t))
    else {
        return Ok(unauthorized());
    };
    let id = state
        .console
        .tickets
        .redeem(&p.ticket, &user.name)
        .ok_or_else(|| ApiError::NotFound("Unknown or used download ticket".into()))?;
    let result = state
        .console
        .results
        .get(&id, &user.name)
        .ok_or_else(|| ApiError::NotFound(format!("Result {id} not found (results expire)")))?;
    let format = match p.format.as_deref() {
        Some("parquet") => OutFormat::Parquet,
        Some("csv") | None => OutFormat::Csv,
        Some(other) => return Err(ApiError::BadRequest(format!("unknown format {other:?}"))),
    };
    let spool_dir = state.config.spool_dir.clone();
    // Written whole to a spool file, then sent: the result is on disk already, and a
    // complete file is what a download should be.
    let file = tokio::task::spawn_blocking(move || -> ApiResult<tempfile::NamedTempFile> {
        let err = |e: &dyn std::fmt::Display| ApiError::Internal(format!("download: {e}"));
        let out = spool_file(spool_dir.as_deref()).map_err(|e| err(&e))?;
        let handle = out.reopen().map_err(|e| err(&e))?;
        let reader = result.batches()?;
        if format == OutFormat::Parquet {
            let mut w = parquet::arrow::ArrowWriter::try_new(handle, result.schema(), None)
                .map_err(|e| err(&e))?;
            for batch in reader {
                w.write(&batch.map_err(|e| err(&e))?).map_err(|e| err(&e))?;
            }
            w.close().map_err(|e| err(&e))?;
        } else {
            use std::io::Write;
            let mut w = std::io::BufWriter::new(handle);
            let mut encoder = Encoder::new(OutFormat::Csv, &result.schema());
            for batch in reader {
                let bytes = encoder.batch(&batch.map_err(|e| err(&e))?)?;
                w.write_all(&bytes).map_err(|e| err(&e))?;
            }
            if let Some(bytes) = encoder.finish() {
                w.write_all(&bytes).map_err(|e| err(&e))?;
            }
            w.flush().map_err(|e| err(&e))?;
        }
        Ok(out)
    })
    .await
    .map_err(|e| ApiError::Internal(e.to_string()))??;
    let reader = tokio::fs::File::open(file.path())
        .await
        .map_err(|e| ApiError::Internal(format!("download: {e}")))?;
    // The open handle keeps the data readable after the temporary file is unlinked.
    drop(file);
    let (content_type, name) = match format {
        OutFormat::Parquet => ("application/vnd.apache.parquet", "result.parquet"),
        _ => ("text/csv; charset=utf-8", "result.csv"),
    };
    Ok((
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
            (
                header::CONTENT_DISPOSITION,
                HeaderValue::from_str(&format!("attachment; filename=\"{name}\""))
                    .map_err(|e| ApiError::Internal(e.to_string()))?,
            ),
        ],
        Body::from_stream(tokio_util::io::ReaderStream::new(reader)),
    )
        .into_response())
}
