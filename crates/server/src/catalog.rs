//! Names and storage layout: `<root>/<catalog>/<schema>/<table>/`, one Delta table per
//! folder. Names are validated before any path is built from them.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, Weak};

use deltalite::{DeltaLiteTable, TableLocation};
use futures::TryStreamExt;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt};

use crate::error::ApiError;

/// Marker object that makes an empty schema visible on object stores, which have no
/// directories.
const SCHEMA_MARKER: &str = ".deltalite_schema";

/// Reject names that could escape their folder or confuse the layout.
pub fn validate_name(kind: &str, name: &str) -> Result<(), ApiError> {
    // A folder of that name makes its parent look like a Delta table (delta-rs then finds
    // no table below it): reserved at every level.
    if name == "_delta_log" {
        return Err(ApiError::BadRequest(format!(
            "Invalid {kind} name {name:?}: the name is reserved for Delta's transaction log"
        )));
    }
    let bad = name.is_empty()
        || name.len() > 255
        || name == "."
        || name == ".."
        || name.starts_with('.')
        || name
            .chars()
            // '%': storage paths pass through URLs, and a decoded `%2e%2e` is `..`.
            .any(|c| c == '/' || c == '\\' || c == '%' || c.is_control() || c == '\u{0}');
    if bad {
        return Err(ApiError::BadRequest(format!(
            "Invalid {kind} name {name:?}: names are identifiers and may not contain '/', '\\', \
             '%', control characters or start with '.'"
        )));
    }
    Ok(())
}

/// A fully qualified, validated table name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TableName {
    /// Catalog.
    pub catalog: String,
    /// Schema.
    pub schema: String,
    /// Table.
    pub table: String,
}

impl TableName {
    /// Validate the three parts.
    pub fn new(catalog: &str, schema: &str, table: &str) -> Result<Self, ApiError> {
        validate_name("catalog", catalog)?;
        validate_name("schema", schema)?;
        validate_name("table", table)?;
        Ok(Self {
            catalog: catalog.to_string(),
            schema: schema.to_string(),
            table: table.to_string(),
        })
    }
}

impl std::fmt::Display for TableName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.catalog, self.schema, self.table)
    }
}

/// The data root and how to reach it.
pub struct Storage {
    /// Root URI without trailing slash (local absolute path or `scheme://...`).
    root: String,
    /// Local root when the data lives on the local filesystem.
    local: Option<PathBuf>,
    store: Arc<dyn ObjectStore>,
    /// Base path of `store` for the root (object stores only).
    base: ObjectPath,
    /// Storage options for delta-rs.
    pub options: HashMap<String, String>,
    /// One writer per table at a time inside this process; Delta's optimistic concurrency
    /// still protects against other processes.
    locks: Mutex<TableLocks>,
    /// When set, every table is opened and created through this store (rooted at the
    /// storage root) instead of one built from the URI: instrumentation, fault injection.
    table_store: Option<Arc<dyn ObjectStore>>,
}

/// The per-table writer locks. Entries are weak: a lock lives as long as a request holds
/// or waits for it, so the map does not keep one entry per table name ever written to
/// (names of tables that do not exist included: the lock is taken before the check).
#[derive(Default)]
struct TableLocks {
    map: HashMap<String, Weak<tokio::sync::Mutex<()>>>,
    /// Map size at which dead entries are swept next; doubling it after each sweep
    /// keeps the sweeps' cost constant per lock taken.
    sweep_at: usize,
}

/// Smallest [`TableLocks::sweep_at`]: sweeping a handful of entries is not worth a pass.
const MIN_LOCK_SWEEP: usize = 64;

impl std::fmt::Debug for Storage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Storage").field("root", &self.root).finish()
    }
}

/// A storage failure: retryable (`503`) when transient, else the operator's problem.
fn internal(e: impl std::error::Error + 'static) -> ApiError {
    ApiError::from_failure(&e, e.to_string(), ApiError::Internal)
}

impl Storage {
    /// Open the data root, creating a local one when missing.
    pub fn open(root: &str, options: HashMap<String, String>) -> Result<Self, ApiError> {
        // Make sure delta-rs' S3 handlers are registered before any URL is parsed.
        let _ = deltalite::table::table_url("/");
        if root.contains("://") && !root.starts_with("file://") {
            let url = url::Url::parse(root).map_err(internal)?;
            // object_store spells its keys in lower case (`aws_endpoint`, `allow_http`);
            // delta-rs users write `AWS_ENDPOINT_URL`, `AWS_ALLOW_HTTP`. Offer every spelling,
            // unknown keys are ignored.
            let mut store_options: Vec<(String, String)> = Vec::new();
            for (k, v) in &options {
                let lower = k.to_ascii_lowercase();
                store_options.push((k.clone(), v.clone()));
                store_options.push((lower.clone(), v.clone()));
                if let Some(stripped) = lower.strip_prefix("aws_") {
                    store_options.push((stripped.to_string(), v.clone()));
                }
            }
            let (store, base) = object_store::parse_url_opts(&url, store_options)
                .map_err(|e| ApiError::Internal(format!("cannot open data root {root}: {e}")))?;
            Ok(Self {
                root: root.trim_end_matches('/').to_string(),
                local: None,
                store: Arc::from(store),
                base,
                options,
                locks: Mutex::new(TableLocks::default()),
                table_store: None,
            })
        } else {
            let path = PathBuf::from(root.trim_start_matches("file://"));
            std::fs::create_dir_all(&path).map_err(|e| {
                ApiError::Internal(format!("cannot create data root {}: {e}", path.display()))
            })?;
            let path = path.canonicalize().map_err(internal)?;
            let store =
                object_store::local::LocalFileSystem::new_with_prefix(&path).map_err(internal)?;
            Ok(Self {
                root: path.to_string_lossy().trim_end_matches('/').to_string(),
                local: Some(path),
                store: Arc::new(store),
                base: ObjectPath::from(""),
                options,
                locks: Mutex::new(TableLocks::default()),
                table_store: None,
            })
        }
    }

    /// Reach every table through `store` (rooted at the storage root, e.g.
    /// `LocalFileSystem::new()` for a local data root) instead of a store built from each
    /// table's URI. Listings of catalogs and schemas still use the root's own store.
    pub fn with_table_store(mut self, store: Arc<dyn ObjectStore>) -> Self {
        self.table_store = Some(store);
        self
    }

    /// Where a table is, for the engine to open or create it.
    pub fn location(&self, name: &TableName) -> Result<TableLocation, ApiError> {
        let uri = self.table_uri(name);
        let location = match &self.table_store {
            Some(store) => TableLocation::with_store(&uri, Arc::clone(store)),
            None => TableLocation::new(&uri, self.options.clone()),
        };
        location.map_err(|e| ApiError::from_engine(&format!("cannot open table {name}"), e))
    }

    fn join(&self, parts: &[&str]) -> String {
        let mut out = self.root.clone();
        for p in parts {
            out.push('/');
            out.push_str(p);
        }
        out
    }

    fn object_path(&self, parts: &[&str]) -> ObjectPath {
        let mut path = self.base.clone();
        for p in parts {
            path = path.clone().join(*p);
        }
        path
    }

    /// URI of a table folder, as the engine takes it.
    pub fn table_uri(&self, name: &TableName) -> String {
        self.join(&[&name.catalog, &name.schema, &name.table])
    }

    /// One cheap call to the data root, for the readiness probe: the root's metadata on
    /// a local disk, a listing of one level on an object store.
    pub async fn ping(&self) -> Result<(), ApiError> {
        if let Some(local) = &self.local {
            let local = local.clone();
            return tokio::task::spawn_blocking(move || std::fs::metadata(&local))
                .await
                .map_err(|e| ApiError::Internal(e.to_string()))?
                .map(|_| ())
                .map_err(internal);
        }
        self.store
            .list_with_delimiter(Some(&self.base))
            .await
            .map(|_| ())
            .map_err(internal)
    }

    /// Create a catalog folder (startup).
    pub async fn ensure_catalog(&self, catalog: &str) -> Result<(), ApiError> {
        if let Some(local) = &self.local {
            std::fs::create_dir_all(local.join(catalog)).map_err(internal)?;
        }
        Ok(())
    }

    /// Whether a schema exists.
    pub async fn schema_exists(&self, catalog: &str, schema: &str) -> Result<bool, ApiError> {
        if let Some(local) = &self.local {
            return Ok(local.join(catalog).join(schema).is_dir());
        }
        let prefix = self.object_path(&[catalog, schema]);
        let mut list = self.store.list(Some(&prefix));
        Ok(list.try_next().await.map_err(internal)?.is_some())
    }

    /// Create a schema (idempotent); true when it did not exist before.
    pub async fn create_schema(&self, catalog: &str, schema: &str) -> Result<bool, ApiError> {
        let existed = self.schema_exists(catalog, schema).await?;
        if let Some(local) = &self.local {
            std::fs::create_dir_all(local.join(catalog).join(schema)).map_err(internal)?;
            return Ok(!existed);
        }
        let marker = self.object_path(&[catalog, schema, SCHEMA_MARKER]);
        self.store
            .put(&marker, bytes::Bytes::new().into())
            .await
            .map_err(internal)?;
        Ok(!existed)
    }

    /// Schemas of a catalog, sorted.
    pub async fn list_schemas(&self, catalog: &str) -> Result<Vec<String>, ApiError> {
        self.list_children(&[catalog]).await
    }

    /// Tables (folders with a `_delta_log`) of a schema, sorted.
    pub async fn list_tables(&self, catalog: &str, schema: &str) -> Result<Vec<String>, ApiError> {
        let mut out = Vec::new();
        for child in self.list_children(&[catalog, schema]).await? {
            if self.has_delta_log(&[catalog, schema, &child]).await? {
                out.push(child);
            }
        }
        Ok(out)
    }

    async fn has_delta_log(&self, parts: &[&str]) -> Result<bool, ApiError> {
        if let Some(local) = &self.local {
            let mut p = local.clone();
            for part in parts {
                p.push(part);
            }
            return Ok(p.join("_delta_log").is_dir());
        }
        let mut all: Vec<&str> = parts.to_vec();
        all.push("_delta_log");
        let prefix = self.object_path(&all);
        let mut list = self.store.list(Some(&prefix));
        Ok(list.try_next().await.map_err(internal)?.is_some())
    }

    /// Folders inside a schema (tables or leftovers), sorted.
    pub async fn list_schema_children(
        &self,
        catalog: &str,
        schema: &str,
    ) -> Result<Vec<String>, ApiError> {
        self.list_children(&[catalog, schema]).await
    }

    /// Whether a table exists.
    pub async fn table_exists(&self, name: &TableName) -> Result<bool, ApiError> {
        self.has_delta_log(&[&name.catalog, &name.schema, &name.table])
            .await
    }

    async fn list_children(&self, parts: &[&str]) -> Result<Vec<String>, ApiError> {
        let mut out = Vec::new();
        if let Some(local) = &self.local {
            let mut p = local.clone();
            for part in parts {
                p.push(part);
            }
            let Ok(entries) = std::fs::read_dir(&p) else {
                return Ok(out);
            };
            for entry in entries.flatten() {
                if entry.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                    let name = entry.file_name().to_string_lossy().to_string();
                    if !name.starts_with('.') {
                        out.push(name);
                    }
                }
            }
        } else {
            let prefix = self.object_path(parts);
            let listing = self
                .store
                .list_with_delimiter(Some(&prefix))
                .await
                .map_err(internal)?;
            for p in listing.common_prefixes {
                if let Some(name) = p.filename() {
                    out.push(name.to_string());
                }
            }
        }
        out.sort();
        Ok(out)
    }

    async fn delete_prefix(&self, parts: &[&str]) -> Result<(), ApiError> {
        if let Some(local) = &self.local {
            let mut p = local.clone();
            for part in parts {
                p.push(part);
            }
            return match std::fs::remove_dir_all(&p) {
                Ok(()) => Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(internal(e)),
            };
        }
        let prefix = self.object_path(parts);
        let paths: Vec<ObjectPath> = self
            .store
            .list(Some(&prefix))
            .map_ok(|m| m.location)
            .try_collect()
            .await
            .map_err(internal)?;
        for path in paths {
            match self.store.delete(&path).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(internal(e)),
            }
        }
        Ok(())
    }

    /// Remove a table folder and everything in it.
    pub async fn drop_table(&self, name: &TableName) -> Result<(), ApiError> {
        self.delete_prefix(&[&name.catalog, &name.schema, &name.table])
            .await
    }

    /// Remove a schema that holds nothing (no table, no other folder): what a failed
    /// request that created it leaves. Returns whether it was removed.
    pub async fn drop_empty_schema(&self, catalog: &str, schema: &str) -> Result<bool, ApiError> {
        if !self.list_tables(catalog, schema).await?.is_empty()
            || !self.list_schema_children(catalog, schema).await?.is_empty()
        {
            return Ok(false);
        }
        self.drop_schema(catalog, schema).await?;
        Ok(true)
    }

    /// Remove a schema folder and everything in it.
    pub async fn drop_schema(&self, catalog: &str, schema: &str) -> Result<(), ApiError> {
        self.delete_prefix(&[catalog, schema]).await
    }

    /// Open a table; `Ok(None)` when it does not exist.
    pub async fn open_table(&self, name: &TableName) -> Result<Option<DeltaLiteTable>, ApiError> {
        if !self.table_exists(name).await? {
            return Ok(None);
        }
        match self.location(name)?.open().await {
            Ok(t) => Ok(Some(t)),
            Err(deltalite::DeltaLiteError::TableNotFound(_)) => Ok(None),
            Err(e) => Err(ApiError::from_engine(
                &format!("cannot open table {name}"),
                e,
            )),
        }
    }

    /// The per-table writer lock: every request that holds the returned handle at the
    /// same time gets the same lock.
    pub fn table_lock(&self, name: &TableName) -> Arc<tokio::sync::Mutex<()>> {
        let key = name.to_string();
        let mut locks = self.table_locks();
        if let Some(lock) = locks.map.get(&key).and_then(Weak::upgrade) {
            return lock;
        }
        if locks.map.len() >= locks.sweep_at {
            locks.map.retain(|_, lock| lock.strong_count() > 0);
            locks.sweep_at = (2 * locks.map.len()).max(MIN_LOCK_SWEEP);
        }
        let lock = Arc::new(tokio::sync::Mutex::new(()));
        locks.map.insert(key, Arc::downgrade(&lock));
        lock
    }

    /// Entries in the writer-lock map (live or not yet swept), for `/metrics`.
    pub fn table_lock_count(&self) -> usize {
        self.table_locks().map.len()
    }

    fn table_locks(&self) -> std::sync::MutexGuard<'_, TableLocks> {
        // The map stays consistent if a holder panicked: use it rather than fail.
        match self.locks.lock() {
            Ok(l) => l,
            Err(poisoned) => poisoned.into_inner(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_escape_are_rejected() {
        for bad in [
            "",
            ".",
            "..",
            "../x",
            "a/b",
            "a\\b",
            "x\0y",
            "a\nb",
            ".hidden",
            "%2e%2e",
            "a%2Fb",
            "_delta_log",
        ] {
            assert!(validate_name("table", bad).is_err(), "{bad:?}");
        }
        for good in ["items", "_dlt_loads", "Ünïcode", "with space", "a.b"] {
            assert!(validate_name("table", good).is_ok(), "{good:?}");
        }
    }
}
