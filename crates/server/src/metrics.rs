//! Prometheus exposition of the `metrics` facade: the engine's `deltalite_*` series plus
//! the server's request counters.

use std::sync::OnceLock;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// Install the process-wide recorder once; `None` if another recorder was installed first.
pub fn install() -> Option<PrometheusHandle> {
    HANDLE
        .get_or_init(|| match PrometheusBuilder::new().install_recorder() {
            Ok(h) => Some(h),
            Err(e) => {
                tracing::warn!(error = %e, "metrics recorder not installed");
                None
            }
        })
        .clone()
}

/// Count one HTTP request.
pub fn record_request(route: &str, status: u16, seconds: f64) {
    metrics::counter!(
        "deltalite_http_requests_total",
        "route" => route.to_string(),
        "status" => status.to_string()
    )
    .increment(1);
    metrics::histogram!("deltalite_http_request_duration_seconds", "route" => route.to_string())
        .record(seconds);
}

/// Count one certificate reload (SIGHUP), by outcome.
pub fn record_tls_reload(ok: bool) {
    metrics::counter!(
        "deltalite_tls_reloads_total",
        "outcome" => if ok { "ok" } else { "failed" }
    )
    .increment(1);
}

/// How often histogram samples are folded into their summaries.
pub const UPKEEP_INTERVAL: std::time::Duration = std::time::Duration::from_secs(5);

/// Fold recorded histogram samples into their (fixed-size) summaries every
/// [`UPKEEP_INTERVAL`]. The exporter keeps every raw sample until this runs or `/metrics` is
/// scraped; `install_recorder` does not schedule it, so on a server nobody scrapes, each
/// request's latency sample would be kept forever.
pub fn spawn_upkeep(handle: PrometheusHandle) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(UPKEEP_INTERVAL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            handle.run_upkeep();
        }
    });
}

/// Sizes of the server's long-lived in-memory state.
pub struct StateSizes<'a> {
    /// Entries in the query log.
    pub query_log_entries: usize,
    /// Bytes the query log holds, approximately.
    pub query_log_bytes: usize,
    /// Task ids remembered for `GET /tasks/{id}`.
    pub tasks: usize,
    /// The web console's live sign-in sessions.
    pub console_sessions: usize,
    /// The web console's spooled results.
    pub console_results: usize,
    /// Per-table writer locks held in the lock map.
    pub table_locks: usize,
    /// The tables kept open between queries, when the server keeps any.
    pub snapshots: Option<crate::snapshots::SnapshotStats>,
    /// The query runtime, whose caches (Parquet footers, file statistics, listings) are
    /// shared by all queries.
    pub query_runtime: &'a datafusion::execution::runtime_env::RuntimeEnv,
}

/// Publish [`StateSizes`] as gauges, so that an operator (and the soak benchmark) can see
/// each bounded structure next to the process's RSS.
pub fn record_state(s: &StateSizes<'_>) {
    metrics::gauge!("deltalite_query_log_entries").set(s.query_log_entries as f64);
    metrics::gauge!("deltalite_query_log_bytes").set(s.query_log_bytes as f64);
    metrics::gauge!("deltalite_tasks_entries").set(s.tasks as f64);
    metrics::gauge!("deltalite_table_locks").set(s.table_locks as f64);
    metrics::gauge!("deltalite_console_sessions").set(s.console_sessions as f64);
    metrics::gauge!("deltalite_console_results").set(s.console_results as f64);
    let caches = s.query_runtime.cache_manager.as_ref();
    let report = |name: &'static str, entries: usize, bytes: usize, limit: usize| {
        metrics::gauge!("deltalite_query_cache_entries", "cache" => name).set(entries as f64);
        metrics::gauge!("deltalite_query_cache_bytes", "cache" => name).set(bytes as f64);
        metrics::gauge!("deltalite_query_cache_limit_bytes", "cache" => name).set(limit as f64);
    };
    let metadata = caches.get_file_metadata_cache();
    let entries = metadata.list_entries();
    report(
        "file_metadata",
        entries.len(),
        entries.values().map(|e| e.size_bytes).sum(),
        metadata.cache_limit(),
    );
    if let Some(stats) = caches.get_file_statistic_cache() {
        let entries = stats.list_entries();
        report(
            "file_statistics",
            entries.len(),
            entries.values().map(|e| e.size_bytes).sum(),
            stats.cache_limit(),
        );
    }
    if let Some(lists) = caches.get_list_files_cache() {
        let entries = lists.list_entries();
        report(
            "list_files",
            entries.len(),
            entries.values().map(|e| e.size_bytes).sum(),
            lists.cache_limit(),
        );
    }
    if let Some(kept) = &s.snapshots {
        metrics::gauge!("deltalite_query_tables_kept").set(kept.tables as f64);
        metrics::gauge!("deltalite_query_tables_kept_files").set(kept.files as f64);
        metrics::gauge!("deltalite_query_tables_kept_limit_files").set(kept.limit_files as f64);
        for (event, count) in [("hit", kept.hits), ("miss", kept.misses)] {
            metrics::counter!("deltalite_query_table_opens_total", "event" => event)
                .absolute(count);
        }
    }
    // The engine's key cache (each file's keys, shared by every upsert of the process;
    // `--key-cache-mb` bounds it).
    let probe = deltalite::runtime::probe_cache::ProbeCache::global().stats();
    report("probe_keys", probe.entries, probe.bytes, probe.max_bytes);
    for (event, count) in [
        ("hit", probe.hits),
        ("miss", probe.misses),
        ("insert", probe.inserts),
        ("eviction", probe.evictions),
        ("fill", probe.filled),
    ] {
        metrics::counter!("deltalite_probe_cache_events_total", "event" => event).absolute(count);
    }
}
