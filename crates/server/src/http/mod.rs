//! The HTTP surface: router, middleware (auth, limits, metrics), shared state.

mod autocomplete;
mod ingest;
mod probes;
mod query;

use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::Router;
use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::http::{HeaderMap, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use datafusion::execution::memory_pool::FairSpillPool;
use datafusion::execution::runtime_env::{RuntimeEnv, RuntimeEnvBuilder};
use metrics_exporter_prometheus::PrometheusHandle;

use crate::auth::Authenticator;
use crate::catalog::Storage;
use crate::config::ServerConfig;
use crate::registry::{QueryLog, TaskLog};

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
    Router::new()
        .route("/livez", get(probes::livez))
        .route("/readyz", get(probes::readyz))
        .merge(api)
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

fn header_str(headers: &HeaderMap, name: header::HeaderName) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(String::from)
}
