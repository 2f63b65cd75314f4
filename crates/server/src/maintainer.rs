//! The background maintainer: tables that look after themselves.
//!
//! Every [`MaintenanceConfig::interval`] one pass walks the configured catalogs' tables,
//! at most [`MaintenanceConfig::max_tables`] at a time, and for each table
//! - **compacts** a partition once it holds [`MaintenanceConfig::min_small_files`] files
//!   below the table's target size (the engine's compaction: bin-packing per partition,
//!   `OPTIMIZE` commits without data change, in rounds of a few bins);
//! - **vacuums** at most once per [`MaintenanceConfig::vacuum_interval`]: files that no
//!   version within the table's `delta.deletedFileRetentionDuration` (7 days unless set)
//!   reads, orphans of failed writes among them.
//!
//! Checkpoints and expired-log cleanup are not here: the engine writes them after the
//! commit that reaches `delta.checkpointInterval` (`deltalite` `txn/mod.rs::maintain`),
//! for every commit any face makes, the maintainer's included.
//!
//! It never takes the server's table locks: its commits race foreground writes like any
//! other writer's, through the engine's conflict rule. A foreground write that loses to a
//! compaction re-plans once; a compaction whose files a foreground write replaced
//! conflicts and is dropped (the next pass looks again), so no row is resurrected and
//! no file is compacted twice, also with several servers on one data root. A table with
//! `deltalite.maintenance = 'off'` is left alone. Each action is logged (`maintenance`
//! target) and counted in `/metrics` (`deltalite_maintenance_*`); its commits carry
//! `deltalite.maintainer` in their commit info, so `DESCRIBE HISTORY` shows them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use deltalite::DeltaLiteTable;
use deltalite::compact::CompactOptions;
use deltalite::deltalake::table::config::TablePropertiesExt as _;
use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use crate::catalog::{Storage, TableName};
use crate::config::MaintenanceConfig;
use crate::error::ApiError;
use crate::sql::maintenance::MAINTENANCE_PROPERTY;

/// What one table's maintenance did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct TableReport {
    /// Files merged away by compaction, and files it wrote.
    pub files_compacted: usize,
    pub files_written: usize,
    /// Files deleted by vacuum.
    pub files_vacuumed: usize,
    /// The table opted out (`deltalite.maintenance = 'off'`).
    pub skipped: bool,
}

/// Start the maintainer; it stops at `stop`. Does nothing when maintenance is off.
pub fn spawn(
    storage: Arc<Storage>,
    catalogs: Vec<String>,
    config: MaintenanceConfig,
    stop: CancellationToken,
) -> Option<tokio::task::JoinHandle<()>> {
    if !config.enabled {
        tracing::info!(target: "maintenance", "background maintenance is off");
        return None;
    }
    let maintainer = Arc::new(Maintainer {
        storage,
        catalogs,
        config,
        vacuumed: Mutex::new(HashMap::new()),
    });
    Some(tokio::spawn(async move {
        let mut tick = tokio::time::interval(maintainer.config.interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // The first pass waits one interval: a server that just started serves first.
        tick.tick().await;
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = stop.cancelled() => break,
            }
            tokio::select! {
                _ = maintainer.pass() => {}
                // An action cut short leaves what any killed writer leaves: files no
                // commit references, which a later vacuum removes.
                _ = stop.cancelled() => break,
            }
        }
        tracing::info!(target: "maintenance", "background maintenance stopped");
    }))
}

struct Maintainer {
    storage: Arc<Storage>,
    catalogs: Vec<String>,
    config: MaintenanceConfig,
    /// When each table was last vacuumed by this process.
    vacuumed: Mutex<HashMap<String, Instant>>,
}

impl Maintainer {
    async fn pass(&self) {
        let started = Instant::now();
        let tables = match self.tables().await {
            Ok(t) => t,
            Err(e) => {
                tracing::warn!(target: "maintenance", error = %e, "cannot list the tables to maintain");
                metrics::counter!("deltalite_maintenance_failures_total", "task" => "list")
                    .increment(1);
                return;
            }
        };
        metrics::gauge!("deltalite_maintenance_tables").set(tables.len() as f64);
        futures::stream::iter(tables)
            .for_each_concurrent(self.config.max_tables.max(1), |name| async move {
                self.maintain(&name).await;
            })
            .await;
        metrics::counter!("deltalite_maintenance_passes_total").increment(1);
        metrics::gauge!("deltalite_maintenance_last_pass_seconds")
            .set(started.elapsed().as_secs_f64());
        // Tables that are gone no longer need a vacuum time.
        let mut vacuumed = lock(&self.vacuumed);
        if vacuumed.len() > 4 * self.config.max_tables.max(1) * 1024 {
            vacuumed.retain(|_, at| at.elapsed() < self.config.vacuum_interval);
        }
    }

    async fn tables(&self) -> Result<Vec<TableName>, ApiError> {
        let mut out = Vec::new();
        for catalog in &self.catalogs {
            for schema in self.storage.list_schemas(catalog).await? {
                for table in self.storage.list_tables(catalog, &schema).await? {
                    out.push(TableName::new(catalog, &schema, &table)?);
                }
            }
        }
        Ok(out)
    }

    async fn maintain(&self, name: &TableName) {
        let due = lock(&self.vacuumed)
            .get(&name.to_string())
            .is_none_or(|at| at.elapsed() >= self.config.vacuum_interval);
        match maintain_table(&self.storage, name, &self.config, due).await {
            Ok(report) => {
                if due && !report.skipped {
                    lock(&self.vacuumed).insert(name.to_string(), Instant::now());
                }
            }
            Err(e) => {
                tracing::warn!(target: "maintenance", table = %name, error = %e, "maintenance failed; the next pass tries again");
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

/// Look after one table: compact what [`needs_compaction`] finds, vacuum when `vacuum`.
pub async fn maintain_table(
    storage: &Storage,
    name: &TableName,
    config: &MaintenanceConfig,
    vacuum: bool,
) -> Result<TableReport, ApiError> {
    let mut report = TableReport::default();
    let Some(mut table) = storage.open_table(name).await? else {
        return Ok(report);
    };
    let properties = table
        .configuration()
        .map_err(|e| ApiError::from_engine("configuration", e))?;
    if properties.get(MAINTENANCE_PROPERTY).map(String::as_str) == Some("off") {
        report.skipped = true;
        return Ok(report);
    }
    if needs_compaction(&table, config.min_small_files)? {
        let started = Instant::now();
        let options = CompactOptions {
            max_buffered_bytes: config.memory_bytes,
            max_parallel_bins: 1,
            // Merging n files into one removes n - 1: a partition below the threshold is
            // left for later.
            min_partition_removable_files: config.min_small_files.saturating_sub(1).max(1),
            // Short rounds: each commit races foreground writes over fewer files.
            max_bins_per_commit: Some(4),
            commit_metadata: HashMap::from([(
                "deltalite.maintainer".to_string(),
                serde_json::Value::from("compact"),
            )]),
            ..CompactOptions::default()
        };
        match table.compact(&options).await {
            Ok(stats) => {
                report.files_compacted = stats.files_removed;
                report.files_written = stats.files_added;
                metrics::counter!("deltalite_maintenance_runs_total", "task" => "compact")
                    .increment(1);
                metrics::counter!("deltalite_maintenance_files_compacted_total")
                    .increment(stats.files_removed as u64);
                tracing::info!(
                    target: "maintenance",
                    table = %name,
                    files_removed = stats.files_removed,
                    files_added = stats.files_added,
                    partitions = stats.partitions_compacted,
                    commits = stats.commits,
                    version = stats.version,
                    ms = started.elapsed().as_millis() as u64,
                    "compacted"
                );
            }
            Err(e) => {
                metrics::counter!("deltalite_maintenance_failures_total", "task" => "compact")
                    .increment(1);
                // A lost race with a foreground write is the rule working, not a fault.
                tracing::info!(target: "maintenance", table = %name, error = %e, "compaction did not commit");
                table
                    .reload()
                    .await
                    .map_err(|e| ApiError::from_engine("reload", e))?;
            }
        }
    }
    if vacuum {
        // At the table's own retention.
        match table.vacuum(&deltalite::VacuumOptions::default()).await {
            Ok(deltalite::Vacuumed {
                files: deleted,
                retention,
            }) => {
                report.files_vacuumed = deleted.len();
                metrics::counter!("deltalite_maintenance_runs_total", "task" => "vacuum")
                    .increment(1);
                metrics::counter!("deltalite_maintenance_files_vacuumed_total")
                    .increment(deleted.len() as u64);
                if !deleted.is_empty() {
                    tracing::info!(target: "maintenance", table = %name, files = deleted.len(), retention_hours = retention.as_secs() / 3600, "vacuumed");
                }
            }
            Err(e) => {
                metrics::counter!("deltalite_maintenance_failures_total", "task" => "vacuum")
                    .increment(1);
                tracing::warn!(target: "maintenance", table = %name, error = %e, "vacuum failed");
            }
        }
    }
    Ok(report)
}

/// Whether some partition holds at least `min_small_files` files below the table's target
/// file size (`delta.targetFileSize`, else the engine's default).
fn needs_compaction(table: &DeltaLiteTable, min_small_files: usize) -> Result<bool, ApiError> {
    let target = table
        .delta_table()
        .snapshot()
        .map_err(|e| ApiError::Internal(e.to_string()))?
        .table_config()
        .target_file_size()
        .get();
    let files = table
        .files()
        .map_err(|e| ApiError::from_engine("files", e))?;
    let mut small: HashMap<Vec<(String, Option<String>)>, usize> = HashMap::new();
    for f in files.into_iter().filter(|f| f.size < target) {
        *small.entry(f.partition_values).or_default() += 1;
    }
    Ok(small.values().any(|n| *n >= min_small_files.max(2)))
}
