//! Metric names and emission through the `metrics` facade (static labels only).

use std::time::Duration;

use crate::error::DeltaLiteError;
use crate::options::PruneStrategy;
use crate::stats::UpsertStats;

/// Record a finished upsert.
pub(crate) fn record(
    result: &Result<UpsertStats, DeltaLiteError>,
    prune: PruneStrategy,
    elapsed: Duration,
) {
    let (outcome, error_kind) = match result {
        Ok(_) => ("ok", "none"),
        Err(e) => ("error", e.kind().as_str()),
    };
    metrics::counter!(
        "deltalite_upserts_total",
        "outcome" => outcome,
        "prune_strategy" => prune.as_str(),
        "error_kind" => error_kind
    )
    .increment(1);
    metrics::histogram!("deltalite_upsert_duration_seconds").record(elapsed.as_secs_f64());
    if let Ok(s) = result {
        metrics::counter!("deltalite_files_added_total").increment(s.files_added as u64);
        metrics::counter!("deltalite_files_removed_total").increment(s.files_removed as u64);
        metrics::counter!("deltalite_files_carried_over_total")
            .increment(s.files_carried_over as u64);
        metrics::counter!("deltalite_files_probed_total").increment(s.files_probed as u64);
        metrics::counter!("deltalite_files_probe_cached_total")
            .increment(s.files_probe_cached as u64);
        metrics::counter!("deltalite_files_marked_total").increment(s.files_marked as u64);
        metrics::counter!("deltalite_rows_updated_total").increment(s.rows_updated as u64);
        metrics::counter!("deltalite_rows_inserted_total").increment(s.rows_inserted as u64);
        metrics::counter!("deltalite_rows_copied_total").increment(s.rows_copied as u64);
    }
}
