//! The `deltalite` Python package (native part, `deltalite._deltalite`).
//!
//! A thin layer over the engine crate: it turns Python arguments into
//! [`deltalite::UpsertOptions`], reads the caller's Arrow C stream, and releases the GIL
//! for everything the engine does, so that many Python threads can upsert at once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use arrow::datatypes::{Schema, SchemaRef};
use arrow::ffi_stream::ArrowArrayStreamReader;
use arrow::pyarrow::{FromPyArrow, ToPyArrow};
use arrow::record_batch::{RecordBatch, RecordBatchReader};
use deltalite::compact::{CompactOptions, CompactStats};
use deltalite::write::{WriteOptions, WriteStats};
use deltalite::{
    DeltaLiteError as EngineError, ErrorKind, Knobs, OmittedColumns, OnDuplicate, PruneStrategy,
    UpsertOptions, UpsertStats,
};
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString, PyType};

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
fn to_py(err: EngineError) -> PyErr {
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

/// One runtime per process, shared by every call; `block_on` is called from the
/// (GIL-released) Python threads themselves, so concurrent calls run in parallel.
fn runtime() -> PyResult<&'static tokio::runtime::Runtime> {
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
fn block_on<F: std::future::Future>(future: F) -> PyResult<F::Output> {
    Ok(runtime()?.block_on(future))
}

/// A string or a list of strings, as the seed accepts for key arguments.
fn str_or_list(value: &Bound<'_, PyAny>, name: &str) -> PyResult<Vec<String>> {
    if let Ok(s) = value.cast::<PyString>() {
        return Ok(vec![s.to_str()?.to_string()]);
    }
    value
        .extract::<Vec<String>>()
        .map_err(|_| PyTypeError::new_err(format!("{name} must be a str or a list of str")))
}

/// Commit metadata as JSON values, converted by Python's own `json` module so that every
/// JSON-able value is accepted (and anything else is stringified rather than refused).
fn metadata_json(
    py: Python<'_>,
    metadata: Option<&Bound<'_, PyDict>>,
) -> PyResult<HashMap<String, serde_json::Value>> {
    let Some(metadata) = metadata else {
        return Ok(HashMap::new());
    };
    let json = py.import("json")?;
    let kwargs = PyDict::new(py);
    kwargs.set_item("default", py.get_type::<PyString>())?;
    let text: String = json
        .call_method("dumps", (metadata,), Some(&kwargs))?
        .extract()?;
    serde_json::from_str(&text)
        .map_err(|e| PyValueError::new_err(format!("commit_metadata is not a JSON object: {e}")))
}

/// The caller's data as an Arrow stream: anything with `__arrow_c_stream__` (pyarrow,
/// polars, DuckDB, ...), or a pyarrow `RecordBatch` of an older pyarrow.
enum Source {
    Stream(ArrowArrayStreamReader),
    Batch(RecordBatch),
}

impl Source {
    fn from_py(data: &Bound<'_, PyAny>) -> PyResult<Self> {
        let py = data.py();
        if data.hasattr(pyo3::intern!(py, "__arrow_c_stream__"))? {
            return Ok(Source::Stream(ArrowArrayStreamReader::from_pyarrow_bound(
                data,
            )?));
        }
        if data.hasattr(pyo3::intern!(py, "__arrow_c_array__"))? {
            return Ok(Source::Batch(RecordBatch::from_pyarrow_bound(data)?));
        }
        Err(PyTypeError::new_err(format!(
            "data must export the Arrow C stream interface (__arrow_c_stream__), got {}",
            data.get_type().name()?
        )))
    }

    fn schema(&self) -> SchemaRef {
        match self {
            Source::Stream(reader) => reader.schema(),
            Source::Batch(batch) => batch.schema(),
        }
    }

    /// Read every batch, failing as soon as the running in-memory size passes `limit`
    /// (`0` disables), so an oversized source is refused before it is fully read.
    fn collect(self, limit: usize) -> Result<Vec<RecordBatch>, EngineError> {
        let iter: Box<dyn Iterator<Item = Result<RecordBatch, EngineError>> + Send> = match self {
            Source::Stream(reader) => Box::new(reader.map(|b| b.map_err(EngineError::from))),
            Source::Batch(batch) => Box::new(std::iter::once(Ok(batch))),
        };
        let mut total = 0usize;
        let mut out = Vec::new();
        for batch in iter {
            let batch = batch?;
            total += batch.get_array_memory_size();
            if limit > 0 && total > limit {
                return Err(EngineError::SourceTooLarge {
                    actual: total,
                    limit,
                });
            }
            if batch.num_rows() > 0 {
                out.push(batch);
            }
        }
        Ok(out)
    }

    fn into_iter(self) -> Box<dyn Iterator<Item = Result<RecordBatch, EngineError>> + Send> {
        match self {
            Source::Stream(reader) => Box::new(reader.map(|b| b.map_err(EngineError::from))),
            Source::Batch(batch) => Box::new(std::iter::once(Ok(batch))),
        }
    }
}

fn parse<T: std::str::FromStr<Err = EngineError>>(value: &str) -> PyResult<T> {
    value
        .parse()
        .map_err(|e: EngineError| PyValueError::new_err(e.to_string()))
}

/// What one upsert did.
#[pyclass(
    module = "deltalite",
    name = "UpsertStats",
    frozen,
    get_all,
    skip_from_py_object
)]
#[derive(Clone)]
struct PyUpsertStats {
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
struct PyWriteStats {
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
struct PyCompactStats {
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

/// A Delta table opened for upserts.
///
/// Calls on one handle are serialized (the handle tracks one snapshot); use one handle
/// per thread for parallel writers, they coordinate through the Delta log.
#[pyclass(module = "deltalite", name = "DeltaLiteTable", frozen)]
struct PyDeltaLiteTable {
    uri: String,
    inner: Arc<Mutex<deltalite::DeltaLiteTable>>,
}

impl PyDeltaLiteTable {
    fn new(uri: &str, table: deltalite::DeltaLiteTable) -> Self {
        Self {
            uri: uri.to_string(),
            inner: Arc::new(Mutex::new(table)),
        }
    }

    /// Run `f` on the table with the GIL released. The lock is taken only after the GIL
    /// is released: a thread holding the GIL never waits for the table, so a long call
    /// on another thread (which may need the GIL to pull a Python-backed stream) cannot
    /// deadlock against it.
    fn with_table<T, F>(&self, py: Python<'_>, f: F) -> PyResult<T>
    where
        T: Send,
        F: FnOnce(&mut deltalite::DeltaLiteTable) -> PyResult<T> + Send,
    {
        let inner = Arc::clone(&self.inner);
        py.detach(move || {
            let mut guard = lock(&inner)?;
            f(&mut guard)
        })
    }
}

fn lock(
    inner: &Mutex<deltalite::DeltaLiteTable>,
) -> PyResult<MutexGuard<'_, deltalite::DeltaLiteTable>> {
    // A poisoned lock means a panic mid-call; the snapshot is still a valid (possibly
    // stale) snapshot because commits are atomic, so keep using it.
    Ok(inner
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner()))
}

#[pymethods]
impl PyDeltaLiteTable {
    /// Open an existing Delta table.
    #[classmethod]
    #[pyo3(signature = (uri, storage_options=None))]
    fn open(
        _cls: &Bound<'_, PyType>,
        py: Python<'_>,
        uri: String,
        storage_options: Option<HashMap<String, String>>,
    ) -> PyResult<Self> {
        let options = storage_options.unwrap_or_default();
        let table =
            py.detach(|| block_on(deltalite::DeltaLiteTable::open(&uri, options))?.map_err(to_py))?;
        Ok(Self::new(&uri, table))
    }

    /// Whether a Delta table exists at `uri`.
    #[classmethod]
    #[pyo3(signature = (uri, storage_options=None))]
    fn is_deltatable(
        _cls: &Bound<'_, PyType>,
        py: Python<'_>,
        uri: String,
        storage_options: Option<HashMap<String, String>>,
    ) -> PyResult<bool> {
        let options = storage_options.unwrap_or_default();
        py.detach(|| {
            block_on(deltalite::DeltaLiteTable::is_deltatable(&uri, options))?.map_err(to_py)
        })
    }

    /// Create an empty table (error if one exists) from a pyarrow schema (or anything
    /// exporting `__arrow_c_schema__`).
    #[classmethod]
    #[pyo3(signature = (uri, schema, partition_by=None, storage_options=None, configuration=None))]
    fn create(
        _cls: &Bound<'_, PyType>,
        py: Python<'_>,
        uri: String,
        schema: &Bound<'_, PyAny>,
        partition_by: Option<&Bound<'_, PyAny>>,
        storage_options: Option<HashMap<String, String>>,
        configuration: Option<HashMap<String, String>>,
    ) -> PyResult<Self> {
        let schema = Schema::from_pyarrow_bound(schema)?;
        let partition_by = match partition_by {
            Some(value) if !value.is_none() => str_or_list(value, "partition_by")?,
            _ => Vec::new(),
        };
        let options = storage_options.unwrap_or_default();
        let configuration = configuration.unwrap_or_default();
        let table = py.detach(|| {
            block_on(deltalite::DeltaLiteTable::create(
                &uri,
                options,
                &schema,
                &partition_by,
                configuration,
            ))?
            .map_err(to_py)
        })?;
        Ok(Self::new(&uri, table))
    }

    /// The URI the table was opened with.
    #[getter]
    fn uri(&self) -> &str {
        &self.uri
    }

    fn __repr__(&self) -> String {
        format!("DeltaLiteTable({:?})", self.uri)
    }

    /// Insert-or-replace `data` by key in one atomic commit.
    #[pyo3(signature = (
        data,
        primary_keys,
        partition_key=None,
        *,
        cursor_field=None,
        on_duplicate="error",
        omitted_columns="null",
        max_parallel_partitions=2,
        max_parallel_files=4,
        max_buffered_bytes=67_108_864,
        prune_strategy="probe",
        skip_unmatched_files=true,
        probe_concurrency=8,
        read_batch_size=8192,
        target_file_size=None,
        max_source_bytes=None,
        multipart_threshold=None,
        multipart_part_size=None,
        commit_max_retries=15,
        commit_metadata=None,
    ))]
    #[allow(clippy::too_many_arguments)]
    fn upsert(
        &self,
        py: Python<'_>,
        data: &Bound<'_, PyAny>,
        primary_keys: &Bound<'_, PyAny>,
        partition_key: Option<&Bound<'_, PyAny>>,
        cursor_field: Option<&Bound<'_, PyAny>>,
        on_duplicate: &str,
        omitted_columns: &str,
        max_parallel_partitions: usize,
        max_parallel_files: usize,
        max_buffered_bytes: usize,
        prune_strategy: &str,
        skip_unmatched_files: bool,
        probe_concurrency: usize,
        read_batch_size: usize,
        target_file_size: Option<u64>,
        max_source_bytes: Option<usize>,
        multipart_threshold: Option<usize>,
        multipart_part_size: Option<usize>,
        commit_max_retries: usize,
        commit_metadata: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<PyUpsertStats> {
        let defaults = Knobs::default();
        let mut prune: PruneStrategy = parse(prune_strategy)?;
        if !skip_unmatched_files {
            // The seed's toggle: False means "read every file of a touched partition".
            prune = PruneStrategy::None;
        }
        let knobs = Knobs {
            max_parallel_partitions,
            max_parallel_files,
            max_buffered_bytes,
            prune_strategy: prune,
            probe_concurrency,
            read_batch_size,
            target_file_size,
            max_source_bytes: max_source_bytes.unwrap_or(defaults.max_source_bytes),
            multipart_threshold: multipart_threshold.unwrap_or(defaults.multipart_threshold),
            multipart_part_size: multipart_part_size.unwrap_or(defaults.multipart_part_size),
            commit_max_retries,
        };
        knobs
            .validate()
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        let options = UpsertOptions {
            primary_keys: str_or_list(primary_keys, "primary_keys")?,
            partition_key: match partition_key {
                Some(value) if !value.is_none() => Some(str_or_list(value, "partition_key")?),
                _ => None,
            },
            cursor_fields: match cursor_field {
                Some(value) if !value.is_none() => str_or_list(value, "cursor_field")?,
                _ => Vec::new(),
            },
            on_duplicate: parse::<OnDuplicate>(on_duplicate)?,
            omitted_columns: parse::<OmittedColumns>(omitted_columns)?,
            commit_metadata: metadata_json(py, commit_metadata)?,
            knobs,
            ..Default::default()
        };
        if options.primary_keys.is_empty() {
            return Err(PyValueError::new_err("primary_keys must not be empty"));
        }
        let source = Source::from_py(data)?;
        let schema = source.schema();
        let limit = options.knobs.max_source_bytes;
        let stats = self.with_table(py, move |table| {
            let batches = source.collect(limit).map_err(to_py)?;
            block_on(table.upsert(&schema, &batches, &options))?.map_err(to_py)
        })?;
        Ok(stats.into())
    }

    /// Append `data` by column name in one commit (missing columns are NULL).
    #[pyo3(signature = (data, *, target_file_size=None, commit_max_retries=15, commit_metadata=None))]
    fn append(
        &self,
        py: Python<'_>,
        data: &Bound<'_, PyAny>,
        target_file_size: Option<u64>,
        commit_max_retries: usize,
        commit_metadata: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<PyWriteStats> {
        let options = write_options(py, target_file_size, commit_max_retries, commit_metadata)?;
        let source = Source::from_py(data)?;
        let stats = self.with_table(py, move |table| {
            block_on(table.append(source.into_iter(), &options))?.map_err(to_py)
        })?;
        Ok(stats.into())
    }

    /// Replace the table's contents (and schema, when `data`'s differs) in one commit,
    /// keeping its id, partitioning and history.
    #[pyo3(signature = (data, *, target_file_size=None, commit_max_retries=15, commit_metadata=None))]
    fn overwrite(
        &self,
        py: Python<'_>,
        data: &Bound<'_, PyAny>,
        target_file_size: Option<u64>,
        commit_max_retries: usize,
        commit_metadata: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<PyWriteStats> {
        let options = write_options(py, target_file_size, commit_max_retries, commit_metadata)?;
        let source = Source::from_py(data)?;
        let schema = source.schema();
        let stats = self.with_table(py, move |table| {
            block_on(table.overwrite(&schema, source.into_iter(), &options))?.map_err(to_py)
        })?;
        Ok(stats.into())
    }

    /// Bin-pack the small files of each partition into files of about
    /// `target_file_size` (default: the table's setting), in one `OPTIMIZE` commit.
    /// `primary_keys` get bloom filters in the new files so later upsert probes stay cheap.
    #[pyo3(signature = (
        target_file_size=None,
        *,
        primary_keys=None,
        read_batch_size=8192,
        max_buffered_bytes=67_108_864,
        commit_max_retries=15,
        commit_metadata=None,
    ))]
    #[allow(clippy::too_many_arguments)]
    fn compact(
        &self,
        py: Python<'_>,
        target_file_size: Option<u64>,
        primary_keys: Option<&Bound<'_, PyAny>>,
        read_batch_size: usize,
        max_buffered_bytes: usize,
        commit_max_retries: usize,
        commit_metadata: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<PyCompactStats> {
        if target_file_size == Some(0) || read_batch_size == 0 || max_buffered_bytes == 0 {
            return Err(PyValueError::new_err(
                "target_file_size, read_batch_size and max_buffered_bytes must be positive",
            ));
        }
        let options = CompactOptions {
            target_file_size,
            read_batch_size,
            max_buffered_bytes,
            bloom_filter_columns: match primary_keys {
                Some(value) if !value.is_none() => str_or_list(value, "primary_keys")?,
                _ => Vec::new(),
            },
            commit_max_retries,
            commit_metadata: metadata_json(py, commit_metadata)?,
        };
        let stats = self.with_table(py, move |table| {
            block_on(table.compact(&options))?.map_err(to_py)
        })?;
        Ok(stats.into())
    }

    /// Version of the loaded snapshot.
    fn version(&self, py: Python<'_>) -> PyResult<u64> {
        self.with_table(py, |table| Ok(table.version()))
    }

    /// Apply commits made by other writers since the last load.
    fn reload(&self, py: Python<'_>) -> PyResult<()> {
        self.with_table(py, |table| block_on(table.reload())?.map_err(to_py))
    }

    /// Schema of the table as a `pyarrow.Schema`.
    fn schema_arrow<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let schema = self.with_table(py, |table| table.schema().map_err(to_py))?;
        schema.to_pyarrow(py)
    }

    /// Partition column names in table order.
    fn partition_columns(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        self.with_table(py, |table| table.partition_columns().map_err(to_py))
    }

    /// Full URIs of the active data files.
    fn file_uris(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        self.with_table(py, |table| table.file_uris().map_err(to_py))
    }

    /// The latest `limit` commit infos (all when `None`), newest first.
    #[pyo3(signature = (limit=None))]
    fn history<'py>(&self, py: Python<'py>, limit: Option<usize>) -> PyResult<Bound<'py, PyAny>> {
        let text = self.with_table(py, move |table| {
            let infos = block_on(table.history(limit))?.map_err(to_py)?;
            serde_json::to_string(&infos).map_err(|e| DeltaLiteError::new_err(e.to_string()))
        })?;
        py.import("json")?.call_method1("loads", (text,))
    }
}

fn write_options(
    py: Python<'_>,
    target_file_size: Option<u64>,
    commit_max_retries: usize,
    metadata: Option<&Bound<'_, PyDict>>,
) -> PyResult<WriteOptions> {
    if target_file_size == Some(0) {
        return Err(PyValueError::new_err("target_file_size must be positive"));
    }
    Ok(WriteOptions {
        target_file_size,
        commit_max_retries,
        commit_metadata: metadata_json(py, metadata)?,
        ..Default::default()
    })
}

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
