//! `/query`, `/validate`, `/query/{id}` (log and cancel).

use std::sync::Arc;
use std::time::Instant;

use arrow::datatypes::Schema;
use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::{Extension, Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{AppState, S, header_str};
use crate::auth::User;
use crate::error::{ApiError, ApiResult};
use crate::output::ndjson::json_line;
use crate::output::{Encoder, Limits, OutFormat, ResultStream, Stop, write_parquet};
use crate::registry::{Cancel, ClientInterface, QueryStart};
use crate::spool::spool_file;
use crate::sql::SqlSession;
use crate::types::duckdb_field_type;

/// The `/query` body. Optional fields are read leniently (a number sent as a string, a
/// `null`): clients in the wild differ, and only `statement` is required.
#[derive(Debug, Deserialize)]
pub(super) struct QueryRequest {
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

pub(super) async fn validate(
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

pub(super) async fn query_log(
    State(state): State<S>,
    Extension(user): Extension<User>,
    Path(query_id): Path<String>,
) -> ApiResult<Json<Value>> {
    let log = state.queries().get(&query_id, &user.name);
    log.map(Json)
        .ok_or_else(|| ApiError::NotFound(format!("Query {query_id} not found")))
}

#[derive(Debug, Deserialize)]
pub(super) struct CancelParams {
    session_id: Option<String>,
}

pub(super) async fn cancel_query(
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
pub(super) fn finish_log(
    state: &AppState,
    query_id: &str,
    start: Instant,
    rows: u64,
    error: Option<String>,
) {
    let (end, ms) = (now_iso(), start.elapsed().as_millis() as u64);
    state.queries().finish(query_id, end, ms, rows, error);
}

/// The first NDJSON line of a result.
fn metadata(req: &QueryRequest, statement: &str, ids: &Ids, start: Instant) -> Value {
    json!({
        "statement": statement,
        "rows_limit": req.limit,
        "rows_offset": req.offset.unwrap_or(0),
        "init_time_ms": start.elapsed().as_millis() as u64,
        "connections_errors": {},
        "session_id": ids.session_id,
        "query_id": ids.query_id,
        "worker_slug": "deltalite",
    })
}

pub(super) struct Ids {
    pub(super) query_id: String,
    pub(super) session_id: String,
}

pub(super) async fn query(
    State(state): State<S>,
    Extension(user): Extension<User>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult<Response> {
    let (req, statement) = parse_query_body(&body)?;
    let format = OutFormat::parse(req.format.as_deref())?;
    let ids = Ids {
        query_id: req
            .query_id
            .clone()
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string()),
        session_id: req
            .session_id
            .clone()
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string()),
    };
    let start = Instant::now();
    // A failure before any result row: logged, then an in-stream `{"error"}` for the
    // NDJSON protocol (still 200, as the protocol says) or an HTTP error for the others.
    // A transient failure is a 503 in every format: clients retry that, while they take
    // a 200 with an error line, like a 4xx, as final.
    let fail = |e: ApiError| {
        finish_log(&state, &ids.query_id, start, 0, Some(e.to_string()));
        match format {
            OutFormat::Ndjson if !e.is_transient() => {
                let mut body = json_line(&metadata(&req, &statement, &ids, start));
                body.push_str(&json_line(&json!({"error": e.to_string()})));
                Ok((
                    [(
                        header::CONTENT_TYPE,
                        HeaderValue::from_static(format.content_type()),
                    )],
                    body,
                )
                    .into_response())
            }
            _ => Err(e),
        }
    };
    let run = Run {
        statement: &statement,
        catalog: req.catalog.as_deref(),
        schema: req.schema.as_deref(),
        ids: &ids,
        visible: req
            .visible
            .as_ref()
            .and_then(Value::as_bool)
            .unwrap_or(true),
        requested_by: req.requested_by.clone(),
        user_agent: header_str(&headers, header::USER_AGENT),
    };
    let (output, limits) = match begin(&state, user, run).await {
        Ok(started) => started,
        Err(Begin::Refused(e)) => return Err(e),
        Err(Begin::Failed(e)) => return fail(e),
    };
    let mut result = ResultStream::new(output, limits, req.offset.unwrap_or(0), req.limit);
    // The first batch before any header: an error found this early is a proper answer.
    let first = match result.next().await {
        None => None,
        Some(Ok(batch)) => Some(batch),
        Some(Err(stop)) => return fail(stop.into_error()),
    };
    if format == OutFormat::Parquet {
        return parquet_response(&state, &ids.query_id, start, result, first).await;
    }
    let mut head = Vec::new();
    if format == OutFormat::Ndjson {
        head.push(Bytes::from(json_line(&metadata(
            &req, &statement, &ids, start,
        ))));
        head.push(Bytes::from(json_line(&columns_json(&result.schema()))));
    }
    let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(8);
    let st = Arc::clone(&state);
    let query_id = ids.query_id.clone();
    tokio::spawn(async move {
        let error = stream_body(format, head, first, &mut result, &tx).await;
        finish_log(&st, &query_id, start, result.rows(), error);
    });
    let stream =
        futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|b| (b, rx)) });
    Ok((
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static(format.content_type()),
        )],
        Body::from_stream(stream),
    )
        .into_response())
}

/// A statement to start, as `/query` and the console's run both start one.
pub(super) struct Run<'a> {
    pub(super) statement: &'a str,
    pub(super) catalog: Option<&'a str>,
    pub(super) schema: Option<&'a str>,
    pub(super) ids: &'a Ids,
    pub(super) visible: bool,
    pub(super) requested_by: Option<Value>,
    pub(super) user_agent: Option<String>,
}

/// Why a statement did not start.
pub(super) enum Begin {
    /// Refused before it was logged (its query id names another user's query).
    Refused(ApiError),
    /// Logged as running, then failed: the caller ends its log entry.
    Failed(ApiError),
}

/// Log `run` as running (cancellable through `DELETE /query/{id}`), then plan it (and
/// execute DDL and DML) racing cancellation and the server's query timeout. The output
/// streams under the returned limits.
pub(super) async fn begin(
    state: &AppState,
    user: User,
    run: Run<'_>,
) -> Result<(crate::sql::Output, Limits), Begin> {
    let limits = Limits {
        token: CancellationToken::new(),
        deadline: tokio::time::Instant::now() + state.config.query_timeout,
    };
    state
        .queries()
        .start(
            QueryStart {
                interface: ClientInterface::HttpQuery,
                query_id: run.ids.query_id.clone(),
                user: user.name.clone(),
                session_id: run.ids.session_id.clone(),
                statement: run.statement.to_string(),
                start_time: now_iso(),
                visible: run.visible,
                requested_by: run.requested_by,
                user_agent: run.user_agent,
            },
            limits.token.clone(),
        )
        .map_err(|taken| Begin::Refused(ApiError::BadRequest(taken.to_string())))?;
    let mut session = SqlSession::new(
        Arc::clone(&state.storage),
        Arc::clone(&state.query_runtime),
        user,
        run.catalog,
        run.schema,
    )
    .map_err(Begin::Failed)?;
    let planned = tokio::select! {
        r = session.run(run.statement) => r,
        stop = limits.stopped() => Err(stop.into_error()),
    };
    planned
        .map(|output| (output, limits))
        .map_err(Begin::Failed)
}

/// Send a streamed result's body/// Send a streamed result's body: `head`, then `first` and the rest of `result`. Returns
/// the error that ended it early, if one did. After an error the NDJSON protocol sends an
/// `{"error"}` line and ends; CSV and JSONL send an I/O error down the body, which aborts
/// the response so the client sees an incomplete body, never a short but complete one.
async fn stream_body(
    format: OutFormat,
    head: Vec<Bytes>,
    first: Option<arrow::record_batch::RecordBatch>,
    result: &mut ResultStream,
    tx: &mpsc::Sender<Result<Bytes, std::io::Error>>,
) -> Option<String> {
    for bytes in head {
        if tx.send(Ok(bytes)).await.is_err() {
            return None;
        }
    }
    let mut encoder = Encoder::new(format, &result.schema());
    let mut next = first.map(Ok);
    let stop = loop {
        let batch = match next.take() {
            Some(b) => b,
            None => match result.next().await {
                Some(b) => b,
                None => break None,
            },
        };
        let bytes = batch
            .map_err(Stop::into_error)
            .and_then(|b| encoder.batch(&b));
        match bytes {
            // A client that went away: dropping the stream cancels the execution.
            Ok(bytes) => {
                if tx.send(Ok(bytes)).await.is_err() {
                    return None;
                }
            }
            Err(e) => break Some(e),
        }
    };
    match stop {
        None => {
            if let Some(bytes) = encoder.finish() {
                let _ = tx.send(Ok(bytes)).await;
            }
            None
        }
        Some(e) => {
            let msg = e.to_string();
            let ending = if format == OutFormat::Ndjson {
                Ok(Bytes::from(json_line(&json!({"error": msg}))))
            } else {
                Err(std::io::Error::other(msg.clone()))
            };
            let _ = tx.send(ending).await;
            Some(msg)
        }
    }
}

/// A Parquet result: spooled whole, then sent; an error on the way is a proper status.
async fn parquet_response(
    state: &AppState,
    query_id: &str,
    start: Instant,
    mut result: ResultStream,
    first: Option<arrow::record_batch::RecordBatch>,
) -> ApiResult<Response> {
    let spool = spool_file(state.config.spool_dir.as_deref())
        .map_err(|e| ApiError::Internal(format!("spool: {e}")))?;
    if let Err(stop) = write_parquet(&mut result, first, &spool).await {
        let e = stop.into_error();
        finish_log(state, query_id, start, result.rows(), Some(e.to_string()));
        return Err(e);
    }
    finish_log(state, query_id, start, result.rows(), None);
    let file = tokio::fs::File::open(spool.path())
        .await
        .map_err(|e| ApiError::Internal(format!("spool: {e}")))?;
    // The open handle keeps the data readable after the temp file is unlinked.
    drop(spool);
    let stream = tokio_util::io::ReaderStream::new(file);
    Ok((
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static(OutFormat::Parquet.content_type()),
        )],
        Body::from_stream(stream),
    )
        .into_response())
}

pub(super) fn columns_json(schema: &Schema) -> Value {
    Value::Array(
        schema
            .fields()
            .iter()
            .map(|f| json!({"name": f.name(), "type": duckdb_field_type(f)}))
            .collect(),
    )
}
