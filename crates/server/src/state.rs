//! The state both protocol faces share: configuration, storage, users, the query
//! runtime (one memory pool for every query), the query log and the task list. The HTTP
//! router (`http/`) and the Flight SQL service (`flight/`) each hold an `Arc` of it.

use std::sync::{Arc, Mutex};

use datafusion::execution::memory_pool::{FairSpillPool, TrackConsumersPool};
use datafusion::execution::runtime_env::{RuntimeEnv, RuntimeEnvBuilder};
use metrics_exporter_prometheus::PrometheusHandle;
use std::num::NonZeroUsize;

use crate::auth::Authenticator;
use crate::catalog::Storage;
use crate::config::ServerConfig;
use crate::registry::{QueryLog, TaskLog};

/// Shared server state.
pub struct AppState {
    pub(crate) config: ServerConfig,
    pub(crate) storage: Arc<Storage>,
    pub(crate) auth: Authenticator,
    /// The web console's sessions, results and tickets (each bounded).
    pub(crate) console: crate::console::Console,
    pub(crate) prometheus: Option<PrometheusHandle>,
    /// One DataFusion runtime for every query: its memory pool bounds them together.
    pub(crate) query_runtime: Arc<RuntimeEnv>,
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
            // The error of a refused reservation names the largest consumers: what a
            // person tuning `--query-memory-mb` needs to see.
            .with_memory_pool(Arc::new(TrackConsumersPool::new(
                FairSpillPool::new(config.query_memory_bytes),
                NonZeroUsize::new(3).unwrap_or(NonZeroUsize::MIN),
            )))
            .with_metadata_cache_limit(config.query_footer_cache_bytes)
            .build_arc()?;
        let queries = QueryLog::new(config.query_log_entries, config.query_log_bytes);
        let storage = storage.with_snapshot_cache(config.query_table_cache_files);
        Ok(Arc::new(Self {
            auth: Authenticator::new(&config.users),
            console: Default::default(),
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
    pub(crate) fn queries(&self) -> std::sync::MutexGuard<'_, QueryLog> {
        match self.queries.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    pub(crate) fn tasks(&self) -> std::sync::MutexGuard<'_, TaskLog> {
        match self.tasks.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// Sizes of the server's long-lived in-memory state, for `/metrics`.
    pub(crate) fn record_state_gauges(&self) {
        let (entries, bytes) = {
            let q = self.queries();
            (q.len(), q.bytes())
        };
        let tasks = self.tasks().len();
        crate::metrics::record_state(&crate::metrics::StateSizes {
            query_log_entries: entries,
            query_log_bytes: bytes,
            tasks,
            console_sessions: self.console.sessions.len(),
            console_results: self.console.results.len(),
            table_locks: self.storage.table_lock_count(),
            snapshots: self.storage.snapshot_stats(),
            query_runtime: &self.query_runtime,
        });
    }
}
