//! What a call did, as Python objects.

use std::collections::HashMap;

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
    pages_skipped: usize,
    rows_updated: usize,
    rows_inserted: usize,
    rows_copied: usize,
    source_rows: usize,
    null_pk_rows: usize,
    rows_dropped_by_cursor: usize,
    duplicates_resolved: usize,
    commit_retries: usize,
    replans: usize,
    /// Wall time per phase in seconds: prepare, prune, write, commit, total.
    timings: HashMap<String, f64>,
}

impl From<UpsertStats> for PyUpsertStats {
    fn from(s: UpsertStats) -> Self {
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
            pages_skipped: s.pages_skipped,
            rows_updated: s.rows_updated,
            rows_inserted: s.rows_inserted,
            rows_copied: s.rows_copied,
            source_rows: s.source_rows,
            null_pk_rows: s.null_pk_rows,
            rows_dropped_by_cursor: s.rows_dropped_by_cursor,
            duplicates_resolved: s.duplicates_resolved,
            commit_retries: s.commit_retries,
            replans: s.replans,
            timings,
        }
    }
}

impl PyUpsertStats {
    fn counters(&self) -> [(&'static str, u64); 16] {
        [
            ("version", self.version),
            ("partitions_touched", self.partitions_touched as u64),
            ("files_added", self.files_added as u64),
            ("files_removed", self.files_removed as u64),
            ("files_carried_over", self.files_carried_over as u64),
            ("files_probed", self.files_probed as u64),
            ("pages_skipped", self.pages_skipped as u64),
            ("rows_updated", self.rows_updated as u64),
            ("rows_inserted", self.rows_inserted as u64),
            ("rows_copied", self.rows_copied as u64),
            ("source_rows", self.source_rows as u64),
            ("null_pk_rows", self.null_pk_rows as u64),
            ("rows_dropped_by_cursor", self.rows_dropped_by_cursor as u64),
            ("duplicates_resolved", self.duplicates_resolved as u64),
            ("commit_retries", self.commit_retries as u64),
            ("replans", self.replans as u64),
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
        for (k, v) in self.counters() {
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

/// What a compaction did.
#[pyclass(module = "deltalite", name = "CompactStats", frozen, get_all)]
pub(crate) struct PyCompactStats {
    version: u64,
    partitions_compacted: usize,
    files_removed: usize,
    files_added: usize,
    rows_rewritten: u64,
}

impl From<CompactStats> for PyCompactStats {
    fn from(s: CompactStats) -> Self {
        Self {
            version: s.version,
            partitions_compacted: s.partitions_compacted,
            files_removed: s.files_removed,
            files_added: s.files_added,
            rows_rewritten: s.rows_rewritten,
        }
    }
}

#[pymethods]
impl PyCompactStats {
    fn __repr__(&self) -> String {
        format!(
            "CompactStats(version={}, partitions_compacted={}, files_removed={}, \
             files_added={}, rows_rewritten={})",
            self.version,
            self.partitions_compacted,
            self.files_removed,
            self.files_added,
            self.rows_rewritten
        )
    }
}
