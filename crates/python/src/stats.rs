//! What a call did, as Python objects.

use std::collections::HashMap;
use std::time::Duration;

use deltalite::UpsertStats;
use deltalite::compact::CompactStats;
use deltalite::write::WriteStats;
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// What one upsert did.
#[pyclass(
    module = "deltalite",
    name = "UpsertStats",
    frozen,
    get_all,
    skip_from_py_object
)]
#[derive(Clone)]
pub(crate) struct PyUpsertStats {
    version: u64,
    partitions_touched: usize,
    files_added: usize,
    files_removed: usize,
    files_carried_over: usize,
    files_probed: usize,
    files_probe_cached: usize,
    /// Files given a deletion vector instead of a rewrite.
    files_marked: usize,
    pages_skipped: usize,
    rows_updated: usize,
    /// Stored rows replaced: more than `rows_updated` when the table holds a key twice.
    rows_replaced: usize,
    /// Stored rows removed by delete-marked rows (`delete_column`).
    rows_deleted: usize,
    /// Delete-marked source rows not dropped by the cursor.
    delete_markers: usize,
    rows_inserted: usize,
    rows_copied: usize,
    source_rows: usize,
    null_pk_rows: usize,
    rows_dropped_by_cursor: usize,
    duplicates_resolved: usize,
    commit_retries: usize,
    replans: usize,
    columns_relaxed: usize,
    /// Phase timings in whole milliseconds, under PostHog's deltalite's names.
    initial_open_ms: u64,
    ingest_ms: u64,
    open_ms: u64,
    relax_ms: u64,
    plan_ms: u64,
    probe_ms: u64,
    rewrite_ms: u64,
    commit_ms: u64,
    maintenance_ms: u64,
    /// Wall time per phase in seconds: prepare, prune, write, commit, total.
    timings: HashMap<String, f64>,
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl PyUpsertStats {
    /// The engine's stats, plus the time the binding spent reading the caller's data.
    pub(crate) fn new(s: UpsertStats, ingest: Duration) -> Self {
        let t = &s.timings;
        let timings = [
            ("prepare", t.prepare),
            ("prune", t.prune),
            ("write", t.write),
            ("commit", t.commit),
            ("total", t.total),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.as_secs_f64()))
        .collect();
        Self {
            version: s.version,
            partitions_touched: s.partitions_touched,
            files_added: s.files_added,
            files_removed: s.files_removed,
            files_carried_over: s.files_carried_over,
            files_probed: s.files_probed,
            files_probe_cached: s.files_probe_cached,
            files_marked: s.files_marked,
            pages_skipped: s.pages_skipped,
            rows_updated: s.rows_updated,
            rows_replaced: s.rows_replaced,
            rows_deleted: s.rows_deleted,
            delete_markers: s.delete_markers,
            rows_inserted: s.rows_inserted,
            rows_copied: s.rows_copied,
            source_rows: s.source_rows,
            null_pk_rows: s.null_pk_rows,
            rows_dropped_by_cursor: s.rows_dropped_by_cursor,
            duplicates_resolved: s.duplicates_resolved,
            commit_retries: s.commit_retries,
            replans: s.replans,
            columns_relaxed: s.columns_relaxed,
            initial_open_ms: ms(t.initial_open),
            ingest_ms: ms(ingest),
            open_ms: ms(t.reload),
            relax_ms: ms(t.relax),
            plan_ms: ms(t.prepare),
            probe_ms: ms(t.prune),
            // As in PostHog's deltalite, the probe is part of the rewrite phase.
            rewrite_ms: ms(t.prune + t.write),
            commit_ms: ms(t.commit.saturating_sub(t.reload)),
            maintenance_ms: ms(t.maintenance),
            timings,
        }
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("version", self.version),
            ("partitions_touched", self.partitions_touched as u64),
            ("files_added", self.files_added as u64),
            ("files_removed", self.files_removed as u64),
            ("files_carried_over", self.files_carried_over as u64),
            ("files_probed", self.files_probed as u64),
            ("files_probe_cached", self.files_probe_cached as u64),
            ("files_marked", self.files_marked as u64),
            ("pages_skipped", self.pages_skipped as u64),
            ("rows_updated", self.rows_updated as u64),
            ("rows_replaced", self.rows_replaced as u64),
            ("rows_deleted", self.rows_deleted as u64),
            ("delete_markers", self.delete_markers as u64),
            ("rows_inserted", self.rows_inserted as u64),
            ("rows_copied", self.rows_copied as u64),
            ("source_rows", self.source_rows as u64),
            ("null_pk_rows", self.null_pk_rows as u64),
            ("rows_dropped_by_cursor", self.rows_dropped_by_cursor as u64),
            ("duplicates_resolved", self.duplicates_resolved as u64),
            ("commit_retries", self.commit_retries as u64),
            ("replans", self.replans as u64),
            ("columns_relaxed", self.columns_relaxed as u64),
        ]
    }

    fn millis(&self) -> [(&'static str, u64); 9] {
        [
            ("initial_open_ms", self.initial_open_ms),
            ("ingest_ms", self.ingest_ms),
            ("open_ms", self.open_ms),
            ("relax_ms", self.relax_ms),
            ("plan_ms", self.plan_ms),
            ("probe_ms", self.probe_ms),
            ("rewrite_ms", self.rewrite_ms),
            ("commit_ms", self.commit_ms),
            ("maintenance_ms", self.maintenance_ms),
        ]
    }
}

#[pymethods]
impl PyUpsertStats {
    fn __repr__(&self) -> String {
        let fields: Vec<String> = self
            .counters()
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        format!(
            "UpsertStats({}, total_seconds={:.3})",
            fields.join(", "),
            self.timings.get("total").copied().unwrap_or(0.0)
        )
    }

    /// Every field as a plain dict.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let out = PyDict::new(py);
        for (k, v) in self.counters().into_iter().chain(self.millis()) {
            out.set_item(k, v)?;
        }
        out.set_item("timings", self.timings.clone())?;
        Ok(out)
    }
}

/// What an append or overwrite did.
#[pyclass(module = "deltalite", name = "WriteStats", frozen, get_all)]
pub(crate) struct PyWriteStats {
    version: u64,
    files_added: usize,
    files_removed: usize,
    rows_written: u64,
}

impl From<WriteStats> for PyWriteStats {
    fn from(s: WriteStats) -> Self {
        Self {
            version: s.version,
            files_added: s.files_added,
            files_removed: s.files_removed,
            rows_written: s.rows_written,
        }
    }
}

#[pymethods]
impl PyWriteStats {
    fn __repr__(&self) -> String {
        format!(
            "WriteStats(version={}, files_added={}, files_removed={}, rows_written={})",
            self.version, self.files_added, self.files_removed, self.rows_written
        )
    }
}

/// What a compaction did (or would do, with `dry_run`). Attributes, and a read-only
/// mapping with the same keys plus delta-rs's `optimize` metric names, as PostHog's
/// deltalite returns a dict.
#[pyclass(module = "deltalite", name = "CompactStats", frozen, get_all, mapping)]
pub(crate) struct PyCompactStats {
    version: u64,
    files_considered: usize,
    files_skipped: usize,
    partitions_compacted: usize,
    bins: usize,
    files_removed: usize,
    files_added: usize,
    bytes_removed: u64,
    bytes_added: u64,
    rows_rewritten: u64,
    batches_read: u64,
    parallel_bins: usize,
    commits: usize,
    largest_bin_files: usize,
    plan_ms: u64,
    rewrite_ms: u64,
    commit_ms: u64,
    dry_run: bool,
}

impl From<CompactStats> for PyCompactStats {
    fn from(s: CompactStats) -> Self {
        Self {
            version: s.version,
            files_considered: s.files_considered,
            files_skipped: s.files_skipped,
            partitions_compacted: s.partitions_compacted,
            bins: s.bins,
            files_removed: s.files_removed,
            files_added: s.files_added,
            bytes_removed: s.bytes_removed,
            bytes_added: s.bytes_added,
            rows_rewritten: s.rows_rewritten,
            batches_read: s.batches_read,
            parallel_bins: s.parallel_bins,
            commits: s.commits,
            largest_bin_files: s.largest_bin_files,
            plan_ms: ms(s.plan_time),
            rewrite_ms: ms(s.rewrite_time),
            commit_ms: ms(s.commit_time),
            dry_run: s.dry_run,
        }
    }
}

impl PyCompactStats {
    /// Every key with its value, in a stable order.
    fn entries<'py>(&self, py: Python<'py>) -> PyResult<Vec<(&'static str, Bound<'py, PyAny>)>> {
        let int = |v: u64| v.into_pyobject(py).map(|v| v.into_any());
        Ok(vec![
            ("version", int(self.version)?),
            ("files_considered", int(self.files_considered as u64)?),
            ("files_skipped", int(self.files_skipped as u64)?),
            (
                "partitions_compacted",
                int(self.partitions_compacted as u64)?,
            ),
            ("bins", int(self.bins as u64)?),
            ("files_removed", int(self.files_removed as u64)?),
            ("files_added", int(self.files_added as u64)?),
            ("bytes_removed", int(self.bytes_removed)?),
            ("bytes_added", int(self.bytes_added)?),
            ("rows_rewritten", int(self.rows_rewritten)?),
            ("batches_read", int(self.batches_read)?),
            ("parallel_bins", int(self.parallel_bins as u64)?),
            ("commits", int(self.commits as u64)?),
            ("largest_bin_files", int(self.largest_bin_files as u64)?),
            ("plan_ms", int(self.plan_ms)?),
            ("rewrite_ms", int(self.rewrite_ms)?),
            ("commit_ms", int(self.commit_ms)?),
            (
                "dry_run",
                pyo3::types::PyBool::new(py, self.dry_run)
                    .to_owned()
                    .into_any(),
            ),
            // delta-rs's `optimize.compact()` metrics, under its names.
            ("numFilesAdded", int(self.files_added as u64)?),
            ("numFilesRemoved", int(self.files_removed as u64)?),
            (
                "partitionsOptimized",
                int(self.partitions_compacted as u64)?,
            ),
            ("numBatches", int(self.batches_read)?),
            ("totalConsideredFiles", int(self.files_considered as u64)?),
            ("totalFilesSkipped", int(self.files_skipped as u64)?),
        ])
    }
}

#[pymethods]
impl PyCompactStats {
    fn __repr__(&self) -> String {
        format!(
            "CompactStats(version={}, partitions_compacted={}, bins={}, files_removed={}, \
             files_added={}, rows_rewritten={}, commits={}, dry_run={})",
            self.version,
            self.partitions_compacted,
            self.bins,
            self.files_removed,
            self.files_added,
            self.rows_rewritten,
            self.commits,
            if self.dry_run { "True" } else { "False" }
        )
    }

    fn __getitem__<'py>(&self, py: Python<'py>, key: &str) -> PyResult<Bound<'py, PyAny>> {
        self.entries(py)?
            .into_iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v)
            .ok_or_else(|| pyo3::exceptions::PyKeyError::new_err(key.to_string()))
    }

    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        Ok(self.entries(py)?.len())
    }

    fn __contains__(&self, py: Python<'_>, key: &str) -> PyResult<bool> {
        Ok(self.entries(py)?.iter().any(|(k, _)| *k == key))
    }

    fn __iter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.keys(py)?.into_any().try_iter().map(|i| i.into_any())
    }

    /// The keys, as a list.
    fn keys<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, pyo3::types::PyList>> {
        let keys: Vec<&str> = self.entries(py)?.into_iter().map(|(k, _)| k).collect();
        pyo3::types::PyList::new(py, keys)
    }

    /// The values, as a list.
    fn values<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, pyo3::types::PyList>> {
        let values: Vec<Bound<'py, PyAny>> =
            self.entries(py)?.into_iter().map(|(_, v)| v).collect();
        pyo3::types::PyList::new(py, values)
    }

    /// `(key, value)` pairs, as a list.
    fn items<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, pyo3::types::PyList>> {
        let items: Vec<(&str, Bound<'py, PyAny>)> = self.entries(py)?;
        pyo3::types::PyList::new(py, items)
    }

    /// The value of `key`, or `default`.
    #[pyo3(signature = (key, default=None))]
    fn get<'py>(
        &self,
        py: Python<'py>,
        key: &str,
        default: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        Ok(self
            .entries(py)?
            .into_iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v)
            .or(default))
    }

    /// Every key and value as a plain dict.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let out = PyDict::new(py);
        for (k, v) in self.entries(py)? {
            out.set_item(k, v)?;
        }
        Ok(out)
    }
}
