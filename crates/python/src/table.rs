//! `DeltaLiteTable`: the Python class over the engine's table handle.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use arrow::datatypes::Schema;
use arrow::pyarrow::{FromPyArrow, ToPyArrow};
use deltalite::compact::CompactOptions;
use deltalite::{Knobs, OmittedColumns, OnDuplicate, PruneStrategy, UpsertOptions};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyType};

use crate::args::{metadata_json, parse, str_or_list, uri_arg, write_options};
use crate::errors::{DeltaLiteError, invalid_argument, to_py};
use crate::runtime::block_on;
use crate::source::Source;
use crate::stats::{PyCompactStats, PyUpsertStats, PyWriteStats};

/// A Delta table opened for upserts.
///
/// Calls on one handle are serialized (the handle tracks one snapshot); use one handle
/// per thread for parallel writers, they coordinate through the Delta log.
#[pyclass(module = "deltalite", name = "DeltaLiteTable", frozen)]
pub(crate) struct PyDeltaLiteTable {
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
    /// Open an existing Delta table (at `version` when given: reads see that state).
    #[classmethod]
    #[pyo3(signature = (uri, storage_options=None, *, version=None))]
    fn open(
        _cls: &Bound<'_, PyType>,
        py: Python<'_>,
        uri: &Bound<'_, PyAny>,
        storage_options: Option<HashMap<String, String>>,
        version: Option<u64>,
    ) -> PyResult<Self> {
        let uri = uri_arg(uri)?;
        let options = storage_options.unwrap_or_default();
        let table = py.detach(|| {
            block_on(async {
                let mut table = deltalite::DeltaLiteTable::open(&uri, options).await?;
                if let Some(v) = version {
                    table.load_version(v).await?;
                }
                Ok::<_, deltalite::DeltaLiteError>(table)
            })?
            .map_err(to_py)
        })?;
        Ok(Self::new(&uri, table))
    }

    /// Whether a Delta table exists at `uri`.
    #[classmethod]
    #[pyo3(signature = (uri, storage_options=None))]
    fn is_deltatable(
        _cls: &Bound<'_, PyType>,
        py: Python<'_>,
        uri: &Bound<'_, PyAny>,
        storage_options: Option<HashMap<String, String>>,
    ) -> PyResult<bool> {
        let uri = uri_arg(uri)?;
        let options = storage_options.unwrap_or_default();
        py.detach(|| {
            block_on(deltalite::DeltaLiteTable::is_deltatable(&uri, options))?.map_err(to_py)
        })
    }

    /// Whether `uri` holds a Delta log, without loading it (`deltalake`'s
    /// `DeltaTable.is_deltatable`): a table whose log cannot be read still exists. A
    /// storage failure raises instead of answering False.
    #[classmethod]
    #[pyo3(signature = (uri, storage_options=None))]
    fn table_exists(
        _cls: &Bound<'_, PyType>,
        py: Python<'_>,
        uri: &Bound<'_, PyAny>,
        storage_options: Option<HashMap<String, String>>,
    ) -> PyResult<bool> {
        let uri = uri_arg(uri)?;
        let options = storage_options.unwrap_or_default();
        py.detach(|| {
            block_on(deltalite::DeltaLiteTable::table_exists(&uri, options))?.map_err(to_py)
        })
    }

    /// Create an empty table (error if one exists) from a pyarrow schema (or anything
    /// exporting `__arrow_c_schema__`).
    #[classmethod]
    #[pyo3(signature = (uri, schema, partition_by=None, storage_options=None, configuration=None))]
    fn create(
        _cls: &Bound<'_, PyType>,
        py: Python<'_>,
        uri: &Bound<'_, PyAny>,
        schema: &Bound<'_, PyAny>,
        partition_by: Option<&Bound<'_, PyAny>>,
        storage_options: Option<HashMap<String, String>>,
        configuration: Option<HashMap<String, String>>,
    ) -> PyResult<Self> {
        let uri = uri_arg(uri)?;
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
        delete_column=None,
        on_duplicate="error",
        omitted_columns="null",
        max_parallel_partitions=None,
        max_parallel_files=None,
        max_buffered_bytes=None,
        prune_strategy=None,
        skip_unmatched_files=None,
        probe_concurrency=None,
        read_batch_size=None,
        target_file_size=None,
        max_source_bytes=None,
        multipart_threshold=None,
        multipart_part_size=None,
        commit_max_retries=None,
        commit_metadata=None,
        max_row_group_bytes=None,
        isolate_source_rows=None,
        use_probe_cache=None,
        deletion_vector_max_share=None,
    ))]
    #[allow(clippy::too_many_arguments)]
    fn upsert(
        &self,
        py: Python<'_>,
        data: &Bound<'_, PyAny>,
        primary_keys: &Bound<'_, PyAny>,
        partition_key: Option<&Bound<'_, PyAny>>,
        cursor_field: Option<&Bound<'_, PyAny>>,
        delete_column: Option<String>,
        on_duplicate: &str,
        omitted_columns: &str,
        max_parallel_partitions: Option<usize>,
        max_parallel_files: Option<usize>,
        max_buffered_bytes: Option<usize>,
        prune_strategy: Option<&str>,
        skip_unmatched_files: Option<bool>,
        probe_concurrency: Option<usize>,
        read_batch_size: Option<usize>,
        target_file_size: Option<u64>,
        max_source_bytes: Option<usize>,
        multipart_threshold: Option<usize>,
        multipart_part_size: Option<usize>,
        commit_max_retries: Option<usize>,
        commit_metadata: Option<&Bound<'_, PyDict>>,
        max_row_group_bytes: Option<usize>,
        isolate_source_rows: Option<bool>,
        use_probe_cache: Option<bool>,
        deletion_vector_max_share: Option<f64>,
    ) -> PyResult<PyUpsertStats> {
        // `None` is the engine's default (`Knobs::default()`, shown by `knob_defaults()`):
        // the binding writes no default of its own.
        let defaults = Knobs::default();
        let mut prune = match prune_strategy {
            Some(name) => parse(name)?,
            None => defaults.prune_strategy,
        };
        if skip_unmatched_files == Some(false) {
            // The seed's toggle: False means "read every file of a touched partition".
            prune = PruneStrategy::None;
        }
        let knobs = Knobs {
            max_parallel_partitions: max_parallel_partitions
                .unwrap_or(defaults.max_parallel_partitions),
            max_parallel_files: max_parallel_files.unwrap_or(defaults.max_parallel_files),
            max_buffered_bytes: max_buffered_bytes.unwrap_or(defaults.max_buffered_bytes),
            prune_strategy: prune,
            probe_concurrency: probe_concurrency.unwrap_or(defaults.probe_concurrency),
            read_batch_size: read_batch_size.unwrap_or(defaults.read_batch_size),
            target_file_size: target_file_size.or(defaults.target_file_size),
            max_source_bytes: max_source_bytes.unwrap_or(defaults.max_source_bytes),
            multipart_threshold: multipart_threshold.unwrap_or(defaults.multipart_threshold),
            multipart_part_size: multipart_part_size.unwrap_or(defaults.multipart_part_size),
            commit_max_retries: commit_max_retries.unwrap_or(defaults.commit_max_retries),
            max_row_group_bytes: max_row_group_bytes.or(defaults.max_row_group_bytes),
            isolate_source_rows: isolate_source_rows.unwrap_or(defaults.isolate_source_rows),
            use_probe_cache: use_probe_cache.unwrap_or(defaults.use_probe_cache),
            fill_probe_cache: defaults.fill_probe_cache,
            deletion_vector_max_share: deletion_vector_max_share
                .unwrap_or(defaults.deletion_vector_max_share),
        };
        knobs.validate().map_err(to_py)?;
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
            delete_column,
            on_duplicate: parse::<OnDuplicate>(on_duplicate)?,
            omitted_columns: parse::<OmittedColumns>(omitted_columns)?,
            commit_metadata: metadata_json(py, commit_metadata)?,
            knobs,
            ..Default::default()
        };
        if options.primary_keys.is_empty() {
            return Err(invalid_argument(
                "primary_keys must not be empty for an upsert",
            ));
        }
        let source = Source::from_py(data)?;
        let schema = source.schema();
        let limit = options.knobs.max_source_bytes;
        let (stats, ingest) = self.with_table(py, move |table| {
            let started = Instant::now();
            let batches = source.collect(limit).map_err(to_py)?;
            let ingest = started.elapsed();
            let stats = block_on(table.upsert(&schema, &batches, &options))?.map_err(to_py)?;
            Ok((stats, ingest))
        })?;
        Ok(PyUpsertStats::new(stats, ingest))
    }

    /// Append `data` by column name in one commit (missing columns are NULL).
    #[pyo3(signature = (data, *, target_file_size=None, commit_max_retries=None, commit_metadata=None))]
    fn append(
        &self,
        py: Python<'_>,
        data: &Bound<'_, PyAny>,
        target_file_size: Option<u64>,
        commit_max_retries: Option<usize>,
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
    #[pyo3(signature = (data, *, target_file_size=None, commit_max_retries=None, commit_metadata=None))]
    fn overwrite(
        &self,
        py: Python<'_>,
        data: &Bound<'_, PyAny>,
        target_file_size: Option<u64>,
        commit_max_retries: Option<usize>,
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
    /// `target_file_size` (default: the table's setting) as delta-rs's
    /// `optimize.compact()` does, in `OPTIMIZE` commits. `primary_keys` get bloom filters
    /// in the new files so later upsert probes stay cheap. `None` knobs take the engine's
    /// defaults. Returns `CompactStats` (attributes, and a mapping).
    #[pyo3(signature = (
        target_file_size=None,
        *,
        primary_keys=None,
        partitions=None,
        min_partition_removable_files=None,
        max_bins_per_commit=None,
        max_parallel_bins=None,
        dry_run=false,
        read_batch_size=None,
        max_buffered_bytes=None,
        multipart_threshold=None,
        multipart_part_size=None,
        commit_max_retries=None,
        commit_metadata=None,
    ))]
    #[allow(clippy::too_many_arguments)]
    fn compact(
        &self,
        py: Python<'_>,
        target_file_size: Option<u64>,
        primary_keys: Option<&Bound<'_, PyAny>>,
        partitions: Option<Vec<Option<String>>>,
        min_partition_removable_files: Option<usize>,
        max_bins_per_commit: Option<usize>,
        max_parallel_bins: Option<usize>,
        dry_run: bool,
        read_batch_size: Option<usize>,
        max_buffered_bytes: Option<usize>,
        multipart_threshold: Option<usize>,
        multipart_part_size: Option<usize>,
        commit_max_retries: Option<usize>,
        commit_metadata: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<PyCompactStats> {
        let defaults = CompactOptions::default();
        let options = CompactOptions {
            target_file_size,
            read_batch_size: read_batch_size.unwrap_or(defaults.read_batch_size),
            max_buffered_bytes: max_buffered_bytes.unwrap_or(defaults.max_buffered_bytes),
            bloom_filter_columns: match primary_keys {
                Some(value) if !value.is_none() => str_or_list(value, "primary_keys")?,
                _ => Vec::new(),
            },
            commit_max_retries: commit_max_retries.unwrap_or(defaults.commit_max_retries),
            commit_metadata: metadata_json(py, commit_metadata)?,
            partitions,
            min_partition_removable_files: min_partition_removable_files
                .unwrap_or(defaults.min_partition_removable_files),
            max_bins_per_commit: max_bins_per_commit.or(defaults.max_bins_per_commit),
            max_parallel_bins: max_parallel_bins.unwrap_or(defaults.max_parallel_bins),
            dry_run,
            multipart_threshold: multipart_threshold.or(defaults.multipart_threshold),
            multipart_part_size: multipart_part_size.or(defaults.multipart_part_size),
        };
        options.validate().map_err(to_py)?;
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

    /// The active data files of the loaded version: `path` (relative to the table root),
    /// `size` (bytes), `modification_time` (epoch milliseconds) and `partition_values`.
    fn files<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        let files = self.with_table(py, |table| table.files().map_err(to_py))?;
        files
            .into_iter()
            .map(|f| {
                let out = PyDict::new(py);
                out.set_item("path", f.path)?;
                out.set_item("size", f.size)?;
                out.set_item("modification_time", f.modification_time)?;
                let values = PyDict::new(py);
                for (name, value) in f.partition_values {
                    values.set_item(name, value)?;
                }
                out.set_item("partition_values", values)?;
                Ok(out)
            })
            .collect()
    }

    /// Number of active data files of the loaded version.
    fn num_files(&self, py: Python<'_>) -> PyResult<usize> {
        self.with_table(py, |table| table.num_files().map_err(to_py))
    }

    /// The table's id (`metaData.id`).
    fn table_id(&self, py: Python<'_>) -> PyResult<String> {
        self.with_table(py, |table| table.table_id().map_err(to_py))
    }

    /// The table's properties (`metaData.configuration`).
    fn configuration(&self, py: Python<'_>) -> PyResult<HashMap<String, String>> {
        self.with_table(py, |table| table.configuration().map_err(to_py))
    }

    /// The Delta schema as JSON text, as the log stores it.
    fn schema_json(&self, py: Python<'_>) -> PyResult<String> {
        self.with_table(py, |table| table.schema_json().map_err(to_py))
    }

    /// Make the table what it was at `version`, in one `RESTORE` commit (files of that
    /// version added back, the others removed; nothing rewritten). Fails without
    /// committing when a file of that version is gone. Returns `numRemovedFile`,
    /// `numRestoredFile` and the committed `version`; the handle moves to it.
    #[pyo3(signature = (version, *, commit_metadata=None, commit_max_retries=None))]
    fn restore<'py>(
        &self,
        py: Python<'py>,
        version: u64,
        commit_metadata: Option<&Bound<'_, PyDict>>,
        commit_max_retries: Option<usize>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let metadata = metadata_json(py, commit_metadata)?;
        let retries = commit_max_retries.unwrap_or(Knobs::default().commit_max_retries);
        let stats = self.with_table(py, move |table| {
            block_on(table.restore(version, &metadata, retries))?.map_err(to_py)
        })?;
        let out = PyDict::new(py);
        out.set_item("numRemovedFile", stats.files_removed)?;
        out.set_item("numRestoredFile", stats.files_restored)?;
        out.set_item("version", stats.version)?;
        Ok(out)
    }

    /// Delete files no version within the retention reads: files removed from the table
    /// longer ago than `retention_hours`, and files of writes that never committed.
    /// `retention_hours` defaults to the table's `delta.deletedFileRetentionDuration` (7
    /// days unless set); shorter raises `ValueError` unless `enforce_retention_duration`
    /// is False. `dry_run` (the default, as deltalake's) only lists them. Returns the
    /// paths (relative to the table root), sorted.
    #[pyo3(signature = (retention_hours=None, dry_run=true, enforce_retention_duration=true))]
    fn vacuum(
        &self,
        py: Python<'_>,
        retention_hours: Option<f64>,
        dry_run: bool,
        enforce_retention_duration: bool,
    ) -> PyResult<Vec<String>> {
        let retention = retention_hours
            .map(deltalite::VacuumOptions::hours)
            .transpose()
            .map_err(|_| {
                invalid_argument(format!(
                    "retention_hours must be a non-negative number, not {}",
                    retention_hours.unwrap_or_default()
                ))
            })?;
        let options = deltalite::VacuumOptions {
            retention,
            enforce_retention: enforce_retention_duration,
            dry_run,
        };
        self.with_table(py, move |table| match block_on(table.vacuum(&options))? {
            Ok(done) => Ok(done.files),
            Err(e @ deltalite::DeltaLiteError::RetentionTooShort { .. }) => Err(invalid_argument(
                format!("{e}; pass enforce_retention_duration=False if you mean it"),
            )),
            Err(e) => Err(to_py(e)),
        })
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
