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
    let knobs = deltalite::Knobs::default();
    let out = pyo3::types::PyDict::new(py);
    out.set_item("max_parallel_partitions", knobs.max_parallel_partitions)?;
    out.set_item("max_parallel_files", knobs.max_parallel_files)?;
    out.set_item("max_buffered_bytes", knobs.max_buffered_bytes)?;
    out.set_item("probe_concurrency", knobs.probe_concurrency)?;
    out.set_item("read_batch_size", knobs.read_batch_size)?;
    out.set_item("commit_max_retries", knobs.commit_max_retries)?;
    out.set_item("max_source_bytes", knobs.max_source_bytes)?;
    out.set_item("multipart_threshold", knobs.multipart_threshold)?;
    out.set_item("multipart_part_size", knobs.multipart_part_size)?;
    Ok(out)
}

#[pymodule]
fn _deltalite(m: &Bound<'_, PyModule>) -> PyResult<()> {
    deltalite::alloc::tune_malloc(deltalite::alloc::Workload::Bulk);
    let py = m.py();
    m.add_class::<PyDeltaLiteTable>()?;
    m.add_function(wrap_pyfunction!(knob_defaults, m)?)?;
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
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
