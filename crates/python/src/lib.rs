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

#[pymodule]
fn _deltalite(m: &Bound<'_, PyModule>) -> PyResult<()> {
    deltalite::alloc::tune_malloc(deltalite::alloc::Workload::Bulk);
    let py = m.py();
    m.add_class::<PyDeltaLiteTable>()?;
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
