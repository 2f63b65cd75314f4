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
