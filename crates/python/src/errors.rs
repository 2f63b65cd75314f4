//! The exception classes and the one mapping from engine error kinds to them.

use deltalite::{DeltaLiteError as EngineError, ErrorKind};
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

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
        ErrorKind::InvalidInput | ErrorKind::Failed | ErrorKind::Internal => {
            DeltaLiteError::new_err(message)
        }
    }
}
