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
    #[error("source too large: {actual} bytes exceeds the limit of {limit} bytes")]
    SourceTooLarge {
        /// In-memory size of the source seen so far.
        actual: usize,
        /// The active guard.
        limit: usize,
    },
    /// Duplicate primary keys inside one batch with `on_duplicate = error`.
    #[error("duplicate primary keys in source: {count} duplicate row(s) in partition {partition}")]
    DuplicateKeys {
        /// Human-readable partition, e.g. `day=2024-01-01` or `<unpartitioned>`.
        partition: String,
        /// How many rows repeat a key seen earlier in the batch.
        count: usize,
    },
    /// A caller passed options that cannot work together.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
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

/// The exception class a binding should raise for an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// `DeltaLiteError` itself.
    Generic,
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
}

impl ErrorKind {
    /// Stable label for metrics and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Generic => "generic",
            ErrorKind::CommitConflict => "commit_conflict",
            ErrorKind::SchemaMismatch => "schema_mismatch",
            ErrorKind::TableNotFound => "table_not_found",
            ErrorKind::UnsupportedTable => "unsupported_table",
            ErrorKind::SourceTooLarge => "source_too_large",
        }
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
            _ => ErrorKind::Generic,
        }
    }

    pub(crate) fn schema(msg: impl Into<String>) -> Self {
        DeltaLiteError::SchemaMismatch(msg.into())
    }

    pub(crate) fn invalid(msg: impl Into<String>) -> Self {
        DeltaLiteError::InvalidArgument(msg.into())
    }
}
