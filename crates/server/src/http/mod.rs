//! The HTTP surface: router, middleware (auth, limits, metrics), shared state.

mod autocomplete;
mod console;
mod ingest;
mod probes;
mod query;

use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::http::{HeaderMap, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use tracing::Instrument;

pub use crate::state::AppState;

type S = Arc<AppState>;

/// The router: the API behind auth, limits and metrics; the operators' probes
/// (`/livez`, `/readyz`) outside auth.
pub fn router(state: S) -> Router {
    let json_limit = state.config.max_body_bytes.min(64 * deltalite::MIB as u64) as usize;
    let api = Router::new()
        .route("/upload", post(ingest::upload))
        .route("/upsert", post(ingest::upsert))
        .route("/append", post(ingest::append))
        .route("/query", post(query::query))
        .route(
            "/query/{query_id}",
            get(query::query_log).delete(query::cancel_query),
        )
        .route("/validate", post(query::validate))
        .route("/autocomplete", post(autocomplete::autocomplete))
        .route("/tasks/{task_id}", get(ingest::task))
        .route("/healthz", get(probes::healthz))
        .route("/metrics", get(probes::metrics_text))
        .route("/console/history", get(console::history))
        .route("/console/table", get(console::table))
        .route("/console/run", post(console::run))
        .route("/console/results/{id}", get(console::page))
        .route("/console/results/{id}/ticket", post(console::ticket))
        .layer(DefaultBodyLimit::max(json_limit))
        // A body that stops arriving (or drips slower than one piece per timeout) fails
        // the request instead of holding a connection and a spool file forever.
        .layer(tower_http::timeout::RequestBodyTimeoutLayer::new(
            state.config.body_idle_timeout,
        ))
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&state),
            authenticate,
        ));
    // The console's page, assets and sign-in: outside auth (the page signs in).
    let console = Router::new()
        .route("/", get(crate::console::assets::index))
        .route(
            "/console/assets/{*name}",
            get(crate::console::assets::asset),
        )
        .route("/console/download", get(console::download))
        .route("/console/login", post(console::login))
        .route("/console/session", get(console::session))
        .route("/console/logout", post(console::logout))
        .layer(DefaultBodyLimit::max(64 * 1024));
    Router::new()
        .route("/livez", get(probes::livez))
        .route("/readyz", get(probes::readyz))
        .merge(console)
        .merge(api)
        // A bug in one handler answers 500 instead of dropping the connection.
        .layer(tower_http::catch_panic::CatchPanicLayer::new())
        .layer(axum::middleware::from_fn(observe))
        // Outermost: every request has its id before anything logs.
        .layer(crate::request_id::propagate())
        .layer(crate::request_id::set())
        .with_state(state)
}

async fn observe(request: Request, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "unmatched".into());
    let method = request.method().clone();
    let has_body = request.headers().contains_key(header::TRANSFER_ENCODING)
        || header_str(request.headers(), header::CONTENT_LENGTH)
            .and_then(|n| n.parse::<u64>().ok())
            .is_some_and(|n| n > 0);
    // Every log line of the request, here and in the handlers, carries its id.
    let span = tracing::info_span!(
        "request",
        request_id = crate::request_id::of(request.headers())
    );
    let start = Instant::now();
    let mut response = next.run(request).instrument(span.clone()).await;
    let elapsed = start.elapsed();
    let _entered = span.enter();
    let status = response.status().as_u16();
    // An error answered before its body was read (auth, limits, a bad parameter) leaves
    // that body on the connection, so hyper closes it after the response: say so, or a
    // client pooling the connection (httpx) fails its next request on it.
    if has_body && status >= 400 {
        response.headers_mut().insert(
            header::CONNECTION,
            header::HeaderValue::from_static("close"),
        );
    }
    crate::metrics::record_request(&route, status, elapsed.as_secs_f64());
    tracing::info!(%method, %route, status, ms = elapsed.as_millis() as u64, "request");
    response
}

/// `Authorization` (Basic or Bearer) when the request has it; else the console's session
/// cookie, accepted only with its CSRF header.
async fn authenticate(State(state): State<S>, mut request: Request, next: Next) -> Response {
    let headers = request.headers();
    let user = if headers.contains_key(header::AUTHORIZATION) {
        state.auth.authenticate(headers)
    } else {
        match console::session_user(&state, headers) {
            Some(Ok(user)) => Ok(user),
            Some(Err(refused)) => return refused,
            None => state.auth.authenticate(headers),
        }
    };
    match user {
        Ok(user) => {
            request.extensions_mut().insert(user);
            next.run(request).await
        }
        Err(e) => e.into_response(),
    }
}

fn header_str(headers: &HeaderMap, name: header::HeaderName) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(String::from)
}
