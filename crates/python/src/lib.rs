//! The `deltalite` Python package (native part, `deltalite._deltalite`).
//!
//! A thin layer over the engine crate: it turns Python arguments into
//! [`deltalite::UpsertOptions`], reads the caller's Arrow C stream, and releases the GIL
//! for everything the engine does, so that many Python threads can upsert at once.

mod args;
mod errors;
mod runtime;
mod source;
mod stats;
mod table;

use pyo3::prelude::*;

use errors::*;
use stats::{PyCompactStats, PyUpsertStats, PyWriteStats};
use table::PyDeltaLiteTable;

/// The engine's default upsert knobs (`deltalite::Knobs::default()`), which the
/// signature of `DeltaLiteTable.upsert` shows; the test suite holds the two equal.
#[pyfunction]
fn knob_defaults(py: Python<'_>) -> PyResult<Bound<'_, pyo3::types::PyDict>> {
    // Values of several types (ints, None, booleans): the dict holds Python objects.
    let knobs = deltalite::Knobs::default();
    let out = pyo3::types::PyDict::new(py);
    out.set_item("max_parallel_partitions", knobs.max_parallel_partitions)?;
    out.set_item("max_parallel_files", knobs.max_parallel_files)?;
    out.set_item("max_buffered_bytes", knobs.max_buffered_bytes)?;
    out.set_item("prune_strategy", knobs.prune_strategy.as_str())?;
    out.set_item("probe_concurrency", knobs.probe_concurrency)?;
    out.set_item("read_batch_size", knobs.read_batch_size)?;
    out.set_item("commit_max_retries", knobs.commit_max_retries)?;
    out.set_item("max_source_bytes", knobs.max_source_bytes)?;
    out.set_item("multipart_threshold", knobs.multipart_threshold)?;
    out.set_item("multipart_part_size", knobs.multipart_part_size)?;
    out.set_item("max_row_group_bytes", knobs.max_row_group_bytes)?;
    out.set_item("isolate_source_rows", knobs.isolate_source_rows)?;
    out.set_item("use_probe_cache", knobs.use_probe_cache)?;
    out.set_item("deletion_vector_max_share", knobs.deletion_vector_max_share)?;
    Ok(out)
}

/// The process's probe cache now: `entries`, `bytes`, `max_bytes`, `hits`, `misses`,
/// `inserts`, `evictions`.
#[pyfunction]
fn probe_cache_stats(py: Python<'_>) -> PyResult<Bound<'_, pyo3::types::PyDict>> {
    let s = deltalite::runtime::probe_cache::ProbeCache::global().stats();
    let out = pyo3::types::PyDict::new(py);
    out.set_item("entries", s.entries)?;
    out.set_item("bytes", s.bytes)?;
    out.set_item("max_bytes", s.max_bytes)?;
    out.set_item("hits", s.hits)?;
    out.set_item("misses", s.misses)?;
    out.set_item("inserts", s.inserts)?;
    out.set_item("evictions", s.evictions)?;
    Ok(out)
}

/// Bound the process's probe cache to `max_bytes` (evicting down to it at once); `0`
/// empties it and turns it off.
#[pyfunction]
fn set_probe_cache_max_bytes(max_bytes: usize) {
    deltalite::runtime::probe_cache::ProbeCache::global().set_max_bytes(max_bytes);
}

/// Forget every entry of the process's probe cache (its counters stay).
#[pyfunction]
fn clear_probe_cache() {
    deltalite::runtime::probe_cache::ProbeCache::global().clear();
}

#[pymodule]
fn _deltalite(m: &Bound<'_, PyModule>) -> PyResult<()> {
    deltalite::alloc::tune_malloc(deltalite::alloc::Workload::Bulk);
    let py = m.py();
    m.add_class::<PyDeltaLiteTable>()?;
    m.add_function(wrap_pyfunction!(knob_defaults, m)?)?;
    m.add_function(wrap_pyfunction!(probe_cache_stats, m)?)?;
    m.add_function(wrap_pyfunction!(set_probe_cache_max_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(clear_probe_cache, m)?)?;
    m.add_class::<PyUpsertStats>()?;
    m.add_class::<PyWriteStats>()?;
    m.add_class::<PyCompactStats>()?;
    m.add("DeltaLiteError", py.get_type::<DeltaLiteError>())?;
    m.add(
        "DeltaLiteTransientError",
        py.get_type::<DeltaLiteTransientError>(),
    )?;
    m.add(
        "DeltaLiteCommitConflictError",
        py.get_type::<DeltaLiteCommitConflictError>(),
    )?;
    m.add(
        "DeltaLiteSchemaMismatchError",
        py.get_type::<DeltaLiteSchemaMismatchError>(),
    )?;
    m.add(
        "DeltaLiteTableNotFoundError",
        py.get_type::<DeltaLiteTableNotFoundError>(),
    )?;
    m.add(
        "DeltaLiteUnsupportedTableError",
        py.get_type::<DeltaLiteUnsupportedTableError>(),
    )?;
    m.add(
        "DeltaLiteSourceTooLargeError",
        py.get_type::<DeltaLiteSourceTooLargeError>(),
    )?;
    m.add(
        "DeltaLiteInvalidArgumentError",
        errors::invalid_argument_class(py)?,
    )?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
