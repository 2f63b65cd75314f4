//! The exception classes and the one mapping from engine error kinds to them.

use deltalite::{DeltaLiteError as EngineError, ErrorKind};
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyType};

create_exception!(
    deltalite,
    DeltaLiteError,
    PyException,
    "Base class of every deltalite error."
);
create_exception!(
    deltalite,
    DeltaLiteTransientError,
    DeltaLiteError,
    "A failure that retrying the same call may not meet: the storage layer timed out, \
     reset the connection, throttled or failed on its side, or concurrent writers won the \
     commit race. Nothing was committed unless the call's commit is found later."
);
create_exception!(
    deltalite,
    DeltaLiteCommitConflictError,
    DeltaLiteTransientError,
    "Concurrent writers kept winning the commit race until commit_max_retries ran out."
);
create_exception!(
    deltalite,
    DeltaLiteSchemaMismatchError,
    DeltaLiteError,
    "The data does not fit the table's schema."
);
create_exception!(
    deltalite,
    DeltaLiteTableNotFoundError,
    DeltaLiteError,
    "No Delta table at the URI."
);
create_exception!(
    deltalite,
    DeltaLiteUnsupportedTableError,
    DeltaLiteError,
    "The table uses a feature deltalite cannot honour."
);
create_exception!(
    deltalite,
    DeltaLiteSourceTooLargeError,
    DeltaLiteError,
    "The source data is larger than max_source_bytes."
);

/// `DeltaLiteInvalidArgumentError`, a subclass of both `DeltaLiteError` and `ValueError`:
/// PostHog's deltalite raised `DeltaLiteError` for arguments that cannot work (an unknown
/// `prune_strategy`, duplicate keys in a batch), Python convention (and this package
/// before) raises `ValueError`; one class lets callers of either catch it. PyO3's
/// `create_exception!` takes one base, so the class is made by `type()` once per process.
fn invalid_argument_type(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    static TYPE: PyOnceLock<Py<PyType>> = PyOnceLock::new();
    TYPE.get_or_try_init(py, || {
        let bases = PyTuple::new(
            py,
            [
                py.get_type::<DeltaLiteError>(),
                py.get_type::<PyValueError>(),
            ],
        )?;
        let namespace = PyDict::new(py);
        namespace.set_item("__module__", "deltalite")?;
        namespace.set_item(
            "__doc__",
            "An argument that cannot work: an unknown option value, a knob out of range, \
             duplicate keys in a batch, a partition key the table does not have. Both a \
             DeltaLiteError and a ValueError.",
        )?;
        let made = py.import("builtins")?.getattr("type")?.call1((
            "DeltaLiteInvalidArgumentError",
            bases,
            namespace,
        ))?;
        Ok(made.cast_into::<PyType>()?.unbind())
    })
    .map(|t| t.bind(py))
}

/// The class object, for the module's namespace.
pub(crate) fn invalid_argument_class(py: Python<'_>) -> PyResult<Bound<'_, PyType>> {
    invalid_argument_type(py).cloned()
}

/// A `DeltaLiteInvalidArgumentError`. Callable with the GIL released (the engine's errors
/// are mapped inside `detach`): it takes the GIL for the moment it builds the error,
/// which cannot deadlock because no thread waits for a table while holding the GIL.
pub(crate) fn invalid_argument(message: impl Into<String>) -> PyErr {
    let message = message.into();
    Python::attach(|py| match invalid_argument_type(py) {
        Ok(class) => PyErr::from_type(class.clone(), message),
        Err(e) => e,
    })
}

/// Map an engine error to the exception class of its kind.
pub(crate) fn to_py(err: EngineError) -> PyErr {
    let message = err.to_string();
    match err.kind() {
        ErrorKind::CommitConflict => DeltaLiteCommitConflictError::new_err(message),
        ErrorKind::SchemaMismatch => DeltaLiteSchemaMismatchError::new_err(message),
        ErrorKind::TableNotFound => DeltaLiteTableNotFoundError::new_err(message),
        ErrorKind::UnsupportedTable => DeltaLiteUnsupportedTableError::new_err(message),
        ErrorKind::SourceTooLarge => DeltaLiteSourceTooLargeError::new_err(message),
        ErrorKind::Transient => DeltaLiteTransientError::new_err(message),
        ErrorKind::InvalidInput => invalid_argument(message),
        ErrorKind::Failed | ErrorKind::Internal => DeltaLiteError::new_err(message),
    }
}
