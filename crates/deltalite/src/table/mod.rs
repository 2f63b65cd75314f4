//! The long-lived table handle: open once, reload incrementally, upsert many times.

use std::collections::HashMap;
use std::sync::{Arc, Once};

use arrow::datatypes::SchemaRef;
use deltalake::logstore::LogStore;
use deltalake::{DeltaTable, DeltaTableBuilder, DeltaTableError};
use futures::TryStreamExt;
use object_store::ObjectStore;
use url::Url;

pub(crate) mod files;

use crate::error::{DeltaLiteError, Result};
use crate::schema::partition::normalize_raw;

/// An active data file of the current version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActiveFile {
    /// Path relative to the table root.
    pub path: String,
    /// Size in bytes.
    pub size: u64,
    /// Partition values (canonical serialization; `None` for NULL).
    pub partition_values: Vec<(String, Option<String>)>,
    /// Row count from the log statistics, when recorded.
    pub num_records: Option<usize>,
    /// When the file was written (the Add action's `modificationTime`), epoch milliseconds.
    pub modification_time: i64,
}

/// Register object-store schemes (S3, Azure, GCS) once per process.
pub(crate) fn register_stores() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        deltalake::aws::register_handlers(None);
        deltalake::azure::register_handlers(None);
        deltalake::gcp::register_handlers(None);
    });
}

/// Turn a user's location (local path or URI) into a table URL.
pub fn table_url(uri: &str) -> Result<Url> {
    register_stores();
    if uri.contains("://") {
        return Url::parse(uri)
            .map_err(|e| DeltaLiteError::invalid(format!("invalid table URI {uri:?}: {e}")));
    }
    let path = std::path::Path::new(uri);
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .map_err(|e| DeltaLiteError::Other(e.to_string()))?
            .join(path)
    };
    Url::from_directory_path(&absolute)
        .map_err(|_| DeltaLiteError::invalid(format!("invalid table path {uri:?}")))
}

fn not_found(uri: &str, err: DeltaTableError) -> DeltaLiteError {
    match err {
        DeltaTableError::NotATable(_) | DeltaTableError::InvalidTableLocation(_) => {
            DeltaLiteError::TableNotFound(uri.to_string())
        }
        other => other.into(),
    }
}

/// A Delta table opened for upserts. A clone shares the loaded snapshot's data.
#[derive(Clone)]
pub struct DeltaLiteTable {
    uri: String,
    table: DeltaTable,
    /// How long `open` took to load the log, until an upsert reports it.
    initial_open: Option<std::time::Duration>,
}

impl std::fmt::Debug for DeltaLiteTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeltaLiteTable")
            .field("uri", &self.uri)
            .field("version", &self.table.version())
            .finish()
    }
}

/// Where a table is, or will be: its URI and the store that reaches it, nothing loaded.
/// Opening and creating start here, so a caller-supplied store (instrumented, or
/// fault-injecting in tests) serves both.
pub struct TableLocation {
    uri: String,
    url: Url,
    table: DeltaTable,
    custom_store: bool,
}

impl std::fmt::Debug for TableLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableLocation")
            .field("uri", &self.uri)
            .finish()
    }
}

impl TableLocation {
    /// The table at `uri`, reached with `storage_options` (the keys the `deltalake` Python
    /// package takes: `AWS_REGION`, `AWS_ENDPOINT_URL`, `AWS_ALLOW_HTTP`, ...).
    pub fn new(uri: &str, storage_options: HashMap<String, String>) -> Result<Self> {
        let url = table_url(uri)?;
        let table = DeltaTableBuilder::from_url(url.clone())
            .map_err(|e| not_found(uri, e))?
            .with_storage_options(storage_options)
            .build()
            .map_err(|e| not_found(uri, e))?;
        Ok(Self {
            uri: uri.to_string(),
            url,
            table,
            custom_store: false,
        })
    }

    /// The table at `uri`, reached through `store` instead of one built from the URI's
    /// scheme: a custom or instrumented store, or a fault-injecting wrapper in tests. Every
    /// read and write, data files and log alike, goes through `store`.
    ///
    /// `store` is rooted at the root of the URI's storage (for `s3://bucket/a/t` the bucket;
    /// for a local path the file system root, as `LocalFileSystem::new()`); the table's own
    /// prefix is applied on top of it. Conditional creates (`PutMode::Create`) must be
    /// honoured by `store`, since commits rely on them.
    pub fn with_store(uri: &str, store: Arc<dyn ObjectStore>) -> Result<Self> {
        let url = table_url(uri)?;
        let table = DeltaTableBuilder::from_url(url.clone())
            .map_err(|e| not_found(uri, e))?
            .with_storage_backend(store, url.clone())
            .build()
            .map_err(|e| not_found(uri, e))?;
        Ok(Self {
            uri: uri.to_string(),
            url,
            table,
            custom_store: true,
        })
    }

    /// The URI.
    pub fn uri(&self) -> &str {
        &self.uri
    }

    /// Open the table; [`DeltaLiteError::TableNotFound`] when there is none.
    pub async fn open(self) -> Result<DeltaLiteTable> {
        let uri = self.uri;
        if !self.custom_store
            && self.url.scheme() == "file"
            && let Ok(path) = self.url.to_file_path()
            && !path.join("_delta_log").is_dir()
        {
            return Err(DeltaLiteError::TableNotFound(uri));
        }
        let mut table = self.table;
        if self.custom_store && !table.log_store().is_delta_table_location().await? {
            return Err(DeltaLiteError::TableNotFound(uri));
        }
        let started = std::time::Instant::now();
        table.load().await.map_err(|e| not_found(&uri, e))?;
        Ok(DeltaLiteTable {
            uri,
            table,
            initial_open: Some(started.elapsed()),
        })
    }

    /// The unloaded delta-rs table (its log store and object store).
    pub(crate) fn delta_table(&self) -> &DeltaTable {
        &self.table
    }

    /// The table URL.
    pub(crate) fn url(&self) -> &Url {
        &self.url
    }
}

impl DeltaLiteTable {
    /// Open an existing table. `storage_options` takes the same keys as the `deltalake`
    /// Python package (`AWS_REGION`, `AWS_ENDPOINT_URL`, `AWS_ALLOW_HTTP`, ...).
    pub async fn open(uri: &str, storage_options: HashMap<String, String>) -> Result<Self> {
        TableLocation::new(uri, storage_options)?.open().await
    }

    /// Open an existing table through a caller-supplied object store (see
    /// [`TableLocation::with_store`]).
    pub async fn open_with_store(uri: &str, store: Arc<dyn ObjectStore>) -> Result<Self> {
        TableLocation::with_store(uri, store)?.open().await
    }

    /// Whether `uri` holds a Delta log (a commit or checkpoint file under `_delta_log/`),
    /// without loading it: a table whose log cannot be read still exists (delta-rs's
    /// `verify_deltatable_existence`, which `deltalake.DeltaTable.is_deltatable` answers
    /// from). A storage failure is an error, never "no table".
    pub async fn table_exists(uri: &str, storage_options: HashMap<String, String>) -> Result<bool> {
        let location = match TableLocation::new(uri, storage_options) {
            Ok(location) => location,
            Err(DeltaLiteError::TableNotFound(_)) => return Ok(false),
            Err(e) => return Err(e),
        };
        if location.url.scheme() == "file"
            && let Ok(path) = location.url.to_file_path()
            && !path.join("_delta_log").is_dir()
        {
            return Ok(false);
        }
        Ok(location.table.log_store().is_delta_table_location().await?)
    }

    /// Whether a Delta table exists at `uri` and loads.
    pub async fn is_deltatable(
        uri: &str,
        storage_options: HashMap<String, String>,
    ) -> Result<bool> {
        match Self::open(uri, storage_options).await {
            Ok(_) => Ok(true),
            Err(DeltaLiteError::TableNotFound(_)) => Ok(false),
            Err(e) => Err(e),
        }
    }

    pub(crate) fn from_delta(uri: &str, table: DeltaTable) -> Self {
        Self {
            uri: uri.to_string(),
            table,
            initial_open: None,
        }
    }

    /// The time `open` spent loading the log, once: the first caller gets it (an upsert
    /// reports it in its timings), later ones get zero.
    pub(crate) fn take_initial_open(&mut self) -> std::time::Duration {
        self.initial_open.take().unwrap_or_default()
    }

    /// The URI the table was opened with.
    pub fn uri(&self) -> &str {
        &self.uri
    }

    /// The underlying delta-rs table (for callers that need protocol-level access).
    pub fn delta_table(&self) -> &DeltaTable {
        &self.table
    }

    pub(crate) fn delta_table_mut(&mut self) -> &mut DeltaTable {
        &mut self.table
    }

    /// Version of the loaded snapshot.
    pub fn version(&self) -> u64 {
        self.table.version().unwrap_or(0)
    }

    /// Apply commits made since the last load (incremental: no full log replay).
    pub async fn reload(&mut self) -> Result<()> {
        self.table.update_incremental(None).await?;
        Ok(())
    }

    /// Arrow schema of the table.
    pub fn schema(&self) -> Result<SchemaRef> {
        Ok(self.table.snapshot()?.snapshot().arrow_schema())
    }

    /// Partition columns in table order.
    pub fn partition_columns(&self) -> Result<Vec<String>> {
        Ok(self
            .table
            .snapshot()?
            .metadata()
            .partition_columns()
            .to_vec())
    }

    /// Active files of the loaded version.
    pub fn files(&self) -> Result<Vec<ActiveFile>> {
        let state = self.table.snapshot()?;
        let partition_columns = state.metadata().partition_columns().to_vec();
        let schema = state.schema();
        state
            .log_data()
            .iter()
            .map(|view| {
                let values = normalize_raw(
                    &view.partition_values_map(),
                    &partition_columns,
                    schema.as_ref(),
                )?;
                Ok(ActiveFile {
                    path: view.path().to_string(),
                    size: view.size().max(0) as u64,
                    partition_values: partition_columns.iter().cloned().zip(values).collect(),
                    num_records: view.num_records(),
                    modification_time: view.modification_time(),
                })
            })
            .collect()
    }

    /// Number of active files of the loaded version.
    pub fn num_files(&self) -> Result<usize> {
        Ok(self.table.snapshot()?.log_data().num_files())
    }

    /// The table's id (`metaData.id`).
    pub fn table_id(&self) -> Result<String> {
        Ok(self.table.snapshot()?.metadata().id().to_string())
    }

    /// The table's properties (`metaData.configuration`).
    pub fn configuration(&self) -> Result<HashMap<String, String>> {
        Ok(self.table.snapshot()?.metadata().configuration().clone())
    }

    /// The Delta schema as the log stores it (`metaData.schemaString`'s JSON).
    pub fn schema_json(&self) -> Result<String> {
        serde_json::to_string(self.table.snapshot()?.schema().as_ref())
            .map_err(|e| DeltaLiteError::Other(format!("cannot serialize the schema: {e}")))
    }

    /// Full URIs of the active files.
    pub fn file_uris(&self) -> Result<Vec<String>> {
        Ok(self.table.get_file_uris()?.collect())
    }

    /// The latest `limit` commit infos, newest first, each with its `version`. Besides the
    /// commit info's own keys (custom metadata flat at the top, as delta-rs writes it),
    /// each entry has `info`: the keys that are not typed commit-info fields, with their
    /// values as JSON text, as PostHog's deltalite returns them (callers match on it).
    pub async fn history(&self, limit: Option<usize>) -> Result<Vec<serde_json::Value>> {
        let infos: Vec<_> = self.table.history(limit).try_collect().await?;
        let latest = self.version();
        Ok(infos
            .into_iter()
            .enumerate()
            .map(|(i, info)| {
                let extra: serde_json::Map<String, serde_json::Value> = info
                    .info
                    .iter()
                    .map(|(k, v)| (k.clone(), serde_json::Value::String(v.to_string())))
                    .collect();
                let mut value = serde_json::to_value(&info).unwrap_or(serde_json::Value::Null);
                if let serde_json::Value::Object(map) = &mut value {
                    map.entry("version").or_insert_with(|| {
                        serde_json::Value::from(latest.saturating_sub(i as u64))
                    });
                    map.insert("info".to_string(), serde_json::Value::Object(extra));
                }
                value
            })
            .collect())
    }

    /// Last version recorded for an application transaction id, if any.
    pub async fn app_transaction_version(&self, app_id: &str) -> Result<Option<i64>> {
        Ok(self
            .table
            .snapshot()?
            .transaction_version(self.table.log_store().as_ref(), app_id)
            .await?)
    }
}

impl DeltaLiteTable {
    /// Move the handle to `version` (older or newer than the loaded one): reads see that
    /// state; a write through the handle commits on top of the latest version as any
    /// stale handle's does.
    pub async fn load_version(&mut self, version: u64) -> Result<()> {
        let latest = self
            .table
            .log_store()
            .get_latest_version(self.version())
            .await?;
        if version > latest {
            return Err(DeltaLiteError::invalid(format!(
                "version {version} does not exist: the latest is {latest}"
            )));
        }
        self.table.load_version(version).await?;
        Ok(())
    }

    /// How long files removed from the table are kept for readers of older versions and
    /// writes in flight (`delta.deletedFileRetentionDuration`, 7 days unless set): the
    /// shortest retention a vacuum that enforces it accepts.
    pub fn deleted_file_retention(&self) -> Result<std::time::Duration> {
        use deltalake::table::config::TablePropertiesExt as _;
        Ok(self
            .table
            .snapshot()?
            .table_config()
            .deleted_file_retention_duration())
    }

    /// Delete files under the table that the log does not reference (leftovers of calls
    /// that crashed or failed before their commit) and tombstoned files, when older than
    /// the retention. A retention below the table's [`Self::deleted_file_retention`] is
    /// refused unless `options.enforce_retention` is off: a younger file may be read by
    /// an older version, or belong to a call that has not committed yet.
    pub async fn vacuum(&mut self, options: &VacuumOptions) -> Result<Vacuumed> {
        let minimum = self.deleted_file_retention()?;
        let retention = options.retention.unwrap_or(minimum);
        if options.enforce_retention && retention < minimum {
            return Err(DeltaLiteError::RetentionTooShort {
                requested: retention,
                minimum,
            });
        }
        let period = chrono::Duration::from_std(retention)
            .map_err(|e| DeltaLiteError::invalid(format!("retention out of range: {e}")))?;
        let (table, metrics) = self
            .table
            .clone()
            .vacuum()
            .with_mode(deltalake::operations::vacuum::VacuumMode::Full)
            .with_retention_period(period)
            .with_enforce_retention_duration(false)
            .with_dry_run(options.dry_run)
            .await?;
        self.table = table;
        // delta-rs lists a file both as a tombstone and as found under the table.
        let mut files = metrics.files_deleted;
        files.sort();
        files.dedup();
        Ok(Vacuumed { retention, files })
    }
}

/// What [`DeltaLiteTable::vacuum`] deletes.
#[derive(Debug, Clone, Copy)]
pub struct VacuumOptions {
    /// Files younger than this stay; `None` means the table's
    /// `delta.deletedFileRetentionDuration`.
    pub retention: Option<std::time::Duration>,
    /// Refuse a retention below the table's (on unless the caller insists).
    pub enforce_retention: bool,
    /// List what would be deleted; delete nothing.
    pub dry_run: bool,
}

impl Default for VacuumOptions {
    fn default() -> Self {
        Self {
            retention: None,
            enforce_retention: true,
            dry_run: false,
        }
    }
}

impl VacuumOptions {
    /// A retention given in hours, as the faces take it: finite and not negative.
    pub fn hours(hours: f64) -> Result<std::time::Duration> {
        if hours.is_finite() && hours >= 0.0 {
            Ok(std::time::Duration::from_secs_f64(hours * 3600.0))
        } else {
            Err(DeltaLiteError::invalid(format!(
                "{hours} is not a number of hours"
            )))
        }
    }
}

/// What a vacuum did (or, dry, would do).
#[derive(Debug, Clone)]
pub struct Vacuumed {
    /// The retention it applied.
    pub retention: std::time::Duration,
    /// The deleted paths, relative to the table, sorted.
    pub files: Vec<String>,
}
