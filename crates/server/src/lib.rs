//! `deltalite-server`: the lakehouse HTTP API (Altertable-compatible) over Delta tables.
//!
//! Storage is `<root>/<catalog>/<schema>/<table>/`, one Delta table per folder; writes go
//! through the `deltalite` engine (one atomic commit per request), SQL through DataFusion.
//!
//! Module map:
//! - [`config`]: [`ServerConfig`] (data root, users and grants, limits).
//! - [`auth`]: Basic / Bearer(base64) authentication in constant time.
//! - [`catalog`]: name validation and the storage layout (local or object store).
//! - [`ingest`]: `/upload`, `/upsert`, `/append` flows: spooled bodies, format detection,
//!   modes, idempotency keys, undo of a table created by a failed request.
//! - [`sql`]: protocol-independent SQL: DataFusion session per request, guards, DDL/DML as
//!   Delta commits, information_schema.
//! - [`types`]: DuckDB type names for Arrow types and back; storable types.
//! - [`output`]: query results as NDJSON, CSV, JSONL and Parquet bodies.
//! - [`http`]: the axum router, middleware and handlers.
//! - [`flight`]: the Arrow Flight SQL endpoint (tonic), on the same SQL layer.
//! - [`maintainer`]: the background maintainer (compaction, vacuum) of every table.
//! - [`state`]: what both faces share (storage, users, query runtime, query log).
//! - [`registry`]: the bounded query log (with cancellation handles) and task list.
//! - [`metrics`]: Prometheus exposition.
//! - [`tls`]: the listeners' certificate, reloaded on SIGHUP.
//! - [`request_id`]: the request id of every HTTP request and Flight call.
//! - [`error`]: [`ApiError`] and its HTTP mapping.

pub mod auth;
pub mod catalog;
pub mod config;
pub mod console;
pub mod error;
pub mod flight;
pub mod http;
pub mod ingest;
pub mod maintainer;
pub mod metrics;
pub mod output;
pub mod registry;
pub mod request_id;
pub mod snapshots;
pub mod spool;
pub mod sql;
pub mod staged_log;
pub mod state;
pub mod tls;
pub mod types;

pub use config::{ServerConfig, UserConfig};
pub use error::{ApiError, ConfigError};

use std::future::Future;

/// Errors of [`serve`].
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The configuration cannot work.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The data root or a catalog could not be opened or created.
    #[error("storage: {0}")]
    Storage(ApiError),
    /// The query runtime (memory pool) could not be built.
    #[error("query runtime: {0}")]
    QueryRuntime(#[from] datafusion::error::DataFusionError),
    /// Binding or serving failed.
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
    /// The Flight SQL endpoint failed.
    #[error("flight: {0}")]
    Flight(#[from] tonic::transport::Error),
    /// The TLS certificate or key could not be loaded.
    #[error("tls: {0}")]
    Tls(#[from] tls::TlsError),
}

/// Run the server until `shutdown` resolves; then stop accepting and drain in-flight
/// requests. The bound addresses are printed to stdout (see [`serve_on`]).
pub async fn serve(
    config: ServerConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let storage = catalog::Storage::open(&config.data_root, config.storage_options.clone())
        .map_err(ServeError::Storage)?;
    let listener = tokio::net::TcpListener::bind(config.listen).await?;
    serve_on(config, storage, listener, shutdown).await
}

/// Serve with an opened data root on a bound listener until `shutdown` resolves: for
/// embedding the server, and for tests that reach tables through an instrumented store
/// (`catalog::Storage::with_table_store`). With `config.flight_listen` set, the Flight
/// SQL endpoint is bound there and serves until the same `shutdown`.
///
/// Once both listen, two lines go to stdout in one write, for whoever started the
/// process to read (port 0 picks free ports): `listening on http://ADDR`, then
/// `flight listening on grpc://ADDR` (or `flight off`).
pub async fn serve_on(
    config: ServerConfig,
    storage: catalog::Storage,
    listener: tokio::net::TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    for c in &config.catalogs {
        storage
            .ensure_catalog(c)
            .await
            .map_err(ServeError::Storage)?;
    }
    // Scratch catalogs live as long as their Flight session; none survives a restart.
    let swept = storage
        .sweep_scratch_catalogs(&config.catalogs)
        .await
        .map_err(ServeError::Storage)?;
    if !swept.is_empty() {
        tracing::info!(catalogs = ?swept, "removed scratch catalogs of a previous run");
    }
    // So do Flight transactions: their private logs are garbage now (the files their
    // staged commits wrote are orphans for VACUUM).
    storage
        .delete_folder(&[staged_log::PRIVATE_FOLDER])
        .await
        .map_err(ServeError::Storage)?;
    let storage = if config.deletion_vectors {
        storage.with_new_table_property(deltalite::DELETION_VECTORS_PROPERTY, "true")
    } else {
        storage
    };
    let mut config = config;
    if config.spool_dir.is_none() {
        config.spool_dir = default_spool_dir(&config.data_root)?;
    }
    let flight_listener = match config.flight_listen {
        Some(addr) => Some(tokio::net::TcpListener::bind(addr).await?),
        None => None,
    };
    let tls = match &config.tls {
        Some(files) => Some(tls::Tls::load(files.clone())?),
        None => None,
    };
    let keys = deltalite::runtime::probe_cache::ProbeCache::global();
    keys.set_max_bytes(config.key_cache_bytes);
    keys.set_background_fill(config.key_cache_fill);
    let prometheus = metrics::install();
    if let Some(handle) = &prometheus {
        metrics::spawn_upkeep(handle.clone());
    }
    if let Some(every) = config.malloc_trim_interval {
        spawn_malloc_trim(every);
    }
    if let Some(tls) = &tls {
        spawn_tls_reload(std::sync::Arc::clone(tls));
    }
    let state = state::AppState::new(config.clone(), storage, prometheus)?;
    let app = http::router(std::sync::Arc::clone(&state));
    let addr = listener.local_addr()?;
    let flight_addr = match &flight_listener {
        Some(l) => Some(l.local_addr()?),
        None => None,
    };
    tracing::info!(%addr, flight = ?flight_addr, tls = tls.is_some(), data = %config.data_root, catalogs = ?config.catalogs, "listening");
    announce(addr, flight_addr, tls.is_some());
    // One shutdown for both faces.
    let stop = tokio_util::sync::CancellationToken::new();
    {
        let stop = stop.clone();
        tokio::spawn(async move {
            shutdown.await;
            stop.cancel();
        });
    }
    let maintainer = maintainer::spawn(
        std::sync::Arc::clone(&state.storage),
        config.catalogs.clone(),
        config.maintenance.clone(),
        stop.clone(),
    );
    let flight = flight_listener.map(|l| {
        tokio::spawn(flight::serve(
            std::sync::Arc::clone(&state),
            l,
            tls.as_ref().map(|t| t.acceptor(&[b"h2"])),
            stop.clone().cancelled_owned(),
        ))
    });
    let http_tls = tls.as_ref().map(|t| t.acceptor(&[b"http/1.1"]));
    let served = async {
        accept_loop(listener, app, http_tls, stop.clone().cancelled_owned()).await;
        if let Some(flight) = flight {
            match flight.await {
                Ok(served) => served?,
                Err(e) => tracing::error!(error = %e, "the flight endpoint's task failed"),
            }
        }
        if let Some(maintainer) = maintainer
            && let Err(e) = maintainer.await
        {
            tracing::error!(error = %e, "the maintainer's task failed");
        }
        Ok::<_, ServeError>(())
    };
    // In-flight requests get `shutdown_timeout` after the signal; then the process stops
    // anyway (what still runs is dropped with the runtime).
    let deadline = async {
        stop.cancelled().await;
        tokio::time::sleep(config.shutdown_timeout).await;
    };
    tokio::select! {
        served = served => served?,
        _ = deadline => {
            tracing::warn!(
                timeout_secs = config.shutdown_timeout.as_secs_f64(),
                "shutdown deadline passed: stopping with requests still in flight"
            );
        }
    }
    tracing::info!("server stopped");
    Ok(())
}

/// Reload the certificate on SIGHUP (a rotated certificate is picked up by new
/// connections; established ones keep theirs).
fn spawn_tls_reload(tls: std::sync::Arc<tls::Tls>) {
    #[cfg(unix)]
    tokio::spawn(async move {
        use tokio::signal::unix::{SignalKind, signal};
        let mut hangups = match signal(SignalKind::hangup()) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGHUP: the certificate is not reloadable");
                return;
            }
        };
        while hangups.recv().await.is_some() {
            match tls.reload() {
                Ok(()) => {
                    crate::metrics::record_tls_reload(true);
                    tracing::info!("SIGHUP: TLS certificate reloaded");
                }
                Err(e) => {
                    crate::metrics::record_tls_reload(false);
                    tracing::error!(error = %e, "SIGHUP: TLS certificate not reloaded, the previous one stays");
                }
            }
        }
    });
    #[cfg(not(unix))]
    drop(tls);
}

/// Print the listening lines in one write. A reader that closed stdout after the first
/// line (the Rust test harness) must not take the server down: errors are ignored.
fn announce(http: std::net::SocketAddr, flight: Option<std::net::SocketAddr>, tls: bool) {
    use std::io::Write;
    let (web, grpc) = if tls {
        ("https", "grpc+tls")
    } else {
        ("http", "grpc")
    };
    let flight = match flight {
        Some(a) => format!("flight listening on {grpc}://{a}"),
        None => "flight off".to_string(),
    };
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(format!("listening on {web}://{http}\n{flight}\n").as_bytes());
    let _ = out.flush();
}

/// Trim malloc's free memory every `every`, on the blocking pool (the trim holds the
/// arena locks for milliseconds; the async workers keep serving).
fn spawn_malloc_trim(every: std::time::Duration) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tick.tick().await;
            let trim = tokio::task::spawn_blocking(|| {
                let start = std::time::Instant::now();
                let released = deltalite::alloc::release_free_memory();
                (released, start.elapsed())
            });
            match trim.await {
                Ok((released, took)) => {
                    tracing::debug!(released, micros = took.as_micros() as u64, "malloc trim");
                }
                Err(e) => tracing::warn!(error = %e, "malloc trim task failed"),
            }
        }
    });
}

/// How long a client may take to send a request's headers before the connection is closed
/// (a client that trickles header bytes would otherwise hold a connection forever; body
/// pauses are bounded separately by `body_idle_timeout`).
pub const HEADER_READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Serve HTTP/1.1 connections (over TLS when `tls` is set) until `shutdown` resolves,
/// then let in-flight requests finish. Like `axum::serve`, plus a header read timeout
/// (which needs a timer that `axum::serve` does not configure).
async fn accept_loop(
    listener: tokio::net::TcpListener,
    app: axum::Router,
    tls: Option<tokio_rustls::TlsAcceptor>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (stream, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        // Taken before the handshake, so a shutdown waits for this connection too.
        let watcher = graceful.watcher();
        let app = app.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            let Some(tls) = tls else {
                return serve_connection(stream, app, watcher).await;
            };
            // The handshake is bounded like the headers that follow it.
            if let Some(stream) = tls::handshake(&tls, stream, HEADER_READ_TIMEOUT).await {
                serve_connection(stream, app, watcher).await;
            }
        });
    }
    drop(listener);
    graceful.shutdown().await;
}

/// One HTTP/1.1 connection, watched for the graceful shutdown.
async fn serve_connection<S>(
    stream: S,
    app: axum::Router,
    watcher: hyper_util::server::graceful::Watcher,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    use hyper_util::rt::{TokioIo, TokioTimer};
    use hyper_util::service::TowerToHyperService;

    let service = TowerToHyperService::new(app);
    let connection = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .serve_connection(TokioIo::new(stream), service);
    if let Err(e) = watcher.watch(connection).await {
        tracing::debug!(error = %e, "connection ended with an error");
    }
}

/// With a local data root, upload bodies are spooled in `<root>/.spool`, on the tables'
/// filesystem, so a Parquet file stored as it is moves into its table by a rename instead
/// of a second copy. Spool files a killed server left behind are removed. (Catalog names
/// cannot start with a dot, so the directory never collides with one.)
fn default_spool_dir(data_root: &str) -> Result<Option<std::path::PathBuf>, ServeError> {
    if data_root.contains("://") {
        return Ok(None);
    }
    let dir = std::path::Path::new(data_root).join(".spool");
    std::fs::create_dir_all(&dir)?;
    for entry in std::fs::read_dir(&dir)? {
        let path = entry?.path();
        if path.is_file() {
            std::fs::remove_file(&path)?;
        }
    }
    Ok(Some(dir))
}

/// Resolves on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::warn!(error = %e, "cannot listen for SIGINT");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = term => {}
    }
    tracing::info!("shutdown signal received");
}
