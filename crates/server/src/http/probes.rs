//! Operators' endpoints: liveness and readiness probes (no credentials, no details),
//! `/healthz` and Prometheus `/metrics` (behind auth, like the API).

use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::S;

/// How long `/readyz` waits for the storage call before answering "not ready".
const READY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// `GET /livez`: the process is up and serving. No storage call.
pub(super) async fn livez() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

/// `GET /readyz`: the data root answers one cheap call (a listing of the root). `503`
/// when it fails or takes longer than [`READY_TIMEOUT`]; the reason goes to the log,
/// never to the unauthenticated caller.
pub(super) async fn readyz(axum::extract::State(state): State<S>) -> Response {
    match tokio::time::timeout(READY_TIMEOUT, state.storage.ping()).await {
        Ok(Ok(())) => (StatusCode::OK, Json(json!({"status": "ok"}))).into_response(),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "readiness check: the data root did not answer");
            not_ready()
        }
        Err(_) => {
            tracing::warn!("readiness check: the data root did not answer in time");
            not_ready()
        }
    }
}

fn not_ready() -> Response {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        [(header::RETRY_AFTER, "1")],
        Json(json!({"status": "unavailable"})),
    )
        .into_response()
}

pub(super) async fn healthz() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

pub(super) async fn metrics_text(State(state): State<S>) -> Response {
    state.record_state_gauges();
    let body = state
        .prometheus
        .as_ref()
        .map(|h| h.render())
        .unwrap_or_default();
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], body).into_response()
}
