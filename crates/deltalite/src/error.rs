//! Typed errors. The kinds mirror the Python exception hierarchy of the seed API
//! (`DeltaLiteError` and its subclasses) so every caller can branch on them.

use deltalake::DeltaTableError;

/// Result alias used throughout the crate.
pub type Result<T, E = DeltaLiteError> = std::result::Result<T, E>;

/// Everything an engine call can fail with.
#[derive(Debug, thiserror::Error)]
pub enum DeltaLiteError {
    /// A concurrent writer kept winning the commit race until `commit_max_retries` ran out.
    #[error("commit conflict: {0}")]
    CommitConflict(String),
    /// The batch does not fit the table: unknown column, uncastable value, missing key.
    #[error("schema mismatch: {0}")]
    SchemaMismatch(String),
    /// No Delta table at the URI.
    #[error("table not found: {0}")]
    TableNotFound(String),
    /// The table uses a feature the engine cannot honour (deletion vectors, column mapping, ...).
    #[error("unsupported table: {0}")]
    UnsupportedTable(String),
    /// The source batch is larger than the `max_source_bytes` guard.
    #[error(
        "source too large: {actual} bytes exceeds the limit of {limit} bytes (the \
         max_source_bytes ceiling); split the batch or raise the ceiling"
    )]
    SourceTooLarge {
        /// In-memory size of the source seen so far.
        actual: usize,
        /// The active guard.
        limit: usize,
    },
    /// Duplicate primary keys inside one batch with `on_duplicate = error`.
    #[error(
        "duplicate primary-key tuple(s) in source: {count} duplicate row(s) in partition \
         {partition}; deduplicate the batch (keep the last row) or pass on_duplicate=\"last\""
    )]
    DuplicateKeys {
        /// Human-readable partition, e.g. `day=2024-01-01` or `<unpartitioned>`.
        partition: String,
        /// How many rows repeat a key seen earlier in the batch.
        count: usize,
    },
    /// A caller passed options that cannot work together.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A vacuum's retention is below the table's `delta.deletedFileRetentionDuration`.
    #[error(
        "a retention of {} hours is below the table's delta.deletedFileRetentionDuration ({} hours): files younger than that may still be read by older versions or by writes in flight",
        requested.as_secs_f64() / 3600.0,
        minimum.as_secs_f64() / 3600.0
    )]
    RetentionTooShort {
        /// The retention asked for.
        requested: std::time::Duration,
        /// The table's.
        minimum: std::time::Duration,
    },
    /// Storage, protocol or Parquet failures from the layers below.
    #[error("delta error: {0}")]
    Delta(#[from] DeltaTableError),
    /// Arrow compute failures.
    #[error("arrow error: {0}")]
    Arrow(#[from] deltalake::arrow::error::ArrowError),
    /// Parquet decoding or encoding failures.
    #[error("parquet error: {0}")]
    Parquet(#[from] deltalake::parquet::errors::ParquetError),
    /// Object store failures.
    #[error("object store error: {0}")]
    ObjectStore(#[from] object_store::Error),
    /// A hook vetoed the commit or a task failed.
    #[error("{0}")]
    Other(String),
}

/// What happened, in the terms every face maps from (the HTTP status, the Python
/// exception class): each face has one small table from these kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The call's arguments cannot work (bad knobs, duplicate keys under
    /// `on_duplicate = error`).
    InvalidInput,
    /// The operation failed for good below the engine: an unreadable file, a corrupt
    /// log, a store that refuses (not found, permission denied).
    Failed,
    /// A bug or a broken invariant (a task that panicked).
    Internal,
    /// `DeltaLiteCommitConflictError`.
    CommitConflict,
    /// `DeltaLiteSchemaMismatchError`.
    SchemaMismatch,
    /// `DeltaLiteTableNotFoundError`.
    TableNotFound,
    /// `DeltaLiteUnsupportedTableError`.
    UnsupportedTable,
    /// `DeltaLiteSourceTooLargeError`.
    SourceTooLarge,
    /// `DeltaLiteTransientError`: the storage layer failed in a way a retry may not meet
    /// (timeout, connection reset, throttling, a 5xx from the store).
    Transient,
}

impl ErrorKind {
    /// Stable label for metrics and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::InvalidInput => "invalid_input",
            ErrorKind::Failed => "failed",
            ErrorKind::Internal => "internal",
            ErrorKind::CommitConflict => "commit_conflict",
            ErrorKind::SchemaMismatch => "schema_mismatch",
            ErrorKind::TableNotFound => "table_not_found",
            ErrorKind::UnsupportedTable => "unsupported_table",
            ErrorKind::SourceTooLarge => "source_too_large",
            ErrorKind::Transient => "transient",
        }
    }

    /// Whether retrying the same call may succeed: a lost commit race (even one that ran
    /// out of retries) or a transient storage failure. Everything else is final: the input,
    /// the table or the configuration must change first.
    pub fn is_transient(self) -> bool {
        matches!(self, ErrorKind::CommitConflict | ErrorKind::Transient)
    }
}

impl DeltaLiteError {
    /// Which exception class this error maps to.
    pub fn kind(&self) -> ErrorKind {
        match self {
            DeltaLiteError::CommitConflict(_) => ErrorKind::CommitConflict,
            DeltaLiteError::SchemaMismatch(_) => ErrorKind::SchemaMismatch,
            DeltaLiteError::TableNotFound(_) => ErrorKind::TableNotFound,
            DeltaLiteError::UnsupportedTable(_) => ErrorKind::UnsupportedTable,
            DeltaLiteError::SourceTooLarge { .. } => ErrorKind::SourceTooLarge,
            DeltaLiteError::Delta(DeltaTableError::NotATable(_)) => ErrorKind::TableNotFound,
            DeltaLiteError::Delta(DeltaTableError::SchemaMismatch { .. }) => {
                ErrorKind::SchemaMismatch
            }
            DeltaLiteError::InvalidArgument(_)
            | DeltaLiteError::DuplicateKeys { .. }
            | DeltaLiteError::RetentionTooShort { .. } => ErrorKind::InvalidInput,
            other if is_transient(other) => ErrorKind::Transient,
            DeltaLiteError::Other(_) => ErrorKind::Internal,
            _ => ErrorKind::Failed,
        }
    }

    /// Whether retrying the same call may succeed (see [`ErrorKind::is_transient`]).
    pub fn is_transient(&self) -> bool {
        self.kind().is_transient()
    }

    pub(crate) fn schema(msg: impl Into<String>) -> Self {
        DeltaLiteError::SchemaMismatch(msg.into())
    }

    pub(crate) fn invalid(msg: impl Into<String>) -> Self {
        DeltaLiteError::InvalidArgument(msg.into())
    }
}

/// Whether an error, or any error in its `source()` chain, is a storage failure that a
/// retry may not meet: an object-store error other than "not found", "permission denied",
/// "invalid path" and the like (after the store's own retries: a timeout, a reset
/// connection, throttling, a 5xx), an I/O error of a transient kind, or a lost commit race.
/// This is the one place that decides transient against final; every face (HTTP status,
/// Python exception class) maps from it.
pub fn is_transient(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut current = Some(err);
    while let Some(e) = current {
        if let Some(store) = e.downcast_ref::<object_store::Error>() {
            return store_error_is_transient(store);
        }
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            // An I/O error may carry the real cause (object_store's writers wrap store
            // errors so); its own `source()` skips that cause, so look at it here.
            return io_error_is_transient(io);
        }
        // The kernel's error keeps the store's error without exposing it as a source.
        if let Some(kernel) = e.downcast_ref::<delta_kernel::Error>() {
            match kernel {
                delta_kernel::Error::ObjectStore(store) => return store_error_is_transient(store),
                delta_kernel::Error::IOError(io) => return is_transient(io),
                _ => {}
            }
        }
        if let Some(delta) = e.downcast_ref::<DeltaTableError>()
            && matches!(
                delta,
                DeltaTableError::VersionAlreadyExists(_) | DeltaTableError::Transaction {
                    source: deltalake::kernel::transaction::TransactionError::MaxCommitAttempts(_)
                        | deltalake::kernel::transaction::TransactionError::VersionAlreadyExists(_)
                }
            )
        {
            return true;
        }
        if let Some(DeltaLiteError::CommitConflict(_)) = e.downcast_ref::<DeltaLiteError>() {
            return true;
        }
        current = e.source();
    }
    false
}

fn store_error_is_transient(err: &object_store::Error) -> bool {
    use object_store::Error as E;
    match err {
        // What is left after the store's own retries: 5xx, timeouts, connection errors;
        // unless the cause underneath is an I/O error of a final kind (a local disk).
        E::Generic { source, .. } => {
            let mut current: Option<&(dyn std::error::Error + 'static)> = Some(source.as_ref());
            while let Some(e) = current {
                if let Some(io) = e.downcast_ref::<std::io::Error>() {
                    return io_error_is_transient(io);
                }
                current = e.source();
            }
            true
        }
        E::JoinError { .. } | E::Precondition { .. } | E::AlreadyExists { .. } => true,
        _ => false,
    }
}

/// An I/O error's kind decides, unless it is a plain wrapper (`Other`) around the real
/// cause (object_store's writers wrap store errors so; the wrapper's own `source()` skips
/// that cause).
fn io_error_is_transient(err: &std::io::Error) -> bool {
    use std::io::ErrorKind as K;
    if err.kind() == K::Other {
        return err.get_ref().is_some_and(|inner| is_transient(inner));
    }
    matches!(
        err.kind(),
        K::TimedOut
            | K::ConnectionReset
            | K::ConnectionAborted
            | K::ConnectionRefused
            | K::NotConnected
            | K::BrokenPipe
            | K::Interrupted
            | K::WouldBlock
            | K::UnexpectedEof
            | K::StorageFull
            | K::QuotaExceeded
            | K::ResourceBusy
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store_generic(source: Box<dyn std::error::Error + Send + Sync>) -> object_store::Error {
        object_store::Error::Generic {
            store: "S3",
            source,
        }
    }

    #[test]
    fn storage_failures_are_transient_and_bad_input_is_final() {
        let reset = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset");
        let cases: Vec<(DeltaLiteError, bool)> = vec![
            (
                DeltaLiteError::ObjectStore(store_generic("HTTP 503 Slow Down".into())),
                true,
            ),
            (
                DeltaLiteError::ObjectStore(store_generic(Box::new(reset))),
                true,
            ),
            (
                DeltaLiteError::ObjectStore(store_generic(Box::new(std::io::Error::new(
                    std::io::ErrorKind::PermissionDenied,
                    "denied",
                )))),
                false,
            ),
            (
                DeltaLiteError::ObjectStore(object_store::Error::NotFound {
                    path: "x".into(),
                    source: "gone".into(),
                }),
                false,
            ),
            // A store failure under a Parquet read (the probe's and rewrite's path).
            (
                DeltaLiteError::Parquet(deltalake::parquet::errors::ParquetError::External(
                    Box::new(store_generic("timed out".into())),
                )),
                true,
            ),
            (
                DeltaLiteError::Parquet(deltalake::parquet::errors::ParquetError::General(
                    "corrupt page".into(),
                )),
                false,
            ),
            (
                DeltaLiteError::Delta(DeltaTableError::ObjectStore {
                    source: store_generic("connection closed".into()),
                }),
                true,
            ),
            // A store failure behind an I/O error (object_store's buffered writers) and
            // inside a kernel error (log reads).
            (
                DeltaLiteError::Parquet(deltalake::parquet::errors::ParquetError::External(
                    Box::new(std::io::Error::other(store_generic("put failed".into()))),
                )),
                true,
            ),
            (
                DeltaLiteError::Delta(DeltaTableError::KernelError(
                    delta_kernel::Error::ObjectStore(store_generic("get failed".into())),
                )),
                true,
            ),
            (DeltaLiteError::CommitConflict("gave up".into()), true),
            (DeltaLiteError::SchemaMismatch("no column x".into()), false),
            (DeltaLiteError::InvalidArgument("bad knob".into()), false),
        ];
        for (err, transient) in cases {
            assert_eq!(err.is_transient(), transient, "{err}");
        }
        assert_eq!(
            DeltaLiteError::ObjectStore(store_generic("503".into())).kind(),
            ErrorKind::Transient
        );
        assert_eq!(
            DeltaLiteError::CommitConflict("x".into()).kind(),
            ErrorKind::CommitConflict
        );
    }
}
