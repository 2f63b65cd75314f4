//! The shared async runtime the engine runs on.

use std::sync::OnceLock;

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

/// One runtime per process, shared by every call; `block_on` is called from the
/// (GIL-released) Python threads themselves, so concurrent calls run in parallel.
pub(crate) fn runtime() -> PyResult<&'static tokio::runtime::Runtime> {
    static RUNTIME: OnceLock<Result<tokio::runtime::Runtime, String>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .thread_name("deltalite")
                .build()
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| PyRuntimeError::new_err(format!("cannot start the async runtime: {e}")))
}

/// Run an engine future to completion on the shared runtime.
pub(crate) fn block_on<F: std::future::Future>(future: F) -> PyResult<F::Output> {
    Ok(runtime()?.block_on(future))
}
